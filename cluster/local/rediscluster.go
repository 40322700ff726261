package local

import (
	"context"
	"fmt"
	mrand "math/rand"
	"net"
	"strconv"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/clusterq"
)

// The Redis Cluster system: nodes n1..nP start as primaries and share the
// hash slots evenly; node nP+i is the replica of ni (clusterq forms it and
// answers for it). With Spec.Mesh, the nodes reach each other's client
// port (replication) through the inbound "net" link of each node, and
// each other's cluster bus through one link per pair of nodes (see
// demux), so that a node can be cut off from its peers in both directions
// while clients still reach it.

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
	c.slots = &clusterq.Deployment{}
	for i, s := range c.servers {
		met := clusterq.Node{Name: s.Name, Host: s.Host, Port: s.Port, BusPort: bus[i]}
		s.Args = append(s.Args, clusterq.Args(spec, bus[i])...)
		s.Args = append(s.Args, "--bind-source-addr", s.Host)
		if spec.Mesh != nil {
			announce, busAnnounce, err := c.clusterLinks(spec.Mesh, i, bus)
			if err != nil {
				return fmt.Errorf("start node %s: %w", s.Name, err)
			}
			s.Announce = announce
			met.Host, met.Port = splitHostPort(announce)
			_, met.BusPort = splitHostPort(busAnnounce)
			s.Args = append(s.Args, clusterq.AnnounceArgs(met.Host, met.Port, met.BusPort)...)
		}
		c.slots.Nodes = append(c.slots.Nodes, met)
	}
	return nil
}

func splitHostPort(addr string) (string, int) {
	host, port := splitAddr(addr)
	p, _ := strconv.Atoi(port)
	return host, p
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

// startRedisCluster starts the nodes, calls started, forms the cluster
// and waits until it is healthy.
func (c *Cluster) startRedisCluster(ctx context.Context, started func() error) error {
	c.heldPorts.release()
	for i, s := range c.servers {
		if err := s.Start(ctx); err != nil {
			return err
		}
		c.slots.Nodes[i].Client = c.admin(s)
	}
	if err := started(); err != nil {
		return err
	}
	if err := c.slots.Form(ctx); err != nil {
		return err
	}
	return c.WaitHealthy(ctx)
}

// PrimaryOf names the node that serves key's slot (clusterq.PrimaryOf).
func (c *Cluster) PrimaryOf(ctx context.Context, key string) (string, error) {
	if c.slots == nil {
		return "", fmt.Errorf("primary of %s: the %s system has no slots", key, c.spec.System)
	}
	return c.slots.PrimaryOf(ctx, key)
}
