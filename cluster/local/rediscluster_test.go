package local_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/local"
	"github.com/lockjepsen/lockjepsen/cluster/proxy"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

// startRedisCluster starts the default Redis Cluster (3 primaries, 3
// replicas) through a fresh mesh.
func startRedisCluster(t *testing.T) (*local.Cluster, *proxy.Mesh) {
	t.Helper()
	redistest.RequireBinary(t)
	spec := cluster.Spec{System: cluster.RedisCluster, Nodes: cluster.DefaultNodes(cluster.RedisCluster), Dir: t.TempDir(), Persistence: cluster.PersistNone}
	spec.Processes = recordIn(spec.Dir)
	mesh := proxy.NewMesh()
	t.Cleanup(func() { mesh.Close() })
	spec.Mesh = meshOf(mesh)
	cl, err := local.Backend{}.Start(within(t, startDeadline), spec)
	if err != nil {
		t.Fatal(err)
	}
	c := cl.(*local.Cluster)
	t.Cleanup(func() { c.Close(context.Background()) })
	return c, mesh
}

// The cluster starts with every slot covered, each primary with its
// replica in sync, and its links in the mesh: every node's inbound "net"
// link and a bus link for every ordered pair of nodes.
func TestRedisClusterStarts(t *testing.T) {
	t.Parallel()
	c, mesh := startRedisCluster(t)
	ctx := within(t, waitDeadline)
	nodes := c.Nodes()
	if len(nodes) != 6 {
		t.Fatalf("%d nodes, want 6", len(nodes))
	}
	for i, n := range nodes {
		want := cluster.RolePrimary
		if i >= 3 {
			want = cluster.RoleReplica
		}
		if n.Role != want || n.Announce == n.Addr {
			t.Errorf("node %s: role %s (want %s), announced %s, real %s", n.Name, n.Role, want, n.Announce, n.Addr)
		}
	}
	if got, want := len(mesh.Links()), 6+6*5; got != want {
		t.Errorf("%d links in the mesh, want %d", got, want)
	}
	// Each primary serves its third of the slots.
	for _, key := range []string{"lock-0", "lock-1", "{a}"} {
		owner, err := c.PrimaryOf(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		slot := cluster.KeySlot(key)
		for p := 0; p < 3; p++ {
			if lo, hi := cluster.SlotRange(p, 3); slot >= lo && slot <= hi && owner != fmt.Sprintf("n%d", p+1) {
				t.Errorf("%s (slot %d) is served by %s, want n%d", key, slot, owner, p+1)
			}
		}
	}
	// An application's cluster client writes to every primary, and each
	// write reaches that primary's replica.
	rdb := redistest.ClusterClient(t, c.Nodes())
	for i := 0; i < 30; i++ {
		if err := rdb.Set(ctx, fmt.Sprintf("k%d", i), i, 0).Err(); err != nil {
			t.Fatalf("SET k%d: %v", i, err)
		}
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
}

// Killing the primary of a key's slot makes its replica take over, by the
// cluster's own election; restarted, the old primary rejoins as a replica
// and the cluster is healthy again. Cutting a primary's inbound link and
// its bus links both ways (what isolate does) does the same while clients
// still reach the old primary: two nodes then claim the slot.
func TestRedisClusterFailover(t *testing.T) {
	t.Parallel()
	c, mesh := startRedisCluster(t)
	ctx := within(t, 2*waitDeadline)
	waitPrimary := func(key, want string) {
		t.Helper()
		deadline := time.Now().Add(waitDeadline)
		var last string
		var lastErr error
		for time.Now().Before(deadline) {
			if last, lastErr = c.PrimaryOf(ctx, key); lastErr == nil && last == want {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("after %v the primary of %s is %q (%v), not %s", waitDeadline, key, last, lastErr, want)
	}
	if err := c.Kill("n1", false); err != nil {
		t.Fatal(err)
	}
	waitPrimary("lock-0", "n4")
	if err := c.Restart(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	waitPrimary("lock-0", "n4")

	// Isolate n2 (slot of lock-1): its inbound link, and every bus link
	// from or to it.
	var cut []*proxy.Link
	for _, l := range mesh.Links() {
		if l.To == "n2" || l.From == "n2" {
			if err := l.Apply(proxy.Fault{Mode: proxy.Partition}); err != nil {
				t.Fatal(err)
			}
			cut = append(cut, l)
		}
	}
	waitPrimary("lock-1", "n5")
	// n2 itself, cut off, still believes it serves the slot.
	n2 := redis.NewClient(&redis.Options{Addr: c.Nodes()[1].Addr, DisableIdentity: true})
	defer n2.Close()
	nodes, err := n2.ClusterNodes(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(nodes, "myself,master") {
		t.Errorf("isolated n2 no longer thinks itself primary:\n%s", nodes)
	}
	for _, l := range cut {
		if err := l.Heal(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	waitPrimary("lock-1", "n5")
}
