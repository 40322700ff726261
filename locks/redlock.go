package locks

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

	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/cluster"
)

// RedlockName is our implementation of the published Redlock algorithm.
const RedlockName = "redlock"

var redlockLock = Descriptor{
	Name:        RedlockName,
	Description: "lockjepsen's implementation of the published Redlock algorithm: SET NX PX on every node, granted with a majority and a positive validity (TTL − elapsed − drift), released everywhere",
	Nodes:       Majority,
	Systems:     []string{cluster.Redlock},
	New: func(nodes []Conn, opts Options) (Locker, error) {
		return NilOnErr(NewRedlock(nodes, RedlockOptions{
			TokenPrefix: opts.TokenPrefix, DriftFactor: opts.DriftFactor, Tries: opts.Tries,
			NodeTimeout: opts.NodeTimeout, RetryDelay: opts.RetryDelay, Clock: opts.Clock,
		}))
	},
}

// Clock is the client's clock as Redlock reads it to measure how long an
// acquisition or extension took. Injecting one makes client clock drift (or
// a stall the clock does not see) a fault.
type Clock interface{ Now() time.Time }

// NodeReporter is implemented by leases of multi-node locks.
type NodeReporter interface{ GrantedBy() []string }

// Drift is Redlock's clock-drift allowance: TTL×factor + 2 ms, as in the
// published algorithm. With factor 0.01 it is DefaultDrift.
func Drift(ttl time.Duration, factor float64) time.Duration {
	return time.Duration(float64(ttl)*factor) + 2*time.Millisecond
}

// RedlockOptions configures Redlock; zero values mean the defaults.
type RedlockOptions struct {
	TokenPrefix string
	// DriftFactor: default 0.01.
	DriftFactor float64
	// NodeTimeout bounds each node's answer: default min(TTL/10, 50ms), so
	// that a dead node costs a small part of the validity, not all of it.
	// It is a budget for the command's round trip: a node without a
	// connection ready is connected first (see ConnectTimeout).
	NodeTimeout time.Duration
	// ConnectTimeout bounds the connection that an operation opens ahead,
	// before its clock starts, to each node that has none ready: go-redis
	// dials and sends HELLO on a new connection, which on a loaded
	// machine takes longer than NodeTimeout and would make a live node
	// count as unavailable. The operation waits for these connections
	// only until a quorum of nodes has one, for at most half the time
	// left on its context (ConnectTimeout without a deadline); a slower
	// one goes on in the background for the next operation. Default 1 s.
	ConnectTimeout time.Duration
	// Tries per TryAcquire: default 1, because the harness's workload
	// already retries after a random backoff and records every attempt.
	Tries int
	// RetryDelay is the longest random wait between tries: default 50ms.
	// Random, so that clients that split the nodes between them do not
	// collide again in lockstep.
	RetryDelay time.Duration
	// Clock measures elapsed time: default real time.
	Clock Clock
}

// Redlock is the algorithm of Redis's distributed-lock documentation on N
// independent nodes: SET NX PX on all of them in parallel, granted only by a
// majority within the validity, released everywhere on failure.
type Redlock struct {
	nodes  []Conn
	opts   RedlockOptions
	quorum int
	seq    atomic.Int64
	// dialing[i] is set while a connection to node i is being opened
	// ahead (warmUp): one at a time, so that a node cut off does not
	// collect one hanging PING per attempt.
	dialing []atomic.Bool
}

// NewRedlock returns a Redlock on nodes (any count ≥ 1 here; New insists on
// an odd count ≥ 3, the only ones where a majority tolerates failures).
func NewRedlock(nodes []Conn, opts RedlockOptions) (*Redlock, error) {
	if len(nodes) == 0 {
		return nil, errors.New("redlock needs at least one node")
	}
	if opts.DriftFactor < 0 || opts.DriftFactor >= 1 {
		return nil, fmt.Errorf("redlock: drift factor %v is outside [0, 1)", opts.DriftFactor)
	}
	if opts.DriftFactor == 0 {
		opts.DriftFactor = 0.01
	}
	if opts.Tries <= 0 {
		opts.Tries = 1
	}
	if opts.RetryDelay <= 0 {
		opts.RetryDelay = 50 * time.Millisecond
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = time.Second
	}
	ns := make([]Conn, len(nodes))
	for i, n := range nodes {
		if n.Client == nil {
			return nil, fmt.Errorf("redlock: node %d (%q) has no client", i+1, n.Name)
		}
		if n.Name == "" {
			n.Name = "n" + strconv.Itoa(i+1)
		}
		ns[i] = n
	}
	return &Redlock{nodes: ns, opts: opts, quorum: len(ns)/2 + 1, dialing: make([]atomic.Bool, len(ns))}, nil
}

