package ssh_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/proxy"
	"github.com/lockjepsen/lockjepsen/cluster/sentinelq"
	"github.com/lockjepsen/lockjepsen/contrib/ssh"
	"github.com/lockjepsen/lockjepsen/contrib/ssh/sshtest"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/redis/go-redis/v9"
)

func sentinelSpec(t *testing.T) cluster.Spec {
	return cluster.Spec{System: cluster.Sentinel, Nodes: 3, Sentinels: 3, Dir: t.TempDir(), Persistence: cluster.PersistNone}
}

func TestUnknownHostKeyIsRefused(t *testing.T) {
	f := sshtest.Start(t)
	empty := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	h := f.Load(t, empty, 1, 0)
	r := ssh.NewRunner(h, false, false, nil)
	defer r.Close()
	_, err := ssh.New(h, r).Start(context.Background(), cluster.Spec{System: cluster.Single, Nodes: 1, Dir: t.TempDir(), Persistence: cluster.PersistNone})
	if !errors.Is(err, ssh.ErrUnknownHost) {
		t.Fatalf("start against an unknown host: %v, want %v", err, ssh.ErrUnknownHost)
	}
	if out := f.OnHost(t, 0, "ls /var/lib/lockjepsen 2>/dev/null"); out != "" {
		t.Errorf("something ran on the unknown host: %s", out)
	}
	// Trusting on first use records the key, and a second runner without
	// trust then knows it.
	r2 := ssh.NewRunner(h, true, false, nil)
	defer r2.Close()
	if _, err := r2.Run(context.Background(), h.Nodes[0], "true"); err != nil {
		t.Fatalf("trust on first use: %v", err)
	}
	r3 := ssh.NewRunner(h, false, false, nil)
	defer r3.Close()
	if _, err := r3.Run(context.Background(), h.Nodes[0], "true"); err != nil {
		t.Fatalf("after trust on first use: %v", err)
	}
}

func TestDryRunRunsNothing(t *testing.T) {
	f := sshtest.Start(t)
	h := f.Load(t, f.KnownHosts(t), 3, 3)
	var out bytes.Buffer
	r := ssh.NewRunner(h, false, true, &out)
	cl, err := ssh.New(h, r).Start(context.Background(), sentinelSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	c := cl.(*ssh.Cluster)
	for _, step := range []func() error{
		func() error { return c.Pause("n1") }, func() error { return c.Resume("n1") },
		func() error { return c.CutInternal(context.Background(), "n1", proxy.Fault{Mode: proxy.Partition}) },
		func() error { return c.HealInternal(context.Background(), "n1") },
		func() error { return cl.Close(context.Background()) },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"redis-server /var/lib/lockjepsen/n1/server.conf", "redis-sentinel", "kill -STOP", "iptables -A LOCKJEPSEN", "replicaof " + f.Addrs[0]} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("dry run does not print %q:\n%s", want, out.String())
		}
	}
	for i := 0; i < sshtest.Hosts; i++ {
		if got := f.OnHost(t, i, "ls /var/lib/lockjepsen 2>/dev/null"); got != "" {
			t.Errorf("the dry run ran something on host %d: %s", i+1, got)
		}
	}
}

