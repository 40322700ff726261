package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/proxy"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/nemesis"
	"github.com/lockjepsen/lockjepsen/runfile"
	"github.com/lockjepsen/lockjepsen/workloads"
)

// system is the started system as the later phases see it.
type system struct {
	cl    cluster.Cluster
	sc    cluster.SentinelCluster // nil but on the sentinel system
	slots cluster.SlotCluster     // nil but on the Redis Cluster system
	// primaries follows the node that is primary where failovers change
	// it (sentinel, Redis Cluster); nil elsewhere.
	primaries *primarySource
	mesh      *proxy.Mesh
	// targets are the processes clients reach: the nodes, and the
	// sentinels that tell them the primary.
	targets   []cluster.Node
	fakeClock bool
}

// startSystem starts the configured system on its backend and records
// what it is in run.json.
func (r *runner) startSystem(ctx context.Context, mesh *proxy.Mesh) (*system, error) {
	cfg := r.cfg
	backend := cfg.backend()
	r.info.Backend = backend.Name()
	spec := cfg.Spec(r.dir)
	spec.Processes = func(nodes []cluster.Node) error { return runfile.WriteNodes(r.dir, nodes) }
	if cfg.system().Peers != "" {
		// The local backend routes the cluster's own traffic through these
		// in-process links. The container backends ignore spec.Mesh (their
		// processes cannot reach the host's loopback proxies) and carry
		// that traffic through a toxiproxy server of their own instead,
		// which the nemesis cuts through nemesis.InternalNet.
		spec.Mesh = cluster.MeshFunc(func(from, to, upstream string) (string, error) {
			l, err := mesh.Add(from, to, upstream, "")
			if err != nil {
				return "", err
			}
			return l.Addr(), nil
		})
	}
	r.say("starting %s system (%s backend) in %s", cfg.System, backend.Name(), r.dir)
	cl, err := backend.Start(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("start the %s system: %w", cfg.System, err)
	}
	sys := &system{cl: cl, mesh: mesh, targets: cl.Nodes(), fakeClock: spec.FakeClock}
	// Only a system whose clients reach it through sentinels has them,
	// whatever methods the backend's cluster type has.
	switch cfg.system().Reach {
	case cluster.ReachSentinels:
		if sys.sc, _ = cl.(cluster.SentinelCluster); sys.sc == nil {
			cl.Close(context.Background())
			return nil, fmt.Errorf("the %s backend does not run Sentinel", backend.Name())
		}
		sys.targets = append(sys.targets, sys.sc.Sentinels()...)
		sys.primaries = &primarySource{who: "the sentinels", what: "primary", primary: sys.sc.Primary, healthy: sys.sc.WaitHealthy}
	case cluster.ReachSlots:
		if sys.slots, _ = cl.(cluster.SlotCluster); sys.slots == nil {
			cl.Close(context.Background())
			return nil, fmt.Errorf("the %s backend does not run Redis Cluster", backend.Name())
		}
		key := lockKey(0)
		if d, err := locks.Lookup(cfg.Lock); err == nil && d.ServerKey != nil && len(cfg.Client) == 0 {
			key = d.ServerKey(key) // the lock's own key, in its own slot
		}
		sys.primaries = &primarySource{who: "the cluster's nodes", what: "primary of " + key + "'s slot", key: key,
			primary: func(ctx context.Context) (string, error) { return sys.slots.PrimaryOf(ctx, key) },
			healthy: sys.slots.WaitHealthy}
	}
	if err := checkAddresses(cl, sys.sc, cfg.AllowRemote); err != nil {
		cl.Close(context.Background())
		return nil, &UsageError{err}
	}
	r.info.Nodes, r.info.Resource = sys.targets, cl.Resource()
	if version := versionOf[cfg.system().Server]; version != nil {
		version(ctx, cl.Nodes()[0].Addr, r.info)
	}
	return sys, nil
}