// Quorum is the number of nodes that must grant: N/2+1.
func (l *Redlock) Quorum() int { return l.quorum }

func (l *Redlock) nodeTimeout(ttl time.Duration) time.Duration {
	if l.opts.NodeTimeout > 0 {
		return l.opts.NodeTimeout
	}
	return max(min(ttl/10, 50*time.Millisecond), time.Millisecond)
}

// warmUp opens a connection ahead to every node whose client has none
// idle, so that the node budget of the operation that follows covers its
// command's round trip and not go-redis's dial and HELLO. It returns once
// a quorum of nodes has a connection ready, every connection it opened
// is up or failed, ctx ends, or half of ctx's remaining time (at most
// ConnectTimeout) has passed. The operation reads its clock after this, so
// the validity TTL − elapsed − drift still counts every moment in which a
// node may have set its key.
//
// The PINGs run on a context of their own: they are not the operation's
// requests (a stamp of its first send must be its first command on the
// key), and a connection still opening when the operation goes on is kept
// for the next one.
func (l *Redlock) warmUp(ctx context.Context) {
	ready, started := 0, 0
	opened := make(chan bool, len(l.nodes))
	for i, n := range l.nodes {
		if n.Client.PoolStats().IdleConns > 0 {
			ready++
			continue
		}
		if !l.dialing[i].CompareAndSwap(false, true) {
			continue // a connection is already opening
		}
		started++
		go func() {
			defer l.dialing[i].Store(false)
			cctx, cancel := context.WithTimeout(context.Background(), l.opts.ConnectTimeout)
			defer cancel()
			opened <- n.Client.Ping(cctx).Err() == nil
		}()
	}
	if started == 0 || ready >= l.quorum {
		return
	}
	wait := l.opts.ConnectTimeout
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl)/2)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	for ; started > 0 && ready < l.quorum; started-- {
		select {
		case ok := <-opened:
			if ok {
				ready++
			}
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// now returns the lock's clock and the real clock. With the default clock
// they are one reading, so that ValidUntil is exactly start + TTL − drift.
func (l *Redlock) now() (clock, real time.Time) {
	real = time.Now()
	if l.opts.Clock == nil {
		return real, real
	}
	return l.opts.Clock.Now(), real
}

// TryAcquire makes up to Tries attempts, each with a fresh token.
//
// Errors: ErrNotAcquired (definite) when no attempt can have left our token
// on a majority — the refusals (NX or a Redis error reply) alone make a
// quorum impossible — or when a majority granted but the validity had run
// out (the lease is then refused by us, released everywhere, and whatever
// stays behind expires with the TTL). Otherwise some node's answer is
// unknown and might complete a majority: an error that is not Definite.
func (l *Redlock) TryAcquire(ctx context.Context, key string, ttl time.Duration) (Lease, error) {
	if ttl <= 0 {
		return nil, fmt.Errorf("redlock acquire %s: needs a positive TTL, got %v", key, ttl)
	}
	var last, unknown error
	for try := 0; try < l.opts.Tries; try++ {
		if try > 0 {
			t := time.NewTimer(rand.N(l.opts.RetryDelay + 1))
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, l.triesError(last, unknown)
			case <-t.C:
			}
		}
		lease, err := l.attempt(ctx, key, ttl)
		if err == nil {
			return lease, nil
		}
		last = err
		if unknown == nil && !Definite(err) {
			unknown = err
		}
	}
	return nil, l.triesError(last, unknown)
}

// triesError keeps the result unknown if any attempt's outcome was: the
// last attempt's refusal says nothing about an earlier attempt's keys.
func (l *Redlock) triesError(last, unknown error) error {
	if unknown == nil || unknown == last {
		return last
	}
	return fmt.Errorf("%v; an earlier attempt's outcome is unknown: %w", last, unknown)
}

func (l *Redlock) attempt(ctx context.Context, key string, ttl time.Duration) (Lease, error) {
	token := l.opts.TokenPrefix + "." + strconv.FormatInt(l.seq.Add(1), 10)
	l.warmUp(ctx)
	start, _ := l.now()
	t := l.onAll(ctx, l.nodeTimeout(ttl), func(ctx context.Context, c redis.UniversalClient) (bool, error) {
		return c.SetNX(ctx, key, token, ttl).Result()
	})
	end, realEnd := l.now()
	elapsed := end.Sub(start)
	validity := ttl - elapsed - Drift(ttl, l.opts.DriftFactor)
	if t.yes >= l.quorum && validity > 0 {
		// The validity starts when the acquisition ends, in real time: the
		// harness compares ValidUntil with its own clock, and an injected
		// clock must distort the belief only through the elapsed time it
		// measured, as a drifting client clock would.
		return &redlockLease{lock: l, key: key, token: token, ttl: ttl,
			validUntil: realEnd.Add(validity), grantedBy: t.names(l.nodes)}, nil
	}
	// Every node, not only those that said yes: a node whose answer was
	// lost may have applied the SET.
	l.releaseAll(ctx, key, token, ttl)
	switch {
	case t.yes+t.unknown < l.quorum:
		return nil, fmt.Errorf("%w: redlock %s: %d of %d nodes needed: %s", ErrNotAcquired, key, l.quorum, len(l.nodes), t.summary(l.nodes))
	case t.yes >= l.quorum:
		return nil, fmt.Errorf("%w: redlock %s: granted by %d of %d nodes but validity %v ≤ 0 after %v; released",
			ErrNotAcquired, key, t.yes, len(l.nodes), validity, elapsed)
	default:
		return nil, fmt.Errorf("redlock acquire %s: outcome unknown, %d of %d nodes needed: %s: %w",
			key, l.quorum, len(l.nodes), t.summary(l.nodes), t.firstUnknown)
	}
}

// releaseAll is the best-effort cleanup of a failed attempt. It must run
// even when the caller's context has ended (that is often why the attempt
// failed), so it has only its per-node timeout.
func (l *Redlock) releaseAll(ctx context.Context, key, token string, ttl time.Duration) {
	l.onAll(context.WithoutCancel(ctx), l.nodeTimeout(ttl), func(ctx context.Context, c redis.UniversalClient) (bool, error) {
		n, err := releaseScript.Run(ctx, c, []string{key}, token).Int64()
		return n == 1, err
	})
}

type nodeOutcome int8

const (
	nodeYes     nodeOutcome = iota // granted, deleted, extended
	nodeNo                         // a definite no: NX refused, not our token, or a Redis error reply
	nodeUnknown                    // timeout, connection error: it may have happened
)

type tally struct {
	outcomes     []nodeOutcome
	errs         []error
	yes, no      int
	unknown      int
	firstUnknown error
}

func (t *tally) names(nodes []Conn) []string {
	var out []string
	for i, o := range t.outcomes {
		if o == nodeYes {
			out = append(out, nodes[i].Name)
		}
	}
	return out
}

func (t *tally) summary(nodes []Conn) string {
	parts := make([]string, len(nodes))
	for i, o := range t.outcomes {
		switch {
		case o == nodeYes:
			parts[i] = nodes[i].Name + " yes"
		case t.errs[i] != nil && o == nodeNo:
			parts[i] = nodes[i].Name + " refused (" + t.errs[i].Error() + ")"
		case o == nodeNo:
			parts[i] = nodes[i].Name + " no"
		default:
			parts[i] = nodes[i].Name + " unknown (" + t.errs[i].Error() + ")"
		}
	}
	return strings.Join(parts, ", ")
}

type nodeOp func(ctx context.Context, c redis.UniversalClient) (bool, error)

// onAll runs op on every node in parallel, each under its own timeout, and
// waits at most a little longer than that timeout: a client that does not
// honour context deadlines must not stretch the acquisition.
func (l *Redlock) onAll(ctx context.Context, timeout time.Duration, op nodeOp) *tally {
	n := len(l.nodes)
	t := &tally{outcomes: make([]nodeOutcome, n), errs: make([]error, n)}
	noAnswer := fmt.Errorf("no answer within %v", timeout)
	for i := range t.outcomes {
		t.outcomes[i], t.errs[i] = nodeUnknown, noAnswer
	}
	type result struct {
		i   int
		yes bool
		err error
	}
	// Buffered: a late node's goroutine must be able to finish after we
	// stopped listening.
	ch := make(chan result, n)
	for i, node := range l.nodes {
		go func() {
			nctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			yes, err := op(nctx, node.Client)
			ch <- result{i, yes, err}
		}()
	}
	hard := time.NewTimer(timeout + timeout/2 + time.Millisecond)
	defer hard.Stop()
collect:
	for got := 0; got < n; got++ {
		select {
		case r := <-ch:
			switch {
			case r.err == nil && r.yes:
				t.outcomes[r.i], t.errs[r.i] = nodeYes, nil
			case r.err == nil:
				t.outcomes[r.i], t.errs[r.i] = nodeNo, nil
			case Definite(r.err):
				t.outcomes[r.i], t.errs[r.i] = nodeNo, r.err
			default:
				t.errs[r.i] = r.err
			}
		case <-hard.C:
			break collect
		}
	}
	for i, o := range t.outcomes {
		switch o {
		case nodeYes:
			t.yes++
		case nodeNo:
			t.no++
		default:
			t.unknown++
			if t.firstUnknown == nil {
				t.firstUnknown = fmt.Errorf("node %s: %w", l.nodes[i].Name, t.errs[i])
			}
		}
	}
	return t
}

type redlockLease struct {
	lock       *Redlock
	key, token string

	mu         sync.Mutex // the nemesis may ask GrantedBy while the client extends
	ttl        time.Duration
	validUntil time.Time
	grantedBy  []string
}

func (le *redlockLease) Token() string        { return le.token }
func (le *redlockLease) Fence() (int64, bool) { return 0, false } // Redlock has no monotonic token
func (le *redlockLease) String() string       { return le.key + "=" + le.token }

// ValidUntil is the real time at which the validity TTL − elapsed − drift,
// counted from the end of the acquisition (or last extension), runs out.
// With the real clock that is start + TTL − drift, start being read before
// the first SET was sent: the same belief as the token lock's.
func (le *redlockLease) ValidUntil() time.Time {
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.validUntil
}

// GrantedBy names the nodes that granted the lease, in node order; after
// an Extend, the nodes that extended it (those whose key now lives longest).
func (le *redlockLease) GrantedBy() []string {
	le.mu.Lock()
	defer le.mu.Unlock()
	return append([]string(nil), le.grantedBy...)
}

// Extend asks every node for ttl more with a compare-and-PEXPIRE. It
// succeeds with a quorum and a positive validity; ErrNotHeld when the
// refusals alone deny a quorum, or when a quorum extended but too late.
func (le *redlockLease) Extend(ctx context.Context, ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("redlock extend %s: needs a positive TTL, got %v", le.key, ttl)
	}
	l := le.lock
	l.warmUp(ctx)
	start, _ := l.now()
	t := l.onAll(ctx, l.nodeTimeout(ttl), func(ctx context.Context, c redis.UniversalClient) (bool, error) {
		n, err := extendScript.Run(ctx, c, []string{le.key}, le.token, ttl.Milliseconds()).Int64()
		return n == 1, err
	})
	end, realEnd := l.now()
	validity := ttl - end.Sub(start) - Drift(ttl, l.opts.DriftFactor)
	switch {
	case t.yes >= l.quorum && validity > 0:
		le.mu.Lock()
		le.ttl, le.validUntil, le.grantedBy = ttl, realEnd.Add(validity), t.names(l.nodes)
		le.mu.Unlock()
		return nil
	case t.yes >= l.quorum:
		return fmt.Errorf("%w: redlock extend %s: extended by %d nodes but validity %v ≤ 0 after %v",
			ErrNotHeld, le.key, t.yes, validity, end.Sub(start))
	case t.yes+t.unknown < l.quorum:
		return fmt.Errorf("%w: redlock extend %s: %d of %d nodes needed: %s", ErrNotHeld, le.key, l.quorum, len(l.nodes), t.summary(l.nodes))
	default:
		return fmt.Errorf("redlock extend %s: outcome unknown, %d of %d nodes needed: %s: %w",
			le.key, l.quorum, len(l.nodes), t.summary(l.nodes), t.firstUnknown)
	}
}

