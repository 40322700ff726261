package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/clusterq"
	"github.com/lockjepsen/lockjepsen/cluster/fakeclock"
)

// Host is the loopback address nodes bind to.
const Host = "127.0.0.1"

// Backend starts clusters as local processes.
type Backend struct{}

// Name is "local".
func (Backend) Name() string { return "local" }

// Cluster is a running local topology.
type Cluster struct {
	servers   []*Server
	resource  *Server
	dir       string
	spec      cluster.Spec
	fakeClock bool
	aof       *aofSampler // nil without persistence
	sentinels []*Server   // the sentinel system's redis-sentinel processes
	heldPorts *portPicker // the sentinel and cluster systems' ports, held from setup to start

	// The Redis Cluster system: its bus demuxes, and the shared queries
	// (the nodes as the others meet them).
	demuxes []*demux
	slots   *clusterq.Deployment

	adminMu sync.Mutex
	admins  map[string]*redis.Client // the backend's own clients, by process

	closeOnce sync.Once
}

// Start launches the topology of spec and waits until every node is ready
// (for the sentinel system: until WaitHealthy succeeds). On error, whatever
// was started is stopped again. If ctx is cancelled before Start is done,
// Start stops what it started and returns an error that wraps ctx's
// (errors.Is(err, context.Canceled)), with no node logs: the user gave up,
// nothing failed. A deadline of ctx that passes is a start that took too
// long, and its error carries the logs like any failure.
func (Backend) Start(ctx context.Context, spec cluster.Spec) (cluster.Cluster, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	spec = spec.WithDefaults()
	if spec.Descriptor().Server == cluster.ServerEtcd {
		c, err := StartEtcd(ctx, spec)
		if err != nil {
			return nil, err // not a nil *EtcdCluster inside a non-nil interface
		}
		return c, nil
	}
	c, err := startRedis(ctx, spec)
	if err != nil {
		return nil, startFailed(ctx, err)
	}
	return c, nil
}

// startFailed is the error of a start that failed with err: the
// cancellation instead if ctx was cancelled, whatever step noticed it.
func startFailed(ctx context.Context, err error) error {
	if cerr := cancelled(ctx); cerr != nil {
		return cerr
	}
	return err
}

// cancelled returns the error Start returns when ctx was cancelled (not
// timed out), or nil. It wraps ctx.Err() and, if one was given, the
// cancellation's cause.
func cancelled(ctx context.Context) error {
	err := ctx.Err()
	if !errors.Is(err, context.Canceled) {
		return nil
	}
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("start-up cancelled: %w (%w)", err, cause)
	}
	return fmt.Errorf("start-up cancelled: %w", err)
}

// startRedis is Start for the Redis systems.
func startRedis(ctx context.Context, spec cluster.Spec) (*Cluster, error) {
	binary, err := FindRedisServer()
	if err != nil {
		return nil, err
	}
	var sentinelBinary string
	if spec.Descriptor().HasSentinels() {
		if sentinelBinary, err = FindRedisSentinel(); err != nil {
			return nil, err
		}
	}
	c := &Cluster{dir: spec.Dir, spec: spec, fakeClock: spec.FakeClock}
	var kit *fakeclock.Kit
	if spec.FakeClock {
		if kit, err = prepareFakeClock(ctx); err != nil {
			return nil, err
		}
	}
	withClock := clockSetter(kit)
	newServer := func(name, role string) *Server {
		dir := nodeDir(spec, name)
		return &Server{
			Name: name, Role: role, Host: Host, Dir: dir,
			LogPath: filepath.Join(dir, "redis.log"),
			Args:    persistenceArgs(spec.Persistence), binary: binary,
		}
	}
	for i := 1; i <= spec.Nodes; i++ {
		s := newServer(fmt.Sprintf("n%d", i), nodeRole(spec, i))
		if err := withClock(s); err != nil {
			return nil, err
		}
		c.servers = append(c.servers, s)
	}
	if spec.Resource {
		c.resource = newServer("resource", cluster.RoleResource)
		c.resource.Args = nil // the resource is not under test; keep it plain
	}
	if err := c.startServers(ctx, spec, sentinelBinary, withClock); err != nil {
		c.Close(context.Background())
		return nil, err
	}
	if spec.Persistence != cluster.PersistNone {
		c.aof = startAOFSampler(c.servers)
	}
	return c, nil
}

// clockSetter prepares a server to run under the fake clock of kit: its
// clock file at offset 0 and rate 1, libfaketime in its environment, and
// its shared-memory files removed when it exits, a semaphore it left
// half-made by dying as it started included. Without a kit it does
// nothing.
func clockSetter(kit *fakeclock.Kit) func(*Server) error {
	return func(s *Server) error {
		if kit == nil {
			return nil
		}
		if err := os.MkdirAll(s.Dir, 0o755); err != nil {
			return fmt.Errorf("start node %s: %w", s.Name, err)
		}
		if err := fakeclock.Set(clockFile(s), 0, 1); err != nil {
			return fmt.Errorf("start node %s: %w", s.Name, err)
		}
		s.Env = kit.Env(clockFile(s))
		s.AfterExit = func(pid int, launched time.Time) {
			fakeclock.CleanupShm(pid)
			fakeclock.RemoveHalfMadeSems(launched)
		}
		return nil
	}
}

