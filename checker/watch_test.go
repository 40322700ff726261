package checker

import (
	"math/rand"
	"strings"
	"testing"

	"github.com/lockjepsen/lockjepsen/history"
)

func watch(ops []history.Op) *WatchViolation {
	w := NewWatcher()
	for _, op := range ops {
		if v := w.Observe(op); v != nil {
			return v
		}
	}
	return w.Done()
}

func countWatched(ops []history.Op) int {
	w := NewWatcher()
	for _, op := range ops {
		w.Observe(op)
	}
	w.Done()
	return w.Count()
}

// The watcher that stops a run must see a violation exactly when the
// exclusion checker finds one, and the same first one: stopping on a false
// alarm would cut a safe run short, and missing one would let it run on.
// The random histories have tied timestamps, the watcher's hard case.
func TestWatcherAgreesWithExclusion(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	found := 0
	for i := 0; i < 3000; i++ {
		ops := randomHistory(rng).build(t)
		ex := scan(ops).exclusion(Options{})
		v := watch(ops)
		if c := countWatched(ops); c != ex.Count {
			t.Fatalf("history %d: the watcher counts %d violations, the exclusion checker %d\n%s", i, c, ex.Count, dump(ops))
		}
		if (v != nil) != (ex.Count > 0) {
			t.Fatalf("history %d: watcher found %+v, exclusion checker counts %d violations\n%s", i, v, ex.Count, dump(ops))
		}
		if v == nil {
			continue
		}
		found++
		if want := ex.Violations[0].Second.AcquireIndex; v.SecondIndex != want {
			t.Fatalf("history %d: watcher's first violation is the grant at event %d, the checker's at %d\n%s", i, v.SecondIndex, want, dump(ops))
		}
	}
	if found < 300 || found > 2700 {
		t.Fatalf("%d of 3000 random histories had a violation: the generator no longer tests both sides", found)
	}
}

func TestWatcher(t *testing.T) {
	cases := []struct {
		name string
		b    *hb
		want bool
	}{
		{"a grant while another is believed", new(hb).
			acquire(1, "k", 0, 1, ok, "a", 100).
			acquire(2, "k", 2, 3, ok, "b", 100), true},
		{"a grant after the other's lease ran out", new(hb).
			acquire(1, "k", 0, 1, ok, "a", 5).
			acquire(2, "k", 6, 7, ok, "b", 100), false},
		{"a grant after the other's release was invoked", new(hb).
			acquire(1, "k", 0, 1, ok, "a", 100).
			release(1, "k", 2, 9, ok, "a").
			acquire(2, "k", 3, 4, ok, "b", 100), false},
		{"a belief that ends at the instant the other starts", new(hb).
			acquire(1, "k", 0, 1, ok, "a", 100).
			acquire(2, "k", 2, 3, ok, "b", 100).
			release(1, "k", 3, 4, ok, "a"), false},
		{"other keys do not overlap", new(hb).
			acquire(1, "k1", 0, 1, ok, "a", 100).
			acquire(2, "k2", 2, 3, ok, "b", 100), false},
		{"a crashed holder believes nothing", new(hb).
			acquire(1, "k", 0, 1, ok, "a", 100).
			crash(2, 1).
			acquire(2, "k", 3, 4, ok, "b", 100), false},
		{"a failed extend ends the belief", new(hb).
			acquire(1, "k", 0, 1, ok, "a", 100).
			extend(1, "k", 2, 3, fail, "a", 100).
			acquire(2, "k", 4, 5, ok, "b", 100), false},
		{"an extended lease overlaps", new(hb).
			acquire(1, "k", 0, 1, ok, "a", 4).
			extend(1, "k", 2, 3, ok, "a", 100).
			acquire(2, "k", 6, 7, ok, "b", 100), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ops := c.b.build(t)
			if got := watch(ops) != nil; got != c.want {
				t.Fatalf("watcher found a violation: %v, want %v", got, c.want)
			}
			if got := scan(ops).exclusion(Options{}).Count > 0; got != c.want {
				t.Fatalf("the exclusion checker disagrees with this table: %v", got)
			}
		})
	}
}

func dump(ops []history.Op) string {
	var b strings.Builder
	for i := range ops {
		b.Write(history.AppendJSON(nil, &ops[i]))
		b.WriteByte('\n')
	}
	return b.String()
}

// A run told to go on after its first violation stops once the earlier
// holder's belief has ended: by then what it did while it believed, a
// stale write, is in the history. Events of the later holder, or a write
// of the earlier one, must not end it.
func TestEarlierHoldEnded(t *testing.T) {
	overlap := func() *hb {
		return new(hb).
			acquire(1, "k", 0, 1, ok, "a", 100).
			acquire(2, "k", 2, 3, ok, "b", 100)
	}
	cases := []struct {
		name string
		b    *hb
		want bool
	}{
		{"nothing after the overlap", overlap(), false},
		{"the earlier holder's write is still in its hold", overlap().write(1, "k", 4, 5, ok, 1, history.I64(1)), false},
		{"the later holder releases", overlap().release(2, "k", 4, 5, ok, "b"), false},
		{"the earlier holder invokes its release", overlap().write(1, "k", 4, 5, fail, 1, history.I64(1)).release(1, "k", 6, -1, ok, "a"), true},
		{"the earlier holder crashes", overlap().crash(4, 1), true},
		{"the earlier holder's extend fails", overlap().extend(1, "k", 4, 5, fail, "a", 100), true},
		{"the earlier holder asks again", overlap().acquire(1, "k", 4, -1, ok, "c", 100), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := NewWatcher()
			var first *WatchViolation
			for _, op := range c.b.buildRaw() {
				if v := w.Observe(op); first == nil {
					first = v
				}
			}
			if first == nil {
				first = w.Done()
			}
			if first == nil {
				t.Fatal("no violation in the table's history")
			}
			if got := first.EarlierHoldEnded(); got != c.want {
				t.Fatalf("EarlierHoldEnded = %v, want %v", got, c.want)
			}
		})
	}
}
