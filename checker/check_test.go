package checker

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/history"
)

func TestStats(t *testing.T) {
	ops := new(hb).acquire(1, "k", 0, 10, ok, "a", 1000).acquire(2, "k", 0, 30, fail, "", 0).
		release(1, "k", 50, 60, ok, "a").acquire(3, "k", 100, -1, ok, "", 0).
		fault(200, "pause", "start").fault(1000, "pause", "stop").build(t)
	s := ComputeStats(ops)
	if s.Ops != 3 || s.Pending != 1 || s.Counts["acquire"]["ok"] != 1 || s.Counts["acquire"]["fail"] != 1 ||
		s.Counts["acquire"]["pending"] != 1 || s.Counts["release"]["ok"] != 1 || s.NemesisEvents != 2 {
		t.Fatalf("%+v", s)
	}
	if l := s.Latency["acquire"]; l.Count != 2 || l.P50 != ms(30) || l.Max != ms(30) {
		t.Fatalf("latency %+v", l)
	}
	if s.Duration != ms(1000) || s.AcquireThroughput != 1 || s.OpThroughput != 3 {
		t.Fatalf("%+v", s)
	}
}

// A rate over a history of a few ns is noise, and "1 operations" is wrong.
func TestStatsSummaryLine(t *testing.T) {
	cases := []struct {
		name string
		ops  []history.Op
		want string
	}{
		{"one op in 20ns", []history.Op{
			{Index: 0, Time: 0, Process: 1, Type: history.Invoke, F: history.Read, Key: "k"},
			{Index: 1, Time: 20, Process: 1, Type: history.OK, F: history.Read, Key: "k", Value: &history.Value{N: history.I64(0)}},
		}, "1 operation in 20ns"},
		{"under a second", new(hb).acquire(1, "k", 0, 10, ok, "a", 1000).release(1, "k", 50, 999, ok, "a").build(t),
			"2 operations in 999ms"},
		{"a second", new(hb).acquire(1, "k", 0, 10, ok, "a", 1000).release(1, "k", 50, 1000, ok, "a").build(t),
			"2 operations in 1s (2 ops/s, 1.0 acquires/s)"},
		{"empty", nil, "0 operations in 0s"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Check(c.ops, Options{})
			sum := r.Summary()
			if last := sum[len(sum)-1]; last != c.want {
				t.Fatalf("stats line %q, want %q", last, c.want)
			}
			if r.Stats.Duration < int64(time.Second) {
				b, _ := json.Marshal(r.Stats)
				if r.Stats.OpThroughput != 0 || r.Stats.AcquireThroughput != 0 || strings.Contains(string(b), "throughput") {
					t.Fatalf("a rate for a history shorter than 1s: %s", b)
				}
			}
		})
	}
}

