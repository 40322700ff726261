package docker

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/clusterq"
	"github.com/lockjepsen/lockjepsen/cluster/sentinelq"
)

// The Redis Cluster system on containers: n1..nP start as primaries, nP+i
// as the replica of ni, and a toxiproxy server container carries the
// cluster's own traffic into each node on two proxies: net-<node> for its
// client port (replication) and net-<node>-bus for its cluster bus. Every
// node announces the toxiproxy container's address with its two proxy
// ports, so clients that learn the slots from the cluster learn those
// addresses too; the harness maps them back to the nodes' published
// loopback ports (cluster.Node.Announce).
//
// A fault on a node's internal links is on its net-<node> proxy only:
// replication into its replica, as on the local backend, where the bus
// has links of its own. A kill drops both proxies' connections. Neither
// isolates a node, which on Redis Cluster needs its bus cut both ways (a
// node that still reaches its peers hears at once that its replica took
// its slots), and a proxy carries only what flows into its node: Isolate
// runs on the local backend only.

const (
	// busPort is every node's cluster bus port inside its container.
	busPort = 16379
	// busProxyBase is the port of node i's bus proxy, busProxyBase+i,
	// inside the toxiproxy container (its client port's is
	// nodeProxyBase+i).
	busProxyBase = 30000
)

// busProxyName is the name of the proxy in front of a node's cluster bus.
func busProxyName(node string) string { return InternalProxyName(node) + "-bus" }

// startRedisCluster starts the toxiproxy server, the nodes, forms the
// cluster and waits until it is healthy.
func (c *Cluster) startRedisCluster(ctx context.Context, spec cluster.Spec, image, toxiImage, preload string) error {
	proxies := map[string][]toxiproxy.Proxy{}
	for i := 1; i <= spec.Nodes; i++ {
		role := cluster.RoleReplica
		if i <= spec.Nodes/2 {
			role = cluster.RolePrimary
		}
		name := fmt.Sprintf("n%d", i)
		c.nodes = append(c.nodes, &node{name: name, role: role, logPath: filepath.Join(spec.Dir, "nodes", name, "redis.log")})
		proxies[name] = []toxiproxy.Proxy{
			{Name: InternalProxyName(name), Listen: listenOn(nodeProxyBase + i), Upstream: net.JoinHostPort(name, strconv.Itoa(RedisPort)), Enabled: true},
			{Name: busProxyName(name), Listen: listenOn(busProxyBase + i), Upstream: net.JoinHostPort(name, strconv.Itoa(busPort)), Enabled: true},
		}
	}
	if spec.Resource {
		c.resource = &node{name: "resource", role: cluster.RoleResource, logPath: filepath.Join(spec.Dir, "nodes", "resource", "redis.log")}
	}
	if err := c.startToxiproxy(ctx, toxiImage, proxies); err != nil {
		return fmt.Errorf("the cluster system's internal network: %w", err)
	}
	// Redis Cluster announces an IP address, not a name.
	toxiIP := c.toxiIP
	c.slots = &clusterq.Deployment{}
	for i, n := range c.nodes {
		n.announce = net.JoinHostPort(toxiIP, strconv.Itoa(nodeProxyBase+i+1))
		c.slots.Nodes = append(c.slots.Nodes, clusterq.Node{Name: n.name, Host: toxiIP, Port: nodeProxyBase + i + 1, BusPort: busProxyBase + i + 1})
	}
	nodes := c.all()[:len(c.nodes)]
	if c.resource != nil {
		nodes = append(nodes, c.resource)
	}
	err := c.startAll(ctx, nodes, func(n *node) ctrSpec {
		if n == c.resource {
			return redisContainer(image, []string{"--appendonly", "no"}, nil)
		}
		m := c.slots.Nodes[c.nodeIndex(n.name)]
		args := append(persistenceArgs(spec.Persistence), clusterq.Args(spec, busPort)...)
		args = append(args, clusterq.AnnounceArgs(m.Host, m.Port, m.BusPort)...)
		var env map[string]string
		if spec.FakeClock {
			env = fakeClockEnv(preload)
		}
		return redisContainer(image, args, env)
	})
	if err != nil {
		return err
	}
	for i, n := range c.nodes {
		a := redis.NewClient(sentinelq.AdminOptions(n.addr()))
		c.admins = append(c.admins, a)
		c.slots.Nodes[i].Client = a
	}
	hctx, cancel := context.WithTimeout(ctx, SentinelAgreeTimeout)
	defer cancel()
	if err := c.slots.Form(hctx); err != nil {
		return fmt.Errorf("start the cluster system: %w", err)
	}
	if err := c.slots.WaitHealthy(hctx); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("start the cluster system: %w", err)
	}
	return nil
}

func listenOn(port int) string { return net.JoinHostPort("0.0.0.0", strconv.Itoa(port)) }

func (c *Cluster) nodeIndex(name string) int {
	for i, n := range c.nodes {
		if n.name == name {
			return i
		}
	}
	return -1
}

// PrimaryOf names the node that serves key's slot (clusterq.PrimaryOf).
func (c *Cluster) PrimaryOf(ctx context.Context, key string) (string, error) {
	if c.slots == nil {
		return "", fmt.Errorf("primary of %s: only the cluster system has slots", key)
	}
	return c.slots.PrimaryOf(ctx, key)
}
