// redsync v4.0.3: Unlock and Extend compared their scripts' results
// wrongly (status != 0 on an int64, status != "ERR"), so both reported
// success when the key had expired or belonged to another client. Fixed
// in v4.0.4 (go-redsync/redsync PR #61).
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

// v4.0.3 is driven as a user would: one mutex per attempt, one try,
// tokens unique per grant. It has no Until(): the user counts the validity
// from before the call, as redsync does inside (expiry − 1% drift).
func newLock(nodes []locks.Conn, process int) (locks.Locker, error) {
	rs := redsync.New(pools(nodes)...)
	return redsyncadapter.New(redsyncadapter.Version{
		NewMutex: func(key, token string, ttl time.Duration) redsyncadapter.Mutex {
			return rs.NewMutex(key, redsync.WithExpiry(ttl), redsync.WithTries(1),
				redsync.WithGenValueFunc(func() (string, error) { return token, nil }))
		},
		NotAcquired: func(err error) bool { return errors.Is(err, redsync.ErrFailed) },
		Validity: func(_ redsyncadapter.Mutex, start, _ time.Time, ttl time.Duration, _ bool) time.Time {
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

// Every hold outlasts the TTL, so every release comes after the key
// expired; v4.0.3 reports each as a success, which the lease model calls
// dishonest. The mechanism makes it certain in any seed.
func TestUnlockAfterExpiry(t *testing.T) {
	out := lockjepsentest.Run(t, redsyncadapter.UnlockAfterExpiry("redsync-v4.0.3", newLock, harness.ExpectUnsafe))
	if out == nil {
		return
	}
	if l := out.Results.Lease; l.DishonestOps == 0 {
		t.Fatalf("no dishonest release found:\n%s", strings.Join(out.Results.Summary(), "\n"))
	}
	t.Logf("v4.0.3: %d of %d late releases reported success: %s", out.Results.Lease.DishonestOps, out.Results.Lease.Judged, out.Results.Lease.Dishonesty[0].Story)
}
