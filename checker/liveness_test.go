package checker

import (
	"testing"
	"time"
)

func TestLiveness(t *testing.T) {
	cases := []struct {
		name    string
		b       *hb
		windows int
		longest int64 // ms
		stuck   bool
		since   int64 // ms
	}{
		{"always available",
			new(hb).acquire(1, "k", 0, 10, ok, "a", 1000).release(1, "k", 50, 60, ok, "a"),
			0, 0, false, 0},
		{"failures while held are not unavailability",
			new(hb).acquire(1, "k", 0, 10, ok, "a", 1000).acquire(2, "k", 20, 30, fail, "", 0).release(1, "k", 50, 60, ok, "a"),
			0, 0, false, 0},
		{"clients blocked since during the previous hold count from its end",
			// A paused node: 2's attempt hangs from 20 to 400, past 1's
			// release at 50; 3 gets the lock at 420.
			new(hb).acquire(1, "k", 0, 10, ok, "a", 1000).acquire(2, "k", 20, 400, info, "", 0).
				release(1, "k", 50, 60, ok, "a").acquire(3, "k", 300, 420, ok, "c", 2000),
			1, 370, false, 0},
		{"recovering window",
			// 1's belief ends at 100 (crash) but the key stays; 2 fails until
			// the server expires it and 2 gets it at 3000.
			new(hb).acquire(1, "k", 0, 10, ok, "a", -1).crash(100, 1).
				acquire(2, "k", 200, 210, fail, "", 0).acquire(2, "k", 1000, 1010, info, "", 0).
				acquire(2, "k", 2900, 3000, ok, "b", 4000).release(2, "k", 3500, 3510, ok, "b").
				acquire(3, "k", 9000, 9010, ok, "c", 10000),
			1, 2800, false, 0},
		{"stuck: no TTL holder crashed, everyone fails to the end",
			func() *hb {
				b := new(hb).acquire(1, "k", 0, 10, ok, "a", -1).crash(100, 1)
				for i := int64(0); i < 10; i++ {
					b.acquire(2, "k", 200+i*1000, 210+i*1000, fail, "", 0)
				}
				return b
			}(),
			1, 9010, true, 200},
		{"window at the end, too short to be stuck",
			new(hb).acquire(1, "k", 0, 10, ok, "a", 1000).release(1, "k", 50, 60, ok, "a").
				acquire(2, "k", 5000, 5010, fail, "", 0).acquire(2, "k", 5500, 5600, fail, "", 0),
			1, 600, false, 0},
		{"attempts stopped long before the end: not stuck",
			new(hb).acquire(2, "k", 0, 10, fail, "", 0).acquire(2, "k", 3000, 3010, fail, "", 0).
				acquire(3, "k", 60000, 60010, ok, "x", 70000).release(3, "k", 60020, 60030, ok, "x").
				ev(100000, 4, "invoke", "read", "r", nil).ev(100001, 4, "ok", "read", "r", nil),
			1, 60010, false, 0},
		{"open attempt at the end counts as failed",
			new(hb).acquire(2, "k", 0, 10, fail, "", 0).acquire(2, "k", 20, -1, ok, "", 0).
				ev(5000, 4, "invoke", "read", "r", nil).ev(5001, 4, "ok", "read", "r", nil),
			1, 5001, true, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Liveness(c.b.build(t), Options{TTL: 100 * time.Millisecond})
			if r.Windows != c.windows || r.Stuck != c.stuck {
				t.Fatalf("windows %d stuck %v, want %d %v: %+v", r.Windows, r.Stuck, c.windows, c.stuck, r)
			}
			if c.windows > 0 && r.Longest.Duration != ms(c.longest) {
				t.Fatalf("longest %+v, want %dms", r.Longest, c.longest)
			}
			if c.stuck && (r.StuckKey != "k" || r.StuckSince != ms(c.since)) {
				t.Fatalf("stuck %s since %d", r.StuckKey, r.StuckSince)
			}
		})
	}
}

func TestLivenessCounts(t *testing.T) {
	r := Liveness(new(hb).acquire(1, "k", 0, 1, ok, "a", 5).acquire(2, "k", 0, 1, fail, "", 0).
		acquire(3, "k", 0, 1, info, "", 0).acquire(4, "k", 0, -1, ok, "", 0).build(t), Options{})
	if r.AcquireAttempts != 4 || r.AcquireOK != 1 || r.AcquireFail != 1 || r.AcquireUnknown != 2 || r.SuccessRate != 0.25 {
		t.Fatalf("%+v", r)
	}
	if r.StuckAfter != int64(2*time.Second) {
		t.Fatalf("default StuckAfter %d", r.StuckAfter)
	}
}

func TestInsertTop(t *testing.T) {
	var top []Window
	for _, d := range []int64{5, 1, 9, 3, 7, 2, 8, 6, 4, 10, 0, 11, 5} {
		top = insertTop(top, Window{Duration: d})
	}
	if len(top) != topWindows || top[0].Duration != 11 || top[9].Duration != 3 {
		t.Fatalf("%+v", top)
	}
}
