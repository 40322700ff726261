package checker

import (
	"fmt"
	"testing"

	"github.com/lockjepsen/lockjepsen/history"
)

// TestToyFaultMeansWhatItsMeaningSays: a fault the checker has never
// heard of, "toy-stop", means what Options.Faults says, not what its name
// does. Process 0 holds k with a long lease; toy-stop names process 0 at
// 20 ms; process 1 is granted k at 30 ms. Said to crash its clients, the
// fault ended 0's belief before the grant (safe, a holder crash on a live
// lease, an instant fault); said to be a lasting client fault, it ended
// nothing (the overlap is the lock's violation, the fault a span that
// never stopped); with nothing said, its name means nothing either way.
// Said to fail over, it is a failover on the live lease, not a node
// fault. A name the legacy reading knows (client-crash) keeps its old
// meaning when nothing is said.
func TestToyFaultMeansWhatItsMeaningSays(t *testing.T) {
	// run is the history with the fault's start naming client 0, or
	// node n1 when onNode.
	run := func(name string, onNode bool) []history.Op {
		v := &history.Value{Phase: "start", Clients: []int{0}, Targets: []string{"client 0"}}
		if onNode {
			v = &history.Value{Phase: "start", Targets: []string{"n1"}}
		}
		b := new(hb).acquire(0, "k", 0, 10, history.OK, "a", 10_000)
		b.ev(20, history.NemesisProcess, history.Info, name, "", v)
		return b.acquire(1, "k", 25, 30, history.OK, "b", 10_000).build(t)
	}
	crash := FaultMeaning{Kind: "client", Instant: true, Crashes: true}
	cases := []struct {
		name      string
		fault     string
		onNode    bool
		meanings  FaultMeanings
		valid     bool
		crashes   int  // Exercised.HolderCrashes
		nodeFault int  // Exercised.NodeFaults
		instant   bool // the fault's span ends at its start
	}{
		{"a toy said to crash", "toy-stop", false, FaultMeanings{"toy-stop": crash}, true, 1, 0, true},
		{"a toy said to be a lasting client fault", "toy-stop", false, FaultMeanings{"toy-stop": {Kind: "client"}}, false, 0, 0, false},
		{"a toy of no recorded meaning", "toy-stop", false, nil, false, 0, 0, false},
		{"a toy on a node said to be a node fault", "toy-stop", true, FaultMeanings{"toy-stop": {Kind: "server"}}, false, 0, 1, false},
		{"a toy on a node said to be a client fault", "toy-stop", true, FaultMeanings{"toy-stop": {Kind: "client"}}, false, 0, 0, false},
		{"client-crash in an old store", "client-crash", false, nil, true, 1, 0, true},
		{"client-crash said to be lasting", "client-crash", false, FaultMeanings{"client-crash": {Kind: "client"}}, false, 0, 0, false},
		{"client-pause on a node in an old store", "client-pause", true, nil, false, 0, 0, false},
		{"a toy on a node said to fail over", "toy-stop", true, FaultMeanings{"toy-stop": {Kind: "server", FailsOver: true}}, false, 0, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ops := run(c.fault, c.onNode)
			r := Check(ops, Options{Faults: c.meanings})
			if r.Exclusion.Valid != c.valid {
				t.Errorf("exclusion valid %v, want %v", r.Exclusion.Valid, c.valid)
			}
			failovers := 0 // a fault said to fail over is a failover on the live lease
			if c.meanings.Of(c.fault).FailsOver {
				failovers = 1
			}
			if e := r.Exercised; e == nil || e.HolderCrashes != c.crashes || e.NodeFaults != c.nodeFault || e.Failovers != failovers {
				t.Errorf("exercised %+v, want %d holder crashes, %d node faults and %d failovers", e, c.crashes, c.nodeFault, failovers)
			}
			fs := c.meanings.Faults(ops)
			if len(fs) != 1 || (fs[0].End == fs[0].Start) != c.instant || (!c.instant && fs[0].End != Never) {
				t.Errorf("faults %+v, want one, instant %v (else never stopped)", fs, c.instant)
			}
		})
	}
}

// TestFaultPairerPairsByFaultAndTargets: a stop ends the open start of
// the same fault on the same targets and clients, whatever else is open;
// an error or a stop of nothing open begins and ends nothing.
func TestFaultPairerPairsByFaultAndTargets(t *testing.T) {
	ops := new(hb).
		fault(0, "pause", "start", "n1").
		fault(1, "pause", "start", "n2").
		fault(2, "pause", "error", "n3").
		fault(3, "pause", "stop", "n2").
		fault(4, "kill", "stop", "n1").
		fault(5, "pause", "stop", "n1").build(t)
	var p FaultPairer
	type got struct {
		started, stopped string
	}
	want := []got{{"pause [n1] 0", ""}, {"pause [n2] 1", ""}, {}, {"", "pause [n2] 1-3"}, {}, {"", "pause [n1] 0-5"}}
	for i := range ops {
		s, e := p.Apply(&ops[i])
		var g got
		if s != nil {
			g.started = fmt.Sprintf("%s %v %d", s.Name, s.Targets, s.Start/ms(1))
		}
		if e != nil {
			g.stopped = fmt.Sprintf("%s %v %d-%d", e.Name, e.Targets, e.Start/ms(1), e.End/ms(1))
		}
		if g != want[i] {
			t.Errorf("event %d (%s %s): got %+v, want %+v", i, ops[i].F, ops[i].Value.Phase, g, want[i])
		}
	}
}

// The live watcher reads a fault's meaning as the checkers do: a toy
// said to crash its client ends the holder's belief before the next
// grant; read by name, it ends nothing and the grant overlaps.
func TestWatcherReadsFaultMeanings(t *testing.T) {
	b := new(hb).acquire(0, "k", 0, 10, history.OK, "a", 10_000)
	b.ev(20, history.NemesisProcess, history.Info, "toy-stop", "", &history.Value{Phase: "start", Clients: []int{0}, Targets: []string{"client 0"}})
	ops := b.acquire(1, "k", 25, 30, history.OK, "b", 10_000).
		acquire(2, "k", 40, 45, history.Fail, "", -1).build(t)
	cases := []struct {
		name    string
		w       *Watcher
		overlap bool
	}{
		{"said to crash", NewWatcherWith(FaultMeanings{"toy-stop": {Kind: "client", Instant: true, Crashes: true}}), false},
		{"read by name", NewWatcher(), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var first *WatchViolation
			for _, op := range ops {
				if v := c.w.Observe(op); v != nil && first == nil {
					first = v
				}
			}
			if (first != nil) != c.overlap {
				t.Fatalf("first violation %+v, want one: %v", first, c.overlap)
			}
		})
	}
}
