package checker

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/history"
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
			release(1, "k", 50, 60, ok, "a").ev(50, 2, ok, "acquire", "k", &history.Value{Token: "b"})
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
		release(5, "lock-0", 1505, 1511, ok, "c5-9").       // within 5's own lease
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
	checkStory(t, v.Story, []string{"process 3 held lock-0 from 1.204s", "token c3-17", "valid until 1.700s",
		"until its lease ran out at 1.700s", "process 7 acquired lock-0 at 1.512s", "while 3 still believed it held it",
		"188ms of overlap", "partition on n1, n2",
		// 5 was granted while 3 held: 3's key was lost first, and 5's
		// release, in its own lease, is not the first cause.
		"Not the first cause: process 5's release (token c5-9), invoked at 1.505s, completed at 1.511s"}, []string{"Likely cause"})
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

// Count says how many holds started while another was believed; incidents
// how many separate things went wrong.
func TestExclusionIncidents(t *testing.T) {
	// One stale no-TTL hold that dozens of later holds overlap.
	stale := new(hb).acquire(0, "k", 0, 1, ok, "x", -1)
	for i := 1; i <= 30; i++ {
		stale.acquire(i, "k", int64(i)*10, int64(i)*10+1, ok, "y", int64(i)*10+5)
	}
	cases := []struct {
		name             string
		b                *hb
		count, incidents int
	}{
		{"none", new(hb).acquire(1, "k", 0, 10, ok, "a", 100).acquire(2, "k", 200, 210, ok, "b", 300), 0, 0},
		{"one pair", new(hb).acquire(1, "k", 0, 10, ok, "a", 100).acquire(2, "k", 20, 30, ok, "b", 300), 1, 1},
		{"one stale hold, many overlaps", stale, 30, 1},
		{"a chain a-b, b-c is one incident", new(hb).
			acquire(1, "k", 0, 10, ok, "a", 100).    // [10,100]
			acquire(2, "k", 50, 90, ok, "b", 200).   // [90,200] overlaps a
			acquire(3, "k", 140, 150, ok, "c", 300), // [150,300] overlaps b only
			2, 1},
		{"touching holds do not link", new(hb).
			acquire(1, "k", 0, 10, ok, "a", 100).acquire(2, "k", 20, 30, ok, "b", 200).      // one incident
			acquire(3, "k", 190, 200, ok, "c", 300).acquire(4, "k", 210, 220, ok, "d", 400), // starts when b ends: another
			2, 2},
		{"separate groups", new(hb).
			acquire(1, "k", 0, 10, ok, "a", 100).acquire(2, "k", 20, 30, ok, "b", 100).
			acquire(3, "k", 500, 510, ok, "c", 600).acquire(4, "k", 520, 530, ok, "d", 600).acquire(5, "k", 540, 550, ok, "e", 600),
			3, 2},
		{"keys are separate", new(hb).
			acquire(1, "k", 0, 10, ok, "a", 100).acquire(2, "k", 20, 30, ok, "b", 100).
			acquire(3, "j", 0, 10, ok, "c", 100).acquire(4, "j", 20, 30, ok, "d", 100),
			2, 2},
		{"interleaved keys keep their own groups", new(hb).
			acquire(1, "k", 0, 10, ok, "a", 1000).acquire(3, "j", 15, 20, ok, "c", 30).
			acquire(2, "k", 40, 50, ok, "b", 1000).acquire(4, "j", 60, 70, ok, "d", 80).
			acquire(5, "k", 100, 110, ok, "e", 1000),
			2, 1},
		{"an empty hold does not link", new(hb).
			acquire(1, "k", 0, 10, ok, "a", 100).acquire(2, "k", 0, 120, ok, "b", 110). // empty
			acquire(3, "k", 130, 140, ok, "c", 200).acquire(4, "k", 150, 160, ok, "d", 300),
			1, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ops := c.b.build(t)
			r := Exclusion(ops)
			if r.Count != c.count || r.Incidents != c.incidents {
				t.Fatalf("count %d incidents %d, want %d and %d", r.Count, r.Incidents, c.count, c.incidents)
			}
			res := Check(ops, Options{})
			b, _ := json.Marshal(res)
			var raw map[string]any
			if err := json.Unmarshal(b, &raw); err != nil {
				t.Fatal(err)
			}
			if res.Incidents != c.incidents || raw["incidents"] != float64(c.incidents) ||
				raw["exclusion"].(map[string]any)["incidents"] != float64(c.incidents) {
				t.Fatalf("results: incidents %d, json %v", res.Incidents, raw["incidents"])
			}
		})
	}
}

