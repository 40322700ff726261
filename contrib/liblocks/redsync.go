package liblocks

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/locks"
)

// RedsyncName is github.com/go-redsync/redsync/v4, a Redlock library.
const RedsyncName = "redsync"

// Redsync is the redsync lock's descriptor.
var Redsync = locks.Descriptor{
	Name:        RedsyncName,
	Description: "the go-redsync/redsync library, Redlock over every node",
	Nodes:       locks.Majority,
	Systems:     []string{cluster.Redlock},
	New: func(nodes []locks.Conn, opts locks.Options) (locks.Locker, error) {
		return locks.NilOnErr(NewRedsync(nodes, opts))
	},
}

// RedsyncLock adapts github.com/go-redsync/redsync/v4 (Redlock on its
// goredis v9 pool) to locks.Locker.
//
// Its leases do not implement NodeReporter: redsync counts the nodes that
// granted but does not say which, and drops the per-node errors on success.
// It has no fence.
type RedsyncLock struct {
	rs    *redsync.Redsync
	nodes int
	opts  locks.Options
	seq   atomic.Int64
}

// NewRedsync returns the adapter on nodes. locks.Options used: TokenPrefix,
// DriftFactor, Tries, NodeTimeout (as redsync's timeout factor), RetryDelay.
func NewRedsync(nodes []locks.Conn, opts locks.Options) (*RedsyncLock, error) {
	if len(nodes) == 0 {
		return nil, errors.New("redsync needs at least one node")
	}
	pools := make([]redsyncredis.Pool, len(nodes))
	for i, n := range nodes {
		if n.Client == nil {
			return nil, fmt.Errorf("redsync: node %d (%q) has no client", i+1, n.Name)
		}
		pools[i] = goredis.NewPool(n.Client)
	}
	if opts.DriftFactor == 0 {
		opts.DriftFactor = 0.01
	}
	// One try, not redsync's 32: the workload retries after its own backoff
	// and records each attempt; 32 tries of 50–250 ms would hide seconds of
	// attempts in one operation, past the op timeout, and redsync reports
	// only the last try's errors.
	if opts.Tries <= 0 {
		opts.Tries = 1
	}
	return &RedsyncLock{rs: redsync.New(pools...), nodes: len(nodes), opts: opts}, nil
}

func (l *RedsyncLock) quorum() int { return l.nodes/2 + 1 }

// TryAcquire builds a mutex with expiry = ttl and locks it. Tokens are
// prefix.counter instead of redsync's random value, so that the history
// shows whose key is on a node.
func (l *RedsyncLock) TryAcquire(ctx context.Context, key string, ttl time.Duration) (locks.Lease, error) {
	if ttl <= 0 {
		return nil, fmt.Errorf("redsync acquire %s: needs a positive TTL, got %v", key, ttl)
	}
	token := l.opts.TokenPrefix + "." + strconv.FormatInt(l.seq.Add(1), 10)
	options := []redsync.Option{
		redsync.WithExpiry(ttl),
		redsync.WithTries(l.opts.Tries),
		redsync.WithDriftFactor(l.opts.DriftFactor),
		redsync.WithGenValueFunc(func() (string, error) { return token, nil }),
	}
	if l.opts.NodeTimeout > 0 {
		options = append(options, redsync.WithTimeoutFactor(float64(l.opts.NodeTimeout)/float64(ttl)))
	}
	if d := l.opts.RetryDelay; d > 0 {
		options = append(options, redsync.WithRetryDelayFunc(func(int) time.Duration { return rand.N(d + 1) }))
	}
	m := l.rs.NewMutex(key, options...)
	err := m.LockContext(ctx)
	if err == nil {
		return &redsyncLease{lock: l, m: m, key: key, token: token, validUntil: m.Until()}, nil
	}
	if errors.Is(err, redsync.ErrFailed) {
		// ErrFailed without node errors: a quorum granted too late (then
		// redsync released), or the context ended between tries, when an
		// earlier try's outcome is lost.
		if l.opts.Tries > 1 && ctx.Err() != nil {
			return nil, fmt.Errorf("redsync acquire %s: %v: %w", key, err, ctx.Err())
		}
		return nil, fmt.Errorf("%w: redsync %s: %v", locks.ErrNotAcquired, key, oneLine(err))
	}
	t := tallyRedsync(err)
	granted := l.nodes - t.no - t.unknown
	// As for Redlock: definite when the refusals alone deny a quorum, or
	// when a quorum granted too late and redsync gave the lease up itself.
	// With Tries > 1 only the last try's errors are visible.
	if granted+t.unknown < l.quorum() || granted >= l.quorum() {
		return nil, fmt.Errorf("%w: redsync %s: %v", locks.ErrNotAcquired, key, oneLine(err))
	}
	return nil, fmt.Errorf("redsync acquire %s: outcome unknown (%v): %w", key, oneLine(err), t.firstUnknown)
}

