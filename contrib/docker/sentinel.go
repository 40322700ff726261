package docker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
	"github.com/moby/moby/client"
	"github.com/redis/go-redis/v9"
	"github.com/testcontainers/testcontainers-go"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/sentinelq"
)

// The sentinel system on containers: n1 starts as primary, n2..nN as its
// replicas, s1..sK run redis-sentinel, and a toxiproxy server container
// carries every internal link (see toxiproxy.go). Each container publishes
// its port on 127.0.0.1, which the harness dials (directly or through its
// client links); the cluster itself only ever uses the announced
// toxiproxy addresses. The docker Cluster is then a
// cluster.SentinelCluster and a nemesis.InternalNet.

// Ports of the internal proxies inside the toxiproxy container: node i's
// at nodeProxyBase+i, sentinel j's at sentinelProxyBase+j.
const (
	nodeProxyBase     = 10000
	sentinelProxyBase = 20000
)

// startSentinel starts the toxiproxy server and creates the internal
// proxies, then the nodes, then (once the primary lists every replica, so
// that the sentinels learn them on connecting) the sentinels, and waits
// until the topology is healthy.
func (c *Cluster) startSentinel(ctx context.Context, spec cluster.Spec, image, toxiImage, preload string) error {
	proxies, proxyPorts := c.layOutSentinel(spec)
	// The toxiproxy server first: every other process is configured with
	// its address. Its IP, not its name: Sentinel resolves a hostname in
	// its event loop on every reconnection, and one lookup on Docker's
	// DNS that hung under load stalled a sentinel.
	if err := c.startToxiproxy(ctx, toxiImage, proxies); err != nil {
		return fmt.Errorf("the sentinel system's internal network: %w", err)
	}
	for n, port := range proxyPorts {
		n.announce = net.JoinHostPort(c.toxiIP, strconv.Itoa(port))
	}
	if err := c.startSentinelNodes(ctx, spec, image, preload); err != nil {
		return err
	}
	return c.startSentinels(ctx, spec, image)
}

// layOutSentinel names the sentinel system's nodes (n1 the primary),
// sentinels and resource, and gives each node and sentinel its internal
// proxy: the proxies the toxiproxy server starts with, and each one's
// port inside it.
func (c *Cluster) layOutSentinel(spec cluster.Spec) (map[string][]toxiproxy.Proxy, map[*node]int) {
	proxies := map[string][]toxiproxy.Proxy{}
	proxyPorts := map[*node]int{}
	addProxy := func(n *node, port, upstreamPort int) {
		proxies[n.name] = []toxiproxy.Proxy{{
			Name:     InternalProxyName(n.name),
			Listen:   listenOn(port),
			Upstream: net.JoinHostPort(n.name, strconv.Itoa(upstreamPort)),
			Enabled:  true,
		}}
		proxyPorts[n] = port
	}
	for i := 1; i <= spec.Nodes; i++ {
		role := cluster.RoleReplica
		if i == 1 {
			role = cluster.RolePrimary
		}
		n := &node{name: fmt.Sprintf("n%d", i), role: role, logPath: filepath.Join(spec.Dir, "nodes", fmt.Sprintf("n%d", i), "redis.log")}
		addProxy(n, nodeProxyBase+i, RedisPort)
		c.nodes = append(c.nodes, n)
	}
	for i := 1; i <= spec.Sentinels; i++ {
		n := &node{name: fmt.Sprintf("s%d", i), role: cluster.RoleSentinel, logPath: filepath.Join(spec.Dir, "nodes", fmt.Sprintf("s%d", i), "sentinel.log")}
		addProxy(n, sentinelProxyBase+i, SentinelPort)
		c.sentinels = append(c.sentinels, n)
	}
	if spec.Resource {
		c.resource = &node{name: "resource", role: cluster.RoleResource, logPath: filepath.Join(spec.Dir, "nodes", "resource", "redis.log")}
	}
	return proxies, proxyPorts
}

