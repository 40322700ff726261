// Package mylock is an example of a team's own Redis lock, tested with
// lockjepsen from `go test` (see mylock_test.go): the whole integration is
// implementing locks.Locker and calling lockjepsentest.Run.
//
// The lock is the classic single-instance one: SET key token NX PX ttl to
// acquire, and a Lua script that deletes (or extends) the key only while it
// still holds our token. Options.PlainDEL releases with a plain DEL
// instead, the common mistake that lets a client whose lease ran out delete
// the next holder's lock; lockjepsen catches it under client pauses.
//
// Its leases implement locks.Started: each stamps when its grant or extend
// began, just before the first request went out. lockjepsen's lease model
// counts the TTL from there. A lock on the clients lockjepsen hands it
// (locks.Conn.Client) needs no stamp of its own, since those clients stamp
// the first command each operation sends. A lock that dials Redis itself
// (Dial, on locks.Conn.Addr) has no such stamp, and without StartedAt the
// model counts the TTL from the harness's invocation instead. On a loaded
// machine the lock may send its request milliseconds after that, so an
// honest lease looks as if it claimed more time than the server keeps.
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
	own    *redis.Client // the client Dial made, closed by Close
	prefix string
	opts   Options
	seq    atomic.Int64
}

// New returns a lock on rdb whose tokens start with prefix (unique per
// client).
func New(rdb redis.UniversalClient, prefix string, opts Options) *Lock {
	return &Lock{rdb: rdb, prefix: prefix, opts: opts}
}

// Dial returns a lock on a Redis client of its own to addr, as a team's
// lock that manages its connections does. lockjepsen closes it after the
// run (Close).
func Dial(addr, prefix string, opts Options) *Lock {
	rdb := redis.NewClient(&redis.Options{
		Addr: addr,
		// One attempt per call: a retry would hide an unknown outcome.
		MaxRetries:            -1,
		ContextTimeoutEnabled: true,
	})
	l := New(rdb, prefix, opts)
	l.own = rdb
	return l
}

// Close closes the client Dial made.
func (l *Lock) Close() error {
	if l.own == nil {
		return nil
	}
	return l.own.Close()
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
	return &lease{l: l, key: key, token: token, started: start, until: start.Add(ttl - drift(ttl))}, nil
}

// drift is the safety margin of the lease: Redis expires keys on its own
// millisecond clock.
func drift(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }

type lease struct {
	l       *Lock
	key     string
	token   string
	started time.Time // when the grant or the latest extend began
	until   time.Time
}

// StartedAt implements locks.Started: the stamp taken just before the
// grant's or the latest extend's request was sent.
func (s *lease) StartedAt() time.Time { return s.started }

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
	s.started, s.until = start, start.Add(ttl-drift(ttl))
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

var _ locks.Started = (*lease)(nil)
