package docker_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/proxy"
	"github.com/lockjepsen/lockjepsen/contrib/docker"
	"github.com/lockjepsen/lockjepsen/nemesis"
)

// The docker cluster carries the sentinel system's internal links itself.
var (
	_ cluster.SentinelCluster = (*docker.Cluster)(nil)
	_ nemesis.InternalNet     = (*docker.Cluster)(nil)
	_ nemesis.InternalNodes   = (*docker.Cluster)(nil)
	_ cluster.SentinelCluster = (*docker.ComposeCluster)(nil)
	_ nemesis.InternalNet     = (*docker.ComposeCluster)(nil)
)

// containerIP is the IP of the cluster's container of name on its
// network, as Docker reports it.
func containerIP(t *testing.T, c *docker.Cluster, name string) string {
	t.Helper()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cli.ContainerInspect(ctx, c.Containers()[name], client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ep := res.Container.NetworkSettings.Networks[c.Network()]
	if ep == nil || !ep.IPAddress.IsValid() {
		t.Fatalf("container of %s has no address on network %s", name, c.Network())
	}
	return ep.IPAddress.String()
}

func role(ctx context.Context, c *redis.Client) string {
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return "error: " + err.Error()
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "role:"); ok {
			return v
		}
	}
	return "?"
}

// until polls cond every 50ms until it returns nil or d passes; the
// failure says what cond last reported missing.
func until(t *testing.T, d time.Duration, what string, cond func() error) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		err := cond()
		if err == nil {
			return time.Since(start)
		}
		if time.Since(start) > d {
			t.Fatalf("%s: not after %v: %v", what, d, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Deadlines of the sentinel test's waits. Each wait gets its own: a
// shared one left the last wait of the test with 8.9 s on a loaded
// machine, where a sentinel may need a 10 s INFO period to see a demoted
// primary as a replica.
const (
	// agreeTimeout bounds one WaitHealthy (and a manual failover).
	agreeTimeout = docker.SentinelAgreeTimeout
	// failoverTimeout bounds the promotion of a replica once the primary
	// is cut off: down-after (1 s), the vote, the promotion, and the
	// sentinels' reconfiguration, on a loaded machine.
	failoverTimeout = 60 * time.Second
)

// waitHealthy waits, with a deadline of its own, until the sentinel system
// is healthy; the failure says what was still wrong.
func waitHealthy(t *testing.T, c *docker.Cluster, after string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), agreeTimeout)
	defer cancel()
	start := time.Now()
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatalf("the sentinel system not healthy %v after %s: %v", time.Since(start).Round(time.Millisecond), after, err)
	}
}

func requireNoToxics(t *testing.T, c *docker.Cluster) {
	t.Helper()
	left, err := c.InternalToxics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Fatalf("toxics left on the internal proxies: %v", left)
	}
}

