package local

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/sentinelq"
)

// The Redis Cluster system: nodes n1..nP start as primaries and share the
// hash slots evenly; node nP+i is the replica of ni. With Spec.Mesh, the
// nodes reach each other's client port (replication) through the inbound
// "net" link of each node, and each other's cluster bus through one link
// per pair of nodes (see demux), so that a node can be cut off from its
// peers in both directions while clients still reach it.

var _ cluster.SlotCluster = (*Cluster)(nil)

// setupRedisCluster gives each node a loopback address of its own and its
// two ports, adds the links of the cluster's own traffic, and writes the
// cluster options of each node. Ports are held from here to
// startRedisCluster: configurations name them.
func (c *Cluster) setupRedisCluster(spec cluster.Spec) error {
	base := 2 + mrand.Intn(250-spec.Nodes)
	c.heldPorts = &portPicker{}
	bus := make([]int, len(c.servers))
	for i, s := range c.servers {
		// Every outgoing connection of node i leaves from this address
		// (bind-source-addr): the demuxes tell the nodes apart by it.
		s.Host = fmt.Sprintf("127.0.0.%d", base+i)
		var err error
		if s.Port, err = c.heldPorts.pickOn(s.Host); err != nil {
			return fmt.Errorf("start node %s: pick a port: %w", s.Name, err)
		}
		if bus[i], err = c.heldPorts.pickOn(s.Host); err != nil {
			return fmt.Errorf("start node %s: pick a bus port: %w", s.Name, err)
		}
	}
	c.meet = map[string][3]string{}
	for i, s := range c.servers {
		c.meet[s.Name] = [3]string{s.Host, strconv.Itoa(s.Port), strconv.Itoa(bus[i])}
		s.Args = append(s.Args,
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.Itoa(int(cluster.ClusterNodeTimeout.Milliseconds())),
			"--cluster-port", strconv.Itoa(bus[i]),
			"--bind-source-addr", s.Host,
			// A replica takes over however long ago it last heard from
			// its primary: a short test cannot wait out the default's
			// ten node timeouts, and a real outage does not either.
			"--cluster-replica-validity-factor", "0",
			"--repl-diskless-sync-delay", "0",
		)
		s.Args = append(s.Args, minReplicasArgs(spec)...)
		if spec.Mesh == nil {
			continue
		}
		announce, busAnnounce, err := c.clusterLinks(spec.Mesh, i, bus)
		if err != nil {
			return fmt.Errorf("start node %s: %w", s.Name, err)
		}
		s.Announce = announce
		host, port := splitAddr(announce)
		_, busPort := splitAddr(busAnnounce)
		c.meet[s.Name] = [3]string{host, port, busPort}
		s.Args = append(s.Args,
			"--cluster-announce-ip", host,
			"--cluster-announce-port", port,
			"--cluster-announce-bus-port", busPort,
		)
	}
	return nil
}

// clusterLinks adds node i's inbound "net" link (its client port, for
// replication) and a link from every other node to its bus behind a
// demux; it returns the addresses node i announces for both.
func (c *Cluster) clusterLinks(mesh cluster.Mesh, i int, bus []int) (announce, busAnnounce string, err error) {
	s := c.servers[i]
	announce, err = mesh.AddLink("net", s.Name, s.Addr())
	if err != nil {
		return "", "", fmt.Errorf("inbound link: %w", err)
	}
	realBus := net.JoinHostPort(s.Host, strconv.Itoa(bus[i]))
	routes := map[string]string{}
	for j, peer := range c.servers {
		if j == i {
			continue
		}
		addr, err := mesh.AddLink(peer.Name, s.Name, realBus)
		if err != nil {
			return "", "", fmt.Errorf("bus link from %s: %w", peer.Name, err)
		}
		routes[peer.Host] = addr
	}
	host, _ := splitAddr(announce)
	d, err := newDemux(host, routes, realBus)
	if err != nil {
		return "", "", fmt.Errorf("bus demux: %w", err)
	}
	c.demuxes = append(c.demuxes, d)
	return announce, d.addr(), nil
}

