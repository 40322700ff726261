package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/cluster"
)

// DefaultTopologyFile is the topology of the top-level docker-compose.yml.
const DefaultTopologyFile = "docker/compose/topology.json"

// Topology describes a running compose deployment: the file a compose
// setup provides (docker/compose/topology.json for docker-compose.yml).
type Topology struct {
	// Toxiproxy is the host:port of the toxiproxy server's HTTP API that
	// the node addresses go through ("" if none). The sentinel system's
	// internal proxies are cut through it.
	Toxiproxy string `json:"toxiproxy,omitempty"`
	// ToxiproxyContainer is the toxiproxy server's container, restarted if
	// its API stops answering while a fault is healed ("" if none).
	ToxiproxyContainer string `json:"toxiproxy_container,omitempty"`
	// Persistence of the nodes: none, everysec or always.
	Persistence string `json:"persistence"`
	// FakeClock says whether the nodes run under libfaketime with their
	// offset file at ClockFile.
	FakeClock bool                      `json:"fake_clock"`
	Resource  *TopologyNode             `json:"resource,omitempty"`
	Systems   map[string]TopologySystem `json:"systems"`
}

// TopologySystem is one system of a deployment.
type TopologySystem struct {
	Nodes      []TopologyNode `json:"nodes"`
	Sentinels  []TopologyNode `json:"sentinels,omitempty"`
	MasterName string         `json:"master_name,omitempty"`
}

// TopologyNode is one server: the address clients dial (loopback), the
// container the nemesis pauses and kills, and its toxiproxy proxy. In the
// sentinel system every process also has an internal proxy, which carries
// the cluster's own traffic into it, and announces that proxy's address.
type TopologyNode struct {
	Name      string `json:"name"`
	Role      string `json:"role"`
	Addr      string `json:"addr"`
	Container string `json:"container"`
	Proxy     string `json:"proxy,omitempty"`
	// Announce is the host:port the rest of the cluster knows the process
	// by (replicaof, replica-announce-*, sentinel announce-*): its
	// internal proxy's address on the deployment's network.
	Announce string `json:"announce,omitempty"`
	// InternalProxy is the name of its internal proxy on the toxiproxy
	// server.
	InternalProxy string `json:"internal_proxy,omitempty"`
}

// ReadTopology reads and checks a topology file.
func ReadTopology(path string) (*Topology, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("topology: %w (bring the deployment up with docker-compose, and pass its topology file)", err)
	}
	var t Topology
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("topology %s: %w", path, err)
	}
	for name, sys := range t.Systems {
		if len(sys.Nodes) == 0 {
			return nil, fmt.Errorf("topology %s: system %q has no nodes", path, name)
		}
		for _, n := range append(append([]TopologyNode{}, sys.Nodes...), sys.Sentinels...) {
			if n.Name == "" || n.Addr == "" || n.Container == "" {
				return nil, fmt.Errorf("topology %s: system %q: every node needs name, addr and container (%+v)", path, name, n)
			}
		}
		if d, err := cluster.LookupSystem(name); err != nil || !d.HasSentinels() {
			continue
		}
		if len(sys.Sentinels) == 0 {
			return nil, fmt.Errorf("topology %s: system %q has no sentinels", path, name)
		}
		if sys.MasterName != "" && sys.MasterName != cluster.MasterName {
			return nil, fmt.Errorf("topology %s: system %q: master_name %q: the harness's clients ask the sentinels for %q", path, name, sys.MasterName, cluster.MasterName)
		}
		if t.Toxiproxy == "" {
			return nil, fmt.Errorf("topology %s: system %q needs the toxiproxy API address (toxiproxy) that its internal proxies are cut through", path, name)
		}
		for _, n := range append(append([]TopologyNode{}, sys.Nodes...), sys.Sentinels...) {
			if _, _, err := net.SplitHostPort(n.Announce); err != nil || n.InternalProxy == "" {
				return nil, fmt.Errorf("topology %s: system %q: %s needs announce (host:port, its internal proxy's address) and internal_proxy (the proxy's name): %+v", path, name, n.Name, n)
			}
		}
	}
	return &t, nil
}