// nodeRole is the role node i (from 1) starts in, as the system's
// descriptor says: Sentinel's first node is its primary, Redis Cluster's
// first half are the primaries.
func nodeRole(spec cluster.Spec, i int) string {
	return spec.Descriptor().NodeRole(i, spec.Nodes)
}

// startServers starts the servers (and, on Sentinel, the sentinels; on
// Redis Cluster, forms the cluster) and records their PIDs.
func (c *Cluster) startServers(ctx context.Context, spec cluster.Spec, sentinelBinary string, withClock func(*Server) error) error {
	if reach := spec.Descriptor().Reach; reach == cluster.ReachSentinels || reach == cluster.ReachSlots {
		setup, start := c.setupSentinel, c.startSentinel
		if reach == cluster.ReachSlots {
			setup = func(spec cluster.Spec, _ string, _ func(*Server) error) error { return c.setupRedisCluster(spec) }
			start = c.startRedisCluster
		}
		if err := setup(spec, sentinelBinary, withClock); err != nil {
			return err
		}
		if c.resource != nil {
			if err := c.resource.Start(ctx); err != nil {
				return err
			}
		}
		// Recorded before the wait, so that a harness killed while
		// waiting still leaves the PIDs behind for orphan clean-up.
		if err := start(ctx, c.writeProcesses); err != nil {
			return err
		}
		if err := c.writeProcesses(); err != nil {
			return err
		}
	} else {
		for _, s := range c.all() {
			if err := s.Start(ctx); err != nil {
				return err
			}
		}
		if err := c.writeProcesses(); err != nil {
			return err
		}
	}
	// Cancelled after the last check above: still stop, so that a
	// cancelled Start never leaves a running cluster behind.
	return cancelled(ctx)
}

// prepareFakeClock builds (or finds in the user's cache) what a node needs
// to run with a movable clock.
func prepareFakeClock(ctx context.Context) (*fakeclock.Kit, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	kit, err := fakeclock.Prepare(ctx, filepath.Join(cache, "lockjepsen"))
	if err != nil {
		return nil, fmt.Errorf("clock faults: %w", err)
	}
	return kit, nil
}

func persistenceArgs(mode string) []string {
	switch mode {
	case cluster.PersistEverysec, cluster.PersistAlways:
		return []string{"--appendonly", "yes", "--appendfsync", mode}
	}
	return nil
}

func (c *Cluster) all() []*Server {
	all := append(append([]*Server{}, c.servers...), c.sentinels...)
	if c.resource != nil {
		all = append(all, c.resource)
	}
	return all
}

func nodeOf(s *Server) cluster.Node {
	return cluster.Node{Name: s.Name, Role: s.Role, Addr: s.Addr(), Announce: s.AnnounceAddr(), PID: s.PID(), LogPath: s.LogPath}
}

// nodesOf describes processes of either local system as clients and
// reports see them.
func nodesOf[P any](procs []P, of func(P) cluster.Node) []cluster.Node {
	out := make([]cluster.Node, len(procs))
	for i, p := range procs {
		out[i] = of(p)
	}
	return out
}

// resourceNode is Resource of either local system: nil without one.
func resourceNode(resource *Server) *cluster.Node {
	if resource == nil {
		return nil
	}
	n := nodeOf(resource)
	return &n
}

// Nodes are the nodes under test.
func (c *Cluster) Nodes() []cluster.Node { return nodesOf(c.servers, nodeOf) }

// Resource is the protected resource store, or nil.
func (c *Cluster) Resource() *cluster.Node { return resourceNode(c.resource) }

// Close stops every process. It waits for each to exit.
func (c *Cluster) Close(ctx context.Context) error {
	c.closeOnce.Do(func() {
		c.heldPorts.release()
		if c.aof != nil {
			c.aof.close()
		}
		c.closeAdmins()
		stop := func(servers []*Server) {
			var wg sync.WaitGroup
			for _, s := range servers {
				wg.Go(s.Stop)
			}
			wg.Wait()
		}
		// Sentinels first: otherwise they may see the nodes go and start
		// failing over, rewriting configuration files while the nodes
		// shut down.
		stop(c.sentinels)
		nodes := append([]*Server{}, c.servers...)
		if c.resource != nil {
			nodes = append(nodes, c.resource)
		}
		stop(nodes)
		for _, d := range c.demuxes {
			d.close()
		}
	})
	return nil
}

// writeProcesses tells the spec's recorder every process, so that a later
// run can find servers orphaned by a harness that was killed.
func (c *Cluster) writeProcesses() error {
	if c.spec.Processes == nil {
		return nil
	}
	return c.spec.Processes(nodesOf(c.all(), nodeOf))
}