// clusterPrimaries is how many of the nodes start as primaries.
func (c *Cluster) clusterPrimaries() int { return len(c.servers) / 2 }

// startRedisCluster starts the nodes, calls started, forms the cluster
// and waits until it is healthy.
func (c *Cluster) startRedisCluster(ctx context.Context, started func() error) error {
	c.heldPorts.release()
	for _, s := range c.servers {
		if err := s.Start(ctx); err != nil {
			return err
		}
	}
	if err := started(); err != nil {
		return err
	}
	if err := c.formCluster(ctx); err != nil {
		return err
	}
	return c.WaitHealthy(ctx)
}

// formCluster does what redis-cli --cluster create does: slots to the
// primaries, every node introduced to n1, each replica attached to its
// primary once it knows it.
func (c *Cluster) formCluster(ctx context.Context) error {
	p := c.clusterPrimaries()
	c.nodeIDs = map[string]string{}
	for _, s := range c.servers {
		id, err := c.admin(s).Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			return fmt.Errorf("form the cluster: CLUSTER MYID on %s: %w", s.Name, err)
		}
		c.nodeIDs[id] = s.Name
	}
	for i, s := range c.servers[:p] {
		lo, hi := cluster.SlotRange(i, p)
		if err := c.admin(s).Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			return fmt.Errorf("form the cluster: slots %d-%d to %s: %w", lo, hi, s.Name, err)
		}
	}
	first := c.servers[0]
	for _, s := range c.servers[1:] {
		m := c.meet[s.Name]
		if err := c.admin(first).Do(ctx, "CLUSTER", "MEET", m[0], m[1], m[2]).Err(); err != nil {
			return fmt.Errorf("form the cluster: %s meets %s: %w", first.Name, s.Name, err)
		}
	}
	for i, s := range c.servers[p:] {
		primary := c.servers[i]
		id := c.idOf(primary.Name)
		err := sentinelq.Poll(ctx, fmt.Sprintf("%s to replicate %s", s.Name, primary.Name), func(ctx context.Context) error {
			return c.admin(s).Do(ctx, "CLUSTER", "REPLICATE", id).Err()
		})
		if err != nil {
			return fmt.Errorf("form the cluster: %w", err)
		}
	}
	return nil
}

func (c *Cluster) idOf(name string) string {
	for id, n := range c.nodeIDs {
		if n == name {
			return id
		}
	}
	return ""
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, flags, primaryID string
	epoch                int64 // config epoch
	slots                [][2]int
}

func (n clusterNode) is(flag string) bool { return strings.Contains(","+n.flags+",", ","+flag+",") }

func (n clusterNode) serves(slot int) bool {
	for _, r := range n.slots {
		if slot >= r[0] && slot <= r[1] {
			return true
		}
	}
	return false
}

// parseClusterNodes reads CLUSTER NODES: id addr flags primary ping pong
// epoch link slot...; slots in migration ("[...]") are skipped.
func parseClusterNodes(text string) []clusterNode {
	var out []clusterNode
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		n := clusterNode{id: f[0], flags: f[2], primaryID: f[3]}
		n.epoch, _ = strconv.ParseInt(f[6], 10, 64)
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				continue
			}
			lo, hi, found := strings.Cut(r, "-")
			a, err1 := strconv.Atoi(lo)
			b, err2 := a, error(nil)
			if found {
				b, err2 = strconv.Atoi(hi)
			}
			if err1 == nil && err2 == nil {
				n.slots = append(n.slots, [2]int{a, b})
			}
		}
		out = append(out, n)
	}
	return out
}

// clusterView is one node's CLUSTER NODES.
func (c *Cluster) clusterView(ctx context.Context, s *Server) ([]clusterNode, error) {
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	text, err := c.admin(s).Do(ctx, "CLUSTER", "NODES").Text()
	if err != nil {
		return nil, fmt.Errorf("CLUSTER NODES on %s: %w", s.Name, err)
	}
	return parseClusterNodes(text), nil
}