func TestCheckVerdicts(t *testing.T) {
	stuck := new(hb).acquire(1, "k", 0, 10, ok, "a", -1).crash(100, 1)
	for i := int64(0); i < 10; i++ {
		stuck.acquire(2, "k", 200+i*1000, 210+i*1000, fail, "", 0)
	}
	cases := []struct {
		name    string
		b       *hb
		opts    Options
		verdict string
		valid   Validity
		first   string
	}{
		// A run without evidence must not pass.
		{"empty", new(hb), Options{}, VerdictUnknown, ValidUnknown, "UNKNOWN: no lock was ever granted: nothing was tested"},
		{"no ok acquire", new(hb).acquire(1, "k", 0, 10, fail, "", 0).acquire(2, "k", 5, 20, info, "", 0).acquire(3, "k", 30, -1, ok, "", 0),
			Options{}, VerdictUnknown, ValidUnknown, "UNKNOWN: no lock was ever granted: nothing was tested (3 acquire attempts, none ok)"},
		{"only empty holds", new(hb).acquire(1, "k", 0, 10, ok, "a", 5).acquire(2, "k", 20, 30, ok, "b", 30),
			Options{}, VerdictUnknown, ValidUnknown, "UNKNOWN: no lock was ever granted usably: nothing was tested (2 grants"},
		{"no holds but the resource was corrupted", new(hb).write(1, "k", 0, 1, ok, 1, nil).write(2, "k", 2, 3, ok, 1, nil).read(1, "k", 5, 6, ok, 1),
			Options{}, VerdictUnsafe, ValidFalse, "UNSAFE: the lock looked fine but the protected resource"},
		{"safe", new(hb).acquire(1, "k", 0, 10, ok, "a", 1000).release(1, "k", 50, 60, ok, "a"),
			Options{}, VerdictSafe, ValidTrue, "SAFE: no mutual-exclusion violations in 1 hold;"},
		{"unsafe", new(hb).acquire(3, "lock-0", 0, 10, ok, "a", 1000).acquire(7, "lock-0", 20, 30, ok, "b", 1000).
			release(3, "lock-0", 342, 350, ok, "a"),
			Options{}, VerdictUnsafe, ValidFalse,
			"UNSAFE: 1 mutual-exclusion violation in 1 incident: processes 3 and 7 held lock-0 at the same time for 312ms"},
		{"unsafe, incidents", new(hb).
			acquire(1, "k", 0, 10, ok, "a", 1000).acquire(2, "k", 20, 30, ok, "b", 1000).acquire(3, "k", 40, 50, ok, "c", 1000).
			acquire(4, "k", 2000, 2010, ok, "d", 3000).acquire(5, "k", 2020, 2030, ok, "e", 3000),
			Options{}, VerdictUnsafe, ValidFalse, "UNSAFE: 3 mutual-exclusion violations in 2 incidents: processes 1 and 2"},
		{"resource unsafe", new(hb).write(1, "k", 0, 1, ok, 1, nil).write(2, "k", 2, 3, ok, 1, nil).read(1, "k", 5, 6, ok, 1),
			Options{}, VerdictUnsafe, ValidFalse, "UNSAFE: the lock looked fine but the protected resource"},
		{"stuck", stuck, Options{}, VerdictStuck, ValidFalse, "STUCK: nobody could acquire k from 0.200s"},
		{"unknown", new(hb).acquire(1, "k", 0, 10, ok, "a", 1000).release(1, "k", 50, 60, ok, "a"),
			Options{LinearizabilityBudget: time.Nanosecond}, VerdictUnknown, ValidUnknown, "UNKNOWN"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Check(c.b.build(t), c.opts)
			if r.Verdict != c.verdict || r.Valid != c.valid || r.Disagreement != "" {
				t.Fatalf("verdict %s valid %v disagreement %q", r.Verdict, r.Valid, r.Disagreement)
			}
			sum := r.Summary()
			if len(sum) == 0 || !strings.HasPrefix(sum[0], c.first) {
				t.Fatalf("summary %q", sum)
			}
		})
	}
}

func TestResultsJSONRoundTrip(t *testing.T) {
	ops := new(hb).acquire(1, "k", 0, 10, ok, "a", -1).acquire(2, "k", 20, 30, ok, "b", 1000).
		write(1, "k", 40, 41, ok, 1, nil).build(t)
	for _, v := range []Validity{ValidTrue, ValidFalse, ValidUnknown} {
		r := Check(ops, Options{})
		r.Valid = v
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var raw map[string]any
		if err := json.Unmarshal(b, &raw); err != nil {
			t.Fatal(err)
		}
		want := map[Validity]any{ValidTrue: true, ValidFalse: false, ValidUnknown: "unknown"}[v]
		if raw["valid"] != want || raw["violations"] != float64(1) || raw["exclusion"] == nil || raw["verdict"] != "unsafe" {
			t.Fatalf("json: valid=%v violations=%v", raw["valid"], raw["violations"])
		}
		var back Results
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if back.Valid != v || back.Violations != r.Violations || back.Exclusion.Violations[0].Story != r.Exclusion.Violations[0].Story ||
			back.Linearizability.Valid != r.Linearizability.Valid {
			t.Fatalf("round trip: %+v", back)
		}
	}
	var v Validity
	if err := json.Unmarshal([]byte(`"maybe"`), &v); err == nil {
		t.Fatal("accepted a bad validity")
	}
}

