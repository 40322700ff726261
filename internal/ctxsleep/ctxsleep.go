// Package ctxsleep is the one sleep of the clients and the nemesis: it
// ends early when the run is cancelled, so that no goroutine outlives its
// owner by a hold or a fault's length.
package ctxsleep

import (
	"context"
	"time"
)

// Sleep waits d or until ctx is done.
func Sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
