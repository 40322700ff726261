package checker

import (
	"cmp"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/history"
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

// An illegal segment cut while a hold was open must be drawn with that
// holder's real acquire, not only the synthetic "held at segment start".
func TestIllegalVisualizationShowsBothHolders(t *testing.T) {
	cases := []struct {
		name string
		b    *hb
		want []string // in every illegal segment's HTML
	}{
		{"cut while held", new(hb).acquire(1, "k", 0, 10, ok, "a", 1000).acquire(2, "k", 20, 30, ok, "b", 1000),
			[]string{"p1 acquire → ok", "p2 acquire → ok"}},
		{"no cut: both in one segment", new(hb).acquire(1, "k", 0, 10, ok, "a", 1000).acquire(2, "k", 5, 30, ok, "b", 1000),
			[]string{"p1 acquire → ok", "p2 acquire → ok"}},
		{"a stale no-TTL holder overlapped twice", new(hb).acquire(7, "k", 0, 10, ok, "a", -1).
			acquire(1, "k", 20, 30, ok, "b", 1000).release(1, "k", 40, 41, ok, "b").
			acquire(2, "k", 50, 60, ok, "c", 1000).release(2, "k", 70, 71, ok, "c"),
			[]string{"p7 acquire → ok"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			r := Linearizability(c.b.build(t), Options{OutDir: dir})
			if r.Valid != ValidFalse || len(r.Illegal) == 0 || len(r.Errors) > 0 {
				t.Fatalf("%+v", r)
			}
			for _, seg := range r.Illegal {
				b, err := os.ReadFile(filepath.Join(dir, seg.File))
				if err != nil {
					t.Fatal(err)
				}
				for _, w := range c.want {
					if !strings.Contains(string(b), w) {
						t.Errorf("%s does not mention %q", seg.File, w)
					}
				}
			}
		})
	}
}

// The run directory must hold only the visualizations results.json lists.
func TestStaleVisualizationsRemoved(t *testing.T) {
	illegal := new(hb).acquire(1, "k", 0, 10, ok, "a", 1000).acquire(2, "k", 20, 30, ok, "b", 1000)
	cases := []struct {
		name  string
		ops   []history.Op
		files int
	}{
		{"legal", sequentialRounds(new(hb), "k", 3, 0).build(t), 1},
		{"illegal", illegal.build(t), 1},
		{"nothing to draw", nil, 0},
	}
	kept := []string{"history.jsonl", "results.json", "linearizability.html", "linearizability-k-0.htm",
		"old-linearizability-k-0.html", "linearizability-k-0.html.bak"}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range append([]string{"linearizability-k-0.html", "linearizability-k-9.html", "linearizability-other-1.html"}, kept...) {
				if err := os.WriteFile(filepath.Join(dir, f), []byte("old"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			// A directory with a matching name is not ours to delete.
			if err := os.Mkdir(filepath.Join(dir, "linearizability-d-0.html"), 0o755); err != nil {
				t.Fatal(err)
			}
			r := Check(c.ops, Options{OutDir: dir})
			if len(r.Linearizability.Files) != c.files || len(r.Linearizability.Errors) > 0 {
				t.Fatalf("files %v errors %v", r.Linearizability.Files, r.Linearizability.Errors)
			}
			want := map[string]bool{"linearizability-d-0.html": true}
			for _, f := range append(kept, r.Linearizability.Files...) {
				want[f] = true
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if !want[e.Name()] {
					t.Errorf("%s left in the directory; results list %v", e.Name(), r.Linearizability.Files)
				}
				delete(want, e.Name())
			}
			if len(want) > 0 {
				t.Errorf("missing %v", want)
			}
			for _, f := range r.Linearizability.Files {
				if b, _ := os.ReadFile(filepath.Join(dir, f)); string(b) == "old" {
					t.Errorf("%s was not rewritten", f)
				}
			}
		})
	}
	t.Run("no directory yet", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "new")
		r := Check(illegal.build(t), Options{OutDir: dir})
		if len(r.Linearizability.Files) != 1 || len(r.Linearizability.Errors) > 0 {
			t.Fatalf("files %v errors %v", r.Linearizability.Files, r.Linearizability.Errors)
		}
	})
}