// TestSentinelOnHosts starts the sentinel system over SSH, cuts the
// primary off from its cluster with iptables until the sentinels promote
// another node, heals it, pauses and kills a node, and checks that Close
// leaves every host healed, with the logs collected.
func TestSentinelOnHosts(t *testing.T) {
	f := sshtest.Start(t)
	h := f.Load(t, f.KnownHosts(t), 3, 3)
	r := ssh.NewRunner(h, false, false, nil)
	defer r.Close()
	spec := sentinelSpec(t)
	spec.FakeClock = true
	ctx := context.Background()
	cl, err := ssh.New(h, r).Start(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	c := cl.(*ssh.Cluster)
	closed := false
	defer func() {
		if !closed {
			cl.Close(ctx)
		}
	}()
	primary, err := c.Primary(ctx)
	if err != nil || primary != "n1" {
		t.Fatalf("primary %q, %v; want n1", primary, err)
	}
	replicated := writeOnPrimary(t, ctx, c, "before-the-cut")
	if err := sentinelq.Poll(ctx, "the key written before the cut on n2 and n3", replicated); err != nil {
		t.Fatal(err)
	}
	if err := c.CutInternal(ctx, "n1", proxy.Fault{Mode: proxy.Partition}); err != nil {
		t.Fatal(err)
	}
	// The cut holds n1's writes on n1: its replication stream out was
	// not cut when only the peers' packets in were dropped, and a key it
	// granted reached the replica a failover promotes.
	replicated = writeOnPrimary(t, ctx, c, "during-the-cut")
	if err := pollFor(ctx, 2*time.Second, replicated); err == nil {
		t.Error("a key written on n1 while it was cut off reached its replicas")
	}
	requireCutOnlyN1(t, f, h)
	if got := f.OnHost(t, 0, "cat "+sshtest.Dir+"/n1/"+ssh.MarkerFile); !strings.Contains(got, "iptables -D LOCKJEPSEN") {
		t.Errorf("the marker does not list the rules to undo:\n%s", got)
	}
	pctx, cancel := context.WithTimeout(ctx, sentinelq.HealthyTimeout)
	err = sentinelq.Poll(pctx, "a new primary", func(ctx context.Context) error {
		if p, err := c.Primary(ctx); err != nil || p == "n1" {
			return errors.New("n1 is still primary")
		}
		return nil
	})
	cancel()
	if err != nil {
		t.Fatalf("the sentinels did not promote another node while n1 was cut off: %v", err)
	}
	if err := c.HealInternal(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if out := f.OnHost(t, 0, "iptables -S "+ssh.Chain+" | grep -- -A"); out != "" {
		t.Errorf("rules left after healing n1:\n%s", out)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatalf("after the heal: %v", err)
	}
	for _, step := range []func() error{
		func() error { return c.Pause("n2") }, func() error { return c.Resume("n2") },
		func() error { return c.Kill("n3", false) }, func() error { return c.Restart(ctx, "n3") },
		func() error { return c.SetClock("n2", time.Minute) }, func() error { return c.SetClock("n2", 0) },
		func() error { return c.Pause("n3") }, // left for Close to heal
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	closed = true
	if err := cl.Close(ctx); err != nil {
		t.Fatal(err)
	}
	f.RequireHealed(t)
	for _, file := range []string{"nodes/n1/redis.log", "nodes/s1/sentinel.conf", "ssh-commands.log"} {
		if st, err := os.Stat(filepath.Join(spec.Dir, file)); err != nil || st.Size() == 0 {
			t.Errorf("%s was not collected: %v", file, err)
		}
	}
}

// TestKilledRunIsHealedByTheNext leaves a fault and the servers behind,
// as a control process killed by SIGKILL would (no Close), and checks
// that the next run's ReapOrphans heals every host from the markers.
func TestKilledRunIsHealedByTheNext(t *testing.T) {
	f := sshtest.Start(t)
	h := f.Load(t, f.KnownHosts(t), 1, 0)
	r := ssh.NewRunner(h, false, false, nil)
	ctx := context.Background()
	cl, err := ssh.New(h, r).Start(ctx, cluster.Spec{System: cluster.Single, Nodes: 1, Dir: t.TempDir(), Persistence: cluster.PersistNone})
	if err != nil {
		t.Fatal(err)
	}
	c := cl.(*ssh.Cluster)
	if err := c.CutInternal(ctx, "n1", proxy.Fault{Mode: proxy.Reject}); err != nil {
		t.Fatal(err)
	}
	if err := c.Pause("n1"); err != nil {
		t.Fatal(err)
	}
	r.Close() // the control process dies here

	r2 := ssh.NewRunner(h, false, false, nil)
	defer r2.Close()
	healed := ssh.New(h, r2).ReapOrphans(ctx)
	if len(healed) < 2 {
		t.Errorf("the next run says it healed %d things, want the pause and the server:\n%s", len(healed), strings.Join(healed, "\n"))
	}
	f.RequireHealed(t)
}

func TestMain(m *testing.M) {
	// go-redis's log of every failed dial is noise under faults.
	locks.SilenceRedisLogs()
	sshtest.Main(m)
}

// TestLatencyOnHosts puts a latency fault on the internal links of a
// Sentinel primary (tc netem) and heals it. On a kernel without netem the
// fault must fail saying so, and Close must still leave the host healed:
// the undo of a netem that was never added succeeds.
func TestLatencyOnHosts(t *testing.T) {
	f := sshtest.Start(t)
	h := f.Load(t, f.KnownHosts(t), 3, 3)
	r := ssh.NewRunner(h, false, false, nil)
	defer r.Close()
	ctx := context.Background()
	cl, err := ssh.New(h, r).Start(ctx, sentinelSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	c := cl.(*ssh.Cluster)
	missing := f.NetemMissing(t)
	err = c.CutInternal(ctx, "n1", proxy.Fault{Mode: proxy.Latency, Latency: 100 * time.Millisecond})
	switch {
	case missing != "" && (err == nil || !strings.Contains(err.Error(), "no prio or netem queueing discipline")):
		t.Errorf("latency on a kernel without netem: %v; want an error that says so", err)
	case missing == "" && err != nil:
		t.Errorf("latency: %v", err)
	case missing == "":
		if out := f.OnHost(t, 0, "tc qdisc show dev eth0"); !strings.Contains(out, "netem") {
			t.Errorf("no netem qdisc on n1's host after the fault:\n%s", out)
		}
		if err := c.HealInternal(ctx, "n1"); err != nil {
			t.Errorf("heal: %v", err)
		}
	}
	if err := cl.Close(ctx); err != nil {
		t.Fatal(err)
	}
	f.RequireHealed(t)
	t.Logf("netem on the test hosts: %s", map[bool]string{true: "works", false: "missing: " + missing}[missing == ""])
}

// writeOnPrimary sets key on n1 and returns the check that n2 and n3
// both have it.
func writeOnPrimary(t *testing.T, ctx context.Context, c *ssh.Cluster, key string) func(context.Context) error {
	t.Helper()
	clients := map[string]*redis.Client{}
	for _, n := range c.Nodes() {
		rc := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1, DisableIdentity: true, Protocol: 2})
		t.Cleanup(func() { rc.Close() })
		clients[n.Name] = rc
	}
	if err := clients["n1"].Set(ctx, key, "1", 0).Err(); err != nil {
		t.Fatalf("set %s on n1: %v", key, err)
	}
	return func(ctx context.Context) error {
		for _, n := range []string{"n2", "n3"} {
			if got, err := clients[n].Exists(ctx, key).Result(); err != nil || got != 1 {
				return fmt.Errorf("%s: exists %s = %d, %v", n, key, got, err)
			}
		}
		return nil
	}
}

// requireCutOnlyN1 checks, from n1's host (where s1 runs too), that the
// cut of n1 stops that host's traffic to n1's port and nothing else: its
// sentinel still reaches the replicas. A rule that named only the peer's
// end matched every packet of the host to any port 6379, and s1, which
// then saw no replica, aborted the failovers it led.
func requireCutOnlyN1(t *testing.T, f *sshtest.Fixture, h *ssh.Hosts) {
	t.Helper()
	ping := func(name string) string {
		for _, p := range h.Nodes {
			if p.Name == name {
				return f.OnHost(t, 0, fmt.Sprintf("timeout 3 redis-cli -h %s -p %d ping", p.Address, p.Port))
			}
		}
		t.Fatalf("no %s in the hosts file", name)
		return ""
	}
	for _, n := range []string{"n2", "n3"} {
		if got := ping(n); got != "PONG" {
			t.Errorf("n1's host (s1's too) cannot reach %s while n1 is cut off: %q", n, got)
		}
	}
	if got := ping("n1"); got == "PONG" {
		t.Error("n1's own host, s1's too, still reaches n1 while n1 is cut off from its peers")
	}
}

// pollFor runs check until it succeeds or d passes.
func pollFor(ctx context.Context, d time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return sentinelq.Poll(ctx, "the check", check)
}
