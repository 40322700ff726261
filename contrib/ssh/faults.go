package ssh

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/fakeclock"
	"github.com/lockjepsen/lockjepsen/cluster/proxy"
	"github.com/lockjepsen/lockjepsen/nemesis"
)

var _ nemesis.InternalNet = (*Cluster)(nil)

func (c *Cluster) proc(name string) (*proc, error) {
	for _, p := range c.all() {
		if p.Name == name {
			return p, nil
		}
	}
	return nil, fmt.Errorf("no node %q", name)
}

// change records a fault in p's state and marker before applying it (so
// a run killed in between still heals it), then runs cmd; undoState
// reverts the state if the command failed for sure.
func (c *Cluster) change(ctx context.Context, p *proc, set func(), cmd string) error {
	c.mu.Lock()
	set()
	c.mu.Unlock()
	if err := c.writeMarker(ctx, p); err != nil {
		return err
	}
	_, err := c.b.Runner.Run(ctx, p.Process, cmd)
	return err
}

// restore runs cmd and then clears the state and rewrites the marker.
func (c *Cluster) restore(ctx context.Context, p *proc, cmd string, clear func()) error {
	if _, err := c.b.Runner.Run(ctx, p.Process, cmd); err != nil {
		return fmt.Errorf("%w (undo by hand on %s: %s)", err, p.SSH, cmd)
	}
	c.mu.Lock()
	clear()
	c.mu.Unlock()
	return c.writeMarker(ctx, p)
}

// Pause sends SIGSTOP to the node's server.
func (c *Cluster) Pause(name string) error {
	p, err := c.proc(name)
	if err != nil {
		return err
	}
	return c.change(context.Background(), p, func() { p.paused = true }, p.signal("STOP"))
}

// Resume sends SIGCONT.
func (c *Cluster) Resume(name string) error {
	p, err := c.proc(name)
	if err != nil {
		return err
	}
	return c.restore(context.Background(), p, p.signal("CONT"), func() { p.paused = false })
}

// Kill sends SIGKILL and waits until the process is gone. Losing the
// unsynced tail of the append-only file is not done on real hosts.
func (c *Cluster) Kill(name string, loseUnsynced bool) error {
	if loseUnsynced {
		return fmt.Errorf("kill %s: --lose-unsynced is not supported on the ssh backend (it would truncate a file on the host)", name)
	}
	p, err := c.proc(name)
	if err != nil {
		return err
	}
	if _, err := c.b.Runner.Run(context.Background(), p.Process, p.killCmd()); err != nil {
		return err
	}
	c.mu.Lock()
	p.killed = true
	c.mu.Unlock()
	return nil
}

// Restart starts a killed server again with the same configuration and
// data, and waits until it answers.
func (c *Cluster) Restart(ctx context.Context, name string) error {
	p, err := c.proc(name)
	if err != nil {
		return err
	}
	if _, err := c.b.Runner.Run(ctx, p.Process, p.startCmd()); err != nil {
		return fmt.Errorf("restart %s: %w", name, err)
	}
	c.mu.Lock()
	p.killed = false
	c.mu.Unlock()
	return c.waitReady(ctx, p)
}

// SetClock writes the node's libfaketime offset file (replacing it
// atomically); only nodes started with faketime_preload read one.
func (c *Cluster) SetClock(name string, offset time.Duration) error {
	p, err := c.proc(name)
	if err != nil {
		return err
	}
	if p.env == "" {
		return fmt.Errorf("set clock of %s: the cluster was started without libfaketime; lockjepsen never sets a host's system clock", name)
	}
	tmp := p.file(clockFile + ".tmp")
	cmd := fmt.Sprintf("printf '%%s\\n' '%s' > %s && mv %s %s", fakeclock.Offset(offset, 1), tmp, tmp, p.file(clockFile))
	_, err = c.b.Runner.Run(context.Background(), p.Process, cmd)
	return err
}

// peers are the addresses of every other process of the cluster: the
// sources whose traffic into a node counts as the cluster's own.
func (c *Cluster) peers(p *proc) []string {
	var out []string
	for _, q := range c.all() {
		if q != p && !slices.Contains(out, q.Address) {
			out = append(out, q.Address)
		}
	}
	return out
}

