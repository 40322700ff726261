// redsync v4.3.0: Extend returned true on a quorum without counting the
// time the extension took, or the drift, against the validity, and it
// offered no way to learn the validity: a user counts it from when Extend
// returned. Fixed in v4.4.0 (Extend tracks until and fails with
// ErrExtendFailed when it comes too late).
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

// redsyncLock drives v4.3.0 as a user would: one mutex per attempt, no
// retries of its own, tokens unique per grant. v4.3.0 has no Until(): the
// user counts a grant's validity from before Lock, as redsync does inside,
// and an extension's from when Extend said it succeeded, since nothing
// else is offered.
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
	ok, err := l.m.ExtendContext(ctx)
	if !ok {
		return errors.Join(locks.ErrNotHeld, err)
	}
	l.validUntil = time.Now().Add(ttl)
	return nil
}

func (l *lease) Release(ctx context.Context) error {
	ok, err := l.m.UnlockContext(ctx)
	if !ok {
		return errors.Join(locks.ErrNotHeld, err)
	}
	return nil
}

// One node of five is paused for the whole run, so every extension waits
// out that node's 50 ms timeout before Extend returns true: a validity
// counted from then claims more than any node can keep, on every extend,
// in any seed.
func TestExtendIgnoresElapsed(t *testing.T) {
	out := lockjepsentest.Run(t, lockjepsentest.Options{
		Locker: newLock, LockName: "redsync-v4.3.0", System: "redlock", Workload: "renew", Nemesis: []string{"pause"},
		TimeLimit: 4 * time.Second, Recovery: 500 * time.Millisecond, Expect: harness.ExpectUnsafe,
		Configure: func(c *harness.Config) {
			c.NemesisInterval, c.FaultDuration = 100*time.Millisecond, time.Minute
			c.RenewFor = "2..3"
		},
	})
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