// The cause of an overlap is often a fault that ended just before it: a
// client paused past its lease wakes and deletes the next holder's key.
func TestExclusionFaultsBeforeTheOverlap(t *testing.T) {
	b := new(hb).
		fault(10, "partition", "start", "n1").fault(20, "partition", "stop", "n1"). // long before: not listed
		acquire(2, "k", 95, 100, ok, "p2.1", 590).
		ev(600, -1, info, "client-pause", "", &history.Value{Phase: "start", Clients: []int{2}, Targets: []string{"client 2"}}).
		acquire(1, "k", 1400, 1410, ok, "p1.1", 1900).
		ev(1600, -1, info, "client-pause", "", &history.Value{Phase: "stop", Clients: []int{2}, Targets: []string{"client 2"}}).
		release(2, "k", 1600, 1601, ok, "p2.1"). // DEL of p1's key
		crash(1601, 7).
		acquire(3, "k", 1601, 1602, ok, "p3.1", 2000).
		fault(1605, "partition", "start", "n2").
		release(1, "k", 1650, 1651, ok, "p1.1").
		fault(1700, "partition", "stop", "n2")
	ops := b.build(t)
	cases := []struct {
		name    string
		run     func() *ExclusionResult
		faults  []string // names in order
		story   []string
		noStory []string
	}{
		{"without TTL: only the overlap", func() *ExclusionResult { return Exclusion(ops) },
			[]string{"partition"},
			[]string{"Faults active during the overlap: partition on n2 from 1.605s to 1.700s."},
			[]string{"client-pause", "ended before"}},
		{"with TTL: the TTL before the first hold too", func() *ExclusionResult { return ExclusionWith(ops, Options{TTL: 500 * time.Millisecond}) },
			[]string{"client-pause", "client-crash", "partition"},
			[]string{"Faults active during the overlap: partition on n2 from 1.605s to 1.700s.",
				"Earlier faults: client-pause on client 2 from 0.600s to 1.600s, ended 2ms before the overlap; " +
					"client-crash of processes 7 at 1.601s, 1ms before the overlap."},
			[]string{"n1"}},
		{"through Check", func() *ExclusionResult {
			return Check(ops, Options{TTL: 500 * time.Millisecond}).Exclusion
		}, []string{"client-pause", "client-crash", "partition"}, []string{"ended 2ms before the overlap"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := c.run()
			if r.Count != 1 {
				t.Fatalf("count %d", r.Count)
			}
			v := r.Violations[0]
			if v.First.Process != 1 || v.Second.Process != 3 {
				t.Fatalf("witness %d/%d", v.First.Process, v.Second.Process)
			}
			var names []string
			for _, f := range v.Faults {
				names = append(names, f.Name)
			}
			if strings.Join(names, ",") != strings.Join(c.faults, ",") {
				t.Errorf("faults %v, want %v", names, c.faults)
			}
			checkStory(t, v.Story, c.story, c.noStory)
		})
	}
}

