package scenario

import (
	"fmt"
	"slices"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/harness"
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
}

// systemPresets lists one preset per system, in the order of
// cluster.Systems.
var systemPresets = []SystemPreset{
	{System: cluster.Single, On: withLock(Single), Grid: func(*harness.Config) {}},
	{System: cluster.Sentinel, On: withLock(Sentinel), Grid: failoverGrid},
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
	{System: cluster.RedisCluster, On: withLock(RedisCluster), Grid: failoverGrid},
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

// PresetFor is the system's preset.
func PresetFor(system string) (SystemPreset, error) {
	i := slices.IndexFunc(systemPresets, func(p SystemPreset) bool { return p.System == system })
	if i < 0 {
		return SystemPreset{}, fmt.Errorf("system %q has no preset; want one of %v", system, cluster.Systems)
	}
	return systemPresets[i], nil
}
