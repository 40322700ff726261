package liblocks

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/locks"
)

// The locks of the Redis and Valkey clients, rueidislock and valkeylock
// (one design, two modules), hand their holder a context rather than a
// deadline. Read from rueidislock v1.0.80's lock.go:
//
//   - try (lines 254-364) sets KeyMajority of 2×KeyMajority−1 keys
//     <prefix>:<i>:<name> with SET NX PXAT now+KeyValidity from the
//     client's wall clock (acqat, line 437), each try bounded by
//     TryNextAfter (20 ms, line 155-159); a timer that would cancel the
//     context at the deadline is stopped on success (line 353), so the
//     holder's context has no deadline at all.
//   - A goroutine per key (monitoring, lines 272-315) extends it every
//     ExtendInterval (KeyValidity/2) with a compare-and-PEXPIREAT (extend,
//     line 435) bounded by the key's current deadline (script, lines
//     180-191), and re-checks the key when CLIENT TRACKING invalidates it
//     (onInvalidations, lines 214-252; a nil message, the connection
//     closing, wakes every key). A monitor ends when its script fails or
//     answers 0; once KeyMajority monitors have ended the context is
//     cancelled (line 296).
//
// So the belief ends on a notification, or when a renewal fails, at the
// latest when it runs out at the key's own deadline: the very instant the
// key expires on a server whose clock agrees, truncated to the
// millisecond (deadline.UnixMilli()), with no margin for drift or for the
// cancellation to reach the holder.
//
// The adapter gives each lease a token of its own (the library's random
// value is not exported), watches the library's commands through a client
// wrapper (ClientBuilder) to record each renewal of the lease's keys, and
// its invalidations (OnInvalidations) to tell a notification from a
// failed renewal, and records the context's end as the lease's revocation
// (locks.Revocable).

// ctxLocker is what both libraries' Locker offer the adapter.
type ctxLocker interface {
	TryWithContext(ctx context.Context, name string) (context.Context, context.CancelFunc, error)
	Close()
}

// ctxLibrary is one of the two libraries, as the adapter builds it.
type ctxLibrary struct {
	name      string // the lock's name in errors
	prefix    string // the library's default key prefix
	majority  int32
	notLocked error
	// build makes the library's Locker with KeyValidity validity on
	// conn, its client wrapped so that obs sees its commands and
	// invalidations.
	build func(conn dialSpec, validity time.Duration, majority int32, obs *ctxObserver) (ctxLocker, error)
}

// extendScript is rueidislock's and valkeylock's extend (lock.go line
// 435), by which the adapter knows a renewal among the commands.
const extendScript = `if redis.call("GET",KEYS[1]) == ARGV[1] then local r = redis.call("PEXPIREAT",KEYS[1],ARGV[2]);redis.call("GET",KEYS[1]);return r end;return 0`

var extendSHA = func() string { s := sha1.Sum([]byte(extendScript)); return hex.EncodeToString(s[:]) }()

// ctxLock adapts one of the libraries to locks.Locker. It builds the
// library's Locker at the first acquire, with KeyValidity the TTL asked
// (one per TTL: a run asks one).
type ctxLock struct {
	lib    ctxLibrary
	conn   dialSpec
	prefix string
	seq    atomic.Int64
	obs    *ctxObserver

	mu      sync.Mutex
	lockers map[time.Duration]ctxLocker
}

func newCtxLock(lib ctxLibrary, nodes []locks.Conn, tokenPrefix string) (*ctxLock, error) {
	if len(nodes) != 1 {
		return nil, fmt.Errorf("%s: needs one connection (a node's, or a cluster's), got %d", lib.name, len(nodes))
	}
	spec, err := dialSpecOf(nodes[0])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", lib.name, err)
	}
	return &ctxLock{lib: lib, conn: spec, prefix: tokenPrefix, obs: newCtxObserver(lib.prefix),
		lockers: map[time.Duration]ctxLocker{}}, nil
}

func (l *ctxLock) locker(ttl time.Duration) (ctxLocker, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if lk := l.lockers[ttl]; lk != nil {
		return lk, nil
	}
	lk, err := l.lib.build(l.conn, ttl, l.lib.majority, l.obs)
	if err != nil {
		return nil, fmt.Errorf("%s: new locker: %w", l.lib.name, err)
	}
	l.lockers[ttl] = lk
	return lk, nil
}

// Close closes the library's Lockers and their clients: their renewals
// stop, and every context they handed out ends.
func (l *ctxLock) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for ttl, lk := range l.lockers {
		lk.Close()
		delete(l.lockers, ttl)
	}
	return nil
}

type tryResult struct {
	ctx    context.Context
	cancel context.CancelFunc
	err    error
}

