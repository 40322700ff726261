// redsync v4.3.0: Extend returned true on a quorum without counting the
// time the extension took, or the drift, against the validity, and it
// offered no way to learn the validity: a user counts it from when Extend
// returned. Fixed in v4.4.0 (Extend tracks until and fails with
// ErrExtendFailed when it comes too late).
package regression_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	goredis "github.com/go-redis/redis/v8"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v8"

	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/lockjepsentest"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/regressions/redsyncadapter"
)

// v4.3.0 is driven as a user would: one mutex per attempt, one try,
// tokens unique per grant. It has no Until(): the user counts a grant's
// validity from before Lock, as redsync does inside, and an extension's
// from when Extend said it succeeded, since nothing else is offered.
func newLock(nodes []locks.Conn, process int) (locks.Locker, error) {
	rs := redsync.New(pools(nodes)...)
	return redsyncadapter.New(redsyncadapter.Version{
		NewMutex: func(key, token string, ttl time.Duration) redsyncadapter.Mutex {
			return rs.NewMutex(key, redsync.WithExpiry(ttl), redsync.WithTries(1),
				redsync.WithGenValueFunc(func() (string, error) { return token, nil }))
		},
		NotAcquired: func(err error) bool { return errors.Is(err, redsync.ErrFailed) },
		Validity: func(_ redsyncadapter.Mutex, start, done time.Time, ttl time.Duration, extend bool) time.Time {
			if extend {
				return done.Add(ttl)
			}
			return start.Add(ttl - ttl/100)
		},
	}, process), nil
}

func pools(nodes []locks.Conn) []redsyncredis.Pool {
	var out []redsyncredis.Pool
	for _, n := range nodes {
		out = append(out, redsyncgoredis.NewPool(goredis.NewClient(&goredis.Options{Addr: n.Addr, MaxRetries: -1,
			DialTimeout: 50 * time.Millisecond, ReadTimeout: 50 * time.Millisecond, WriteTimeout: 50 * time.Millisecond})))
	}
	return out
}

// One node of five is paused for the whole run, so every extension waits
// out that node's 50 ms timeout before Extend returns true: a validity
// counted from then claims more than any node can keep, on every extend,
// in any seed.
func TestExtendIgnoresElapsed(t *testing.T) {
	out := lockjepsentest.Run(t, redsyncadapter.PausedNodeRenewals("redsync-v4.3.0", newLock, harness.ExpectUnsafe))
	if out == nil {
		return
	}
	extends := 0
	for _, o := range out.Results.Lease.OverClaimed {
		if o.F == "extend" {
			extends++
		}
	}
	if extends == 0 {
		t.Fatalf("no over-claimed extend:\n%s", strings.Join(out.Results.Summary(), "\n"))
	}
	t.Logf("v4.3.0: %d over-claimed extends; the first: %s", extends, out.Results.Lease.OverClaimed[0].Story)
}
