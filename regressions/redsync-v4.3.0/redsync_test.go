// redsync v4.3.0: Extend returned true on a quorum without counting the
// time the extension took, or the drift, against the validity, and it
// offered no way to learn the validity: a user counts it from when Extend
// returned. Fixed in v4.4.0 (Extend tracks until and fails with
// ErrExtendFailed when it comes too late).
package regression_test

import (
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
	v := redsyncadapter.OneTry(redsync.New(redsyncadapter.Pools(nodes, pool)...).NewMutex,
		redsync.WithExpiry, redsync.WithTries, redsync.WithGenValueFunc, redsync.ErrFailed)
	v.Validity = func(m redsyncadapter.Mutex, start, done time.Time, ttl time.Duration, extend bool) time.Time {
		if extend {
			return done.Add(ttl)
		}
		return redsyncadapter.FromStart(m, start, done, ttl, extend)
	}
	return redsyncadapter.New(v, process), nil
}

// pool is one node's go-redis v8 client, as this version takes it.
func pool(addr string, timeout time.Duration) redsyncredis.Pool {
	return redsyncgoredis.NewPool(goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1,
		DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout}))
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