// addClientLinks gives every client its own link to every node and
// sentinel when a fault of the run acts on links, so that a fault can cut
// one client's link and not another's. Without such faults clients dial
// directly: the proxies cost CPU that the server under test should have.
func (r *runner) addClientLinks(sys *system) error {
	if !r.cfg.needsProxies() {
		return nil
	}
	for w := 0; w < r.cfg.Clients; w++ {
		for _, n := range sys.targets {
			if _, err := sys.mesh.Add(nemesis.ClientLinkName(w), n.Name, n.Addr, ""); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkAddresses refuses to let clients dial anything but loopback unless
// the user allowed remote nodes: a test's traffic must not leave the
// machine by mistake (a stale compose file, a typo in a topology file).
func checkAddresses(cl cluster.Cluster, sc cluster.SentinelCluster, allowRemote bool) error {
	if allowRemote {
		return nil
	}
	nodes := cl.Nodes()
	if res := cl.Resource(); res != nil {
		nodes = append(nodes, *res)
	}
	if sc != nil {
		nodes = append(nodes, sc.Sentinels()...)
	}
	for _, n := range nodes {
		host, _, err := net.SplitHostPort(n.Addr)
		if err != nil {
			return fmt.Errorf("node %s has no host:port address (%q): %w", n.Name, n.Addr, err)
		}
		ip := net.ParseIP(host)
		if host == "localhost" || (ip != nil && ip.IsLoopback()) {
			continue
		}
		return fmt.Errorf("refusing to dial node %s at %s: only loopback addresses are dialed unless remote nodes are allowed (Config.AllowRemote)", n.Name, n.Addr)
	}
	return nil
}

func (r *runner) clientOptions(addr string, pool int) *redis.Options {
	return &redis.Options{
		Addr: addr,
		// Retrying would hide unknown outcomes (and could apply a command
		// twice); the history must see every attempt as it happened.
		MaxRetries:            -1,
		DialTimeout:           r.cfg.OpTimeout,
		ReadTimeout:           r.cfg.OpTimeout,
		WriteTimeout:          r.cfg.OpTimeout,
		ContextTimeoutEnabled: true,
		PoolSize:              pool,
		MinIdleConns:          0,
		DisableIdentity:       true,
	}
}

// lockerFactory gives each client process one connection per node, through
// its worker's links when there are any (a crashed client's replacement
// reuses the worker's links).
func (r *runner) lockerFactory(mesh *proxy.Mesh, nodes []cluster.Node) workloads.LockerFactory {
	return func(process int) (locks.Locker, io.Closer, error) {
		var conns []locks.Conn
		var closers closeAll
		for _, n := range nodes {
			addr := n.Addr
			if link := mesh.Find(nemesis.ClientLinkName(process%r.cfg.Clients), n.Name); link != nil {
				addr = link.Addr()
			}
			if r.cfg.system().Reach == cluster.ReachAddresses {
				// The lock makes its own client from the addresses.
				conns = append(conns, locks.Conn{Name: n.Name, Addr: addr})
				continue
			}
			rdb := redis.NewClient(r.clientOptions(addr, 2))
			rdb.AddHook(workloads.SendHook{})
			closers = append(closers, rdb)
			conns = append(conns, locks.Conn{Name: n.Name, Client: rdb, Addr: addr})
		}
		l, err := r.newLock(conns, process)
		if err != nil {
			closers.Close()
			return nil, nil, err
		}
		if c, ok := l.(io.Closer); ok {
			closers = append(closers, c)
		}
		return l, closers, nil
	}
}

// closeAll closes several connections as one.
type closeAll []io.Closer

func (c closeAll) Close() error {
	var errs []error
	for _, x := range c {
		errs = append(errs, x.Close())
	}
	return errors.Join(errs...)
}

// needsProxies reports whether a fault of the run needs clients to dial
// through proxies; the faults' descriptors decide.
func (c *Config) needsProxies() bool {
	// A lock that dials the nodes itself (etcd's) keeps background
	// traffic (keep-alives) that a paused client must stop too, which
	// takes links of its own to freeze.
	return nemesis.NeedsLinks(c.faultsUsed(), c.system().Reach == cluster.ReachAddresses)
}

func (c *Config) needsFakeClock() bool {
	if nemesis.NeedsFakeClock(c.Nemesis) {
		return true
	}
	for _, st := range c.steps() {
		if nemesis.NeedsFakeClock([]string{st.Action.Fault}) {
			return true
		}
	}
	return false
}
