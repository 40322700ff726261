package liblocks_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/contrib/liblocks"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/nemesis"
	"github.com/lockjepsen/lockjepsen/testkit/harnesstest"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

// The context locks on Sentinel, through their own clients' Sentinel
// support (MasterSet, the sentinels as InitAddress): each grants on the
// primary the sentinels name, and keeps granting once they name another.
// A manual failover (SENTINEL FAILOVER) at 1 s moves the primary; the
// clients learn it by the sentinels' +switch-master (or the old primary
// closing their connections as it is demoted), and the run must show a
// grant by the new primary after the failover. The verdict is not judged:
// a grant the replica had not yet copied may be lost in the promotion, as
// for every lock on Sentinel.
func TestContextLocksOnSentinel(t *testing.T) {
	redistest.RequireBinary(t)
	for _, lock := range []string{liblocks.RueidislockName, liblocks.ValkeylockName} {
		t.Run(lock, func(t *testing.T) {
			cfg := harnesstest.ShortConfig(t)
			cfg.System, cfg.Lock, cfg.Expect = cluster.Sentinel, lock, harness.ExpectAny
			cfg.Clients, cfg.Hold = 4, "50ms..150ms"
			cfg.Script = []nemesis.Step{{At: time.Second, Action: nemesis.Action{Fault: nemesis.Failover}}}
			// At 10 s, long after the failover, every client is armed to
			// crash at its next hold: the first holder crashes, and its
			// lease lives on (the library renews from goroutines a crash
			// does not stop) until the harness closes the lock at the end
			// of the run. A lock on Sentinel that the harness never
			// closed kept such a run going for ever.
			for c := 0; c < cfg.Clients; c++ {
				cfg.Script = append(cfg.Script, nemesis.Step{At: 10 * time.Second, Action: nemesis.Action{Fault: nemesis.ClientCrash, Clients: []int{c}}})
			}
			// The failover takes 1-3 s idle, more on a loaded machine;
			// the rest of the time limit is for grants after it.
			cfg.TimeLimit, cfg.Recovery = 12*time.Second, 2*time.Second
			out := harnesstest.Run(t, cfg)
			r := out.Results
			if len(r.Errors) > 0 {
				t.Fatalf("errors: %v\n%s", r.Errors, harnesstest.ErrorDigest(out.Dir))
			}
			info := harnesstest.ReadRunInfo(t, out.Dir)
			if len(info.Failovers) == 0 {
				t.Fatalf("no failover recorded within the run\n%s", strings.Join(r.Summary(), "\n"))
			}
			f := info.Failovers[0]
			before, after, crashes := 0, 0, 0
			for _, op := range harnesstest.ReadHistory(t, out.Dir).Ops {
				if op.F == nemesis.ClientCrash && op.Value != nil && op.Value.Phase == "start" {
					crashes++
				}
				if op.Type != history.OK || op.F != history.Acquire || op.Value == nil {
					continue
				}
				switch {
				case op.Time < f.At && slices.Equal(op.Value.Nodes, []string{f.From}):
					before++
				case op.Time > f.At && slices.Equal(op.Value.Nodes, []string{f.To}):
					after++
				}
			}
			t.Logf("failover %s → %s at %s: %d grants by %s before it, %d by %s after it; verdict %s",
				f.From, f.To, time.Duration(f.At), before, f.From, after, f.To, r.Verdict)
			if before == 0 || after == 0 {
				t.Fatalf("want grants by the old primary %s before the failover and by the new one %s after it, got %d and %d\n%s",
					f.From, f.To, before, after, strings.Join(r.Summary(), "\n"))
			}
			if crashes == 0 {
				t.Fatalf("no holder crashed in the last 2 s of the run: the lock was not held then\n%s", strings.Join(r.Summary(), "\n"))
			}
			harnesstest.RequireNoServers(t, out.Dir)
		})
	}
}

// What a context lock is given on Sentinel: the sentinels and the master
// name (locks.Conn.Sentinel), which its own client needs; go-redis's
// failover client alone is refused, since it dials whatever primary it
// found whatever the address, and would hide the library's own Sentinel
// support. Nothing is dialled: the library's client is made at the first
// acquire.
func TestContextLocksNeedTheSentinels(t *testing.T) {
	failover := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}})
	defer failover.Close()
	cases := []struct {
		name     string
		sentinel *locks.SentinelConn
		wantErr  string // "" = accepted
	}{
		{name: "the sentinels and the master name", sentinel: &locks.SentinelConn{MasterName: "m", Addrs: []string{"127.0.0.1:1"}}},
		{name: "a failover client alone", wantErr: "a go-redis failover client without the sentinels"},
		{name: "no master name", sentinel: &locks.SentinelConn{Addrs: []string{"127.0.0.1:1"}}, wantErr: "needs a master name and the sentinels' addresses"},
		{name: "no sentinels", sentinel: &locks.SentinelConn{MasterName: "m"}, wantErr: "needs a master name and the sentinels' addresses"},
	}
	for _, lock := range contextLocks {
		for _, c := range cases {
			l, err := locks.New(lock, []locks.Conn{{Name: "primary", Client: failover, Sentinel: c.sentinel}}, locks.Options{TokenPrefix: "p1"})
			switch {
			case c.wantErr == "" && err != nil:
				t.Errorf("%s, %s: %v", lock, c.name, err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Errorf("%s, %s: got %v, want an error containing %q", lock, c.name, err, c.wantErr)
			}
			if closer, ok := l.(interface{ Close() error }); ok {
				closer.Close()
			}
		}
	}
}
