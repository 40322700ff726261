// Package redsyncadapter drives any version of redsync as a lockjepsen
// lock, the way a user of that version would. It imports no redsync: each
// regression module pins its own version and hands its mutexes in, so
// that one adapter serves every pinned version.
package redsyncadapter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockjepsen/lockjepsen/locks"
)

// Mutex is what every redsync v4 mutex offers.
type Mutex interface {
	LockContext(ctx context.Context) error
	UnlockContext(ctx context.Context) (bool, error)
	ExtendContext(ctx context.Context) (bool, error)
}

// Version is one redsync version, as a user of it would drive it.
type Version struct {
	// NewMutex makes the mutex for one attempt: the key, a token unique
	// per grant, the TTL as its expiry, one try.
	NewMutex func(key, token string, ttl time.Duration) Mutex
	// Failed is the version's "lock taken" error, told apart from an
	// unknown outcome.
	Failed error
	// Validity is what the user believes a grant (or, with extend, an
	// extension) leaves: start is taken just before the call, done just
	// after it returned, for a version that offers no validity of its own.
	Validity func(m Mutex, start, done time.Time, ttl time.Duration, extend bool) time.Time
}

// NodeTimeout bounds each call to one node, in the pinned versions' pools
// and the current version's lock alike, so that a paused node costs every
// version's calls the same.
const NodeTimeout = 50 * time.Millisecond

// OneTry is a version as a user drives it: one mutex per attempt, one
// try, the token as its value and the TTL as its expiry; failed is its
// "lock taken" error. The version's constructor, options and error are
// handed in, so that the adapter still imports no redsync. The caller
// sets Validity.
func OneTry[M Mutex, O any](newMutex func(string, ...O) M, expiry func(time.Duration) O, tries func(int) O,
	value func(func() (string, error)) O, failed error) Version {
	return Version{
		NewMutex: func(key, token string, ttl time.Duration) Mutex {
			return newMutex(key, expiry(ttl), tries(1), value(func() (string, error) { return token, nil }))
		},
		Failed: failed,
	}
}

// FromStart is the validity of a version that offers none: counted from
// before the call, as redsync counts it inside, the TTL less 1% for
// drift.
func FromStart(_ Mutex, start, _ time.Time, ttl time.Duration, _ bool) time.Time {
	return start.Add(ttl - ttl/100)
}

// Pools is one pool per node, as newPool makes it from the node's address
// and NodeTimeout.
func Pools[P any](nodes []locks.Conn, newPool func(addr string, timeout time.Duration) P) []P {
	out := make([]P, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, newPool(n.Addr, NodeTimeout))
	}
	return out
}

// New is one client process's lock.
func New(v Version, process int) locks.Locker {
	return &lock{v: v, prefix: fmt.Sprintf("p%d", process)}
}

type lock struct {
	v      Version
	prefix string
	n      int
}

func (l *lock) TryAcquire(ctx context.Context, key string, ttl time.Duration) (locks.Lease, error) {
	l.n++
	token := fmt.Sprintf("%s.%d", l.prefix, l.n)
	m := l.v.NewMutex(key, token, ttl)
	start := time.Now()
	if err := m.LockContext(ctx); err != nil {
		if errors.Is(err, l.v.Failed) {
			return nil, locks.ErrNotAcquired
		}
		return nil, err
	}
	return &lease{v: l.v, m: m, token: token, validUntil: l.v.Validity(m, start, time.Now(), ttl, false)}, nil
}

type lease struct {
	v          Version
	m          Mutex
	token      string
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
	l.validUntil = l.v.Validity(l.m, start, time.Now(), ttl, true)
	return nil
}

func (l *lease) Release(ctx context.Context) error {
	ok, err := l.m.UnlockContext(ctx)
	if !ok {
		return errors.Join(locks.ErrNotHeld, err)
	}
	return nil
}
