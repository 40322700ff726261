package harness_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/internal/redistest"
	"github.com/lockjepsen/lockjepsen/locks"
)

// Replicated Redis with Sentinel: what the Sentinel issue expects.
func TestSentinelScenarios(t *testing.T) {
	redistest.RequireBinary(t)
	cases := []struct {
		name     string
		edit     func(*harness.Config)
		verdict  string
		failover bool
	}{
		{"no faults is safe", func(c *harness.Config) {}, checker.VerdictSafe, false},
		{"the primary cut off while half the clients still reach it: two primaries grant the lock", func(c *harness.Config) {
			c.ScriptName = "sentinel-split-brain"
			c.Hold = "50ms..150ms"
		}, checker.VerdictUnsafe, true},
		{"the primary killed right after a grant: the promoted replica never saw it", func(c *harness.Config) {
			c.ScriptName = "sentinel-kill-after-acquire"
			// The lease must outlive the failover (about 2.5s) for the
			// loss to matter.
			c.TTL, c.Hold = 5*time.Second, "3s..4500ms"
		}, checker.VerdictUnsafe, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := shortConfig(t)
			cfg.System, cfg.Lock = cluster.Sentinel, locks.Token
			cfg.TimeLimit, cfg.Recovery = 9*time.Second, 2*time.Second
			tc.edit(&cfg)
			cfg.Expect = tc.verdict
			out := runFinding(t, cfg)
			r := out.Results
			if r.Verdict != tc.verdict {
				t.Fatalf("verdict %s, want %s:\n%s", r.Verdict, tc.verdict, strings.Join(r.Summary(), "\n"))
			}
			var info harness.RunInfo
			b, _ := os.ReadFile(filepath.Join(out.Dir, harness.RunInfoFile))
			json.Unmarshal(b, &info)
			if tc.failover {
				if len(info.Failovers) == 0 || info.Failovers[0].Duration <= 0 {
					t.Fatalf("no failover measured: %+v", info.Failovers)
				}
				// The witness names two holders on two primaries.
				v := r.Exclusion.Violations[0]
				if len(v.First.Nodes) != 1 || len(v.Second.Nodes) != 1 || v.First.Nodes[0] == v.Second.Nodes[0] {
					t.Fatalf("the witness does not show two primaries: %s", v.Story)
				}
			}
			requireNoServers(t, out.Dir)
		})
	}
}
