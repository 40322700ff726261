package checker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLinearizability(t *testing.T) {
	for _, c := range safetyCases {
		t.Run(c.name, func(t *testing.T) {
			r := Linearizability(c.b().build(t), Options{})
			want := ValidTrue
			if !c.valid {
				want = ValidFalse
			}
			if r.Valid != want {
				t.Fatalf("valid = %v, want %v (%+v)", r.Valid, want, r)
			}
		})
	}
}

// sequentialRounds builds n legal acquire/release rounds on key, alternating
// two clients, with a quiet gap between rounds.
func sequentialRounds(b *hb, key string, n int, base int64) *hb {
	for i := 0; i < n; i++ {
		t := base + int64(i)*100
		p := i % 2
		b.acquire(p, key, t, t+10, ok, "t", t+1000).release(p, key, t+50, t+60, ok, "t")
	}
	return b
}

func TestLinearizabilitySegments(t *testing.T) {
	ops := sequentialRounds(new(hb), "k", 20, 0).build(t)
	r := Linearizability(ops, Options{})
	// Every quiet instant is a cut, also the one inside a hold (the state
	// there is "held by p").
	if r.Valid != ValidTrue || r.Segments != 40 || r.SegmentsChecked != 40 || r.Ops != 40 || r.OpsChecked != 40 {
		t.Fatalf("%+v", r)
	}
}

func TestLinearizabilityCutsWhileHeld(t *testing.T) {
	// A no-TTL hold that never ends, then quiet, then a second acquire: the
	// cut between them must carry "held by 1" into the second segment.
	ops := new(hb).acquire(1, "k", 0, 10, ok, "a", -1).acquire(2, "k", 500, 510, ok, "b", 2000).build(t)
	r := Linearizability(ops, Options{})
	if r.Segments != 2 || r.Valid != ValidFalse || r.SegmentsIllegal != 1 {
		t.Fatalf("%+v", r)
	}
	if r.Illegal[0].N != 1 {
		t.Fatalf("illegal segment %+v, want the second", r.Illegal[0])
	}
}

func TestLinearizabilityTooLarge(t *testing.T) {
	// Overlapping holds leave no quiet point, so this is one segment.
	b := new(hb)
	for i := 0; i < 30; i++ {
		b.acquire(i, "k", int64(i), int64(i)+100, ok, "t", int64(i)+300)
	}
	r := Linearizability(b.build(t), Options{MaxSegmentOps: 10})
	if r.Valid != ValidUnknown || r.TooLarge != 1 || r.OverBudget != 0 || r.SegmentsChecked != 1 || r.OpsChecked != 1 {
		t.Fatalf("%+v", r)
	}
}

func TestLinearizabilityBudget(t *testing.T) {
	ops := sequentialRounds(new(hb), "k", 100, 0).build(t)
	r := Linearizability(ops, Options{LinearizabilityBudget: time.Nanosecond})
	if r.Valid != ValidUnknown || r.OverBudget == 0 {
		t.Fatalf("%+v", r)
	}
}

func TestLinearizabilityVisualization(t *testing.T) {
	dir := t.TempDir()
	illegal := new(hb).acquire(1, "lock/0", 0, 10, ok, "a", 1000).acquire(2, "lock/0", 20, 30, ok, "b", 1000).build(t)
	r := Linearizability(illegal, Options{OutDir: dir})
	if len(r.Files) != 1 || r.Files[0] != "linearizability-lock_0-1.html" || r.Illegal[0].File != r.Files[0] {
		t.Fatalf("files %v, illegal %+v, errors %v", r.Files, r.Illegal, r.Errors)
	}
	html, err := os.ReadFile(filepath.Join(dir, r.Files[0]))
	if err != nil || !strings.Contains(string(html), "p2 acquire") {
		t.Fatalf("visualization: %v", err)
	}

	legal := sequentialRounds(new(hb), "k", 10, 0).build(t)
	r = Linearizability(legal, Options{OutDir: dir})
	if r.Valid != ValidTrue || len(r.Files) != 1 || r.Files[0] != "linearizability-k-0.html" {
		t.Fatalf("files %v errors %v", r.Files, r.Errors)
	}
	html, err = os.ReadFile(filepath.Join(dir, r.Files[0]))
	// All ten rounds of the key go into one picture.
	if err != nil || strings.Count(string(html), "acquire → ok") < 10 {
		t.Fatalf("legal visualization: %v", err)
	}
}