// Odd shapes, which Decode now rejects, must still not make any checker
// panic: Check is also called on events that never went through Decode.
func TestCheckOddHistories(t *testing.T) {
	odd := []*hb{
		new(hb).ev(0, 1, "invoke", "acquire", "", nil).ev(1, 1, "ok", "acquire", "", nil),
		new(hb).ev(0, 1, "invoke", "release", "k", nil).ev(1, 1, "fail", "release", "k", nil),
		new(hb).ev(0, 1, "invoke", "extend", "k", nil).ev(1, 1, "ok", "extend", "k", nil),
		new(hb).ev(0, 1, "invoke", "write", "k", nil).ev(1, 1, "ok", "write", "k", nil),
		new(hb).ev(0, 1, "invoke", "read", "k", nil).ev(1, 1, "ok", "read", "k", nil),
		new(hb).ev(0, -1, "info", "client-crash", "", nil).ev(0, -1, "info", "x", "", &history.Value{Phase: "stop"}),
		new(hb).ev(0, 1, "invoke", "frobnicate", "k", nil),
	}
	for _, b := range odd {
		Check(b.buildRaw(), Options{OutDir: t.TempDir()}).Summary()
	}
}

func TestSummaryOfZeroResults(t *testing.T) {
	if s := (&Results{}).Summary(); len(s) == 0 {
		t.Fatal("empty summary")
	}
}

// The summary tells "the lock was exclusive" from "the resource was safe"
// when the two answers differ, and says nothing when they agree.
func TestLockVersusResource(t *testing.T) {
	cases := []struct {
		name       string
		violations int
		res        *ResourceResult
		want       string
	}{
		{"overlaps, fenced resource safe", 4, &ResourceResult{Checked: true, Valid: true, ResourceCounts: ResourceCounts{RejectedStale: 3}},
			"The lock was not exclusive, but the resource was safe: fencing refused 3 stale writes"},
		{"exclusive lock, corrupted resource", 0, &ResourceResult{Checked: true, Valid: false},
			"The lock looked exclusive (no overlapping holds), but the resource was not safe"},
		{"both unsafe", 2, &ResourceResult{Checked: true, Valid: false}, ""},
		{"both safe", 0, &ResourceResult{Checked: true, Valid: true}, ""},
		{"no resource", 5, &ResourceResult{}, ""},
		{"no results", 5, nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := LockVersusResource(&ExclusionResult{Count: tc.violations}, tc.res)
			if (tc.want == "") != (got == "") || !strings.HasPrefix(got, tc.want) {
				t.Errorf("got %q, want a line starting %q", got, tc.want)
			}
		})
	}
}

// The headline names the first witness, and the longest overlap when the
// first is not it.
func TestSummaryNamesTheLongestOverlap(t *testing.T) {
	v := func(overlap time.Duration) Violation {
		return Violation{Key: "k", First: Hold{Process: 1}, Second: Hold{Process: 2}, Overlap: int64(overlap)}
	}
	r := &Results{Verdict: VerdictUnsafe, Exclusion: &ExclusionResult{Count: 3, Incidents: 1,
		Violations: []Violation{v(15 * time.Millisecond), v(585 * time.Millisecond), v(20 * time.Millisecond)}}}
	head := r.Summary()[0]
	if !strings.Contains(head, "for 15ms") || !strings.Contains(head, "the longest overlap: 585ms") {
		t.Errorf("headline %q", head)
	}
	r.Exclusion.Violations = r.Exclusion.Violations[1:2]
	if head := r.Summary()[0]; strings.Contains(head, "longest") {
		t.Errorf("a single witness is its own longest: %q", head)
	}
}
