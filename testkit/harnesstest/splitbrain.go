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

// SplitBrainScript is scenario sentinel-split-brain's script with
// SplitBrainIsolation windows: the primary is cut off from its replicas
// and sentinels while clients 0 to clients/2-1, cut off from the
// sentinels, still reach it.
func SplitBrainScript(clients int, timeLimit time.Duration) []nemesis.Step {
	var half []int
	for c := 0; c < clients/2; c++ {
		half = append(half, c)
	}
	sentinels := []string{"s1", "s2", "s3"}
	var steps []nemesis.Step
	for t := time.Second; t+SplitBrainIsolation <= timeLimit; t += SplitBrainEvery {
		steps = append(steps,
			nemesis.Step{At: t, Action: nemesis.Action{Fault: nemesis.Partition, Nodes: sentinels, Clients: half, For: SplitBrainIsolation}},
			nemesis.Step{At: t, Action: nemesis.Action{Fault: nemesis.Isolate, Nodes: []string{nemesis.PrimaryPlaceholder}, For: SplitBrainIsolation}})
	}
	return steps
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