// TryAcquire is one TryWithContext. The library's context must outlive
// the call, so it is given none: the library bounds each key's try by
// TryNextAfter itself, but when a try fails it waits for its cleanup,
// which can take up to the TTL on a dead link. A call that outlasts ctx
// is an unknown outcome, and a lease it grants later is given back.
func (l *ctxLock) TryAcquire(ctx context.Context, key string, ttl time.Duration) (locks.Lease, error) {
	if ttl <= 0 {
		return nil, fmt.Errorf("%s acquire %s: needs a positive TTL, got %v", l.lib.name, key, ttl)
	}
	lk, err := l.locker(ttl)
	if err != nil {
		return nil, err
	}
	le := newCtxLease(l, key, l.prefix+"."+strconv.FormatInt(l.seq.Add(1), 10))
	l.obs.watch(key, le)
	ch := make(chan tryResult, 1)
	le.started = time.Now()
	go func() {
		c, cancel, err := lk.TryWithContext(context.Background(), key)
		ch <- tryResult{c, cancel, err}
	}()
	select {
	case r := <-ch:
		return l.answer(le, r)
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.err == nil {
				r.cancel()
			}
			l.obs.forget(key, le)
			le.acts.close()
		}()
		return nil, fmt.Errorf("%s acquire %s: outcome unknown: %w", l.lib.name, key, ctx.Err())
	}
}

func (l *ctxLock) answer(le *ctxLease, r tryResult) (locks.Lease, error) {
	if r.err == nil {
		le.hold(r.ctx, r.cancel)
		return le, nil
	}
	l.obs.forget(le.key, le)
	le.acts.close()
	if errors.Is(r.err, l.lib.notLocked) {
		// Also when a key's try timed out: the library then ran its
		// compare-and-delete on that key before it answered.
		return nil, fmt.Errorf("%w: %s %s: %v", locks.ErrNotAcquired, l.lib.name, le.key, r.err)
	}
	return nil, fmt.Errorf("%s acquire %s: %w", l.lib.name, le.key, r.err)
}

// ctxLease is a granted lock: the library's context and its cancel.
type ctxLease struct {
	lock      *ctxLock
	key       string
	token     string
	started   time.Time
	acts      *actQueue
	notified  atomic.Bool  // an invalidation reached one of its keys
	lastErr   atomic.Value // the last failed renewal's error (errBox)
	released  atomic.Bool
	ended     atomic.Int64 // unix ns when the context ended, 0 while live
	ctx       context.Context
	cancel    context.CancelFunc
	cancelled chan struct{} // closed once cancel has returned
}

type errBox struct{ err error }

func newCtxLease(l *ctxLock, key, token string) *ctxLease {
	return &ctxLease{lock: l, key: key, token: token, acts: newActQueue(), cancelled: make(chan struct{})}
}

// hold follows the context the library granted: when it ends, the
// revocation is the lease's last act (unless the holder released it), and
// the acts end once the library is done with the keys.
func (le *ctxLease) hold(ctx context.Context, cancel context.CancelFunc) {
	le.ctx, le.cancel = ctx, cancel
	go func() {
		<-ctx.Done()
		now := time.Now()
		le.ended.Store(now.UnixNano())
		if !le.released.Load() {
			le.acts.push(locks.Act{From: now, At: now, Ended: le.why()})
		}
		cancel() // waits for the library's monitors to stop
		le.lock.obs.forget(le.key, le)
		le.acts.close()
	}()
}

// why says what ended the context: its last renewal ran out of time
// (deadline), or an invalidation reached one of its keys after its last
// renewal that succeeded (notification), or else a renewal failed.
func (le *ctxLease) why() string {
	if b, ok := le.lastErr.Load().(errBox); ok && errors.Is(b.err, context.DeadlineExceeded) {
		return history.EndedDeadline
	}
	if le.notified.Load() {
		return history.EndedNotification
	}
	return history.EndedError
}

func (le *ctxLease) Token() string          { return le.token }
func (le *ctxLease) Fence() (int64, bool)   { return 0, false }
func (le *ctxLease) String() string         { return le.key + "=" + le.token }
func (le *ctxLease) StartedAt() time.Time   { return le.started }
func (le *ctxLease) Acts() <-chan locks.Act { return le.acts.out }

