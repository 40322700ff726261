package scenario

import (
	"fmt"
	"slices"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/nemesis"
)

// SystemPreset is how runs that are not a named scenario (the review's,
// the matrix's grid cells) run one system: one entry per system here, so
// that neither compares system names.
type SystemPreset struct {
	System string
	// On sets the system, a lock on it, and the run's length: long enough
	// for the system's failovers to happen and settle within the run.
	On func(lock string) func(*harness.Config)
	// Grid sets what a matrix grid cell (short, busy, faults that land on
	// holders) needs on this system beyond the common timing.
	Grid func(*harness.Config)
	// Failover sets a run that meets the system's own failover: the
	// primary killed right after a grant, before replication, with a
	// lease that outlives the failover. SplitBrain: the primary cut off
	// right after a grant from those that elect its successor, but not
	// from half the clients. Both are nil where the system does not fail
	// over by itself.
	Failover, SplitBrain func(*harness.Config)
}

// systemPresets lists one preset per system, in the order of
// cluster.Systems.
var systemPresets = []SystemPreset{
	{System: cluster.Single, On: withLock(Single), Grid: func(*harness.Config) {}},
	{System: cluster.Sentinel, On: withLock(Sentinel), Grid: failoverGrid,
		Failover: func(c *harness.Config) {
			c.ScriptName = "sentinel-kill-after-acquire"
			// A lease shorter than the failover (about 2.5 s) has ended
			// before a replica is promoted: that case is the review's
			// ttl-below-failover mitigation. Production TTLs of seconds
			// outlive it; so do these holds.
			c.TTL = max(c.TTL, FailoverTTL)
			c.Hold = "3s..4500ms"
		},
		SplitBrain: sentinelSplitBrain},
	{System: cluster.Redlock, On: Redlock, Grid: func(c *harness.Config) {
		c.Clients = 3
		c.NemesisInterval, c.FaultDuration = 150*time.Millisecond, 150*time.Millisecond
	}},
	{System: cluster.Etcd, On: Etcd, Grid: func(c *harness.Config) {
		// The etcd client reconnects to a member it lost with a backoff,
		// hence the longer recovery.
		c.TimeLimit, c.Recovery = 6*time.Second, 3*time.Second
		c.NemesisInterval, c.FaultDuration = time.Second, time.Second
	}},
	{System: cluster.RedisCluster, On: withLock(RedisCluster), Grid: failoverGrid,
		Failover: clusterScript("cluster-kill-after-acquire"),
		// A Redis Cluster primary cut off from the others stops taking
		// writes after the node timeout: a lease it granted right before
		// is what outlives the failover.
		SplitBrain: clusterScript("cluster-isolate-primary")},
}

// sentinelSplitBrain is Sentinel's split brain (scenario
// sentinel-split-brain): short holds, so that each primary's half of the
// clients holds the lock nearly all the time, and an op timeout that keeps
// the cut-off half's connections to the old primary alive
// (nemesis.SplitBrainOpTimeout).
func sentinelSplitBrain(c *harness.Config) {
	c.ScriptName = "sentinel-split-brain"
	c.Hold = "50ms..150ms"
	c.OpTimeout = max(c.OpTimeout, nemesis.SplitBrainOpTimeout)
}

// FailoverTTL is the shortest TTL a Sentinel failover run takes: a lease
// that outlives the failover (about 2.5 s on loopback).
const FailoverTTL = 5 * time.Second

// ClusterFailoverTTL is FailoverTTL on Redis Cluster, whose clients also
// have to reload the slots (every second) before the new primary grants.
const ClusterFailoverTTL = 10 * time.Second

// clusterScript runs a Redis Cluster script with leases that outlive the
// failover and the clients' move to the new primary.
func clusterScript(script string) func(*harness.Config) {
	return func(c *harness.Config) {
		c.ScriptName = script
		c.TTL = max(c.TTL, ClusterFailoverTTL)
		c.Hold = "8s..9500ms"
	}
}

// failoverGrid: a system that fails over needs a run that outlasts one,
// and faults of a second that let it happen.
func failoverGrid(c *harness.Config) {
	c.TimeLimit = 6 * time.Second
	c.NemesisInterval, c.FaultDuration = time.Second, time.Second
}

// withLock makes a preset that sets the system into one that also sets
// the lock.
func withLock(preset func(*harness.Config)) func(lock string) func(*harness.Config) {
	return func(lock string) func(*harness.Config) {
		return func(c *harness.Config) {
			preset(c)
			c.Lock = lock
		}
	}
}

// PresetFor is the system's preset: its entry here, or for a system
// without one (a system registered with cluster.RegisterSystem), a run of
// the default shape on it that sets only the system and the lock.
func PresetFor(system string) (SystemPreset, error) {
	if i := slices.IndexFunc(systemPresets, func(p SystemPreset) bool { return p.System == system }); i >= 0 {
		return systemPresets[i], nil
	}
	if _, err := cluster.LookupSystem(system); err != nil {
		return SystemPreset{}, fmt.Errorf("system %q has no preset; want one of %v", system, cluster.SystemNames())
	}
	return SystemPreset{System: system, Grid: func(*harness.Config) {},
		On: withLock(func(c *harness.Config) { c.System = system })}, nil
}
