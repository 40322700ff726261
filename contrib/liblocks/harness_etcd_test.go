package liblocks_test

import (
	"strings"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/contrib/liblocks"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/testkit/harnesstest"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

// etcdCase checks an etcd run's results beyond its verdict.
type etcdCase = harnesstest.Case[func(*testing.T, *harness.Results)]

// The consensus baseline: etcd's lock under the same faults. Its lease is
// a belief like Redis's TTL, so the exclusion checker finds nothing when
// clients respect it; the create revision fences the resource.
func TestEtcdScenarios(t *testing.T) {
	cases := []etcdCase{
		// Safety is asserted; liveness is not: on a loaded machine etcd's
		// short election timeout makes leaders flap, every new leader
		// renews the leases, and a lock key can outlive its holder for
		// seconds (the liveness checker reports it, sometimes as stuck).
		// Without faults, the suite's usual baseline of 3 s + 1.5 s.
		{Name: "no faults is never unsafe", Edit: func(c *harness.Config) {
			c.TimeLimit, c.Recovery = 3*time.Second, 1500*time.Millisecond
		}, Verdict: harness.ExpectAny},
		{Name: "a paused member is never unsafe", Edit: func(c *harness.Config) { c.Nemesis = []string{"pause"} }, Verdict: harness.ExpectAny},
		{Name: "a killed member is never unsafe", Edit: func(c *harness.Config) { c.Nemesis = []string{"kill"} }, Verdict: harness.ExpectAny},
		// A partitioned member that clients are connected to can keep the
		// lock unavailable past the heal (the etcd client reconnects with
		// backoff): liveness may fail, safety must not.
		{Name: "a partitioned member is never unsafe", Edit: func(c *harness.Config) { c.Nemesis = []string{"partition"} }, Verdict: harness.ExpectAny},
		{Name: "stalled clients: the revision fences the resource", Edit: func(c *harness.Config) {
			c.Workload, c.Nemesis = "counter", []string{"client-pause"}
		}, Verdict: harness.ExpectAny, Check: func(t *testing.T, r *harness.Results) {
			if !r.Resource.Valid || r.Resource.LostUpdates != 0 {
				t.Fatalf("resource: %+v", r.Resource)
			}
		}},
	}
	harnesstest.RunCases(t, cases, func(t *testing.T, _ etcdCase) harness.Config {
		redistest.RequireEtcd(t)
		cfg := harnesstest.ShortConfig(t)
		cfg.System, cfg.Lock, cfg.TTL = cluster.Etcd, liblocks.EtcdName, time.Second
		// Faults of 0.5-1.5 s, 0.2-0.6 s apart: three in 4 s.
		cfg.TimeLimit, cfg.Recovery = 4*time.Second, 2*time.Second
		return cfg
	}, func(t *testing.T, tc etcdCase, out *harness.Outcome) {
		r := out.Results
		if r.Verdict == checker.VerdictUnsafe {
			t.Fatalf("etcd's lock was unsafe:\n%s", strings.Join(r.Summary(), "\n"))
		}
		if (tc.Verdict != harness.ExpectAny && r.Verdict != tc.Verdict) || len(r.Errors) > 0 {
			t.Fatalf("verdict %s, want %s; errors %v:\n%s", r.Verdict, tc.Verdict, r.Errors, strings.Join(r.Summary(), "\n"))
		}
		if tc.Check != nil {
			tc.Check(t, r)
		}
		harnesstest.RequireNoServers(t, out.Dir)
	})
}

// Jepsen's etcd 3.4.3 finding, reproduced: with the session lock (the
// client renews the lease in the background), a client process paused
// past the TTL loses the lease and wakes up believing it still holds the
// lock, while another client holds it: the exclusion checker finds the
// overlap. The create revision fences the resource all the same.
func TestEtcdSessionClientPause(t *testing.T) {
	redistest.RequireEtcd(t)
	t.Parallel()
	cases := []struct {
		name     string
		workload string
		nemesis  []string
		expect   string
	}{
		{"no faults is never unsafe", "mutex", nil, harness.ExpectAny},
		// A fault aimed at a live lease, and StopOnFirstViolation: a
		// client pause stalls a holder inside its critical section for
		// 2×TTL (the session lock believes until it releases), its links
		// carry nothing, keep-alives included, so its lease expires on
		// the server after one TTL, and one of nine clients takes the
		// lock while the staller still believes it holds it. A pause is
		// armed every 0.4 s on average; the run ends at the first
		// violation.
		{"a paused client overlaps the next holder", "mutex", []string{"client-pause"}, harness.ExpectUnsafe},
		// The same pauses, going on after the first violation until the
		// staller's hold ends: the case also requires the staller's write
		// to be refused, which happens when it wakes and before it
		// releases. StopGrace only caps that wait; 30 s is sized for a
		// loaded cluster whose leaders flap (a 3 s grace cut a CI run
		// off before the staller wrote). The 60 s limit leaves such a
		// cluster room to serve the lock at last.
		{"the lock is not exclusive but the fenced resource is safe", "counter", []string{"client-pause"}, harness.ExpectUnsafe},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := harnesstest.ShortConfig(t)
			cfg.System, cfg.Lock, cfg.TTL = cluster.Etcd, liblocks.EtcdSessionName, time.Second
			cfg.Workload, cfg.Nemesis = tc.workload, tc.nemesis
			cfg.TimeLimit, cfg.Recovery = 6*time.Second, 2*time.Second
			switch {
			case tc.nemesis == nil:
				// Without faults, the suite's usual baseline.
				cfg.TimeLimit, cfg.Recovery = 3*time.Second, 1500*time.Millisecond
			case tc.expect == harness.ExpectUnsafe:
				harnesstest.UntilViolation(&cfg)
				// A second per operation, not 250 ms: under two busy
				// loops beside the other suites, three etcd members
				// granted 5 leases in a minute within 250 ms, and the
				// paused holder's lease is what the case is about.
				cfg.OpTimeout = time.Second
				if tc.workload == "counter" {
					cfg.StopGrace = 30 * time.Second
				}
			}
			cfg.Expect = tc.expect
			out := harnesstest.Run(t, cfg)
			harnesstest.RequireNoServers(t, out.Dir)
			r := out.Results
			if len(r.Errors) > 0 {
				t.Fatalf("errors: %v", r.Errors)
			}
			switch tc.expect {
			case harness.ExpectAny:
				if r.Verdict == checker.VerdictUnsafe {
					t.Fatalf("unsafe without faults:\n%s", strings.Join(r.Summary(), "\n"))
				}
			case harness.ExpectUnsafe:
				if r.Verdict != checker.VerdictUnsafe || r.Exclusion.Count == 0 {
					t.Fatalf("verdict %s, want overlapping holds:\n%s", r.Verdict, strings.Join(r.Summary(), "\n"))
				}
			}
			if tc.workload == "counter" {
				if !r.Resource.Valid || r.Resource.LostUpdates != 0 || r.Resource.RejectedStale == 0 {
					t.Fatalf("want a safe resource that refused stale writes: %+v", r.Resource)
				}
				if line := checker.LockVersusResource(r.Exclusion, r.Resource); !strings.Contains(line, "not exclusive, but the resource was safe") {
					t.Errorf("the summary does not tell the lock from the resource: %q", line)
				}
			}
		})
	}
}
