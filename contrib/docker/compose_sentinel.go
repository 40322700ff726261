package docker

import (
	"context"
	"fmt"
	"strconv"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/sentinelq"
)

// composeHealthyTimeout bounds how long Start waits for a compose sentinel
// system to settle: after an interrupted run Sentinel may still have to
// demote an old primary, which it notices only on its 10 s INFO period.
const composeHealthyTimeout = 60 * time.Second

// startSentinel brings a compose deployment's sentinel system to a known
// state: every container running, no toxic on any proxy of the toxiproxy
// server (an interrupted run may have left some), the spec's Sentinel
// timings and min-replicas settings applied at run time (SENTINEL SET,
// CONFIG SET), the topology healthy, and the data flushed.
//
// The primary is whichever node the sentinels name: an earlier run may
// have ended after a failover, and the deployment is not failed back
// (which would take another failover and could pick either replica).
// Nodes() lists the current primary first, as the harness expects of a
// sentinel cluster; the roles say which is which.
func (c *ComposeCluster) startSentinel(ctx context.Context, spec cluster.Spec, topo *Topology) error {
	if err := c.connectInternal(ctx, topo); err != nil {
		return err
	}
	if err := c.ensureSentinelContainers(ctx); err != nil {
		return err
	}
	proc := func(n TopologyNode) sentinelq.Proc {
		a := redis.NewClient(sentinelq.AdminOptions(n.Addr))
		c.admins = append(c.admins, a)
		return sentinelq.Proc{Name: n.Name, Announce: n.Announce, Client: a}
	}
	c.dep = &sentinelq.Deployment{MasterName: cluster.MasterName, FailoverTimeout: spec.FailoverTimeout}
	for _, n := range c.nodes {
		c.dep.Nodes = append(c.dep.Nodes, proc(n))
	}
	for _, n := range c.sentinels {
		c.dep.Sentinels = append(c.dep.Sentinels, proc(n))
	}
	if err := c.configure(ctx, spec); err != nil {
		return err
	}
	hctx, cancel := context.WithTimeout(ctx, composeHealthyTimeout)
	defer cancel()
	if err := c.dep.WaitHealthy(hctx); err != nil {
		return fmt.Errorf("the compose sentinel system: %w", err)
	}
	return c.flushPrimary(ctx, hctx)
}

// connectInternal reaches the deployment's toxiproxy server, which carries
// the sentinel system's internal links, and clears what an earlier run
// left on it.
func (c *ComposeCluster) connectInternal(ctx context.Context, topo *Topology) error {
	proxies := map[string][]toxiproxy.Proxy{}
	for _, n := range append(append([]TopologyNode{}, c.nodes...), c.sentinels...) {
		proxies[n.Name] = []toxiproxy.Proxy{{Name: n.InternalProxy}}
	}
	var restart func(context.Context) error
	if topo.ToxiproxyContainer != "" {
		restart = func(ctx context.Context) error {
			return restartContainer(ctx, c.eng.cli, "toxiproxy", topo.ToxiproxyContainer)
		}
	}
	// The proxies come from the server's configuration file
	// (docker/compose/toxiproxy.json), which a restart reads again.
	in := newInternalNet(topo.Toxiproxy, proxies, false, restart)
	if err := in.waitReady(ctx); err != nil {
		return fmt.Errorf("the sentinel system's internal proxies: %w (is the compose deployment up, with docker/compose/toxiproxy.json?)", err)
	}
	if err := in.resetState(ctx); err != nil {
		return fmt.Errorf("clear the toxics an earlier run left: %w", err)
	}
	c.internal = in
	return nil
}