// ComposeBackend runs against a deployment already brought up with
// docker-compose (it starts and removes nothing). Start flushes the nodes'
// data, so that a run does not inherit the keys of an earlier one. As on
// the docker backend, cluster.Spec.Mesh is ignored: the sentinel system's
// internal links are the toxiproxy server's (ComposeCluster.CutInternal).
type ComposeBackend struct {
	// TopologyFile is the deployment's topology; "" means
	// DefaultTopologyFile.
	TopologyFile string
}

// Name is "compose".
func (ComposeBackend) Name() string { return "compose" }

// ComposeCluster is a compose deployment seen as a cluster.Cluster, a
// cluster.Pauser, Killer and ClockSetter; with the sentinel system also a
// cluster.SentinelCluster and a nemesis.InternalNet.
type ComposeCluster struct {
	containerCluster[TopologyNode]
	resource *TopologyNode

	// The sentinel system's sentinels, and its clients for configuring
	// the deployment.
	sentinels []TopologyNode
	admins    []*redis.Client

	closeOnce sync.Once
	closeErr  error
}

// Start reads the topology, checks that the deployment can run the spec,
// and waits until every node answers PING.
func (b ComposeBackend) Start(ctx context.Context, spec cluster.Spec) (cluster.Cluster, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	path := b.TopologyFile
	if path == "" {
		path = DefaultTopologyFile
	}
	topo, err := ReadTopology(path)
	if err != nil {
		return nil, err
	}
	spec = spec.WithDefaults()
	sys, err := topo.systemFor(path, spec)
	if err != nil {
		return nil, err
	}
	eng, err := connect(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("interrupted while starting: %w", ctx.Err())
		}
		return nil, err
	}
	c := &ComposeCluster{containerCluster: containerCluster[TopologyNode]{
		eng: eng, nodes: append([]TopologyNode(nil), sys.Nodes...), fakeClock: topo.FakeClock,
		noClock: "the compose deployment does not run libfaketime",
		noLinks: "only the sentinel system has internal traffic",
	}}
	// The deployment is not ours to remove: a failed or cancelled start
	// heals it (Close) and leaves it running.
	fail := func(err error) (cluster.Cluster, error) {
		cerr := c.Close(ctx)
		if ctx.Err() != nil {
			if cerr != nil {
				return nil, fmt.Errorf("interrupted while starting: %w; healing the deployment then failed: %v", ctx.Err(), cerr)
			}
			return nil, fmt.Errorf("interrupted while starting (the deployment was healed and left running): %w", ctx.Err())
		}
		if cerr != nil {
			err = fmt.Errorf("%w\n(healing the deployment then failed too: %v)", err, cerr)
		}
		return nil, err
	}
	if spec.Descriptor().HasSentinels() {
		c.sentinels = sys.Sentinels
		if spec.Resource {
			c.resource = topo.Resource
		}
		if err := c.startSentinel(ctx, spec, topo); err != nil {
			return fail(err)
		}
		if ctx.Err() != nil {
			return fail(ctx.Err())
		}
		return c, nil
	}
	if spec.Resource {
		c.resource = topo.Resource
	}
	all := append([]TopologyNode{}, c.nodes...)
	if c.resource != nil {
		all = append(all, *c.resource)
	}
	for _, n := range all {
		if err := c.prepare(ctx, n); err != nil {
			return fail(err)
		}
	}
	if ctx.Err() != nil {
		return fail(ctx.Err())
	}
	return c, nil
}

// systemFor is the topology's system that runs spec, or why the deployment
// (read from path) cannot run it.
func (topo *Topology) systemFor(path string, spec cluster.Spec) (TopologySystem, error) {
	sys, ok := topo.Systems[spec.System]
	switch {
	case !ok:
		return sys, fmt.Errorf("topology %s has no %q system", path, spec.System)
	case len(sys.Nodes) != spec.Nodes:
		return sys, fmt.Errorf("topology %s: system %q has %d nodes, the run asks for %d", path, spec.System, len(sys.Nodes), spec.Nodes)
	case spec.FakeClock && !topo.FakeClock:
		return sys, fmt.Errorf("clock faults on the compose backend: %w: topology %s says the nodes do not run under libfaketime (fake_clock false)", ErrNoFakeClock, path)
	case spec.Persistence != cluster.PersistNone && spec.Persistence != topo.Persistence:
		return sys, fmt.Errorf("the run asks for persistence %q but the compose deployment runs %q (topology %s)", spec.Persistence, topo.Persistence, path)
	case spec.Resource && topo.Resource == nil:
		return sys, fmt.Errorf("the counter workload needs a resource node, and topology %s has none", path)
	case spec.Descriptor().HasSentinels() && len(sys.Sentinels) != spec.Sentinels:
		return sys, fmt.Errorf("topology %s: system %q has %d sentinels, the run asks for %d", path, spec.System, len(sys.Sentinels), spec.Sentinels)
	}
	return sys, nil
}

