package docker

import "context"

// ForceInternalRecover restarts the toxiproxy server as a toxiproxy call
// that timed out would, to test that fallback.
func (c *Cluster) ForceInternalRecover(ctx context.Context) error {
	return c.internal.forceRecover(ctx)
}