// ensureSentinelContainers checks that the nodes' and sentinels'
// containers run, and prepares the resource.
func (c *ComposeCluster) ensureSentinelContainers(ctx context.Context) error {
	for _, n := range c.nodes {
		if err := c.ensureRunning(ctx, n); err != nil {
			return err
		}
	}
	for _, n := range c.sentinels {
		if err := c.ensureRunning(ctx, n); err != nil {
			// A sentinel container that was stopped cannot start again:
			// it finds its command line's monitor in its rewritten file.
			return fmt.Errorf("%w (a stopped sentinel container does not start again: recreate the deployment with docker-compose -p lockjepsen up -d --force-recreate)", err)
		}
	}
	if c.resource != nil {
		return c.prepare(ctx, *c.resource)
	}
	return nil
}

// flushPrimary lists the primary the sentinels name first (with the
// roles set), flushes it, and waits (within hctx) until the replicas have
// caught up with the flush.
func (c *ComposeCluster) flushPrimary(ctx, hctx context.Context) error {
	primary, err := c.dep.Primary(hctx)
	if err != nil {
		return err
	}
	ordered := make([]TopologyNode, 0, len(c.nodes))
	for _, n := range c.nodes {
		n.Role = cluster.RoleReplica
		if n.Name == primary {
			n.Role = cluster.RolePrimary
			ordered = append([]TopologyNode{n}, ordered...)
		} else {
			ordered = append(ordered, n)
		}
	}
	c.nodes = ordered

	// Replicas refuse writes: flush the primary, and wait until the
	// replicas have caught up with the flush.
	for _, p := range c.dep.Nodes {
		if p.Name != primary {
			continue
		}
		fctx, fcancel := context.WithTimeout(ctx, 5*time.Second)
		err := p.Client.FlushAll(fctx).Err()
		fcancel()
		if err != nil {
			return fmt.Errorf("node %s: FLUSHALL before the run: %w", p.Name, err)
		}
	}
	if err := sentinelq.Poll(hctx, "the replicas caught up with the flush", func(ctx context.Context) error {
		return c.dep.CheckReplication(ctx, primary)
	}); err != nil {
		return err
	}
	return nil
}

// configure applies the spec's Sentinel timings to every sentinel and its
// min-replicas settings to every node, at run time: the compose file's
// command lines carry the defaults.
func (c *ComposeCluster) configure(ctx context.Context, spec cluster.Spec) error {
	m := cluster.MasterName
	for _, s := range c.dep.Sentinels {
		for _, kv := range [][2]string{
			{"down-after-milliseconds", strconv.FormatInt(spec.DownAfter.Milliseconds(), 10)},
			{"failover-timeout", strconv.FormatInt(spec.FailoverTimeout.Milliseconds(), 10)},
		} {
			sctx, cancel := context.WithTimeout(ctx, sentinelq.AdminTimeout)
			err := s.Client.Do(sctx, "SENTINEL", "SET", m, kv[0], kv[1]).Err()
			cancel()
			if err != nil {
				return fmt.Errorf("sentinel %s: SENTINEL SET %s %s %s: %w", s.Name, m, kv[0], kv[1], err)
			}
		}
	}
	lag := "10" // Redis's default
	if spec.MinReplicasMaxLag > 0 {
		lag = strconv.Itoa(int(spec.MinReplicasMaxLag / time.Second))
	}
	for _, n := range c.dep.Nodes {
		for _, kv := range [][2]string{
			{"min-replicas-to-write", strconv.Itoa(spec.MinReplicasToWrite)},
			{"min-replicas-max-lag", lag},
		} {
			sctx, cancel := context.WithTimeout(ctx, sentinelq.AdminTimeout)
			err := n.Client.ConfigSet(sctx, kv[0], kv[1]).Err()
			cancel()
			if err != nil {
				return fmt.Errorf("node %s: CONFIG SET %s %s: %w", n.Name, kv[0], kv[1], err)
			}
		}
	}
	return nil
}

// MasterName is the name the sentinels monitor the primary under.
func (c *ComposeCluster) MasterName() string { return cluster.MasterName }

// Sentinels are the deployment's sentinels (none for other systems).
func (c *ComposeCluster) Sentinels() []cluster.Node { return infos(c.sentinels) }
