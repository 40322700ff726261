package local

import (
	"context"
	"time"
)

// SetLaunchHook makes f run each time the backend has created a process
// (with its node directory and PID) until the returned function is called.
// Tests filter on the directory: other tests may start clusters meanwhile.
func SetLaunchHook(f func(dir string, pid int)) (restore func()) {
	launchHook.Store(&f)
	return func() { launchHook.Store(nil) }
}

// AOFSampleTimes are the times of the samples of node's append-only file
// that the cluster keeps (none without persistence), oldest first.
func AOFSampleTimes(c *Cluster, node string) []time.Time {
	if c.aof == nil {
		return nil
	}
	c.aof.mu.Lock()
	defer c.aof.mu.Unlock()
	var out []time.Time
	for _, s := range c.aof.samples[node] {
		out = append(out, s.at)
	}
	return out
}

// RepeatFailover is sentinelq's RepeatFailover on the cluster's deployment.
func RepeatFailover(ctx context.Context, c *Cluster, old string) (bool, error) {
	return c.deployment().RepeatFailover(ctx, old)
}
