// Package clusterq forms a Redis Cluster and asks it about itself: which
// node serves a key's slot, and whether every node sees a healthy cluster.
// It is the backend-independent half of cluster.SlotCluster: the local
// backend (processes) and the docker backend (containers) start the nodes
// with Args, describe them to a Deployment, and forward their SlotCluster
// methods here.
package clusterq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/sentinelq"
)

// Args are the cluster options every node of the spec starts with. busPort
// is the port the node listens on for the cluster bus.
func Args(spec cluster.Spec, busPort int) []string {
	a := []string{
		"--cluster-enabled", "yes",
		"--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", strconv.Itoa(int(cluster.ClusterNodeTimeout.Milliseconds())),
		"--cluster-port", strconv.Itoa(busPort),
		// A replica takes over however long ago it last heard from its
		// primary: a short test cannot wait out the default's ten node
		// timeouts, and a real outage does not either.
		"--cluster-replica-validity-factor", "0",
		"--repl-diskless-sync-delay", "0",
	}
	return append(a, spec.MinReplicasArgs()...)
}

// AnnounceArgs make a node known to the others (and to clients, by
// CLUSTER SLOTS and MOVED) by an address other than its own: the links the
// harness puts in front of it.
func AnnounceArgs(host string, port, busPort int) []string {
	return []string{
		"--cluster-announce-ip", host,
		"--cluster-announce-port", strconv.Itoa(port),
		"--cluster-announce-bus-port", strconv.Itoa(busPort),
	}
}

// Node is one redis-server of a cluster.
type Node struct {
	Name string
	// Host, Port and BusPort are the address the other nodes know the
	// node by (CLUSTER MEET), its announced one if it has one.
	Host          string
	Port, BusPort int
	// Client is the backend's own client on the node's real address
	// (sentinelq.AdminOptions). The caller owns it and closes it.
	Client *redis.Client
}

// Deployment is a Redis Cluster of Nodes: the first half start as
// primaries and share the hash slots evenly, node P+i replicates node i.
type Deployment struct {
	Nodes []Node

	mu  sync.Mutex
	ids map[string]string // node ID → name, learnt by Form
}

// Primaries is how many of the nodes start as primaries.
func (d *Deployment) Primaries() int { return len(d.Nodes) / 2 }

func (d *Deployment) proc(n Node) sentinelq.Proc {
	return sentinelq.Proc{Name: n.Name, Client: n.Client}
}

func do(ctx context.Context, n Node, args ...any) *redis.Cmd {
	ctx, cancel := context.WithTimeout(ctx, sentinelq.AdminTimeout)
	defer cancel()
	return n.Client.Do(ctx, args...)
}

// Form does what redis-cli --cluster create does: slots to the primaries,
// every node introduced to the first, each replica attached to its
// primary once it knows it.
func (d *Deployment) Form(ctx context.Context) error {
	p := d.Primaries()
	ids := map[string]string{}
	for _, n := range d.Nodes {
		id, err := do(ctx, n, "CLUSTER", "MYID").Text()
		if err != nil {
			return fmt.Errorf("form the cluster: CLUSTER MYID on %s: %w", n.Name, err)
		}
		ids[id] = n.Name
	}
	d.mu.Lock()
	d.ids = ids
	d.mu.Unlock()
	for i, n := range d.Nodes[:p] {
		lo, hi := cluster.SlotRange(i, p)
		if err := do(ctx, n, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			return fmt.Errorf("form the cluster: slots %d-%d to %s: %w", lo, hi, n.Name, err)
		}
	}
	first := d.Nodes[0]
	for _, n := range d.Nodes[1:] {
		if err := do(ctx, first, "CLUSTER", "MEET", n.Host, n.Port, n.BusPort).Err(); err != nil {
			return fmt.Errorf("form the cluster: %s meets %s: %w", first.Name, n.Name, err)
		}
	}
	for i, n := range d.Nodes[p:] {
		primary := d.Nodes[i]
		id := d.idOf(primary.Name)
		err := sentinelq.Poll(ctx, fmt.Sprintf("%s to replicate %s", n.Name, primary.Name), func(ctx context.Context) error {
			return do(ctx, n, "CLUSTER", "REPLICATE", id).Err()
		})
		if err != nil {
			return fmt.Errorf("form the cluster: %w", err)
		}
	}
	return nil
}

