package docker_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/proxy"
	"github.com/lockjepsen/lockjepsen/contrib/docker"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

var _ cluster.SlotCluster = (*docker.Cluster)(nil)

// The cluster system on containers starts with every slot covered and
// each primary with its replica in sync, every node announced at its
// proxies in the toxiproxy container. A client that maps those addresses
// to the published ports writes to every primary. Killing the primary of
// lock-0's slot makes its replica take over; restarted, the old primary
// rejoins as a replica and the cluster is healthy again.
func TestRedisClusterOnDocker(t *testing.T) {
	requireDocker(t)
	t.Parallel()
	c := start(t, docker.Backend{}, cluster.Spec{System: cluster.RedisCluster})
	ctx, cancel := context.WithTimeout(context.Background(), 3*agreeTimeout)
	defer cancel()

	for i, n := range c.Nodes() {
		want := cluster.RolePrimary
		if i >= 3 {
			want = cluster.RoleReplica
		}
		if n.Role != want || n.Announce == "" || n.Announce == n.Addr {
			t.Errorf("node %s: role %s (want %s), announced %q, published %s", n.Name, n.Role, want, n.Announce, n.Addr)
		}
	}
	for p := 0; p < 3; p++ {
		lo, _ := cluster.SlotRange(p, 3)
		key := fmt.Sprintf("{%s}", slotKey(lo))
		if owner, err := c.PrimaryOf(ctx, key); err != nil || owner != fmt.Sprintf("n%d", p+1) {
			t.Errorf("slot %d is served by %q (%v), want n%d", lo, owner, err, p+1)
		}
	}
	app := redistest.ClusterClient(t, c.Nodes())
	for i := 0; i < 30; i++ {
		if err := app.Set(ctx, fmt.Sprintf("k%d", i), i, 0).Err(); err != nil {
			t.Fatalf("SET k%d: %v", i, err)
		}
	}

	primaryIs := func(want string) func() error {
		return func() error {
			if got, err := c.PrimaryOf(ctx, "lock-0"); err != nil || got != want {
				return fmt.Errorf("the primary of lock-0 is %q (%v)", got, err)
			}
			return nil
		}
	}
	if err := c.Kill("n1", false); err != nil {
		t.Fatal(err)
	}
	took := until(t, failoverTimeout, "n4 takes over lock-0's slot", primaryIs("n4"))
	t.Logf("failover after the kill: %v", took.Round(time.Millisecond))
	if err := c.Restart(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatalf("not healthy after n1's restart: %v", err)
	}
	if err := primaryIs("n4")(); err != nil {
		t.Error(err)
	}
	// A fault on n4's internal links cuts the replication into n1, its
	// replica now, and nothing else: the cluster stays ok, a write on n4
	// does not reach n1 until the cut heals. (WAIT 1 1000 returns 0 if
	// no replica acknowledged the write within a second: a broken cut
	// fails this at once, a slow machine cannot.)
	if err := c.CutInternal(ctx, "n4", proxy.Fault{Mode: proxy.Partition}); err != nil {
		t.Fatal(err)
	}
	left, err := c.InternalToxics(ctx)
	if err != nil || len(left) != 2 || !strings.HasPrefix(left[0], "net-n4/") || !strings.HasPrefix(left[1], "net-n4/") {
		t.Errorf("toxics after cutting n4: %v %v, want two on net-n4 and none on its bus", left, err)
	}
	var n4Addr string
	for _, n := range c.Nodes() {
		if n.Name == "n4" {
			n4Addr = n.Addr
		}
	}
	n4 := redis.NewClient(&redis.Options{Addr: n4Addr})
	defer n4.Close()
	acked := func() (int64, error) {
		var wait *redis.Cmd
		_, err := n4.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, "lock-0", "while-cut", 0)
			wait = p.Do(ctx, "WAIT", 1, 1000)
			return nil
		})
		if err != nil {
			return 0, err
		}
		return wait.Int64()
	}
	if got, err := acked(); err != nil || got != 0 {
		t.Errorf("a write on n4 while its replication is cut: WAIT says %d replicas (%v), want 0", got, err)
	}
	if err := primaryIs("n4")(); err != nil {
		t.Errorf("a replication cut alone moved the slot: %v", err)
	}
	if err := c.HealInternal(ctx, "n4"); err != nil {
		t.Fatal(err)
	}
	until(t, failoverTimeout, "n1 acknowledges n4's writes again", func() error {
		if got, err := acked(); err != nil || got != 1 {
			return fmt.Errorf("WAIT says %d replicas (%v)", got, err)
		}
		return nil
	})
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatalf("not healthy after healing n4: %v", err)
	}
}

// slotKey is a key of the given slot.
func slotKey(slot int) string {
	for i := 0; ; i++ {
		if k := fmt.Sprintf("k%d", i); cluster.KeySlot(k) == slot {
			return k
		}
	}
}
