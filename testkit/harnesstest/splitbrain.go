package harnesstest

import (
	"time"

	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/nemesis"
)

// SplitBrainIsolation and SplitBrainEvery are the windows of
// SplitBrainScript: 20 s of isolation every 30 s, instead of the named
// script's 6 s every 20 s. Under two busy loops on 2 cores, a CI run saw
// no violation in three 6 s windows on containers, the sentinels
// promoting too late (or the other clients finding the new primary too
// late) for two primaries to grant inside one.
const (
	SplitBrainIsolation = 20 * time.Second
	SplitBrainEvery     = 30 * time.Second
)

// SplitBrainScript is scenario sentinel-split-brain's script
// (nemesis.SplitBrainSteps) with SplitBrainIsolation windows, on the 3
// sentinels s1-s3.
func SplitBrainScript(clients int, timeLimit time.Duration) []nemesis.Step {
	return nemesis.SplitBrainSteps([]string{"s1", "s2", "s3"}, clients, SplitBrainIsolation, SplitBrainEvery, timeLimit)
}

// SplitBrain is scenario sentinel-split-brain made deterministic for a
// test, on a Sentinel system of 3 sentinels (s1-s3): SplitBrainScript's
// long windows, the scenario's short holds, so that each primary's half
// of the clients holds the lock nearly all the time, and the scenario's
// op timeout (nemesis.SplitBrainOpTimeout), which keeps the cut-off
// clients' connections to the old primary through a loaded machine's
// stalls. The sentinels promote a replica inside the window; the other
// clients follow it while the cut-off half still locks the old primary,
// which still grants. It needs at least 2 clients. It expects the
// violation and stops at the first.
func SplitBrain(c *harness.Config) {
	c.Hold = "50ms..150ms"
	c.OpTimeout = nemesis.SplitBrainOpTimeout
	c.Expect = harness.ExpectUnsafe
	UntilViolation(c)
	c.Script = SplitBrainScript(c.Clients, c.TimeLimit)
}