func (d *Deployment) idOf(name string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	for id, n := range d.ids {
		if n == name {
			return id
		}
	}
	return ""
}

func (d *Deployment) nameOf(id string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ids[id]
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

// view is one node's CLUSTER NODES.
func (d *Deployment) view(ctx context.Context, n Node) ([]clusterNode, error) {
	text, err := do(ctx, n, "CLUSTER", "NODES").Text()
	if err != nil {
		return nil, fmt.Errorf("CLUSTER NODES on %s: %w", n.Name, err)
	}
	return parseClusterNodes(text), nil
}

// PrimaryOf asks every node which node serves key's slot and returns the
// claim with the highest config epoch, the cluster's own rule for two
// nodes that claim a slot: a replica promoted is primary from its
// election on, before every node has heard of it, and an old primary cut
// off from the others still claims the slot with its old epoch.
func (d *Deployment) PrimaryOf(ctx context.Context, key string) (string, error) {
	slot := cluster.KeySlot(key)
	// Asked at once: a paused node costs its timeout once, not per node.
	views := make([][]clusterNode, len(d.Nodes))
	errs := make([]error, len(d.Nodes))
	var wg sync.WaitGroup
	for i, n := range d.Nodes {
		wg.Go(func() { views[i], errs[i] = d.view(ctx, n) })
	}
	wg.Wait()
	best, epoch := "", int64(-1)
	for _, view := range views {
		for _, n := range view {
			name := d.nameOf(n.id)
			if n.is("master") && n.serves(slot) && n.epoch > epoch && name != "" {
				best, epoch = name, n.epoch
			}
		}
	}
	if best == "" {
		return "", fmt.Errorf("no node names the primary of slot %d: %w", slot, errors.Join(errs...))
	}
	return best, nil
}

// WaitHealthy polls CheckHealthy until it passes; without a deadline on
// ctx it gives up after sentinelq.HealthyTimeout.
func (d *Deployment) WaitHealthy(ctx context.Context) error {
	return sentinelq.Poll(ctx, "a healthy Redis Cluster", d.CheckHealthy)
}

// CheckHealthy checks that every node reports the cluster ok with every
// slot served and every node known, sees no node failing or unknown and
// each primary with a replica, and, if it is a replica, is in sync.
func (d *Deployment) CheckHealthy(ctx context.Context) error {
	for _, n := range d.Nodes {
		info, err := do(ctx, n, "CLUSTER", "INFO").Text()
		if err != nil {
			return fmt.Errorf("CLUSTER INFO on %s: %w", n.Name, err)
		}
		got := sentinelq.InfoFields(info)
		for k, want := range map[string]string{"cluster_state": "ok", "cluster_slots_ok": strconv.Itoa(cluster.ClusterSlots),
			"cluster_known_nodes": strconv.Itoa(len(d.Nodes))} {
			if got[k] != want {
				return fmt.Errorf("%s: %s is %q, not %s", n.Name, k, got[k], want)
			}
		}
		view, err := d.view(ctx, n)
		if err != nil {
			return err
		}
		if err := checkView(n.Name, view, d.Primaries()); err != nil {
			return err
		}
		if err := d.checkReplica(ctx, n, view); err != nil {
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

// checkReplica checks that n, if its view says it is a replica, is in sync
// with its primary.
func (d *Deployment) checkReplica(ctx context.Context, n Node, view []clusterNode) error {
	for _, v := range view {
		if !v.is("myself") || !v.is("slave") {
			continue
		}
		r, err := sentinelq.ReplicationInfo(ctx, d.proc(n))
		if err != nil {
			return err
		}
		if r["master_link_status"] != "up" || r["master_sync_in_progress"] != "0" {
			return fmt.Errorf("replica %s: link to its primary %s, sync in progress %s", n.Name, r["master_link_status"], r["master_sync_in_progress"])
		}
	}
	return nil
}
