package checker

import (
	"os"
	"path/filepath"
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
