package review

import (
	"slices"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/scenario"
)

// Threat is a failure a lock must survive in production, declared once:
// the review runs every threat that applies to the system, and the
// mitigations named here for each threat it finds unsafe.
type Threat struct {
	Name string
	// Title names the threat for a design review.
	Title string
	// Systems it applies to; nil is every system.
	Systems []string
	// Inject sets the faults on a configuration of the system under
	// review (or, for a mitigation that changes the system, of that one).
	Inject func(c *harness.Config)
	// Mitigations could close the threat, by name, in the order tried.
	Mitigations []string
	// Analog: Inject has an equivalent on systems outside Systems, for a
	// mitigation that changes the system (a Sentinel failover is a
	// member's crash on etcd).
	Analog bool
}

// AppliesTo reports whether the threat is one the system faces.
func (t Threat) AppliesTo(system string) bool {
	return t.Systems == nil || slices.Contains(t.Systems, system)
}

var redisSystems = []string{cluster.Single, cluster.Sentinel, cluster.Redlock}

// FailoverTTL is the shortest TTL the failover threat runs with: longer
// than a Sentinel failover with the harness's settings.
const FailoverTTL = 5 * time.Second

// ClusterFailoverTTL is FailoverTTL on Redis Cluster, whose clients also
// have to reload the slots (every second) before the new primary grants.
const ClusterFailoverTTL = 10 * time.Second

// failoverSystems are the systems that fail over by themselves.
var failoverSystems = []string{cluster.Sentinel, cluster.RedisCluster}

// RestartTTL is the shortest TTL the server-restart threat runs with: a
// lease that outlives the restart.
const RestartTTL = 2 * time.Second

// Threats lists every threat, in the order a review runs and shows them.
var Threats = []Threat{
	{Name: "client-pause", Title: "client pause (a GC pause, a stalled VM)",
		Inject:      func(c *harness.Config) { c.Nemesis = []string{"client-pause"} },
		Mitigations: []string{"fencing", "etcd"}},
	{Name: "client-crash", Title: "client crash (the holder dies)",
		Inject: func(c *harness.Config) { c.Nemesis = []string{"client-crash"} }},
	{Name: "server-crash", Title: "server crash (SIGKILL, down 300 ms), with the configured persistence",
		Inject: func(c *harness.Config) {
			serverFault(c, "kill")
			c.RestartDelay = 300 * time.Millisecond
		},
		Mitigations: []string{"fsync-always", "delayed-restart", "fencing", "redlock", "etcd"}},
	{Name: "server-restart", Title: "server crash right after a grant and immediate restart, with the configured persistence (a lease of 2 s or more)",
		Inject: func(c *harness.Config) {
			serverFault(c, "kill")
			c.RestartDelay = 0
			// Aimed at a live lease, so that a server that forgets the key
			// is found on every seed: the kill comes right after a grant,
			// and the holder goes on for 1-1.5 s of a lease of 2 s or
			// more, far longer than a restart (tens of milliseconds, a few
			// hundred on a loaded machine) and the next client's acquire.
			// Left to chance, a 3 s run on a loaded CI machine once saw
			// every kill land between holds.
			c.AfterAcquire = true
			c.TTL = max(c.TTL, RestartTTL)
			c.Hold = "1s..1500ms"
		},
		Mitigations: []string{"fsync-always", "delayed-restart", "fencing", "redlock", "etcd"}},
	{Name: "partition", Title: "a partition between clients and the server",
		Inject:      func(c *harness.Config) { serverFault(c, "partition") },
		Mitigations: []string{"etcd"}},
	{Name: "clock-jump", Title: "a server's clock jumping forward (1.5 TTL)", Systems: redisSystems,
		Inject:      func(c *harness.Config) { serverFault(c, "clock-jump") },
		Mitigations: []string{"fencing", "redlock", "etcd"}},
	{Name: "clock-drift", Title: "a server's clock running 1% fast", Systems: redisSystems,
		Inject: func(c *harness.Config) {
			serverFault(c, "clock-drift")
			c.ClockRate = 1.01
		}},
	{Name: "failover", Title: "failover: the primary killed right after a grant, before replication, with a lease that outlives the failover (TTL of 5 s or more; 10 s on Redis Cluster)", Systems: failoverSystems,
		Inject: func(c *harness.Config) {
			switch c.System {
			case cluster.Sentinel:
				c.ScriptName = "sentinel-kill-after-acquire"
				// A lease shorter than the failover (about 2.5 s) has
				// ended before a replica is promoted: that case is the
				// ttl-below-failover mitigation. Production TTLs of
				// seconds outlive it; so do these holds.
				c.TTL = max(c.TTL, FailoverTTL)
				c.Hold = "3s..4500ms"
			case cluster.RedisCluster:
				clusterScript(c, "cluster-kill-after-acquire")
			default:
				analog(c)
			}
		},
		Mitigations: []string{"ttl-below-failover", "wait", "min-replicas", "fencing", "etcd"}, Analog: true},
	{Name: "split-brain", Title: "split brain: the primary cut off from the sentinels (on Redis Cluster: from the other nodes, right after a grant) but not from half the clients", Systems: failoverSystems,
		Inject: func(c *harness.Config) {
			switch c.System {
			case cluster.Sentinel:
				c.ScriptName = "sentinel-split-brain"
				c.Hold = "50ms..150ms"
			case cluster.RedisCluster:
				// A Redis Cluster primary cut off from the others stops
				// taking writes after the node timeout: a lease it
				// granted right before is what outlives the failover.
				clusterScript(c, "cluster-isolate-primary")
			default:
				analog(c)
			}
		},
		Mitigations: []string{"min-replicas", "wait", "fencing", "etcd"}, Analog: true},
}

// clusterScript runs a Redis Cluster script with a lease that outlives the
// failover and the clients' move to the new primary.
func clusterScript(c *harness.Config, script string) {
	c.ScriptName = script
	c.TTL = max(c.TTL, ClusterFailoverTTL)
	c.Hold = "8s..9500ms"
}

// serverFault injects a server fault the way the scenarios do, aimed where
// it hurts on each system: the primary of a Sentinel system, a node that
// granted the latest lease on Redlock (the holder's majority).
func serverFault(c *harness.Config, fault string) {
	scenario.ServerFault(c, fault)
	switch c.System {
	case cluster.Sentinel, cluster.RedisCluster:
		c.Targets = "primary"
	case cluster.Redlock:
		c.Targets = "holder"
	default:
		c.Targets = "one"
	}
}

// analog is a Sentinel threat's equivalent on a system without Sentinel
// (the etcd baseline): the primary's loss is a member's crash or
// isolation.
func analog(c *harness.Config) {
	c.ScriptName = ""
	c.Nemesis = []string{"kill", "partition"}
	c.Targets = "one"
	c.FaultDuration = time.Second
}

// LookupThreat finds a threat by name.
func LookupThreat(name string) (Threat, bool) {
	i := slices.IndexFunc(Threats, func(t Threat) bool { return t.Name == name })
	if i < 0 {
		return Threat{}, false
	}
	return Threats[i], true
}
