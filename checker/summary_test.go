package checker

import (
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/history"
)

// summary adds a summary of n failed acquires by p on key, the first
// invoked at from and the last completed at to, written at to.
func (b *hb) summary(p int, key string, n, from, to int64) *hb {
	return b.ev(to, p, history.Summary, history.Acquire, key,
		&history.Value{Count: n, From: history.I64(ms(from)), To: history.I64(ms(to))})
}

// TestSummarizedFailures: failed acquires recorded as summaries count as
// the failures they stand for, in the tallies and in the unavailability
// windows, and a summary of failures under a live hold opens no window.
func TestSummarizedFailures(t *testing.T) {
	stuck := func(summarised bool) *hb {
		b := new(hb).acquire(1, "k", 0, 10, ok, "a", -1).crash(100, 1)
		for i := int64(0); i < 10; i++ {
			at := 200 + i*1000
			if summarised {
				b.summary(2, "k", 3, at, at+8)
				continue
			}
			for j := int64(0); j < 3; j++ {
				b.acquire(2, "k", at+3*j, at+3*j+2, fail, "", 0)
			}
		}
		return b
	}
	cases := []struct {
		name          string
		b             *hb
		windows       int
		stuck         bool
		attempts, fai int
	}{
		{"stuck, failures one by one", stuck(false), 1, true, 31, 30},
		{"stuck, failures summarised", stuck(true), 1, true, 31, 30},
		{"summarised failures under a live hold",
			new(hb).acquire(1, "k", 0, 10, ok, "a", 1000).summary(2, "k", 5, 20, 30).release(1, "k", 50, 60, ok, "a"),
			0, false, 6, 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Check(c.b.build(t), Options{TTL: 100 * time.Millisecond})
			l := r.Liveness
			if l.Windows != c.windows || l.Stuck != c.stuck || l.AcquireAttempts != c.attempts || l.AcquireFail != c.fai {
				t.Fatalf("windows %d stuck %v attempts %d failed %d, want %d %v %d %d",
					l.Windows, l.Stuck, l.AcquireAttempts, l.AcquireFail, c.windows, c.stuck, c.attempts, c.fai)
			}
			if got := r.Stats.Counts[history.Acquire]["fail"]; got != c.fai {
				t.Errorf("stats count %d failed acquires, want %d", got, c.fai)
			}
			if c.stuck && (l.StuckSince != ms(200) || l.Longest.Failed != c.fai) {
				t.Errorf("stuck since %d with %d failures in the longest window, want since %d with %d",
					l.StuckSince, l.Longest.Failed, ms(200), c.fai)
			}
		})
	}
}