// The sentinel system on containers: it starts healthy with every process
// announced through the toxiproxy server; cutting the primary's internal
// proxy makes the sentinels promote a replica while clients still reach
// the old primary (split brain); healing removes every toxic and the old
// primary rejoins as a replica; the API-timeout fallback (restarting the
// toxiproxy server) keeps the other faults; a manual failover and a kill
// and restart of the primary end healthy.
func TestSentinelOnDocker(t *testing.T) {
	requireDocker(t)
	t.Parallel()
	c := start(t, docker.Backend{}, cluster.Spec{System: cluster.Sentinel})
	ctx := context.Background()
	nodes, sentinels := c.Nodes(), c.Sentinels()
	if len(nodes) != 3 || len(sentinels) != cluster.DefaultSentinels {
		t.Fatalf("%d nodes, %d sentinels", len(nodes), len(sentinels))
	}
	// Every process announces its internal proxy by the toxiproxy
	// container's IP, as Docker reports it, and no sentinel resolves
	// hostnames: Docker's DNS once hung a sentinel under load.
	toxiIP := containerIP(t, c, "toxiproxy")
	byName := map[string]cluster.Node{}
	for _, n := range append(append([]cluster.Node{}, nodes...), sentinels...) {
		byName[n.Name] = n
		want := toxiIP + ":"
		if !strings.HasPrefix(n.Announce, want) || n.Announce == n.Addr {
			t.Errorf("%s announces %q, want its internal proxy %s<port>", n.Name, n.Announce, want)
		}
	}
	for _, s := range sentinels {
		for _, param := range []string{"resolve-hostnames", "announce-hostnames"} {
			// A map in RESP3, the client's protocol.
			v, err := rdb(t, s.Addr).Do(ctx, "SENTINEL", "CONFIG", "GET", param).Result()
			if m, _ := v.(map[any]any); err != nil || m[param] != "no" {
				t.Errorf("sentinel %s: %s is %v (%v), want no", s.Name, param, v, err)
			}
		}
	}
	if nodes[0].Role != cluster.RolePrimary || nodes[1].Role != cluster.RoleReplica {
		t.Errorf("roles %s, %s", nodes[0].Role, nodes[1].Role)
	}
	if got := c.InternalNodes(); !slices.Equal(got, []string{"n1", "n2", "n3", "s1", "s2", "s3"}) {
		t.Errorf("internal nodes %v", got)
	}
	p, err := c.Primary(ctx)
	if err != nil || p != "n1" {
		t.Fatalf("primary %q, %v; want n1", p, err)
	}
	cl := map[string]*redis.Client{}
	for _, n := range nodes {
		cl[n.Name] = rdb(t, n.Addr)
	}
	if err := cl["n1"].Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	until(t, 30*time.Second, "the write replicated to n2", func() error {
		v, err := cl["n2"].Get(ctx, "k").Result()
		if err != nil || v != "v" {
			return fmt.Errorf("GET on n2: %q, %v", v, err)
		}
		return nil
	})

	// Isolate the primary: only its internal proxy is cut.
	if err := c.CutInternal(ctx, "n1", proxy.Fault{Mode: proxy.Partition}); err != nil {
		t.Fatal(err)
	}
	if left, _ := c.InternalToxics(ctx); !slices.Equal(left, []string{"net-n1/lockjepsen_down", "net-n1/lockjepsen_up"}) {
		t.Errorf("toxics while n1 is cut: %v", left)
	}
	var promoted string
	took := until(t, failoverTimeout, "a failover away from the isolated n1", func() error {
		p, err := c.Primary(ctx)
		if err != nil {
			return err
		}
		if p == "n1" {
			return fmt.Errorf("the sentinels still name n1")
		}
		promoted = p
		return nil
	})
	t.Logf("the sentinels promoted %s %v after the cut", promoted, took.Round(time.Millisecond))
	// Split brain: the old primary still serves its clients as a primary.
	if r := role(ctx, cl["n1"]); r != "master" {
		t.Errorf("isolated n1 reports role %s to a client, want master", r)
	}
	if err := cl["n1"].Set(ctx, "k", "stale", 0).Err(); err != nil {
		t.Errorf("a client cannot write to the isolated old primary: %v", err)
	}
	if err := c.HealInternal(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	requireNoToxics(t, c)
	waitHealthy(t, c, "healing n1")
	if r := role(ctx, cl["n1"]); r != "slave" {
		t.Errorf("healed n1 has role %s, want a replica of %s", r, promoted)
	}

	// The fallback when toxiproxy's API hangs: the server is restarted and
	// the faults still wanted are applied again; the healed ones are not.
	if err := c.CutInternal(ctx, "n3", proxy.Fault{Mode: proxy.Latency, Latency: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if err := c.ForceInternalRecover(ctx); err != nil {
		t.Fatal(err)
	}
	if left, _ := c.InternalToxics(ctx); !slices.Equal(left, []string{"net-n3/lockjepsen_down"}) {
		t.Errorf("after restarting toxiproxy: toxics %v, want n3's latency only", left)
	}
	if c.InternalRestarts() != 1 {
		t.Errorf("%d restarts of toxiproxy, want 1", c.InternalRestarts())
	}
	if err := c.HealInternal(ctx, "n3"); err != nil {
		t.Fatal(err)
	}
	if err := c.HealInternal(ctx, "n3"); err != nil {
		t.Fatalf("healing a healed node: %v", err)
	}
	requireNoToxics(t, c)
	waitHealthy(t, c, "restarting toxiproxy")

	// A manual failover, then the new primary crashes and comes back at
	// once (the kill fault); the system settles.
	// The primary is not necessarily still the one promoted above: the
	// toxiproxy restart drops every internal connection, and on a loaded
	// machine the sentinels can lose the primary for longer than
	// down-after and fail over on their own.
	fctx, cancel := context.WithTimeout(ctx, agreeTimeout)
	defer cancel()
	before, err := c.Primary(fctx)
	if err != nil {
		t.Fatal(err)
	}
	if before != promoted {
		t.Logf("the sentinels failed over on their own while toxiproxy restarted: primary %s, not %s", before, promoted)
	}
	next, err := c.Failover(fctx)
	if err != nil {
		t.Fatal(err)
	}
	if next == before {
		t.Fatalf("failover kept %s", next)
	}
	if err := c.Kill(next, false); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(ctx, next); err != nil {
		t.Fatal(err)
	}
	waitHealthy(t, c, "the kill and restart of "+next)
	requireNoToxics(t, c)

	// Nodes that have no internal link are refused with a clear error.
	if err := c.CutInternal(ctx, "resource", proxy.Fault{Mode: proxy.Partition}); err == nil || !strings.Contains(err.Error(), "no internal link") {
		t.Errorf("cut of a node without internal link: %v", err)
	}
}

// Single and redlock have no internal traffic: the nemesis is told so
// before a run.
func TestNoInternalLinksOutsideSentinel(t *testing.T) {
	requireDocker(t)
	t.Parallel()
	c := start(t, docker.Backend{}, cluster.Spec{System: cluster.Single})
	if got := c.InternalNodes(); len(got) != 0 {
		t.Errorf("single has internal nodes %v", got)
	}
	err := c.CutInternal(context.Background(), "n1", proxy.Fault{Mode: proxy.Partition})
	if err == nil || !strings.Contains(err.Error(), "only the sentinel system") {
		t.Errorf("CutInternal on single: %v", err)
	}
	if _, err := c.Primary(context.Background()); err == nil {
		t.Error("Primary on single answered")
	}
}