// CutInternal applies f to the cluster's traffic into the node, on its
// host: a partition drops the peers' packets to its port and a reject
// resets them (iptables, chain LOCKJEPSEN), and both drop the node's own
// packets from its port to the peers; latency and a bandwidth limit
// delay its replies to the peers (tc netem on its interface). Traffic
// from the control machine is untouched.
//
// The outbound rule is what makes a cut node's writes stay on it: with
// the peers' packets dropped on the way in only, the replication stream
// out of a cut-off primary still reached its replica (the replica's
// acknowledgements were what was dropped), so a key granted there could
// reach the replica a failover promotes, and the checkers, which take a
// grant by a cut-off node as never replicated (isolate,
// nemesis.Descriptor.CutsOff), would excuse what a release did to it.
//
// Every rule names both ends, the node's address and port on one side
// and a peer's address on the other, because the chain is jumped to from
// both INPUT and OUTPUT and a peer can share the node's host (its
// sentinel). A rule with one end only, "-s host --dport 6379", also
// matched, on OUTPUT, the co-located sentinel's packets to every other
// host's port 6379: that sentinel lost its replicas, and when it led the
// failover it found no replica to promote (-failover-abort-no-good-slave),
// so a split brain's window passed without a failover.
func (c *Cluster) CutInternal(ctx context.Context, node string, f proxy.Fault) error {
	p, err := c.proc(node)
	if err != nil {
		return err
	}
	if err := c.HealInternal(ctx, node); err != nil {
		return err
	}
	switch f.Mode {
	case proxy.Partition, proxy.Reject:
		target := "DROP"
		if f.Mode == proxy.Reject {
			target = "REJECT --reject-with tcp-reset"
		}
		var rules []string
		for _, peer := range c.peers(p) {
			rules = append(rules, fmt.Sprintf("-p tcp -s %s -d %s --dport %d -j %s", peer, p.Address, p.Port, target),
				fmt.Sprintf("-p tcp -s %s --sport %d -d %s -j DROP", p.Address, p.Port, peer))
		}
		cmds := []string{fmt.Sprintf("iptables -N %s 2>/dev/null; iptables -C INPUT -j %[1]s 2>/dev/null || iptables -I INPUT -j %[1]s; iptables -C OUTPUT -j %[1]s 2>/dev/null || iptables -I OUTPUT -j %[1]s", Chain)}
		for _, r := range rules {
			cmds = append(cmds, "iptables -A "+Chain+" "+r)
		}
		return c.change(ctx, p, func() { p.rules = rules }, strings.Join(cmds, " && "))
	case proxy.Latency, proxy.Slow:
		err := c.change(ctx, p, func() { p.netem = true }, c.netemCmd(p, f))
		if err != nil && strings.Contains(err.Error(), "qdisc kind is unknown") {
			return fmt.Errorf("%w\n(the kernel of %s has no prio or netem queueing discipline: %s faults need tc netem there, CONFIG_NET_SCH_PRIO and CONFIG_NET_SCH_NETEM, or modprobe sch_prio sch_netem)", err, p.SSH, f.Mode)
		}
		return err
	}
	return fmt.Errorf("cut the internal links of %s: fault %s has no remote form", node, f)
}

// netemCmd puts a prio qdisc on the node's interface whose fourth band
// (which no priority maps to) has the netem delay or rate, and steers the
// node's replies to each peer into it.
func (c *Cluster) netemCmd(p *proc, f proxy.Fault) string {
	var netem string
	if f.Mode == proxy.Latency {
		netem = fmt.Sprintf("delay %dms", f.Latency.Milliseconds())
		if f.Jitter > 0 {
			netem += fmt.Sprintf(" %dms", f.Jitter.Milliseconds())
		}
	} else {
		netem = fmt.Sprintf("rate %dkbps", f.RateKBps)
	}
	dev := p.Interface
	cmds := []string{
		fmt.Sprintf("tc qdisc add dev %s root handle 1: prio bands 4 priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1", dev),
		fmt.Sprintf("tc qdisc add dev %s parent 1:4 handle 40: netem %s", dev, netem),
	}
	for _, peer := range c.peers(p) {
		cmds = append(cmds, fmt.Sprintf("tc filter add dev %s parent 1: protocol ip prio 1 u32 match ip dst %s/32 match ip sport %d 0xffff flowid 1:4", dev, peer, p.Port))
	}
	return strings.Join(cmds, " && ")
}

// HealInternal removes the node's iptables rules and netem qdisc.
func (c *Cluster) HealInternal(ctx context.Context, node string) error {
	p, err := c.proc(node)
	if err != nil {
		return err
	}
	c.mu.Lock()
	var cmds []string
	for _, r := range p.rules {
		cmds = append(cmds, "iptables -D "+Chain+" "+r)
	}
	if p.netem {
		cmds = append(cmds, p.netemUndo())
	}
	c.mu.Unlock()
	if len(cmds) == 0 {
		return nil
	}
	return c.restore(ctx, p, strings.Join(cmds, " && "), func() { p.rules, p.netem = nil, false })
}

// InternalNodes are every node and sentinel.
func (c *Cluster) InternalNodes() []string {
	var out []string
	for _, p := range c.all() {
		out = append(out, p.Name)
	}
	return out
}

// MasterName is the name the sentinels monitor the primary under.
func (c *Cluster) MasterName() string { return cluster.MasterName }

var errNoSentinels = fmt.Errorf("the cluster has no sentinels (only the sentinel system has)")

// Primary asks the sentinels which node is the primary now.
func (c *Cluster) Primary(ctx context.Context) (string, error) {
	if c.dep == nil {
		return "", errNoSentinels
	}
	return c.dep.Primary(ctx)
}

// WaitHealthy polls until replication and the sentinels are healthy.
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	if c.dep == nil {
		return errNoSentinels
	}
	return c.dep.WaitHealthy(ctx)
}

// Failover asks the sentinels for a manual failover.
func (c *Cluster) Failover(ctx context.Context) (string, error) {
	if c.dep == nil {
		return "", errNoSentinels
	}
	return c.dep.Failover(ctx)
}