// prepare checks that a node's container runs, waits for PING, and flushes
// its data (and any clock offset an earlier run left).
func (c *ComposeCluster) prepare(ctx context.Context, n TopologyNode) error {
	if err := c.ensureRunning(ctx, n); err != nil {
		return err
	}
	rc := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1, DisableIdentity: true})
	defer rc.Close()
	fctx, fcancel := context.WithTimeout(ctx, 5*time.Second)
	defer fcancel()
	if err := rc.FlushAll(fctx).Err(); err != nil {
		return fmt.Errorf("node %s: FLUSHALL before the run: %w", n.Name, err)
	}
	return nil
}

// ensureRunning checks that a node's container runs (starting or unpausing
// one an interrupted run left), resets its clock, and waits for PING.
func (c *ComposeCluster) ensureRunning(ctx context.Context, n TopologyNode) error {
	ictx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	st, err := c.eng.cli.ContainerInspect(ictx, n.Container, inspectOpts)
	if err != nil {
		return fmt.Errorf("node %s: container %s: %w (is the compose deployment up? docker-compose -p lockjepsen up -d)", n.Name, n.Container, err)
	}
	if st.Container.State == nil || !st.Container.State.Running || st.Container.State.Paused {
		// A killed or paused node of an interrupted run: bring it back.
		if st.Container.State != nil && st.Container.State.Paused {
			_ = unpauseContainer(c.eng.cli, n.Name, n.Container)
		} else if err := startContainer(ctx, c.eng.cli, n.Name, n.Container); err != nil {
			return err
		}
	}
	if c.fakeClock {
		if err := setClock(c.eng.cli, n.Name, n.Container, 0); err != nil {
			return err
		}
	}
	if err := waitReady(ctx, n.Addr, checkOf(c.eng.cli, n.Container)); err != nil {
		return fmt.Errorf("node %s at %s: %w", n.Name, n.Addr, err)
	}
	return nil
}

func (n TopologyNode) info() cluster.Node {
	role := n.Role
	if role == "" {
		role = cluster.RoleNode
	}
	return cluster.Node{Name: n.Name, Role: role, Addr: n.Addr, Announce: n.Announce}
}

func (n TopologyNode) containerID() string { return n.Container }

// Resource is the resource node, or nil.
func (c *ComposeCluster) Resource() *cluster.Node {
	if c.resource == nil {
		return nil
	}
	n := c.resource.info()
	return &n
}

// Close leaves the deployment running but heals it: the internal proxies
// lose every toxic (Close fails if one remains), paused containers are
// unpaused, killed ones started again, clocks reset.
func (c *ComposeCluster) Close(ctx context.Context) error {
	c.closeOnce.Do(func() {
		var errs []error
		// The caller's context may be cancelled (Ctrl-C): healing must
		// happen anyway, with a deadline of its own.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if c.internal != nil {
			if err := c.internal.healAll(ctx); err != nil {
				errs = append(errs, err)
			} else if left, err := c.internal.leftovers(ctx); err != nil || len(left) > 0 {
				errs = append(errs, fmt.Errorf("toxics left on the internal proxies after healing: %v %v", left, err))
			}
		}
		for _, a := range c.admins {
			a.Close()
		}
		for _, n := range append(append([]TopologyNode{}, c.nodes...), c.sentinels...) {
			st, err := c.eng.cli.ContainerInspect(ctx, n.Container, inspectOpts)
			if err != nil || st.Container.State == nil {
				continue
			}
			if st.Container.State.Paused {
				errs = append(errs, unpauseContainer(c.eng.cli, n.Name, n.Container))
			} else if !st.Container.State.Running {
				errs = append(errs, startContainer(ctx, c.eng.cli, n.Name, n.Container))
			}
			if c.fakeClock {
				errs = append(errs, setClock(c.eng.cli, n.Name, n.Container, 0))
			}
		}
		c.eng.close()
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}