// Release deletes the key on every node where it still holds our token.
// nil only if a quorum deleted it: the lease was still held when it was
// released. A node that never answered the grant may have set its key
// late and keep it past the lease, so a minority's delete says nothing
// about the lock (the lease model would rightly call success on it
// dishonest). ErrNotHeld when the refusals alone deny a quorum; otherwise
// the outcome is unknown.
func (le *redlockLease) Release(ctx context.Context) error {
	l := le.lock
	le.mu.Lock()
	ttl := le.ttl
	le.mu.Unlock()
	l.warmUp(ctx)
	t := l.onAll(ctx, l.nodeTimeout(ttl), func(ctx context.Context, c redis.UniversalClient) (bool, error) {
		n, err := releaseScript.Run(ctx, c, []string{le.key}, le.token).Int64()
		return n == 1, err
	})
	switch {
	case t.yes >= l.quorum:
		return nil
	case t.yes+t.unknown < l.quorum:
		return fmt.Errorf("%w: redlock release %s: %d of %d nodes needed: %s", ErrNotHeld, le.key, l.quorum, len(l.nodes), t.summary(l.nodes))
	default:
		return fmt.Errorf("redlock release %s: outcome unknown: %s: %w", le.key, t.summary(l.nodes), t.firstUnknown)
	}
}