// startSentinelNodes starts the Redis nodes (n1 primary, the others its
// replicas, each announcing its internal proxy) and the resource.
func (c *Cluster) startSentinelNodes(ctx context.Context, spec cluster.Spec, image, preload string) error {
	primary := c.nodes[0]
	ph, pp, _ := net.SplitHostPort(primary.announce)
	nodes := c.nodes
	if c.resource != nil {
		nodes = append(slices.Clip(nodes), c.resource)
	}
	return c.startAll(ctx, nodes, func(n *node) ctrSpec {
		if n == c.resource {
			return redisContainer(image, []string{"--appendonly", "no"}, nil)
		}
		host, port, _ := net.SplitHostPort(n.announce)
		args := append(persistenceArgs(spec.Persistence),
			// The primary lists its replicas by these, and sentinels
			// reach replicas only through what the primary lists.
			"--replica-announce-ip", host,
			"--replica-announce-port", port,
			// Diskless sync waits 5 s by default for more replicas to
			// join; a rejoining node should not.
			"--repl-diskless-sync-delay", "0",
		)
		args = append(args, spec.MinReplicasArgs()...)
		// replicaof lives in the file only: Sentinel rewrites it there
		// after a failover (CONFIG REWRITE), and a command-line replicaof
		// would override the rewrite when a killed node's container is
		// started again.
		conf := "# Written by lockjepsen; rewritten by Sentinel (CONFIG REWRITE) after failovers.\n"
		if n != primary {
			conf += fmt.Sprintf("replicaof %s %s\n", ph, pp)
		}
		var env map[string]string
		if spec.FakeClock {
			env = fakeClockEnv(preload)
		}
		s := ctrSpec{image: image, cmd: redisCmd(nodeConfigFile, args), env: env, port: RedisPort}
		s.files = append(s.files, testcontainers.ContainerFile{Reader: strings.NewReader(conf), ContainerFilePath: nodeConfigFile, FileMode: 0o666})
		s.withClockFile()
		return s
	})
}

// startSentinels starts the sentinels once the primary lists every
// replica, and waits until they agree on a healthy topology.
func (c *Cluster) startSentinels(ctx context.Context, spec cluster.Spec, image string) error {
	primary := c.nodes[0]
	ph, pp, _ := net.SplitHostPort(primary.announce)
	c.dep = &sentinelq.Deployment{MasterName: cluster.MasterName, FailoverTimeout: spec.FailoverTimeout}
	proc := func(n *node) sentinelq.Proc {
		a := redis.NewClient(sentinelq.AdminOptions(n.addr()))
		c.admins = append(c.admins, a)
		return sentinelq.Proc{Name: n.name, Announce: n.announce, Client: a}
	}
	for _, n := range c.nodes {
		c.dep.Nodes = append(c.dep.Nodes, proc(n))
	}
	// A sentinel learns the replicas from the primary's INFO, which it asks
	// for at once on connecting and then only every 10 s: start the
	// sentinels once the primary lists every replica.
	rctx, cancel := context.WithTimeout(ctx, SentinelAgreeTimeout)
	err := sentinelq.Poll(rctx, "replicas connected to the primary", func(ctx context.Context) error {
		return c.dep.CheckReplication(ctx, primary.name)
	})
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// The nodes' logs say whether the replicas were syncing, and
		// whether the primary was up at all.
		return fmt.Errorf("start the sentinel system: %w\n%s", err, logTails(c, c.nodes))
	}

	err = c.startAll(ctx, c.sentinels, func(n *node) ctrSpec {
		host, port, _ := net.SplitHostPort(n.announce)
		// Every process is known by the toxiproxy server's IP; the
		// announced address is the sentinel's internal proxy.
		conf := cluster.SentinelConf(spec, ph, pp, host, port)
		return ctrSpec{
			image: image,
			cmd: []string{"redis-sentinel", sentinelConfigFile,
				"--port", strconv.Itoa(SentinelPort), "--bind", "0.0.0.0", "--protected-mode", "no",
				"--logfile", "", "--daemonize", "no"},
			port: SentinelPort,
			// Sentinel rewrites its file, and the directory must let it.
			files: []testcontainers.ContainerFile{{Reader: strings.NewReader(conf), ContainerFilePath: sentinelConfigFile, FileMode: 0o666}},
		}
	})
	if err != nil {
		return err
	}
	for _, n := range c.sentinels {
		c.dep.Sentinels = append(c.dep.Sentinels, proc(n))
	}
	hctx, cancel := context.WithTimeout(ctx, SentinelAgreeTimeout)
	defer cancel()
	if err := c.dep.WaitHealthy(hctx); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("start the sentinel system: the sentinels do not agree: %w\n%s", err, logTails(c, c.sentinels))
	}
	return nil
}

// startToxiproxy starts the toxiproxy server container, with the given
// proxies, under the name InternalHost, makes it the cluster's internal
// network, and learns its IP on the private network (toxiIP), which the
// cluster's processes are told and announce.
func (c *Cluster) startToxiproxy(ctx context.Context, image string, proxies map[string][]toxiproxy.Proxy) error {
	c.toxi = &node{name: "toxiproxy", role: "toxiproxy", logPath: filepath.Join(c.dir, "nodes", "toxiproxy", "toxiproxy.log")}
	var in *internalNet
	ready := func(ctx context.Context, n *node) error {
		id := n.c.GetContainerID()
		in = newInternalNet(n.addr(), proxies, true, func(ctx context.Context) error {
			if err := restartContainer(ctx, c.eng.cli, "toxiproxy", id); err != nil {
				return err
			}
			return c.checkToxiIP(ctx)
		})
		in.check = checkOf(c.eng.cli, id)
		return in.waitReady(ctx)
	}
	s := ctrSpec{image: image, cmd: []string{"-host=0.0.0.0"}, port: ToxiproxyAPIPort, aliases: []string{InternalHost}}
	if err := c.startNode(ctx, c.toxi, s, ready); err != nil {
		return err
	}
	ip, err := c.toxi.c.ContainerIP(ctx)
	if err != nil || ip == "" {
		return fmt.Errorf("the toxiproxy container's address on network %s: %q %v", c.net.Name, ip, err)
	}
	c.toxiIP, c.internal = ip, in
	return nil
}

