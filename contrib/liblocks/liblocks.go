// Package liblocks adapts lock libraries to lockjepsen's Locker: redsync
// and redislock on Redis, etcd's concurrency.Mutex on etcd. It lives in its
// own module so that the core module (the harness and its Go API) does not
// require these libraries: a user who tests their own pinned version of one
// keeps that version.
package liblocks

import (
	"sync"

	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/review"
	"github.com/lockjepsen/lockjepsen/scenario"
)

// Locks lists this package's locks, in the order help lists them.
var Locks = []locks.Descriptor{Redislock, Redsync, Rueidislock, Rueidislock1, Valkeylock, Valkeylock1, Etcd, EtcdSession}

var (
	registerOnce sync.Once
	registerErr  error
)

// Register adds Locks to the locks package's registry and Scenarios to
// the scenario registry; calling it again does nothing.
func Register() error {
	registerOnce.Do(func() {
		if registerErr = locks.Register(Locks...); registerErr == nil {
			registerErr = scenario.Register(Scenarios...)
		}
		if registerErr == nil {
			registerErr = review.RegisterMitigation(EtcdBaseline)
		}
	})
	return registerErr
}
