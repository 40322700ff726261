// redsync v4.12.0: when Extend's touch failed on one node (a timeout, a
// refused connection), touch released the lock on every node, and
// Extend still returned true if a quorum of touches had succeeded: the
// holder believed its lease extended while the key was gone everywhere.
// Fixed in v4.12.1 (go-redsync/redsync PR #150, #151), which dropped the
// clean-up.
package regression_test

import (
	"strings"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredis "github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/lockjepsentest"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/regressions/redsyncadapter"
)

// v4.12.0 is driven as a user would: one mutex per attempt, one try,
// tokens unique per grant, and the validity the mutex reports (Until).
func newLock(nodes []locks.Conn, process int) (locks.Locker, error) {
	v := redsyncadapter.OneTry(redsync.New(redsyncadapter.Pools(nodes, pool)...).NewMutex,
		redsync.WithExpiry, redsync.WithTries, redsync.WithGenValueFunc, redsync.ErrFailed)
	v.Validity = func(m redsyncadapter.Mutex, _, _ time.Time, _ time.Duration, _ bool) time.Time {
		return m.(*redsync.Mutex).Until()
	}
	return redsyncadapter.New(v, process), nil
}

// pool is one node's go-redis v9 client, as this version takes it.
func pool(addr string, timeout time.Duration) redsyncredis.Pool {
	return redsyncgoredis.NewPool(goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1,
		DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout}))
}

// One node of five is paused for the whole run, so every extension's
// touch on it times out: v4.12.0 then deletes the key on the other four
// before Extend returns true on their quorum. The holder believes on a
// key that is gone, and the next contender is granted it, on every
// extend, in any seed; the run stops at the first overlap, or at the
// first extend answered ok with the next grant inside its TTL.
func TestExtendErrorReleasesAll(t *testing.T) {
	// The two holders show at the first extend during the pause (about
	// 1 s); a generous limit and a stop at the first overlap make that
	// independent of the machine's speed.
	opts := redsyncadapter.PausedNodeRenewals("redsync-v4.12.0", newLock, harness.ExpectUnsafe)
	opts.TimeLimit, opts.StopOnFirstViolation = 60*time.Second, true
	out := lockjepsentest.Run(t, opts)
	if out == nil {
		return
	}
	// Either the two holders, or what comes first since the extend check
	// (checker/extendgrant.go): the extend answered ok on a key it had
	// deleted, and the next grant fell inside the TTL it claimed.
	if ex := out.Results.Exclusion; ex != nil && ex.Count > 0 {
		t.Logf("v4.12.0: %s", ex.Violations[0].Story)
		return
	}
	if eg := out.Results.ExtendGrants; eg != nil && eg.Count > 0 {
		t.Logf("v4.12.0: %s", eg.Examples[0].Story)
		return
	}
	t.Fatalf("no two holders, and no extend with a grant inside it:\n%s", strings.Join(out.Results.Summary(), "\n"))
}
