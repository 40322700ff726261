package checker

import (
	"strings"
	"testing"
)

// safetyCases are judged the same way by the exclusion checker and by
// porcupine; both are run on each.
var safetyCases = []struct {
	name  string
	b     func() *hb
	valid bool
}{
	{"sequential holds", func() *hb {
		return new(hb).acquire(1, "k", 0, 10, ok, "a", 1000).release(1, "k", 50, 60, ok, "a").
			acquire(2, "k", 55, 70, ok, "b", 1000).release(2, "k", 90, 95, ok, "b")
	}, true},
	{"touching intervals are legal", func() *hb {
		// 2's ok arrives at the very instant 1 invokes its release.
		return new(hb).acquire(1, "k", 0, 10, ok, "a", 1000).acquire(2, "k", 20, -1, ok, "", 0).
			release(1, "k", 50, 60, ok, "a").ev(50, 2, ok, "acquire", "k", nil)
	}, true},
	{"overlap", func() *hb {
		return new(hb).acquire(1, "k", 0, 10, ok, "a", 1000).acquire(2, "k", 20, 30, ok, "b", 1000).
			release(1, "k", 50, 60, ok, "a")
	}, false},
	{"different keys do not conflict", func() *hb {
		return new(hb).acquire(1, "k", 0, 10, ok, "a", 1000).acquire(2, "j", 20, 30, ok, "b", 1000)
	}, true},
	{"unknown acquire confers no belief", func() *hb {
		return new(hb).acquire(1, "k", 0, 10, info, "", 0).acquire(2, "k", 20, 30, ok, "b", 1000)
	}, true},
	{"never-completed acquire confers no belief", func() *hb {
		return new(hb).acquire(2, "k", 20, 30, ok, "b", 1000).acquire(1, "k", 0, -1, ok, "", 0)
	}, true},
	{"failed extend: lost before the next acquire", func() *hb {
		return new(hb).acquire(1, "k", 0, 10, ok, "a", 1000).extend(1, "k", 40, 50, fail, "a", 0).
			acquire(2, "k", 45, 60, ok, "b", 1000)
	}, true},
	{"failed extend: lost too late", func() *hb {
		return new(hb).acquire(1, "k", 0, 10, ok, "a", 1000).acquire(2, "k", 30, 40, ok, "b", 1000).
			extend(1, "k", 45, 50, fail, "a", 0)
	}, false},
	{"valid_until expiry makes a later acquire legal", func() *hb {
		return new(hb).acquire(1, "k", 0, 10, ok, "a", 100).acquire(2, "k", 90, 120, ok, "b", 1000).
			release(1, "k", 150, 160, ok, "a")
	}, true},
	{"acquire just before expiry is a violation", func() *hb {
		return new(hb).acquire(1, "k", 0, 10, ok, "a", 100).acquire(2, "k", 90, 99, ok, "b", 1000)
	}, false},
	{"extend pushes expiry past the next acquire", func() *hb {
		return new(hb).acquire(1, "k", 0, 10, ok, "a", 100).extend(1, "k", 50, 60, ok, "a", 300).
			acquire(2, "k", 90, 120, ok, "b", 1000)
	}, false},
	{"crash ends the belief", func() *hb {
		return new(hb).acquire(1, "k", 0, 10, ok, "a", -1).crash(40, 1).acquire(2, "k", 50, 60, ok, "b", -1)
	}, true},
	{"no-TTL holds never end", func() *hb {
		return new(hb).acquire(1, "k", 0, 10, ok, "a", -1).acquire(2, "k", 5000, 5010, ok, "b", -1)
	}, false},
	{"same instant ok", func() *hb {
		return new(hb).acquire(1, "k", 0, 10, ok, "a", 100).acquire(2, "k", 0, 10, ok, "b", 100)
	}, false},
	{"empty hold does not count", func() *hb {
		return new(hb).acquire(1, "k", 0, 10, ok, "a", 1000).acquire(2, "k", 0, 20, ok, "b", 15)
	}, true},
	{"empty history", func() *hb { return new(hb) }, true},
}