type redsyncTally struct {
	no, unknown  int
	firstUnknown error
}

// tallyRedsync counts the definite and unknown node answers in a redsync
// error: a tree of errors.Join of *ErrNodeTaken, *RedisError and
// ErrLockAlreadyExpired, or a lone *ErrTaken when a quorum refused (which
// hides what the other nodes said). The whole error is never wrapped with
// %w: a Redis error reply inside it would make an unknown outcome locks.Definite.
func tallyRedsync(err error) redsyncTally {
	var t redsyncTally
	var walk func(error)
	walk = func(e error) {
		switch x := e.(type) {
		case *redsync.ErrTaken:
			t.no += len(x.Nodes)
		case *redsync.ErrNodeTaken:
			t.no++
		case *redsync.RedisError:
			if locks.Definite(x.Err) {
				t.no++
			} else {
				t.unknown++
				if t.firstUnknown == nil {
					t.firstUnknown = fmt.Errorf("node #%d: %w", x.Node, x.Err)
				}
			}
		default:
			if e == redsync.ErrLockAlreadyExpired {
				t.no++
				return
			}
			if j, ok := e.(interface{ Unwrap() []error }); ok {
				for _, s := range j.Unwrap() {
					walk(s)
				}
				return
			}
			// Something this adapter does not know: assume the worst.
			t.unknown++
			if t.firstUnknown == nil {
				t.firstUnknown = e
			}
		}
	}
	walk(err)
	return t
}

type redsyncLease struct {
	lock       *RedsyncLock
	m          *redsync.Mutex
	key, token string

	mu         sync.Mutex
	validUntil time.Time
}

func (le *redsyncLease) Token() string        { return le.token }
func (le *redsyncLease) Fence() (int64, bool) { return 0, false }
func (le *redsyncLease) String() string       { return le.key + "=" + le.token }

// ValidUntil is redsync's own Until(): start + expiry − expiry×factor,
// without the published algorithm's 2 ms constant.
func (le *redsyncLease) ValidUntil() time.Time {
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.validUntil
}

// Extend sets the mutex's expiry to ttl and extends it on all nodes. Unlike
// the acquisition, redsync bounds it only by ctx: a dead node costs the
// whole context.
func (le *redsyncLease) Extend(ctx context.Context, ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("redsync extend %s: needs a positive TTL, got %v", le.key, ttl)
	}
	redsync.WithExpiry(ttl).Apply(le.m)
	ok, err := le.m.ExtendContext(ctx)
	if ok {
		le.mu.Lock()
		le.validUntil = le.m.Until()
		le.mu.Unlock()
		return nil
	}
	if err == nil || errors.Is(err, redsync.ErrExtendFailed) {
		// A quorum extended but too late: the holder must stop.
		return fmt.Errorf("%w: redsync extend %s: %v", locks.ErrNotHeld, le.key, oneLine(err))
	}
	t := tallyRedsync(err)
	extended := le.lock.nodes - t.no - t.unknown
	if extended+t.unknown < le.lock.quorum() {
		return fmt.Errorf("%w: redsync extend %s: %v", locks.ErrNotHeld, le.key, oneLine(err))
	}
	return fmt.Errorf("redsync extend %s: outcome unknown (%v): %w", le.key, oneLine(err), t.firstUnknown)
}

// Release unlocks on all nodes, bounded only by ctx like Extend. As for
// the redlock lock, and as redsync itself counts it, the release succeeded
// only if a quorum deleted our key: a node that never answered the grant
// may have set its key late, so a minority's delete says nothing about the
// lock. It is locks.ErrNotHeld when the answers settle that no quorum did,
// else its outcome is unknown.
func (le *redsyncLease) Release(ctx context.Context) error {
	ok, err := le.m.UnlockContext(ctx)
	if ok {
		return nil
	}
	if err == nil {
		return fmt.Errorf("%w: redsync release %s", locks.ErrNotHeld, le.key)
	}
	t := tallyRedsync(err)
	if deleted := le.lock.nodes - t.no - t.unknown; deleted+t.unknown < le.lock.quorum() {
		return fmt.Errorf("%w: redsync release %s: %v", locks.ErrNotHeld, le.key, oneLine(err))
	}
	return fmt.Errorf("redsync release %s: outcome unknown (%v): %w", le.key, oneLine(err), t.firstUnknown)
}

// oneLine flattens errors.Join's newlines: the error goes into one history
// line and one terminal line.
func oneLine(err error) string {
	if err == nil {
		return "<nil>"
	}
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}
