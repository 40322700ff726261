// redsync v4.0.3: Unlock and Extend compared their scripts' results
// wrongly (status != 0 on an int64, status != "ERR"), so both reported
// success when the key had expired or belonged to another client. Fixed
// in v4.0.4 (go-redsync/redsync PR #61).
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

// v4.0.3 is driven as a user would: one mutex per attempt, one try,
// tokens unique per grant. It has no Until(): the user counts the validity
// from before the call, as redsync does inside (expiry − 1% drift).
func newLock(nodes []locks.Conn, process int) (locks.Locker, error) {
	v := redsyncadapter.OneTry(redsync.New(redsyncadapter.Pools(nodes, pool)...).NewMutex,
		redsync.WithExpiry, redsync.WithTries, redsync.WithGenValueFunc, redsync.ErrFailed)
	v.Validity = redsyncadapter.FromStart
	return redsyncadapter.New(v, process), nil
}

// pool is one node's go-redis v8 client, as this version takes it.
func pool(addr string, timeout time.Duration) redsyncredis.Pool {
	return redsyncgoredis.NewPool(goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1,
		DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout}))
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