func TestExclusion(t *testing.T) {
	for _, c := range safetyCases {
		t.Run(c.name, func(t *testing.T) {
			r := Exclusion(c.b().build(t))
			if r.Valid != c.valid || (r.Count == 0) != c.valid {
				t.Fatalf("valid=%v count=%d, want valid=%v", r.Valid, r.Count, c.valid)
			}
			if !c.valid && (len(r.Violations) == 0 || r.Violations[0].Story == "") {
				t.Fatalf("no violation detail: %+v", r)
			}
		})
	}
}

func TestExclusionViolationDetail(t *testing.T) {
	ops := new(hb).
		fault(1000, "partition", "start", "n1", "n2").
		acquire(3, "lock-0", 1200, 1204, ok, "c3-17", 1700).
		acquire(5, "lock-0", 1300, 1310, ok, "c5-9", 1800). // overlaps 3 too
		release(5, "lock-0", 1505, 1511, ok, "c5-9").       // DEL of someone's lock
		acquire(7, "lock-0", 1500, 1512, ok, "c7-1", 2000). // while 3 believes
		release(3, "lock-0", 1890, 1895, ok, "c3-17").
		fault(1900, "partition", "stop").
		build(t)
	r := Exclusion(ops)
	if r.Count != 2 || len(r.Violations) != 2 {
		t.Fatalf("count %d, %d detailed, want 2", r.Count, len(r.Violations))
	}
	v := r.Violations[1]
	if v.First.Process != 3 || v.Second.Process != 7 {
		t.Fatalf("witness %d/%d, want 3/7", v.First.Process, v.Second.Process)
	}
	if v.Overlap != ms(1700-1512) || v.OverlapEnd != ms(1700) {
		t.Errorf("overlap %d to %d", v.Overlap, v.OverlapEnd)
	}
	if len(v.Between) != 1 || v.Between[0].Process != 5 || v.Between[0].Token != "c5-9" {
		t.Errorf("between = %+v", v.Between)
	}
	if len(v.Faults) != 1 || v.Faults[0].Name != "partition" {
		t.Errorf("faults = %+v", v.Faults)
	}
	for _, want := range []string{"process 3 held lock-0 from 1.204s", "token c3-17", "valid until 1.700s",
		"until its lease ran out at 1.700s", "process 7 acquired lock-0 at 1.512s", "while 3 still believed it held it",
		"188ms of overlap", "process 5's release (token c5-9) completed at 1.511s", "partition on n1, n2"} {
		if !strings.Contains(v.Story, want) {
			t.Errorf("story lacks %q:\n%s", want, v.Story)
		}
	}
}

func TestExclusionKeepsAtMostMaxViolations(t *testing.T) {
	b := new(hb).acquire(0, "k", 0, 1, ok, "x", -1)
	for i := 1; i <= MaxViolations+50; i++ {
		b.acquire(i, "k", int64(i)*10, int64(i)*10+1, ok, "y", -1)
	}
	r := Exclusion(b.build(t))
	if r.Count != MaxViolations+50 || len(r.Violations) != MaxViolations {
		t.Fatalf("count %d detailed %d", r.Count, len(r.Violations))
	}
}

// Two faults of one kind on different targets overlap; each stop must close
// its own start, or the witness would name the wrong fault window.
func TestOverlappingFaultsOfOneKind(t *testing.T) {
	ops := new(hb).
		fault(0, "pause", "start", "n1").
		fault(10, "pause", "start", "n2").
		fault(20, "pause", "stop", "n1").
		acquire(0, "k", 30, 31, ok, "a", 100).
		acquire(1, "k", 40, 41, ok, "b", 100).
		fault(90, "pause", "stop", "n2").
		build(t)
	r := Exclusion(ops)
	if r.Count != 1 {
		t.Fatalf("count %d", r.Count)
	}
	f := r.Violations[0].Faults
	if len(f) != 1 || f[0].Targets[0] != "n2" || f[0].End != ms(90) {
		t.Fatalf("faults active during the overlap: %+v", f)
	}
}
