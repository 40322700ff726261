package harness_test

import (
	"context"
	"strings"
	"testing"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/scenario"
	"github.com/lockjepsen/lockjepsen/testkit/harnesstest"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

// The Redis Cluster scenarios, run as `lockjepsen scenario` runs them. The
// unsafe ones are deterministic by construction, not by seed: the fault
// lands right after a grant (AfterGrant), the grant never reached the
// replica (replication slowed, or cut), and the lease (holds of 8 s or
// more) outlives the failover and the clients' next reload of the slots
// (about 3.5 s idle). The run ends at the first violation; the limit
// (26-30 s) only leaves room for the grant the fault waits for to come a
// whole hold late.
func TestRedisClusterScenarios(t *testing.T) {
	redistest.RequireBinary(t)
	t.Parallel()
	for _, tc := range []struct {
		scenario string
		// fault is what the violation's story names besides the failover.
		fault string
	}{
		{"cluster-baseline", ""},
		{"cluster-kill-after-acquire", "kill on n1"},
		{"cluster-kill-min-replicas", "kill on n1"},
		{"cluster-isolate-primary", "isolate on n1"},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			t.Parallel()
			s, ok := scenario.Get(tc.scenario)
			if !ok {
				t.Fatalf("no scenario %s", tc.scenario)
			}
			cfg := s.Config()
			cfg.Store = t.TempDir()
			out, err := harness.Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			r := out.Results
			summary := strings.Join(r.Summary(), "\n")
			if r.Verdict != s.Expect || len(r.Errors) > 0 {
				t.Fatalf("verdict %s, want %s; errors %v:\n%s", r.Verdict, s.Expect, r.Errors, summary)
			}
			if s.Expect == checker.VerdictSafe {
				if r.Ops < 1000 || r.Exclusion.Holds < 20 {
					t.Errorf("%d operations, %d holds:\n%s", r.Ops, r.Exclusion.Holds, summary)
				}
				if fo := r.Failover; fo != nil && fo.Failovers > 0 {
					t.Errorf("%d failovers without a fault", fo.Failovers)
				}
				requireGrantsFrom(t, out.Dir, "n1", "n2", "n3")
				return
			}
			// The witness: the holder was granted by n1, the second by the
			// promoted replica n4, and the story names the fault and the
			// failover.
			v := r.Exclusion.Violations[0]
			story := v.Story
			if !strings.Contains(story, "granted by n1") || !strings.Contains(story, "granted by n4") ||
				!strings.Contains(story, tc.fault) || !strings.Contains(story, "primary on n4") {
				t.Errorf("the witness does not name n1, n4, %q and the failover:\n%s", tc.fault, story)
			}
			if fo := r.Failover; fo == nil || fo.Failovers != 1 || fo.Lost != 1 {
				t.Errorf("failover result %+v, want one failover and one lease lost in it", fo)
			}
			// run.json times the failover from the fault that caused it.
			info := harnesstest.ReadRunInfo(t, out.Dir)
			if len(info.Failovers) != 1 || info.Failovers[0].To != "n4" || !strings.HasPrefix(info.Failovers[0].AfterFault, strings.Fields(tc.fault)[0]) ||
				info.Failovers[0].Duration <= 0 {
				t.Errorf("run.json failovers %+v, want n1 to n4 after the %s", info.Failovers, tc.fault)
			}
		})
	}
}

// requireGrantsFrom checks that the run's keys were granted by each of
// the given nodes: the keys are spread over the primaries' slots.
func requireGrantsFrom(t *testing.T, dir string, nodes ...string) {
	t.Helper()
	res := harnesstest.ReadHistory(t, dir)
	granted := map[string]int{}
	for _, op := range res.Ops {
		if op.F == history.Acquire && op.Type == history.OK && op.Value != nil {
			for _, n := range op.Value.Nodes {
				granted[n]++
			}
		}
	}
	for _, n := range nodes {
		if granted[n] == 0 {
			t.Errorf("no grant by %s (grants by node: %v)", n, granted)
		}
	}
}
