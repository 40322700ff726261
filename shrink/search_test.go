package shrink

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/nemesis"
	"github.com/lockjepsen/lockjepsen/runfile"
)

// fakeRunner reproduces when its function says so: the search alone, no
// lock.
type fakeRunner func(Candidate) bool

func (f fakeRunner) Try(_ context.Context, c Candidate) (Try, error) {
	return Try{Reproduced: f(c)}, nil
}

// The search aims the faults planned at the holder's node right after a
// grant, keeps that only when it reproduces, and leaves a fault planned
// at a named node as it was.
func TestShrinkAimsHolderFaultsAtAGrant(t *testing.T) {
	kills := func(nodes ...string) []runfile.ScheduledFault {
		var out []runfile.ScheduledFault
		for i, n := range nodes {
			out = append(out, runfile.ScheduledFault{Fault: nemesis.Kill, At: time.Duration(i+1) * 200 * time.Millisecond, Nodes: []string{n}})
		}
		return out
	}
	holders := kills(nemesis.HolderPlaceholder, nemesis.HolderPlaceholder, nemesis.HolderPlaceholder, nemesis.HolderPlaceholder)
	need := 600 * time.Millisecond
	// has says whether c holds the needed fault, aimed after a grant or not.
	has := func(c Candidate, aimed bool) bool {
		return slices.ContainsFunc(c.Faults, func(x runfile.ScheduledFault) bool { return x.At == need && x.AfterGrant == aimed })
	}
	cases := []struct {
		name       string
		faults     []runfile.ScheduledFault
		reproduces fakeRunner
		aimed      bool   // the shrunk fault is aimed after a grant
		wantAim    string // the aim step's outcome: "kept", "put back" or "" (not tried)
	}{
		// At a random time the needed fault finds a lease only with all
		// four faults' chances; aimed, it does alone.
		{"aimed, it reproduces", holders, func(c Candidate) bool { return has(c, true) || len(c.Faults) == 4 && has(c, false) }, true, "kept"},
		// As recorded it does not reproduce at all: aimed, it does.
		{"only aimed", holders, func(c Candidate) bool { return has(c, true) }, true, "kept"},
		{"aimed, it does not", holders, func(c Candidate) bool { return has(c, false) }, false, "put back"},
		{"named nodes are not aimed", kills("n1", "n2", "n3", "n4"), func(c Candidate) bool { return has(c, false) }, false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			orig := Candidate{Faults: c.faults, Clients: []int{0, 1, 2}, Keys: 1, TimeLimit: 5 * time.Second, Hold: "150ms..400ms"}
			res, err := Shrink(context.Background(), c.reproduces, orig, Options{K: 2, N: 3})
			if err != nil {
				t.Fatal(err)
			}
			aim := ""
			for _, st := range res.Steps {
				if st.Stage == "aim" {
					aim = map[bool]string{true: "kept", false: "put back"}[st.Kept]
				}
			}
			if aim != c.wantAim {
				t.Errorf("the aim step was %q, want %q (steps %+v)", aim, c.wantAim, res.Steps)
			}
			if len(res.Best.Faults) != 1 || res.Best.Faults[0].At != need || res.Best.Faults[0].AfterGrant != c.aimed {
				t.Fatalf("shrunk to %+v, want the fault at %s alone, aimed after a grant: %t", res.Best.Faults, need, c.aimed)
			}
			if res.Best.Faults[0].Nodes[0] != c.faults[2].Nodes[0] {
				t.Errorf("the shrunk fault is planned on %v, want %v as recorded", res.Best.Faults[0].Nodes, c.faults[2].Nodes)
			}
		})
	}
	// Neither as recorded nor aimed: refused, nothing found.
	never := fakeRunner(func(Candidate) bool { return false })
	orig := Candidate{Faults: holders, Clients: []int{0, 1}, Keys: 1, TimeLimit: 5 * time.Second, Hold: "10ms"}
	if res, err := Shrink(context.Background(), never, orig, Options{K: 2, N: 3}); !errors.Is(err, ErrNotReproduced) || res != nil {
		t.Errorf("a violation that never came back: %v, %v; want %v and no result", res, err, ErrNotReproduced)
	}
}

// When the clients stage removes clients, the faults are delta-debugged
// again: here the second fault is needed only while three clients contend.
func TestShrinkTriesTheFaultsAgainWithFewerClients(t *testing.T) {
	var faults []runfile.ScheduledFault
	for i := range 4 {
		faults = append(faults, runfile.ScheduledFault{Fault: nemesis.Kill, At: time.Duration(i+1) * 200 * time.Millisecond, Nodes: []string{"n1"}})
	}
	has := func(c Candidate, at time.Duration) bool {
		return slices.ContainsFunc(c.Faults, func(x runfile.ScheduledFault) bool { return x.At == at })
	}
	r := fakeRunner(func(c Candidate) bool {
		return has(c, 600*time.Millisecond) && (len(c.Clients) < 3 || has(c, 800*time.Millisecond))
	})
	orig := Candidate{Faults: faults, Clients: []int{0, 1, 2}, Keys: 1, TimeLimit: 5 * time.Second, Hold: "10ms"}
	res, err := Shrink(context.Background(), r, orig, Options{K: 2, N: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Best.Faults) != 1 || res.Best.Faults[0].At != 600*time.Millisecond || len(res.Best.Clients) != 1 {
		t.Fatalf("shrunk to %d faults %+v and clients %v; want the fault at 600ms alone and one client", len(res.Best.Faults), res.Best.Faults, res.Best.Clients)
	}
}

// A search stopped before the original run's tries were done says why,
// and keeps nothing: interrupted, or with its budget spent.
func TestShrinkStoppedBeforeTheOriginalSaysWhy(t *testing.T) {
	orig := Candidate{Faults: []runfile.ScheduledFault{{Fault: nemesis.Kill, At: time.Second, Nodes: []string{"n1"}}},
		Clients: []int{0, 1}, Keys: 1, TimeLimit: 5 * time.Second, Hold: "10ms"}
	interrupted, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
		opts Options
		why  string
	}{
		{"interrupted", interrupted, Options{K: 2, N: 3}, "(interrupted)"},
		{"out of budget", context.Background(), Options{K: 2, N: 3, Budget: time.Nanosecond}, "(budget of 1ns spent)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tried := 0
			r := fakeRunner(func(Candidate) bool { tried++; return true })
			res, err := Shrink(c.ctx, r, orig, c.opts)
			if !errors.Is(err, ErrStoppedFirst) || !strings.Contains(err.Error(), c.why) || res != nil {
				t.Fatalf("Shrink: %v, %v; want %v saying %q, and no result", res, err, ErrStoppedFirst, c.why)
			}
			if tried != 0 {
				t.Errorf("%d tries after the search stopped", tried)
			}
		})
	}
}
