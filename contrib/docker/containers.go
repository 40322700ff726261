package docker

import (
	"context"
	"fmt"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/proxy"
	"github.com/lockjepsen/lockjepsen/cluster/sentinelq"
)

// containerNode is a node of either container backend: a container this
// package starts (*node) or one of a compose deployment (TopologyNode).
type containerNode interface {
	info() cluster.Node
	containerID() string
}

// containerFaults are what the clusters of both container backends do to
// their containers: pause, kill and move the clocks.
type containerFaults interface {
	cluster.Pauser
	cluster.Killer
	cluster.ClockSetter
}

var (
	_ containerFaults = (*Cluster)(nil)
	_ containerFaults = (*ComposeCluster)(nil)
)

// containerCluster is what the clusters of both container backends share:
// the faults on a node's container and the sentinel system's queries and
// internal links, which act the same whoever started the containers.
type containerCluster[N containerNode] struct {
	eng       *engine
	nodes     []N
	fakeClock bool
	// noClock says why SetClock fails when fakeClock is off, and noLinks
	// why CutInternal and HealInternal fail when internal is nil: each
	// backend words it for its own deployments.
	noClock, noLinks string
	// notReady, if set, makes the error of a restarted node that does not
	// answer PING: the docker backend adds the tail of the node's log.
	notReady func(n N, err error) error

	// The sentinel system: the toxiproxy server that carries the internal
	// links, and the shared queries (nil outside it; the docker cluster
	// system has internal too).
	internal *internalNet
	dep      *sentinelq.Deployment
}

func (c *containerCluster[N]) node(name string) (N, error) {
	for _, n := range c.nodes {
		if n.info().Name == name {
			return n, nil
		}
	}
	var none N
	return none, fmt.Errorf("no node %q", name)
}

// Nodes are the nodes under test.
func (c *containerCluster[N]) Nodes() []cluster.Node { return infos(c.nodes) }

func infos[N containerNode](ns []N) []cluster.Node {
	out := make([]cluster.Node, len(ns))
	for i, n := range ns {
		out[i] = n.info()
	}
	return out
}

// onContainer runs op on the container of the node called name.
func (c *containerCluster[N]) onContainer(name string, op func(id string) error) error {
	n, err := c.node(name)
	if err != nil {
		return err
	}
	return op(n.containerID())
}

// Pause freezes a node's container (docker pause: the cgroup freezer).
// Connections still open, reads time out.
func (c *containerCluster[N]) Pause(name string) error {
	return c.onContainer(name, func(id string) error { return pauseContainer(c.eng.cli, name, id) })
}

// Resume unpauses a node's container.
func (c *containerCluster[N]) Resume(name string) error {
	return c.onContainer(name, func(id string) error { return unpauseContainer(c.eng.cli, name, id) })
}

// Kill sends SIGKILL to a node's container and waits until it has stopped
// (killNode). The container, its published port and its data stay for
// Restart. loseUnsynced is refused (ErrLoseUnsynced) before anything is
// killed.
func (c *containerCluster[N]) Kill(name string, loseUnsynced bool) error {
	return c.onContainer(name, func(id string) error { return killNode(c.eng.cli, c.internal, name, id, loseUnsynced) })
}

// Restart starts a killed node's container again (same port, same data)
// and waits until it answers PING.
func (c *containerCluster[N]) Restart(ctx context.Context, name string) error {
	n, err := c.node(name)
	if err != nil {
		return err
	}
	if err := startContainer(ctx, c.eng.cli, name, n.containerID()); err != nil {
		return err
	}
	err = waitReady(ctx, n.info().Addr, checkOf(c.eng.cli, n.containerID()))
	if err != nil && c.notReady != nil {
		return c.notReady(n, err)
	}
	return err
}

// SetClock rewrites the node's libfaketime offset file inside its container
// (through the Docker API, so it works on a stopped container too).
func (c *containerCluster[N]) SetClock(name string, offset time.Duration) error {
	return c.onContainer(name, func(id string) error {
		if !c.fakeClock {
			return fmt.Errorf("set clock of %s: %s", name, c.noClock)
		}
		return setClock(c.eng.cli, name, id, offset)
	})
}

// Primary asks the sentinels which node is the primary now (majority).
func (c *containerCluster[N]) Primary(ctx context.Context) (string, error) {
	if c.dep == nil {
		return "", fmt.Errorf("primary: %w", errNoSentinels)
	}
	return c.dep.Primary(ctx)
}

// WaitHealthy polls until replication and the sentinels are healthy.
func (c *containerCluster[N]) WaitHealthy(ctx context.Context) error {
	if c.dep == nil {
		return fmt.Errorf("wait healthy: %w", errNoSentinels)
	}
	return c.dep.WaitHealthy(ctx)
}

// Failover asks the sentinels for a manual failover.
func (c *containerCluster[N]) Failover(ctx context.Context) (string, error) {
	if c.dep == nil {
		return "", fmt.Errorf("failover: %w", errNoSentinels)
	}
	return c.dep.Failover(ctx)
}

// CutInternal applies a link fault to the internal proxy of a node or
// sentinel (every connection of the cluster into it) on the toxiproxy
// server, replacing any fault it had. Clients are not affected: they reach
// it on its published port.
func (c *containerCluster[N]) CutInternal(ctx context.Context, node string, f proxy.Fault) error {
	if c.internal == nil {
		return fmt.Errorf("cut the internal links of %s: %s", node, c.noLinks)
	}
	return c.internal.cut(ctx, node, f)
}

// HealInternal removes every toxic that CutInternal put on the node's
// internal proxy.
func (c *containerCluster[N]) HealInternal(ctx context.Context, node string) error {
	if c.internal == nil {
		return fmt.Errorf("heal the internal links of %s: %s", node, c.noLinks)
	}
	return c.internal.heal(ctx, node)
}

// InternalNodes are the nodes and sentinels with an internal proxy (none
// outside the sentinel system).
func (c *containerCluster[N]) InternalNodes() []string {
	if c.internal == nil {
		return nil
	}
	return c.internal.nodes()
}

// InternalToxics lists the toxics on the internal proxies, as
// "proxy/toxic": none once every fault is healed.
func (c *containerCluster[N]) InternalToxics(ctx context.Context) ([]string, error) {
	if c.internal == nil {
		return nil, nil
	}
	return c.internal.leftovers(ctx)
}
