package harness_test

import (
	"strings"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/nemesis"
	"github.com/lockjepsen/lockjepsen/testkit/harnesstest"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

// sentinelCase checks a Sentinel run's results and failovers beyond its
// verdict.
type sentinelCase = harnesstest.Case[func(*testing.T, *harness.Results, harness.RunInfo)]

// Replicated Redis with Sentinel: what the Sentinel issue expects.
func TestSentinelScenarios(t *testing.T) {
	cases := []sentinelCase{
		// The baseline runs the suite's usual 3 s + 1.5 s: the longer
		// time limit of the other cases was for their failovers.
		{Name: "no faults is safe", Edit: func(c *harness.Config) {
			c.TimeLimit, c.Recovery = 3*time.Second, 1500*time.Millisecond
		}, Verdict: checker.VerdictSafe},
		// Scenario sentinel-split-brain made deterministic
		// (harnesstest.SplitBrain): the primary is cut off from its
		// replicas and sentinels for 20 s while clients 0-4, cut off from
		// the sentinels, still reach it. The sentinels promote a replica
		// (2.3-3.2 s idle, about 5 s on a loaded machine); clients 5-9
		// follow it while 0-4 still lock the old primary, which still
		// grants: two primaries hand out the same lock, each held nearly
		// all the time by its half of the clients. The run ends at the
		// first violation.
		{Name: "the primary cut off while half the clients still reach it: two primaries grant the lock", Edit: harnesstest.SplitBrain,
			Verdict: checker.VerdictUnsafe, Check: requireTwoPrimaries},
		// A fault aimed at a live lease, and StopOnFirstViolation: the
		// named script's steps slow replication by 100 ms and kill the
		// primary right after a grant (AfterGrant), before the key
		// reaches a replica. The holder holds for 15-18 s of its 20 s
		// lease, several times the failover's 2.3-3.2 s (about 5 s
		// loaded), so a client of the promoted replica, which never saw
		// the key, takes the lock while the holder still holds it. The
		// killed primary stays down for those 18 s rather than the
		// script's 5 s: a failover slower than its restart would
		// otherwise give the lock again on the restarted, empty old
		// primary, a violation on one node that tells nothing of the
		// failover. With the longer stay a slow failover only leaves
		// this cycle without a violation; the script kills again every
		// 20 s, and the run ends at the first violation.
		{Name: "the primary killed right after a grant: the promoted replica never saw it", Edit: func(c *harness.Config) {
			c.TTL, c.Hold = 20*time.Second, "15s..18s"
			harnesstest.UntilViolation(c)
			c.Script = killAfterAcquireSteps(c, 18*time.Second)
		}, Verdict: checker.VerdictUnsafe, Check: requireTwoPrimaries},
		// The primary monitor measures a failover: a manual one (SENTINEL
		// FAILOVER), which returns once a majority of the sentinels names
		// the new primary, at 0.5 s. The monitor, which polls every
		// 100 ms for a majority's answer, records it within the run. (The
		// unsafe cases above stop at their violation, which the clients
		// of the new primary cause before a majority of the sentinels may
		// agree: the monitor cannot be held to record their failovers.)
		{Name: "a manual failover is measured", Edit: func(c *harness.Config) {
			c.Script = []nemesis.Step{{At: 500 * time.Millisecond, Action: nemesis.Action{Fault: nemesis.Failover}}}
			c.TimeLimit, c.Recovery = 4*time.Second, 1500*time.Millisecond
		}, Verdict: harness.ExpectAny, Check: func(t *testing.T, r *harness.Results, info harness.RunInfo) {
			if len(info.Failovers) == 0 || info.Failovers[0].Duration <= 0 || !strings.Contains(info.Failovers[0].AfterFault, nemesis.Failover) {
				t.Fatalf("no failover measured: %+v", info.Failovers)
			}
		}},
	}
	harnesstest.RunCases(t, cases, func(t *testing.T, _ sentinelCase) harness.Config {
		redistest.RequireBinary(t)
		cfg := harnesstest.ShortConfig(t)
		cfg.System, cfg.Lock = cluster.Sentinel, locks.Token
		cfg.TimeLimit, cfg.Recovery = 9*time.Second, 2*time.Second
		return cfg
	}, func(t *testing.T, tc sentinelCase, out *harness.Outcome) {
		r := out.Results
		if (tc.Verdict != harness.ExpectAny && r.Verdict != tc.Verdict) || len(r.Errors) > 0 {
			t.Fatalf("verdict %s, want %s; errors %v:\n%s", r.Verdict, tc.Verdict, r.Errors, strings.Join(r.Summary(), "\n"))
		}
		info := harnesstest.ReadRunInfo(t, out.Dir)
		if tc.Check != nil {
			tc.Check(t, r, info)
		}
		harnesstest.RequireNoServers(t, out.Dir)
	})
}

// requireTwoPrimaries: harnesstest.RequireTwoPrimaries, in the shape of
// a case's check.
func requireTwoPrimaries(t *testing.T, r *harness.Results, _ harness.RunInfo) {
	harnesstest.RequireTwoPrimaries(t, r)
}

// killAfterAcquireSteps: harnesstest.KillAfterAcquireSteps.
func killAfterAcquireSteps(c *harness.Config, down time.Duration) []nemesis.Step {
	return harnesstest.KillAfterAcquireSteps(c, down)
}