// TestSequentialSegmentsAgreeWithPorcupine: a segment decided without
// porcupine (sequentialLegal) is one porcupine calls legal, and a
// sequential segment it refuses is one porcupine calls illegal; on the
// cases below and on random small segments, touching and overlapping
// intervals included.
func TestSequentialSegmentsAgreeWithPorcupine(t *testing.T) {
	p0, p1 := &Hold{Process: 10}, &Hold{Process: 11}
	acq := func(h *Hold, call, ret int64) linOp { return linOp{call: call, ret: ret, hold: h} }
	rel := func(h *Hold, at int64) linOp { return linOp{call: at, ret: at, hold: h, release: true} }
	cases := []struct {
		name string
		init *Hold
		ops  []linOp
		want bool
	}{
		{"acquire and release", nil, []linOp{acq(p0, 0, 5), rel(p0, 6)}, true},
		{"two holds in turn", nil, []linOp{acq(p0, 0, 5), rel(p0, 6), acq(p1, 7, 9), rel(p1, 10)}, true},
		{"held at the start, released", p0, []linOp{rel(p0, 3), acq(p1, 4, 5)}, true},
		{"an acquire left open", nil, []linOp{acq(p0, 0, 5)}, true},
		{"acquired while held", nil, []linOp{acq(p0, 0, 5), acq(p1, 6, 8)}, false},
		{"acquired while held at the start", p0, []linOp{acq(p1, 6, 8)}, false},
		{"released by another", nil, []linOp{acq(p0, 0, 5), rel(p1, 6)}, false},
		{"overlapping: left to porcupine", nil, []linOp{acq(p0, 0, 5), rel(p0, 6), acq(p1, 4, 9)}, false},
		{"touching: left to porcupine", nil, []linOp{acq(p0, 0, 5), rel(p0, 5)}, false},
	}
	e := newLinEngine(Options{}.withDefaults())
	lc := e.lc
	lc.clients[10], lc.clients[11], lc.clients[12] = 0, 1, 2
	check := func(t *testing.T, name string, init *Hold, ops []linOp) bool {
		s := &segment{key: "k", ops: ops, nops: len(ops), init: init, start: ops[0].call}
		got := lc.sequentialLegal(s)
		var res int8
		lc.session(func() { res = lc.checkOne(s) })
		switch {
		case got && res != segLegal:
			t.Fatalf("%s: decided legal without porcupine, porcupine says %d: %+v (init %v)", name, res, ops, init)
		case !got && sequential(ops, init, s.start) && res != segIllegal:
			t.Fatalf("%s: a sequential segment refused, porcupine says %d: %+v (init %v)", name, res, ops, init)
		}
		return got
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := check(t, c.name, c.init, c.ops); got != c.want {
				t.Errorf("decided legal %v, want %v", got, c.want)
			}
		})
	}
	rng := rand.New(rand.NewSource(57))
	holds := []*Hold{p0, p1, {Process: 12}}
	decided := 0
	for i := range 3000 {
		var init *Hold
		if rng.Intn(3) == 0 {
			init = holds[rng.Intn(len(holds))]
		}
		ops := randomLinOps(rng, holds)
		if check(t, fmt.Sprintf("random %d", i), init, ops) {
			decided++
		}
	}
	if decided == 0 {
		t.Fatal("no random segment was decided without porcupine")
	}
	t.Logf("%d of 3000 random segments decided without porcupine", decided)
}

// randomLinOps is 1-6 operations on holds in (call, ret) order, at times
// close enough to touch and overlap.
func randomLinOps(rng *rand.Rand, holds []*Hold) []linOp {
	ops := make([]linOp, 1+rng.Intn(6))
	t := int64(10)
	for i := range ops {
		t += int64(rng.Intn(3))
		h := holds[rng.Intn(len(holds))]
		if rng.Intn(2) == 0 {
			ops[i] = linOp{call: t, ret: t, hold: h, release: true}
		} else {
			ops[i] = linOp{call: t, ret: t + int64(rng.Intn(3)), hold: h}
		}
	}
	slices.SortFunc(ops, func(x, y linOp) int { return cmp.Or(cmp.Compare(x.call, y.call), cmp.Compare(x.ret, y.ret)) })
	return ops
}

// sequential reports whether every operation returns before the next is
// called, the synthetic initial acquire at start-1 included.
func sequential(ops []linOp, init *Hold, start int64) bool {
	prev := int64(math.MinInt64)
	if init != nil {
		prev = start - 1
	}
	for _, o := range ops {
		if o.call <= prev {
			return false
		}
		prev = o.ret
	}
	return true
}
