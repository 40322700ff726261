package harness

import (
	"slices"
	"strings"
	"testing"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/nemesis"
	"github.com/lockjepsen/lockjepsen/runfile"
)

// A safe run is vacuous when none of its faults' dangerous moments
// happened, and only then; a run without faults has no threat to
// exercise, and every fault declares moments the checker counts.
func TestVacuous(t *testing.T) {
	cases := []struct {
		name    string
		cfg     Config
		counted checker.Exercised
		want    bool
	}{
		{"client pause, no stale act", Config{Settings: runfile.Settings{Nemesis: []string{nemesis.ClientPause}}}, checker.Exercised{NodeFaults: 3}, true},
		{"client pause, stale acts", Config{Settings: runfile.Settings{Nemesis: []string{nemesis.ClientPause}}}, checker.Exercised{StaleActs: 2}, false},
		{"kill that never hit a live lease", Config{Settings: runfile.Settings{Nemesis: []string{nemesis.Kill}}}, checker.Exercised{StaleActs: 5}, true},
		{"kill on a live lease", Config{Settings: runfile.Settings{Nemesis: []string{nemesis.Kill}}}, checker.Exercised{NodeFaults: 1}, false},
		{"a script, a failover on a live lease", Config{Settings: runfile.Settings{ScriptName: "sentinel-kill-after-acquire"}}, checker.Exercised{Failovers: 1}, false},
		{"a script, nothing hit", Config{Settings: runfile.Settings{ScriptName: "sentinel-kill-after-acquire"}}, checker.Exercised{}, true},
		{"no faults", Config{Settings: runfile.Settings{Nemesis: []string{nemesis.None}}}, checker.Exercised{}, false},
	}
	for _, tc := range cases {
		got := vacuous(tc.cfg, &tc.counted)
		if (got != "") != tc.want || (tc.want && !strings.Contains(got, "no evidence")) {
			t.Errorf("%s: %q, want vacuous %v", tc.name, got, tc.want)
		}
	}
	var known []string
	for _, m := range checker.ExercisedMoments() {
		known = append(known, m.Name)
	}
	for _, d := range nemesis.All() {
		if d.Name == nemesis.None {
			continue
		}
		if len(d.Exercises) == 0 {
			t.Errorf("fault %s declares no moment that shows it hit", d.Name)
		}
		for _, m := range d.Exercises {
			if !slices.Contains(known, m) {
				t.Errorf("fault %s: the checker counts no moment %q", d.Name, m)
			}
		}
	}
}

// A run meets its expectation only when its verdict is the one expected,
// on a whole run, and the harness did not fail: a run with harness errors
// exits 3, and its results.json must not say met (a CI gate reading it
// would pass a run that cannot be trusted).
func TestJudgeExpectation(t *testing.T) {
	cases := []struct {
		name       string
		expect     string
		verdict    string
		errors     []string
		incomplete string
		want       bool
	}{
		{"safe, expected safe", ExpectSafe, checker.VerdictSafe, nil, "", true},
		{"safe with a harness error", ExpectSafe, checker.VerdictSafe, []string{"a fault did not heal"}, "", false},
		{"unsafe, expected unsafe", ExpectUnsafe, checker.VerdictUnsafe, nil, "", true},
		{"unsafe with a harness error", ExpectUnsafe, checker.VerdictUnsafe, []string{"client p3 exited"}, "", false},
		{"any with a harness error", ExpectAny, checker.VerdictSafe, []string{"client p3 exited"}, "", false},
		{"safe but interrupted", ExpectSafe, checker.VerdictSafe, nil, "the run was interrupted", false},
		{"unsafe, expected safe", ExpectSafe, checker.VerdictUnsafe, nil, "", false},
	}
	for _, tc := range cases {
		out := &Results{Results: &checker.Results{Verdict: tc.verdict}, Errors: tc.errors, Incomplete: tc.incomplete}
		judgeExpectation(out, Config{Settings: runfile.Settings{Expect: tc.expect}})
		if out.MetExpectation != tc.want {
			t.Errorf("%s: met %v, want %v (why: %s)", tc.name, out.MetExpectation, tc.want, out.Why)
		}
		if len(tc.errors) > 0 && !strings.Contains(out.Why, tc.errors[0]) {
			t.Errorf("%s: why %q does not name the harness error", tc.name, out.Why)
		}
	}
}