// ValidUntil is zero while the context lives (the holder has no deadline)
// and the moment it ended once it has, so that a careful holder stops.
func (le *ctxLease) ValidUntil() time.Time {
	if ns := le.ended.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// Extend: the library renews by itself and offers the holder no extend;
// the answer is whether the context still lives.
func (le *ctxLease) Extend(ctx context.Context, ttl time.Duration) error {
	if le.ctx.Err() != nil {
		return fmt.Errorf("%w: %s extend %s: its context has ended", locks.ErrNotHeld, le.lock.lib.name, le.key)
	}
	return nil
}

// Release calls the library's cancel, which deletes the keys by token and
// waits for its renewals to stop. The library says nothing of the
// outcome; a context that had already ended is locks.ErrNotHeld (the
// library had told the holder), a cancel that outlasts ctx unknown.
func (le *ctxLease) Release(ctx context.Context) error {
	le.released.Store(true)
	wasLive := le.ctx.Err() == nil
	go func() {
		le.cancel()
		close(le.cancelled)
	}()
	select {
	case <-le.cancelled:
	case <-ctx.Done():
		return fmt.Errorf("%s release %s: outcome unknown: %w", le.lock.lib.name, le.key, ctx.Err())
	}
	if !wasLive {
		return fmt.Errorf("%w: %s release %s: its context had ended", locks.ErrNotHeld, le.lock.lib.name, le.key)
	}
	return nil
}

// actQueue hands a lease's acts to the harness in order, never blocking
// the library's goroutines; acts pushed after close are dropped.
type actQueue struct {
	out    chan locks.Act
	mu     sync.Mutex
	q      []locks.Act
	closed bool
	wake   chan struct{}
}

func newActQueue() *actQueue {
	a := &actQueue{out: make(chan locks.Act), wake: make(chan struct{}, 1)}
	go a.run()
	return a
}

func (a *actQueue) push(act locks.Act) {
	a.mu.Lock()
	if !a.closed {
		a.q = append(a.q, act)
	}
	a.mu.Unlock()
	a.signal()
}

func (a *actQueue) close() {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	a.signal()
}

func (a *actQueue) signal() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// run delivers the queued acts, then closes out once closed and drained.
func (a *actQueue) run() {
	defer close(a.out)
	for {
		a.mu.Lock()
		q, closed := a.q, a.closed
		a.q = nil
		a.mu.Unlock()
		for _, act := range q {
			a.out <- act
		}
		if closed && len(q) == 0 {
			return
		}
		if len(q) == 0 {
			<-a.wake
		}
	}
}

// ctxObserver sees the library's commands and invalidations, and tells
// the lease of each lock name what concerns it: its renewals, and
// notifications about its keys.
type ctxObserver struct {
	prefix string
	mu     sync.Mutex
	leases map[string]*ctxLease // by lock name
}

func newCtxObserver(prefix string) *ctxObserver {
	return &ctxObserver{prefix: prefix, leases: map[string]*ctxLease{}}
}

func (o *ctxObserver) watch(name string, le *ctxLease) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.leases[name] = le
}

func (o *ctxObserver) forget(name string, le *ctxLease) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.leases[name] == le {
		delete(o.leases, name)
	}
}

// leaseOf is the lease watched on a library key <prefix>:<i>:<name>.
func (o *ctxObserver) leaseOf(key string) *ctxLease {
	rest, ok := strings.CutPrefix(key, o.prefix+":")
	if !ok {
		return nil
	}
	_, name, ok := strings.Cut(rest, ":")
	if !ok {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.leases[name]
}

// sending is told of each command before it is sent; for a renewal of a
// watched lease's key it returns what to do with the answer: n is the
// script's integer reply, refused whether err is the server's error reply.
func (o *ctxObserver) sending(args []string) func(n int64, err error, refused bool) {
	if len(args) < 6 || args[2] != "1" {
		return nil
	}
	switch {
	case args[0] == "EVALSHA" && args[1] == extendSHA, args[0] == "EVAL" && args[1] == extendScript:
	default:
		return nil
	}
	key := strings.Clone(args[3]) // the command is recycled once sent
	le := o.leaseOf(key)
	at, err := strconv.ParseInt(args[5], 10, 64)
	if le == nil || err != nil {
		return nil
	}
	from := time.Now()
	return func(n int64, err error, refused bool) {
		// The expiry is absolute (PEXPIREAT): what it lets the key live
		// is what remains of it at the completion, none once it passed.
		now := time.Now()
		a := locks.Act{From: from, At: now, TTL: time.UnixMilli(at).Sub(now)}
		switch {
		case err != nil && refused && strings.HasPrefix(err.Error(), "NOSCRIPT"):
			return // not run: the library sends the script itself (EVAL) next
		case err != nil && refused:
			a.Err = fmt.Errorf("%w: renewal of %s refused: %v", locks.ErrNotHeld, key, err)
		case err != nil:
			a.Err = fmt.Errorf("renewal of %s: %w", key, err)
		case n != 1:
			a.Err = fmt.Errorf("%w: renewal of %s found another value", locks.ErrNotHeld, key)
		}
		if a.Err != nil && !errors.Is(a.Err, context.Canceled) {
			// A renewal the cancellation itself interrupted says nothing
			// of why the context ended.
			le.lastErr.Store(errBox{a.Err})
		} else if a.Err == nil {
			// The lock's own renewal invalidates its key too (tracking
			// without NOLOOP), before its reply: only an invalidation
			// after the last renewal that succeeded is news.
			le.notified.Store(false)
		}
		le.acts.push(a)
	}
}

// invalidated is told of each invalidation the library receives: the
// keys named, or every key when the connection closed (all).
func (o *ctxObserver) invalidated(keys []string, all bool) {
	if all {
		o.mu.Lock()
		for _, le := range o.leases {
			le.notified.Store(true)
		}
		o.mu.Unlock()
		return
	}
	for _, k := range keys {
		if le := o.leaseOf(k); le != nil {
			le.notified.Store(true)
		}
	}
}