// checkToxiIP checks that a restarted toxiproxy server is back on the IP
// that every process announces. Docker gives a restarted container its
// address again unless another container took it meanwhile, which none
// of the cluster's should (the nodes keep theirs while killed).
func (c *Cluster) checkToxiIP(ctx context.Context) error {
	ip, err := c.toxi.c.ContainerIP(ctx)
	if err != nil {
		return fmt.Errorf("the restarted toxiproxy container's address: %w", err)
	}
	if ip != c.toxiIP {
		return fmt.Errorf("the restarted toxiproxy container is on %q, not on %s, which every process of the cluster announces: the cluster's internal links are gone", ip, c.toxiIP)
	}
	return nil
}

// startAll starts nodes at once, each with its spec, and waits until each
// answers PING.
func (c *Cluster) startAll(ctx context.Context, nodes []*node, specOf func(*node) ctrSpec) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { errs[i] = c.startNode(ctx, n, specOf(n), c.waitPing) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Files inside the containers of the sentinel system.
const (
	nodeConfigFile     = "/data/redis.conf"
	sentinelConfigFile = "/data/sentinel.conf"
)

func fakeClockEnv(preload string) map[string]string {
	return map[string]string{
		"LD_PRELOAD":                   preload,
		"FAKETIME_TIMESTAMP_FILE":      ClockFile,
		"FAKETIME_NO_CACHE":            "1",
		"FAKETIME_DONT_FAKE_MONOTONIC": "1",
	}
}

// logTails are the last lines of each node's log, for an error.
func logTails(c *Cluster, nodes []*node) string {
	var b strings.Builder
	for _, n := range nodes {
		fmt.Fprintf(&b, "--- log of %s:\n%s\n", n.name, c.logTail(n, 10))
	}
	return b.String()
}

func restartContainer(ctx context.Context, cli client.APIClient, name, id string) error {
	zero := 0
	return apiCall(ctx, "restart", name, func(ctx context.Context) error {
		_, err := cli.ContainerRestart(ctx, id, client.ContainerRestartOptions{Timeout: &zero})
		return err
	})
}

// MasterName is the name the sentinels monitor the primary under.
func (c *Cluster) MasterName() string { return cluster.MasterName }

// Sentinels are the sentinel containers (none for other systems).
func (c *Cluster) Sentinels() []cluster.Node { return infos(c.sentinels) }

var errNoSentinels = errors.New("the cluster has no sentinels (only the sentinel system has)")

// WaitHealthy polls until replication and the sentinels are healthy (the
// cluster system: until every node sees a healthy cluster).
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	if c.slots != nil {
		return c.slots.WaitHealthy(ctx)
	}
	return c.containerCluster.WaitHealthy(ctx)
}

// InternalRestarts counts the times the toxiproxy server did not answer in
// time and was restarted (every internal connection dropped once).
func (c *Cluster) InternalRestarts() int {
	if c.internal == nil {
		return 0
	}
	c.internal.mu.Lock()
	defer c.internal.mu.Unlock()
	return c.internal.restarts
}

// whileDisabled disables a node's internal proxies, which closes their
// connections and loses the bytes in flight in them (toxiproxy), runs fn,
// then enables them again, as a crashed machine loses what the network had
// not delivered. A fault on the proxies stays.
func (in *internalNet) whileDisabled(ctx context.Context, node string, fn func() error) error {
	names, err := in.proxiesOf(node)
	if err != nil {
		return err
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	set := func(enabled bool) error {
		for _, name := range names {
			err := call(ctx, fmt.Sprintf("enable %s: %t", name, enabled), func() error {
				p, err := in.cli.Proxy(name)
				if err != nil {
					return err
				}
				if enabled {
					return p.Enable()
				}
				return p.Disable()
			})
			if err != nil {
				return err
			}
		}
		return nil
	}
	if err := set(false); err != nil {
		_ = set(true)
		return in.recoverAfter(ctx, fmt.Errorf("drop the connections of %s: %w", node, err))
	}
	ferr := fn()
	if err := set(true); err != nil {
		return errors.Join(ferr, in.recoverAfter(ctx, fmt.Errorf("enable the links of %s again: %w", node, err)))
	}
	return ferr
}
