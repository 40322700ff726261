package liblocks

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/locks"
)

// RedislockName is github.com/bsm/redislock, a single-instance library.
const RedislockName = "redislock"

// Redislock is the redislock lock's descriptor.
var Redislock = locks.Descriptor{
	Name:        RedislockName,
	Description: "the bsm/redislock library: Obtain (SET NX PX), Release and Refresh by token, on a single Redis",
	Nodes:       locks.SingleNode,
	Systems:     []string{cluster.Single, cluster.Sentinel},
	New: func(nodes []locks.Conn, opts locks.Options) (locks.Locker, error) {
		return locks.NilOnErr(NewRedislock(nodes[0].Client, opts.TokenPrefix))
	},
}

// redislockSeq numbers redislock grants across all its Lockers in the
// process (see RedislockLock).
var redislockSeq atomic.Int64

// RedislockLock adapts github.com/bsm/redislock (one Redis instance) to
// locks.Locker.
//
// Tokens are set with locks.Options.Token as prefix.counter, so that they appear
// in the history. redislock's Obtain also succeeds, without NX, when the
// key's value merely starts with the caller's token (its re-entrancy
// check), so two clients given the same token — or a token that is a
// prefix of the holder's, like "p1.1" against "p1.12" — both hold the lock.
// The counter is process-wide and the prefix may not contain '.', which
// makes a newer token never equal to nor a prefix of an older one.
type RedislockLock struct {
	client *redislock.Client
	prefix string
}

// NewRedislock returns the adapter on client.
func NewRedislock(client redis.UniversalClient, tokenPrefix string) (*RedislockLock, error) {
	if client == nil {
		return nil, errors.New("redislock: no client")
	}
	if strings.Contains(tokenPrefix, ".") {
		return nil, fmt.Errorf("redislock: token prefix %q contains '.', which could make one token a prefix of another "+
			"and let redislock grant the lock twice", tokenPrefix)
	}
	return &RedislockLock{client: redislock.New(client), prefix: tokenPrefix}, nil
}

// TryAcquire is one Obtain without retry (the workload retries).
func (l *RedislockLock) TryAcquire(ctx context.Context, key string, ttl time.Duration) (locks.Lease, error) {
	token := l.prefix + "." + strconv.FormatInt(redislockSeq.Add(1), 10)
	start := time.Now()
	lk, err := l.client.Obtain(ctx, key, ttl, &redislock.Options{Token: token, RetryStrategy: redislock.NoRetry()})
	if errors.Is(err, redislock.ErrNotObtained) {
		return nil, locks.ErrNotAcquired
	}
	if err != nil {
		return nil, fmt.Errorf("redislock acquire %s: %w", key, err)
	}
	return &redislockLease{lk: lk, key: key, validUntil: start.Add(ttl - locks.DefaultDrift(ttl))}, nil
}

type redislockLease struct {
	lk         *redislock.Lock
	key        string
	validUntil time.Time
}

func (le *redislockLease) Token() string        { return le.lk.Token() }
func (le *redislockLease) Fence() (int64, bool) { return 0, false }
func (le *redislockLease) String() string       { return le.key + "=" + le.lk.Token() }

// ValidUntil: redislock exposes no validity (only a TTL query), so it is
// start + TTL − locks.DefaultDrift, start read before Obtain: the token lock's
// margin, so that the two are judged alike.
func (le *redislockLease) ValidUntil() time.Time { return le.validUntil }

func (le *redislockLease) Extend(ctx context.Context, ttl time.Duration) error {
	start := time.Now()
	err := le.lk.Refresh(ctx, ttl, nil)
	if errors.Is(err, redislock.ErrNotObtained) {
		return locks.ErrNotHeld
	}
	if err != nil {
		return fmt.Errorf("redislock extend %s: %w", le.key, err)
	}
	le.validUntil = start.Add(ttl - locks.DefaultDrift(ttl))
	return nil
}

func (le *redislockLease) Release(ctx context.Context) error {
	err := le.lk.Release(ctx)
	if errors.Is(err, redislock.ErrLockNotHeld) {
		return locks.ErrNotHeld
	}
	if err != nil {
		return fmt.Errorf("redislock release %s: %w", le.key, err)
	}
	return nil
}
