package harnesstest

import (
	"context"
	"time"

	"github.com/lockjepsen/lockjepsen/locks"
)

// LyingRelease wraps a lock so that every release reports success, as
// redsync v4.0.3's Unlock did for a lock it no longer held: the bug the
// lease model's dishonest-release check and the review must name.
type LyingRelease struct{ locks.Locker }

// TryAcquire acquires with the wrapped lock; the lease lies on release.
func (l LyingRelease) TryAcquire(ctx context.Context, key string, ttl time.Duration) (locks.Lease, error) {
	lease, err := l.Locker.TryAcquire(ctx, key, ttl)
	if err != nil {
		return nil, err
	}
	return lyingLease{lease}, nil
}

type lyingLease struct{ locks.Lease }

func (l lyingLease) Release(ctx context.Context) error {
	l.Lease.Release(ctx) // what it found is dropped: the bug
	return nil
}
