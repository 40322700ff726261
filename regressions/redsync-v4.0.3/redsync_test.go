// redsync v4.0.3: Unlock and Extend compared their scripts' results
// wrongly (status != 0 on an int64, status != "ERR"), so both reported
// success when the key had expired or belonged to another client. Fixed
// in v4.0.4 (go-redsync/redsync PR #61).
package regression_test

import (
	"context"
	"errors"
	"fmt"
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
)

// redsyncLock drives v4.0.3 as a user would: one mutex per attempt, no
// retries of its own, tokens unique per grant. v4.0.3 has no Until(): the
// user counts the validity from before Lock, as redsync does inside.
type redsyncLock struct {
	rs     *redsync.Redsync
	prefix string
	n      int
}

func newLock(nodes []locks.Conn, process int) (locks.Locker, error) {
	var pools []redsyncredis.Pool
	for _, n := range nodes {
		pools = append(pools, redsyncgoredis.NewPool(goredis.NewClient(&goredis.Options{Addr: n.Addr, MaxRetries: -1,
			DialTimeout: 50 * time.Millisecond, ReadTimeout: 50 * time.Millisecond, WriteTimeout: 50 * time.Millisecond})))
	}
	return &redsyncLock{rs: redsync.New(pools...), prefix: fmt.Sprintf("p%d", process)}, nil
}

func (l *redsyncLock) TryAcquire(ctx context.Context, key string, ttl time.Duration) (locks.Lease, error) {
	l.n++
	token := fmt.Sprintf("%s.%d", l.prefix, l.n)
	m := l.rs.NewMutex(key, redsync.WithExpiry(ttl), redsync.WithTries(1),
		redsync.WithGenValueFunc(func() (string, error) { return token, nil }))
	start := time.Now()
	if err := m.LockContext(ctx); err != nil {
		if errors.Is(err, redsync.ErrFailed) {
			return nil, locks.ErrNotAcquired
		}
		return nil, err
	}
	return &lease{m: m, token: token, ttl: ttl, validUntil: start.Add(ttl - ttl/100)}, nil
}

type lease struct {
	m          *redsync.Mutex
	token      string
	ttl        time.Duration
	validUntil time.Time
}

func (l *lease) Token() string         { return l.token }
func (l *lease) ValidUntil() time.Time { return l.validUntil }
func (l *lease) Fence() (int64, bool)  { return 0, false }

func (l *lease) Extend(ctx context.Context, ttl time.Duration) error {
	start := time.Now()
	ok, err := l.m.ExtendContext(ctx)
	if !ok {
		return errors.Join(locks.ErrNotHeld, err)
	}
	l.validUntil = start.Add(ttl - ttl/100)
	return nil
}

func (l *lease) Release(ctx context.Context) error {
	ok, err := l.m.UnlockContext(ctx)
	if !ok {
		return errors.Join(locks.ErrNotHeld, err)
	}
	return nil
}

// Every hold outlasts the TTL, so every release comes after the key
// expired; v4.0.3 reports each as a success, which the lease model calls
// dishonest. The mechanism makes it certain in any seed.
func TestUnlockAfterExpiry(t *testing.T) {
	out := lockjepsentest.Run(t, lockjepsentest.Options{
		Locker: newLock, LockName: "redsync-v4.0.3", System: "redlock",
		TimeLimit: 3 * time.Second, Recovery: 500 * time.Millisecond, Expect: harness.ExpectUnsafe,
		Configure: func(c *harness.Config) { c.LongHoldRate = 1 },
	})
	if out == nil {
		return
	}
	if l := out.Results.Lease; l.DishonestOps == 0 {
		t.Fatalf("no dishonest release found:\n%s", strings.Join(out.Results.Summary(), "\n"))
	}
	t.Logf("v4.0.3: %d of %d late releases reported success: %s", out.Results.Lease.DishonestOps, out.Results.Lease.Judged, out.Results.Lease.Dishonesty[0].Story)
}
