package locks

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/cluster"
)

// WaitName is the token lock that also waits for replicas.
const WaitName = "wait"

var waitLock = Descriptor{
	Name:        WaitName,
	Description: "acquire with SET NX PX, then WAIT for replicas on the same connection, counting the grant only if enough replicas acknowledged; release with compare-and-delete",
	Nodes:       SingleNode,
	// WAIT needs replicas: only Sentinel's primary has them.
	Systems: []string{cluster.Sentinel},
	New: func(nodes []Conn, opts Options) (Locker, error) {
		replicas, timeout := opts.WaitReplicas, opts.WaitTimeout
		if replicas == 0 {
			replicas = 1
		}
		if timeout == 0 {
			timeout = 100 * time.Millisecond
		}
		return NilOnErr(NewWaitLock(nodes[0].Client, opts.TokenPrefix, replicas, timeout))
	},
}

// WaitLock is the token lock on a replicated primary that counts a grant
// only once enough replicas acknowledged it: SET NX PX, then WAIT on the
// same connection. It narrows the failover window but does not close it
// (redisson#5256): WAIT returns after the replicas received the write, not
// after they would win an election, and a replica that did not acknowledge
// can still be promoted.
type WaitLock struct {
	*RedisLock
	// Replicas is how many replicas must acknowledge (WAIT numreplicas).
	Replicas int
	// Timeout bounds the WAIT.
	Timeout time.Duration
}

// NewWaitLock returns the wait lock on client.
func NewWaitLock(client redis.UniversalClient, tokenPrefix string, replicas int, timeout time.Duration) (*WaitLock, error) {
	if replicas < 1 {
		return nil, fmt.Errorf("the wait lock needs at least 1 replica to wait for, not %d", replicas)
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("the wait lock needs a positive WAIT timeout, not %s", timeout)
	}
	base, err := NewRedisLock(client, Token, tokenPrefix)
	if err != nil {
		return nil, err
	}
	return &WaitLock{RedisLock: base, Replicas: replicas, Timeout: timeout}, nil
}

// TryAcquire sets the key and waits for the replicas in one pipeline, so
// that WAIT runs on the connection that wrote.
func (l *WaitLock) TryAcquire(ctx context.Context, key string, ttl time.Duration) (Lease, error) {
	token := l.nextToken()
	start := time.Now()
	pipe := l.Client.Pipeline()
	set := pipe.SetNX(ctx, key, token, ttl)
	// WAIT is not on go-redis's Pipeliner; send it as a raw command.
	wait := pipe.Do(ctx, "WAIT", l.Replicas, l.Timeout.Milliseconds())
	_, err := pipe.Exec(ctx)
	if set.Err() != nil {
		return nil, fmt.Errorf("acquire %s: %w", key, set.Err())
	}
	if !set.Val() {
		return nil, ErrNotAcquired
	}
	lease := &redisLease{lock: l.RedisLock, key: key, token: token, validUntil: start.Add(ttl - DefaultDrift(ttl))}
	if err != nil || wait.Err() != nil {
		// The key is set but we cannot tell whether it replicated: give it
		// back and report an unknown outcome.
		lease.Release(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("acquire %s: WAIT: %w", key, firstErr(wait.Err(), err))
	}
	acked, err := wait.Int64()
	if err != nil {
		lease.Release(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("acquire %s: WAIT: %w", key, err)
	}
	if acked < int64(l.Replicas) {
		// Too few copies to survive a failover: not a lock we may count on.
		if rerr := lease.Release(context.WithoutCancel(ctx)); rerr != nil && !Definite(rerr) {
			return nil, fmt.Errorf("acquire %s: only %d of %d replicas acknowledged, and the release failed: %w", key, acked, l.Replicas, rerr)
		}
		return nil, fmt.Errorf("%w: only %d of %d replicas acknowledged", ErrNotAcquired, acked, l.Replicas)
	}
	return lease, nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