// A witness names what ended the first holder's key early before anything
// else, and says so plainly when nothing is known.
func TestWitnessCauses(t *testing.T) {
	cases := []struct {
		name       string
		b          *hb
		has, lacks []string
	}{
		{"a release still in flight when the second grant returned",
			new(hb).acquire(1, "k", 0, 10, ok, "a", 990).release(2, "k", 300, -1, ok, "b").acquire(3, "k", 400, 410, ok, "c", 1390),
			[]string{"Likely cause: process 2's release (token b), invoked at 0.300s and still in flight"}, nil},
		{"a GET-then-DEL invoked before the first holder's acquire, completed after its grant",
			new(hb).release(2, "k", 1, 50, ok, "b").acquire(1, "k", 5, 10, ok, "a", 990).acquire(3, "k", 60, 70, ok, "c", 1050),
			[]string{"Likely cause: process 2's release (token b), invoked at 0.001s, completed at 0.050s"}, nil},
		{"a failed release changed nothing and is left out",
			new(hb).acquire(1, "k", 0, 10, ok, "a", 990).release(2, "k", 300, 310, fail, "b").acquire(3, "k", 400, 410, ok, "c", 1390),
			[]string{"No cause was recorded"}, []string{"process 2's release"}},
		{"a token shared by the two holds",
			new(hb).acquire(1, "k", 0, 10, ok, "same", 990).acquire(3, "k", 400, 410, ok, "same", 1390),
			[]string{"identical token same"}, []string{"No cause was recorded"}},
		{"an over-claimed validity",
			new(hb).acquire(1, "k", 0, 300, ok, "a", 1290).acquire(3, "k", 1020, 1030, ok, "c", 2000),
			[]string{"over-claimed its validity by 290ms"}, nil},
		{"an extension's validity counts from the extension",
			new(hb).acquire(1, "k", 0, 10, ok, "a", 990).extend(1, "k", 500, 510, ok, "a", 1490).acquire(3, "k", 1020, 1030, ok, "c", 2000),
			nil, []string{"over-claimed its validity"}},
		{"an over-claimed extension",
			new(hb).acquire(1, "k", 0, 10, ok, "a", 990).extend(1, "k", 500, 700, ok, "a", 1690).acquire(3, "k", 1550, 1560, ok, "c", 2500),
			[]string{"over-claimed its validity by 190ms"}, nil},
		{"the first holder's own release that timed out before its grant",
			new(hb).release(1, "k", 0, 250, info, "old").acquire(1, "k", 260, 270, ok, "a", 1250).acquire(3, "k", 400, 410, ok, "c", 1390),
			[]string{"Likely cause: process 1's release (token old) ended with an unknown outcome at 0.250s"}, nil},
		{"another's release that timed out before the first holder's acquire",
			new(hb).release(2, "k", 0, 250, info, "old").acquire(1, "k", 260, 270, ok, "a", 1250).acquire(3, "k", 400, 410, ok, "c", 1390),
			[]string{"Likely cause: process 2's release (token old)"}, nil},
		{"the first holder's own completed release changed nothing after",
			new(hb).release(1, "k", 0, 250, ok, "old").acquire(1, "k", 260, 270, ok, "a", 1250).acquire(3, "k", 400, 410, ok, "c", 1390),
			[]string{"No cause was recorded"}, []string{"process 1's release"}},
		{"the release comes before the faults",
			new(hb).fault(100, "partition", "start", "n1").acquire(1, "k", 0, 10, ok, "a", 990).release(2, "k", 300, 310, ok, "b").acquire(3, "k", 400, 410, ok, "c", 1390),
			[]string{"Likely cause: process 2's release"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ops := c.b.build(t)
			r := ExclusionWith(ops, Options{TTL: time.Second})
			if len(r.Violations) == 0 {
				t.Fatal("no violation")
			}
			story := r.Violations[0].Story
			if s := Check(ops, Options{TTL: time.Second}).Exclusion.Violations[0].Story; s != story {
				t.Errorf("the streaming checker tells another story:\n%s\nthe in-memory one:\n%s", s, story)
			}
			checkStory(t, story, c.has, c.lacks)
			if i, j := strings.Index(story, "Likely cause"), strings.Index(story, "Faults active"); i >= 0 && j >= 0 && j < i {
				t.Errorf("the faults come before the cause:\n%s", story)
			}
		})
	}
}

