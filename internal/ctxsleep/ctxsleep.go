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

// Every calls f every d until done is closed, and returns then; f runs in
// the caller's goroutine, so a slow f delays the next tick rather than
// overlapping it.
func Every(done <-chan struct{}, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			f()
		}
	}
}
