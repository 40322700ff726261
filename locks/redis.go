package locks

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/internal/drift"
)

// Names of the single-instance Redis locks.
const (
	Token      = "token"       // SET NX PX, Lua compare-and-delete release
	SetnxDel   = "setnx-del"   // SET NX PX, plain DEL release: deletes others' locks
	SetnxNoTTL = "setnx-nottl" // SET NX without expiry: a crashed holder blocks all
	Fenced     = "fenced"      // Token plus an INCR fencing counter in the same script
)

// Variants lists the locks that RedisLock implements.
var Variants = []string{Token, SetnxDel, SetnxNoTTL, Fenced}

var (
	tokenLock = redisVariant(Token, false,
		"acquire with SET key token NX PX ttl; release with a Lua script that deletes the key only if it still holds our token (the correct single-instance lock)")
	setnxDelLock = redisVariant(SetnxDel, false,
		"acquire with SET key token NX PX ttl; release with a plain DEL, which deletes the key whoever holds it")
	setnxNoTTLLock = redisVariant(SetnxNoTTL, false,
		"acquire with SET key token NX and no expiry; release with a Lua compare-and-delete: a holder that dies never releases")
	fencedLock = redisVariant(Fenced, true,
		"acquire with a Lua script that does SET NX PX and INCR key:fence, giving every grant a monotonic fencing token; release with compare-and-delete")
)

func redisVariant(name string, fences bool, description string) Descriptor {
	systems := redisSystems
	if !fences {
		// On Redis Cluster a script's keys must share a slot; the fenced
		// lock's counter (key:fence) has a slot of its own.
		systems = append(slices.Clip(systems), cluster.RedisCluster)
	}
	return Descriptor{
		Name: name, Description: description, Nodes: SingleNode, Systems: systems, Fences: fences,
		New: func(nodes []Conn, opts Options) (Locker, error) {
			return NilOnErr(NewRedisLock(nodes[0].Client, name, opts.TokenPrefix))
		},
	}
}

// Scripts run atomically on the server: the check and the action cannot be
// separated by another client's command.
var (
	releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`)
	extendScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0`)
	// The fence is taken only when the SET succeeds, in the same script, so
	// that fences are ordered like grants.
	fencedAcquireScript = redis.NewScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return false`)
)

// DefaultDrift is the safety margin a client subtracts from the TTL before
// it stops trusting its lease (drift.Margin: TTL/100 + 2 ms, as in Redis's
// published lock algorithm), the one the checker counts slow replies by.
func DefaultDrift(ttl time.Duration) time.Duration { return drift.Margin(ttl) }

// RedisLock is one of the single-instance locks; Variant selects which.
type RedisLock struct {
	Client  redis.UniversalClient
	Variant string
	// TokenPrefix makes tokens unique per client; a counter makes them
	// unique per grant.
	TokenPrefix string

	seq atomic.Int64
}

// NewRedisLock returns the named lock on client.
func NewRedisLock(client redis.UniversalClient, variant, tokenPrefix string) (*RedisLock, error) {
	if !slices.Contains(Variants, variant) {
		return nil, fmt.Errorf("unknown lock %q", variant)
	}
	return &RedisLock{Client: client, Variant: variant, TokenPrefix: tokenPrefix}, nil
}

// FenceKey is where the fenced lock keeps its counter.
func FenceKey(key string) string { return key + ":fence" }

// TryAcquire makes one attempt.
func (l *RedisLock) nextToken() string {
	return l.TokenPrefix + "." + strconv.FormatInt(l.seq.Add(1), 10)
}

// TryAcquire makes one attempt.
func (l *RedisLock) TryAcquire(ctx context.Context, key string, ttl time.Duration) (Lease, error) {
	token := l.nextToken()
	start := time.Now()
	lease := &redisLease{lock: l, key: key, token: token}
	switch l.Variant {
	case SetnxNoTTL:
		ok, err := l.Client.SetNX(ctx, key, token, 0).Result()
		if err != nil {
			return nil, fmt.Errorf("acquire %s: %w", key, err)
		}
		if !ok {
			return nil, ErrNotAcquired
		}
		return lease, nil
	case Fenced:
		fence, err := fencedAcquireScript.Run(ctx, l.Client, []string{key, FenceKey(key)}, token, ttl.Milliseconds()).Int64()
		if err == redis.Nil {
			return nil, ErrNotAcquired
		}
		if err != nil {
			return nil, fmt.Errorf("acquire %s: %w", key, err)
		}
		lease.fence, lease.hasFence = fence, true
	default:
		ok, err := l.Client.SetNX(ctx, key, token, ttl).Result()
		if err != nil {
			return nil, fmt.Errorf("acquire %s: %w", key, err)
		}
		if !ok {
			return nil, ErrNotAcquired
		}
	}
	lease.validUntil = start.Add(ttl - DefaultDrift(ttl))
	return lease, nil
}

type redisLease struct {
	lock       *RedisLock
	key, token string
	validUntil time.Time
	fence      int64
	hasFence   bool
}

func (le *redisLease) Token() string          { return le.token }
func (le *redisLease) ValidUntil() time.Time  { return le.validUntil }
func (le *redisLease) Fence() (int64, bool)   { return le.fence, le.hasFence }
func (le *redisLease) String() string         { return le.key + "=" + le.token }
func (le *redisLease) client() redis.Scripter { return le.lock.Client }

func (le *redisLease) Extend(ctx context.Context, ttl time.Duration) error {
	if le.lock.Variant == SetnxNoTTL {
		return nil // nothing expires, nothing to extend
	}
	start := time.Now()
	n, err := extendScript.Run(ctx, le.client(), []string{le.key}, le.token, ttl.Milliseconds()).Int64()
	if err != nil {
		return fmt.Errorf("extend %s: %w", le.key, err)
	}
	if n == 0 {
		return ErrNotHeld
	}
	le.validUntil = start.Add(ttl - DefaultDrift(ttl))
	return nil
}

func (le *redisLease) Release(ctx context.Context) error {
	var n int64
	var err error
	if le.lock.Variant == SetnxDel {
		// The bug under test: whoever holds the key now, it goes.
		n, err = le.lock.Client.Del(ctx, le.key).Result()
	} else {
		n, err = releaseScript.Run(ctx, le.client(), []string{le.key}, le.token).Int64()
	}
	if err != nil {
		return fmt.Errorf("release %s: %w", le.key, err)
	}
	if n == 0 {
		return ErrNotHeld
	}
	return nil
}
