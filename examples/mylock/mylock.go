// Package mylock is an example of a team's own Redis lock, tested with
// lockjepsen from `go test` (see mylock_test.go): the whole integration is
// implementing locks.Locker and calling lockjepsentest.Run.
//
// The lock is the classic single-instance one: SET key token NX PX ttl to
// acquire, and a Lua script that deletes (or extends) the key only while it
// still holds our token. Options.PlainDEL releases with a plain DEL
// instead, the common mistake that lets a client whose lease ran out delete
// the next holder's lock; lockjepsen catches it under client pauses.
package mylock

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/locks"
)

// Options tunes a Lock.
type Options struct {
	// PlainDEL releases with DEL instead of compare-and-delete: broken on
	// purpose, to show what the test reports.
	PlainDEL bool
}

// Lock is one client's lock. It implements locks.Locker.
type Lock struct {
	rdb    redis.UniversalClient
	prefix string
	opts   Options
	seq    atomic.Int64
}

// New returns a lock on rdb whose tokens start with prefix (unique per
// client).
func New(rdb redis.UniversalClient, prefix string, opts Options) *Lock {
	return &Lock{rdb: rdb, prefix: prefix, opts: opts}
}

var (
	release = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)
	extend  = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("PEXPIRE", KEYS[1], ARGV[2]) end return 0`)
)

// TryAcquire makes one attempt: locks.ErrNotAcquired when someone else
// holds the key, another error when the outcome is unknown (a timeout).
func (l *Lock) TryAcquire(ctx context.Context, key string, ttl time.Duration) (locks.Lease, error) {
	token := fmt.Sprintf("%s.%d", l.prefix, l.seq.Add(1))
	start := time.Now() // before the request: the lease may start as soon as it is sent
	ok, err := l.rdb.SetNX(ctx, key, token, ttl).Result()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, locks.ErrNotAcquired
	}
	return &lease{l: l, key: key, token: token, until: start.Add(ttl - drift(ttl))}, nil
}

// drift is the safety margin of the lease: Redis expires keys on its own
// millisecond clock.
func drift(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }

type lease struct {
	l     *Lock
	key   string
	token string
	until time.Time
}

func (s *lease) Token() string         { return s.token }
func (s *lease) ValidUntil() time.Time { return s.until }
func (s *lease) Fence() (int64, bool)  { return 0, false }
func (s *lease) String() string        { return s.key + "=" + s.token }

func (s *lease) Extend(ctx context.Context, ttl time.Duration) error {
	start := time.Now()
	n, err := extend.Run(ctx, s.l.rdb, []string{s.key}, s.token, ttl.Milliseconds()).Int64()
	if err != nil {
		return err
	}
	if n == 0 {
		return locks.ErrNotHeld
	}
	s.until = start.Add(ttl - drift(ttl))
	return nil
}

func (s *lease) Release(ctx context.Context) error {
	var n int64
	var err error
	if s.l.opts.PlainDEL {
		n, err = s.l.rdb.Del(ctx, s.key).Result()
	} else {
		n, err = release.Run(ctx, s.l.rdb, []string{s.key}, s.token).Int64()
	}
	if err != nil {
		return err
	}
	if n == 0 {
		return locks.ErrNotHeld
	}
	return nil
}
