package ssh_test

import (
	"strings"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/contrib/ssh"
	"github.com/lockjepsen/lockjepsen/contrib/ssh/sshtest"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/testkit/harnesstest"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

// verdictCase is one scenario run on the local backend and on the test
// hosts over SSH: both runs must get the case's verdict.
type verdictCase struct {
	name string
	// nodes and sentinels are the processes of the hosts file.
	nodes, sentinels int
	edit             func(*harness.Config)
	verdict          string
	// check looks at each run's results beyond the verdict (nil: none).
	check func(testing.TB, *harness.Results)
	// netem: the case's faults need tc netem on the hosts.
	netem bool
}

// TestSameVerdictOnHostsAsLocally runs the scenarios on both
// backends, one run after the other (the SSH runs share the hosts). Each
// unsafe case aims its fault at a live lease and stops at its first
// violation; its comment says why the violation follows. Nothing is
// retried. After each SSH run every host must be healed: no rule in
// lockjepsen's chain, no netem qdisc, no marker, no server.
func TestSameVerdictOnHostsAsLocally(t *testing.T) {
	redistest.RequireBinary(t)
	f := sshtest.Start(t)
	cases := []verdictCase{
		// harnesstest.RedlockRestart: client 0 reaches only n1-n3,
		// client 1 only n3-n5, and n3 (host 3) is killed with SIGKILL
		// over SSH right after each grant and started again at once,
		// without persistence: it forgets the key, and the other client
		// takes n3 and its two free nodes during the 12-15 s hold.
		{name: "redlock: a node of the holder's majority restarted at once is unsafe", nodes: 5,
			edit: harnesstest.RedlockRestart, verdict: checker.VerdictUnsafe},
		// The named script's steps slow replication by 100 ms (on the
		// hosts: tc netem on each node's replies to its peers) and kill
		// the primary right after a grant (SIGKILL over SSH), before the
		// key reaches a replica. The holder holds 15-18 s of a 20 s
		// lease, past the failover; the primary stays down 18 s so that
		// a slow failover does not hand the lock out again on a
		// restarted empty primary instead (see TestSentinelScenarios).
		{name: "sentinel: the primary killed right after a grant is unsafe", nodes: 3, sentinels: 3,
			edit: func(c *harness.Config) {
				sentinel(c)
				c.TTL, c.Hold = 20*time.Second, "15s..18s"
				harnesstest.UntilViolation(c)
				c.Script = harnesstest.KillAfterAcquireSteps(c, 18*time.Second)
			}, verdict: checker.VerdictUnsafe, check: harnesstest.RequireTwoPrimaries, netem: true},
		// The single node killed (SIGKILL over SSH) right after a grant
		// and started again at once without persistence: it forgets the
		// key, and the next client takes the lock while the holder still
		// holds it (TestServerFaults). The holds of 3-4 s of a 5 s lease
		// leave the kill and the restart, two SSH sessions on a loaded
		// machine, seconds to spare (1-1.5 s holds left a fraction of
		// one); the run stops at the violation, a few milliseconds after
		// the restart. The first grant the kill can follow is the one
		// after the first hold, so longer holds would only make every
		// run wait longer. Needs no netem.
		{name: "single: the node killed right after a grant is unsafe", nodes: 1,
			edit: func(c *harness.Config) {
				c.Nemesis = []string{"kill"}
				c.TTL, c.Hold = 5*time.Second, "3s..4s"
				c.AfterAcquire = true
				harnesstest.UntilViolation(c)
			}, verdict: checker.VerdictUnsafe},
		// sentinel-split-brain (harnesstest.SplitBrain): the primary is
		// cut off from its replicas and sentinels (on the hosts:
		// iptables rules in chain LOCKJEPSEN dropping its peers'
		// packets) for 20 s while half the clients, cut off from the
		// sentinels, still reach it; the sentinels promote a replica
		// that the other half lock.
		{name: "sentinel: the primary partitioned from its cluster is unsafe", nodes: 3, sentinels: 3,
			edit: func(c *harness.Config) {
				sentinel(c)
				harnesstest.SplitBrain(c)
			}, verdict: checker.VerdictUnsafe, check: harnesstest.RequireTwoPrimaries},
		// Partitions of the clients from a single node: the lock is
		// unavailable during each, and safe.
		{name: "single: partitions are safe", nodes: 1,
			edit:    func(c *harness.Config) { c.Nemesis = []string{"partition"} },
			verdict: checker.VerdictSafe},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Asked first: the local run alone compares nothing, and
			// harness TestSentinelScenarios runs the same steps locally.
			if why := f.NetemMissing(t); tc.netem && why != "" {
				t.Skipf("not run: the hosts' kernel has no tc netem, which this case's replication lag needs:\n%s", why)
			}
			local := runVerdictCase(t, tc, nil)
			h := f.Load(t, f.KnownHosts(t), tc.nodes, tc.sentinels)
			r := ssh.NewRunner(h, false, false, nil)
			defer r.Close()
			remote := runVerdictCase(t, tc, ssh.New(h, r))
			f.RequireHealed(t)
			if local != remote {
				t.Fatalf("verdict %s on the hosts, %s locally", remote, local)
			}
		})
	}
}

func sentinel(c *harness.Config) {
	c.System, c.Lock = cluster.Sentinel, locks.Token
	c.TimeLimit, c.Recovery = 9*time.Second, 2*time.Second
}

// runVerdictCase runs tc on backend b (nil: local) and returns its
// verdict, failing the test unless it is the case's.
func runVerdictCase(t *testing.T, tc verdictCase, b cluster.Backend) string {
	t.Helper()
	cfg := harnesstest.ShortConfig(t)
	if b != nil {
		cfg.Backend = b
	}
	tc.edit(&cfg)
	cfg.Expect = tc.verdict
	where := "locally"
	if b != nil {
		where = "on the hosts"
	}
	start := time.Now()
	out := harnesstest.Run(t, cfg)
	r := out.Results
	t.Logf("%s: verdict %s after %s, %d operations", where, r.Verdict, time.Since(start).Round(100*time.Millisecond), r.Ops)
	if r.Verdict != tc.verdict || len(r.Errors) > 0 {
		t.Fatalf("%s: verdict %s, want %s; errors %v:\n%s\n%s", where, r.Verdict, tc.verdict, r.Errors,
			strings.Join(r.Summary(), "\n"), harnesstest.ErrorDigest(out.Dir))
	}
	if r.Verdict == checker.VerdictUnsafe {
		t.Logf("%s: the witness: %s", where, r.Exclusion.Violations[0].Story)
	}
	if tc.check != nil {
		tc.check(t, r)
	}
	return r.Verdict
}