// Faults pairs each stop with its start, fault by fault and target by
// target, and leaves a fault never stopped open.
func TestFaultSpans(t *testing.T) {
	ops := new(hb).fault(100, "kill", "start", "n1").fault(150, "pause", "start", "n2").
		fault(400, "kill", "stop", "n1").fault(500, "kill", "start", "n2").acquire(1, "k", 0, 10, ok, "a", 990).build(t)
	got := Faults(ops)
	want := []Fault{{Name: "kill", Start: 100e6, End: 400e6, Targets: []string{"n1"}},
		{Name: "pause", Start: 150e6, End: Never, Targets: []string{"n2"}},
		{Name: "kill", Start: 500e6, End: Never, Targets: []string{"n2"}}}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i].Name != want[i].Name || got[i].Start != want[i].Start || got[i].End != want[i].End || got[i].Targets[0] != want[i].Targets[0] {
			t.Errorf("fault %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

// A stale release that deleted the second holder's key before the first
// holder asked is the overlap's cause, though it completed before the
// first holder's acquire was invoked: the second holder's grant came
// first and its ok came late. Both orders of a foreign release are
// recorded histories of a plain-DEL release: process 3's (another
// client's) and the first holder's own, from its previous hold. Each
// release's lease (invoked at 0, TTL 1 s) ran out at 1 s, before it ran.
func TestOverlapCauseBeforeTheFirstHolderAsked(t *testing.T) {
	for _, c := range []struct {
		name     string
		releaser int
	}{{"another client's release", 3}, {"the first holder's release of its previous hold", 1}} {
		t.Run(c.name, func(t *testing.T) {
			ops := new(hb).
				acquire(c.releaser, "k", 0, 10, ok, "old", 990).
				acquire(2, "k", 1200, 1500, ok, "b", 2190).      // granted at once, told late
				release(c.releaser, "k", 1300, 1310, ok, "old"). // a DEL of 2's key
				acquire(1, "k", 1350, 1360, ok, "a", 2340).
				release(1, "k", 1600, 1605, ok, "a").
				release(2, "k", 1700, 1705, ok, "b").
				build(t)
			r := Exclusion(ops)
			if r.Count != 1 {
				t.Fatalf("%d violations, want 1: %+v", r.Count, r.Violations)
			}
			v := r.Violations[0]
			if v.First.Process != 1 || v.Second.Process != 2 {
				t.Fatalf("witness %d/%d, want 1/2", v.First.Process, v.Second.Process)
			}
			if len(v.Between) != 1 || v.Between[0].Process != c.releaser || v.Between[0].LeaseEnd != ms(1000) {
				t.Fatalf("between = %+v, want process %d's release with its lease ending at 1s", v.Between, c.releaser)
			}
			a := answer(&Results{Exclusion: r}, nil, nil, nil)
			if len(a.Mechanisms) != 1 || a.Mechanisms[0].Cause != CauseForeignRelease {
				t.Fatalf("mechanisms %+v, want one overlap by a foreign release", a.Mechanisms)
			}
			checkStory(t, v.Story, []string{"which may have deleted process 2's key before process 1 asked for the lock"}, nil)
		})
	}
}

// A release whose own lease ran past the first holder's grant came after
// a key's loss (no grant happens while a live lease's key is there): the
// story names it as not the first cause, as the mechanism
// (classifyOverlap) discounts it, and the fault that took the key is left
// to explain the overlap. Its GET-then-DEL twin, whose lease had run out
// before the grant, stays the likely cause.
func TestOverlapStoryDiscountsOwnKeyReleases(t *testing.T) {
	for _, c := range []struct {
		name       string
		ttl        int64 // process 3's lease, from its acquire at 0
		cause      string
		has, lacks []string
	}{
		{name: "a token release across a restart", ttl: 1000, cause: "kill",
			has:   []string{"Not the first cause: process 3's release (token c)", "its own lease ran until 1.000s, past process 1's grant at 0.110s", "a key had been lost before this call", "Earlier faults: kill"},
			lacks: []string{"Likely cause"}},
		{name: "a release after its own lease ran out (GET, then DEL)", ttl: 80, cause: CauseForeignRelease,
			has:   []string{"Likely cause: process 3's release (token c)", "which may have deleted process 1's key before its lease ran out"},
			lacks: []string{"Not the first cause"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := new(hb)
			b.ev(0, 3, history.Invoke, history.Acquire, "k", &history.Value{TTL: ms(c.ttl)})
			b.ev(10, 3, history.OK, history.Acquire, "k", &history.Value{Token: "c", ValidUntil: history.I64(ms(c.ttl - 10))})
			ops := b.fault(50, "kill", "start").
				release(3, "k", 90, 105, ok, "c"). // the key was gone; 3's lease was not
				acquire(1, "k", 100, 110, ok, "a", 1090).
				fault(250, "kill", "stop").
				acquire(2, "k", 300, 310, ok, "b", 1290).
				build(t)
			r := Check(ops, Options{TTL: time.Second}).Exclusion
			if r.Count != 1 {
				t.Fatalf("%d violations, want 1: %+v", r.Count, r.Violations)
			}
			v := r.Violations[0]
			if oracle := ExclusionWith(ops, Options{TTL: time.Second}); oracle.Count != 1 || oracle.Violations[0].Story != v.Story {
				t.Fatalf("the oracle disagrees: %+v", oracle.Violations)
			}
			if len(v.Between) != 1 || v.Between[0].LeaseEnd != ms(c.ttl) {
				t.Fatalf("between = %+v, want process 3's release with its lease ending at %d ms", v.Between, c.ttl)
			}
			a := answer(&Results{Exclusion: r}, []string{"kill"}, nil, nil)
			got := append(a.Mechanisms, a.Losses...)
			if len(got) != 1 || got[0].Cause != c.cause {
				t.Fatalf("mechanisms %+v, losses %+v, want one with cause %s", a.Mechanisms, a.Losses, c.cause)
			}
			checkStory(t, v.Story, c.has, c.lacks)
		})
	}
}

// A split brain as a review recorded it on a loaded machine: process 1's
// release of its hold on n1 completes late, after process 0 is granted by
// n1, which an isolate had cut off from the rest of its cluster; process
// 2 is then granted by n2, promoted meanwhile. The release completed
// between the grants, and its own lease had run out before process 0's,
// so without the cut it would be the likely cause (a GET, then a DEL).
// With it, n2 never had process 0's key: the overlap is the failover's,
// and the lock is not blamed. The same history with the cut placed after
// process 0's acquire keeps the release as the likely cause.
func TestSplitBrainDiscountsALateRelease(t *testing.T) {
	for _, c := range []struct {
		name        string
		cutAt       int64
		lock, cause string
		has, lacks  []string
	}{
		{name: "cut off before the first acquire", cutAt: 500, lock: AnswerNotFound, cause: CauseFailover,
			has:   []string{"Likely cause: two primaries. n1 was cut off from the rest of its cluster (isolate on n1 from 0.500s to 2.000s)", "so n2 never had process 0's key", "Not the cause: process 1's release (token a1)"},
			lacks: []string{"may have deleted"}},
		{name: "cut off after the first acquire", cutAt: 1105, lock: AnswerUnsafe, cause: CauseForeignRelease,
			has:   []string{"Likely cause: process 1's release (token a1)", "which may have deleted process 0's key"},
			lacks: []string{"two primaries"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ops := new(hb).
				grantBy(1, "k", 0, 10, "a1", 1000, "n1", 0).
				fault(c.cutAt, "isolate", "start", "n1").
				release(1, "k", 900, 1150, ok, "a1"). // slow: it ran before the key expired
				grantBy(0, "k", 1100, 1110, "a0", 2100, "n1", 0).
				grantBy(2, "k", 1300, 1310, "a2", 2300, "n2", 0).
				fault(2000, "isolate", "stop", "n1").
				release(0, "k", 2050, 2060, history.Fail, "a0").
				release(2, "k", 2200, 2210, ok, "a2").
				build(t)
			opts := Options{TTL: time.Second, CutOffFaults: []string{"isolate"}}
			v, a := witnessAt(t, ops, opts, 1, 0, 0, 2, 1)
			got := append(a.Mechanisms, a.Losses...)
			if a.Lock != c.lock || len(got) == 0 || got[0].Cause != c.cause {
				t.Fatalf("lock %s, mechanisms %+v, losses %+v; want lock %s and cause %s first", a.Lock, a.Mechanisms, a.Losses, c.lock, c.cause)
			}
			checkStory(t, v.Story, c.has, c.lacks)
		})
	}
}

// A split brain, then a plain DEL on the new primary, as a run of the
// setnx-del lock under sentinel-split-brain recorded it: process 9 holds
// on n1, cut off; n2 is promoted and grants process 8; 9, now talking to
// n2, releases its lost lease there and acquires again while 8 still
// believes. The first overlap (9 on n1, 8 on n2) is the failover's. The
// second (8 and 9, both on n2) is the lock's: n2 lost no key in between,
// so 9's release, though its own key had been lost (on n1), is what
// removed 8's; a release that compares its token would have deleted
// nothing there. With a fault on n2 in between, the release is excused as
// before.
func TestOneNodeOverlapBlamesACallAfterALossElsewhere(t *testing.T) {
	for _, c := range []struct {
		name string
		// onN2 is a fault on n2 between process 8's grant and process
		// 9's second, "" for none.
		onN2        string
		lock, cause string
		has, lacks  []string
	}{
		{name: "n2 lost no key", lock: AnswerUnsafe, cause: CauseForeignRelease,
			has:   []string{"Likely cause: process 9's release (token p9a)", "Process 9's own key had been lost, but not on n2: n2 granted both holds and lost no key in between"},
			lacks: []string{"Not the first cause", "two primaries"}},
		// The failover threat slows every node's replies: latency takes
		// no key.
		{name: "n2 slowed in between", onN2: "latency", lock: AnswerUnsafe, cause: CauseForeignRelease,
			has:   []string{"Likely cause: process 9's release (token p9a)", "but not on n2", "latency on n2"},
			lacks: []string{"Not the first cause"}},
		{name: "n2 restarted in between", onN2: "kill", lock: AnswerNotFound, cause: "kill",
			has:   []string{"Not the first cause: process 9's release (token p9a)", "kill on n2"},
			lacks: []string{"Likely cause", "but not on n2"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := new(hb).
				fault(0, PrimaryEvent, "start", "n1").
				fault(100, "isolate", "start", "n1").
				grantBy(9, "k", 200, 210, "p9a", 1200, "n1", 0).
				fault(650, PrimaryEvent, "stop", "n1").
				fault(650, PrimaryEvent, "start", "n2").
				grantBy(8, "k", 640, 655, "p8", 1150, "n2", 0)
			if c.onN2 != "" {
				b.fault(657, c.onN2, "start", "n2").fault(658, c.onN2, "stop", "n2")
			}
			ops := b.release(9, "k", 660, 665, ok, "p9a"). // a plain DEL, on n2 now
									grantBy(9, "k", 670, 680, "p9b", 1670, "n2", 0).
									release(8, "k", 700, 705, ok, "p8").
									fault(1100, "isolate", "stop", "n1").
									release(9, "k", 1300, 1305, ok, "p9b").
									fault(2000, PrimaryEvent, "stop", "n2").
									build(t)
			opts := Options{TTL: time.Second, CutOffFaults: []string{"isolate"}, KeyLossFaults: []string{"kill"}}
			v, a := witnessAt(t, ops, opts, 2, 1, 8, 9, 9)
			if a.Deployment != AnswerUnsafe || len(a.Losses) == 0 || a.Losses[0].Cause != CauseFailover {
				t.Errorf("losses %+v: the first overlap is the failover's", a.Losses)
			}
			got := append(a.Mechanisms, a.Losses...)
			if a.Lock != c.lock || !slices.ContainsFunc(got, func(m Mechanism) bool { return m.Cause == c.cause }) {
				t.Fatalf("lock %s, mechanisms %+v, losses %+v; want lock %s and cause %s", a.Lock, a.Mechanisms, a.Losses, c.lock, c.cause)
			}
			checkStory(t, v.Story, c.has, c.lacks)
		})
	}
}

// witnessAt checks a replayed history's overlaps: want of them, the i-th
// witnessing first and second with one call of process between's in
// between, and the oracle telling its story the same way. It returns that
// witness and the run's answers.
func witnessAt(t *testing.T, ops []history.Op, opts Options, want, i, first, second, between int) (Violation, *Answers) {
	t.Helper()
	r := Check(ops, opts)
	ex := r.Exclusion
	if ex.Count != want || len(ex.Violations) <= i {
		t.Fatalf("%d violations, want %d: %+v", ex.Count, want, ex.Violations)
	}
	v := ex.Violations[i]
	if v.First.Process != first || v.Second.Process != second || len(v.Between) != 1 || v.Between[0].Process != between {
		t.Fatalf("witness %d/%d with %+v in between, want %d/%d with process %d's call", v.First.Process, v.Second.Process, v.Between, first, second, between)
	}
	if oracle := ExclusionWith(ops, opts); oracle.Count != want || len(oracle.Violations) <= i || oracle.Violations[i].Story != v.Story {
		t.Fatalf("the oracle disagrees: %+v", oracle.Violations)
	}
	return v, r.Answers
}
