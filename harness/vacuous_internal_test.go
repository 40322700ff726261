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
