package checker

import (
	"testing"

	"github.com/lockjepsen/lockjepsen/history"
)

const (
	ok   = history.OK
	fail = history.Fail
	info = history.Info
)

func TestHolds(t *testing.T) {
	type want struct {
		start, end int64 // ms; end -1 = Never
		reason     string
	}
	cases := []struct {
		name  string
		b     *hb
		holds []want
	}{
		{"release ends belief at its invoke",
			new(hb).acquire(1, "k", 0, 10, ok, "a", 1000).release(1, "k", 50, 60, ok, "a"),
			[]want{{10, 50, EndRelease}}},
		{"failed release still ends at invoke",
			new(hb).acquire(1, "k", 0, 10, ok, "a", 1000).release(1, "k", 50, 60, fail, "a"),
			[]want{{10, 50, EndRelease}}},
		{"unknown acquire confers no belief",
			new(hb).acquire(1, "k", 0, 10, info, "", -1).acquire(2, "k", 5, -1, ok, "", -1),
			nil},
		{"failed acquire confers no belief",
			new(hb).acquire(1, "k", 0, 10, fail, "", -1),
			nil},
		{"lease runs out",
			new(hb).acquire(1, "k", 0, 10, ok, "a", 100),
			[]want{{10, 100, EndValidUntil}}},
		{"release after the lease ran out",
			new(hb).acquire(1, "k", 0, 10, ok, "a", 100).release(1, "k", 150, 160, ok, "a"),
			[]want{{10, 100, EndValidUntil}}},
		{"ok extend moves valid_until",
			new(hb).acquire(1, "k", 0, 10, ok, "a", 100).extend(1, "k", 50, 60, ok, "a", 300),
			[]want{{10, 300, EndValidUntil}}},
		{"extend that arrives after the lease ran out does not revive it",
			new(hb).acquire(1, "k", 0, 10, ok, "a", 100).extend(1, "k", 90, 110, ok, "a", 300),
			[]want{{10, 100, EndValidUntil}}},
		{"unknown extend keeps the earlier valid_until",
			new(hb).acquire(1, "k", 0, 10, ok, "a", 100).extend(1, "k", 50, 60, info, "a", 0),
			[]want{{10, 100, EndValidUntil}}},
		{"failed extend: the client learns it lost the lock",
			new(hb).acquire(1, "k", 0, 10, ok, "a", 100).extend(1, "k", 50, 60, fail, "a", 0),
			[]want{{10, 60, EndLost}}},
		{"extend with another token is not ours",
			new(hb).acquire(1, "k", 0, 10, ok, "a", 100).extend(1, "k", 50, 60, fail, "zzz", 0),
			[]want{{10, 100, EndValidUntil}}},
		{"crash ends the belief",
			new(hb).acquire(1, "k", 0, 10, ok, "a", -1).crash(40, 1, 2),
			[]want{{10, 40, EndCrash}}},
		{"no TTL, never released: belief never ends",
			new(hb).acquire(1, "k", 0, 10, ok, "a", -1),
			[]want{{10, -1, EndOpen}}},
		{"lease already over when the ok arrives: empty",
			new(hb).acquire(1, "k", 0, 10, ok, "a", 5),
			[]want{{10, 10, EndValidUntil}}},
		{"new acquire without release abandons the old hold",
			new(hb).acquire(1, "k", 0, 10, ok, "a", -1).acquire(1, "k", 50, 60, ok, "b", -1),
			[]want{{10, 50, EndAbandoned}, {60, -1, EndOpen}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hs := Holds(c.b.build(t))
			if len(hs) != len(c.holds) {
				t.Fatalf("got %d holds %+v, want %d", len(hs), hs, len(c.holds))
			}
			for i, w := range c.holds {
				end := ms(w.end)
				if w.end < 0 {
					end = Never
				}
				h := hs[i]
				if h.Start != ms(w.start) || h.End != end || h.EndReason != w.reason {
					t.Errorf("hold %d = start %d end %d %s, want %d %d %s", i, h.Start, h.End, h.EndReason, ms(w.start), end, w.reason)
				}
			}
		})
	}
}

func TestHoldsEmptyHistory(t *testing.T) {
	if hs := Holds(nil); len(hs) != 0 {
		t.Fatalf("holds of an empty history: %v", hs)
	}
}

// A client-crash that did not happen must not end anyone's belief.
func TestCrashPhases(t *testing.T) {
	for _, c := range []struct {
		phase string
		end   int64 // ms; -1 = Never
	}{{"start", 40}, {"error", -1}, {"skipped", -1}} {
		t.Run(c.phase, func(t *testing.T) {
			hs := Holds(new(hb).acquire(1, "k", 0, 10, ok, "a", -1).
				ev(40, history.NemesisProcess, info, "client-crash", "", &history.Value{Phase: c.phase, Clients: []int{1}}).build(t))
			want := ms(c.end)
			if c.end < 0 {
				want = Never
			}
			if len(hs) != 1 || hs[0].End != want {
				t.Fatalf("holds %+v, want end %d", hs, want)
			}
		})
	}
}

// Extend's semantics, each with a legal history (the second client gets
// the lock once the first belief is over) and an illegal one (it gets it
// while the first still believes). The first client's lease runs to 100
// ms unless an extend moves it.
func TestExtendSemantics(t *testing.T) {
	first := func() *hb { return new(hb).acquire(1, "k", 0, 10, ok, "a", 100) }
	cases := []struct {
		name       string
		b          *hb
		violations int
	}{
		{"ok extend to 300: a grant at 350 is legal",
			first().extend(1, "k", 50, 60, ok, "a", 300).acquire(2, "k", 340, 350, ok, "b", 800), 0},
		{"ok extend to 300: a grant at 200 overlaps",
			first().extend(1, "k", 50, 60, ok, "a", 300).acquire(2, "k", 190, 200, ok, "b", 800), 1},
		{"failed extend at 60: a grant at 80 is legal",
			first().extend(1, "k", 50, 60, fail, "a", 0).acquire(2, "k", 70, 80, ok, "b", 800), 0},
		{"failed extend completing at 60: a grant at 55 overlaps",
			first().extend(1, "k", 50, 60, fail, "a", 0).acquire(2, "k", 45, 55, ok, "b", 800), 1},
		{"unknown extend keeps 100: a grant at 150 is legal",
			first().extend(1, "k", 50, 60, info, "a", 0).acquire(2, "k", 140, 150, ok, "b", 800), 0},
		{"unknown extend keeps 100: a grant at 90 overlaps",
			first().extend(1, "k", 50, 60, info, "a", 0).acquire(2, "k", 80, 90, ok, "b", 800), 1},
		{"an extend that arrives after the client's own lease ran out does not revive it: a grant at 150 is legal",
			first().extend(1, "k", 90, 110, ok, "a", 300).acquire(2, "k", 140, 150, ok, "b", 800), 0},
		{"the same extend: a grant at 95, before the lease ran out, overlaps",
			first().extend(1, "k", 90, 110, ok, "a", 300).acquire(2, "k", 93, 95, ok, "b", 800), 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ops := c.b.build(t)
			if got := Exclusion(ops).Count; got != c.violations {
				t.Fatalf("%d violations, want %d; holds %+v", got, c.violations, Holds(ops))
			}
			// porcupine, built from the same holds, agrees.
			if r := Check(ops, Options{}); r.Disagreement != "" {
				t.Errorf("checkers disagree: %s", r.Disagreement)
			}
		})
	}
}