// PrimaryOf asks every node which node serves key's slot and returns the
// claim with the highest config epoch, the cluster's own rule for two
// nodes that claim a slot: a replica promoted is primary from its
// election on, before every node has heard of it, and an old primary cut
// off from the others still claims the slot with its old epoch.
func (c *Cluster) PrimaryOf(ctx context.Context, key string) (string, error) {
	slot := cluster.KeySlot(key)
	// Asked at once: a paused node costs its timeout once, not per node.
	views := make([][]clusterNode, len(c.servers))
	errs := make([]error, len(c.servers))
	var wg sync.WaitGroup
	for i, s := range c.servers {
		wg.Go(func() { views[i], errs[i] = c.clusterView(ctx, s) })
	}
	wg.Wait()
	best, epoch := "", int64(-1)
	for _, view := range views {
		for _, n := range view {
			if n.is("master") && n.serves(slot) && n.epoch > epoch && c.nodeIDs[n.id] != "" {
				best, epoch = c.nodeIDs[n.id], n.epoch
			}
		}
	}
	if best == "" {
		return "", fmt.Errorf("no node names the primary of slot %d: %w", slot, errors.Join(errs...))
	}
	return best, nil
}

// checkClusterHealthy is one check of WaitHealthy for Redis Cluster.
func (c *Cluster) checkClusterHealthy(ctx context.Context) error {
	p := c.clusterPrimaries()
	for _, s := range c.servers {
		actx, cancel := context.WithTimeout(ctx, adminTimeout)
		info, err := c.admin(s).ClusterInfo(actx).Result()
		cancel()
		if err != nil {
			return fmt.Errorf("CLUSTER INFO on %s: %w", s.Name, err)
		}
		got := infoFields(info)
		for k, want := range map[string]string{"cluster_state": "ok", "cluster_slots_ok": strconv.Itoa(cluster.ClusterSlots),
			"cluster_known_nodes": strconv.Itoa(len(c.servers))} {
			if got[k] != want {
				return fmt.Errorf("%s: %s is %q, not %s", s.Name, k, got[k], want)
			}
		}
		view, err := c.clusterView(ctx, s)
		if err != nil {
			return err
		}
		if err := checkView(s.Name, view, p); err != nil {
			return err
		}
		if err := c.checkReplica(ctx, s, view); err != nil {
			return err
		}
	}
	return nil
}

// checkView checks one node's view: no node failing or unknown, p primaries
// with slots, each with a replica.
func checkView(name string, view []clusterNode, p int) error {
	replicas := map[string]int{}
	for _, n := range view {
		for _, bad := range []string{"fail", "fail?", "handshake", "noaddr"} {
			if n.is(bad) {
				return fmt.Errorf("%s sees node %s as %s", name, n.id, n.flags)
			}
		}
		if n.is("slave") {
			replicas[n.primaryID]++
		}
	}
	primaries := 0
	for _, n := range view {
		if n.is("master") && len(n.slots) > 0 {
			primaries++
			if replicas[n.id] == 0 {
				return fmt.Errorf("%s sees primary %s without a replica", name, n.id)
			}
		}
	}
	if primaries != p {
		return fmt.Errorf("%s sees %d primaries with slots, not %d", name, primaries, p)
	}
	return nil
}

// checkReplica checks that s, if its view says it is a replica, is in
// sync with its primary.
func (c *Cluster) checkReplica(ctx context.Context, s *Server, view []clusterNode) error {
	for _, n := range view {
		if !n.is("myself") || !n.is("slave") {
			continue
		}
		r, err := sentinelq.ReplicationInfo(ctx, sentinelq.Proc{Name: s.Name, Client: c.admin(s)})
		if err != nil {
			return err
		}
		if r["master_link_status"] != "up" || r["master_sync_in_progress"] != "0" {
			return fmt.Errorf("replica %s: link to its primary %s, sync in progress %s", s.Name, r["master_link_status"], r["master_sync_in_progress"])
		}
	}
	return nil
}

// infoFields reads the "key:value" lines of an INFO-style reply.
func infoFields(text string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			out[k] = v
		}
	}
	return out
}
