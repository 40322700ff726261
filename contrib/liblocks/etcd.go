package liblocks

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/locks"
)

// Names of etcd's lock: concurrency.Mutex on a lease, on the etcd system.
const (
	EtcdName = "etcd"
	// EtcdSessionName is the same with the session's background
	// keep-alive, as applications use it: the holder has no deadline.
	EtcdSessionName = "etcd-session"
)

// Etcd and EtcdSession are the etcd locks' descriptors.
var (
	Etcd = locks.Descriptor{
		Name:        EtcdName,
		Description: "etcd's concurrency.Mutex on a lease of the TTL with no keep-alive: the holder acts only until the lease's end by its own clock; the key's create revision is the fencing token",
		Nodes:       locks.RaftMembers, Systems: []string{cluster.Etcd}, DialsAddr: true, Fences: true,
		New: func(nodes []locks.Conn, opts locks.Options) (locks.Locker, error) {
			return locks.NilOnErr(NewEtcdLock(nodes, EtcdOptions{TokenPrefix: opts.TokenPrefix}))
		},
	}
	EtcdSession = locks.Descriptor{
		Name:        EtcdSessionName,
		Description: "etcd's concurrency.Session and Mutex as applications use them: the client renews the lease in the background, and the holder believes it holds the lock until it releases; the key's create revision is the fencing token",
		Nodes:       locks.RaftMembers, Systems: []string{cluster.Etcd}, DialsAddr: true, Fences: true, BackgroundRenewal: true,
		New: func(nodes []locks.Conn, opts locks.Options) (locks.Locker, error) {
			return locks.NilOnErr(NewEtcdLock(nodes, EtcdOptions{TokenPrefix: opts.TokenPrefix, KeepAlive: true}))
		},
	}
)

// The etcd lock: etcd's own recipe, go.etcd.io/etcd/client/v3/concurrency,
// a Mutex on a Session, the way applications take locks on etcd.
//
// Acquire. Each attempt grants a fresh lease of the TTL asked, rounded up
// to whole seconds (etcd counts lease TTLs in seconds, and raises any TTL
// below its minimum: 1 s with the local backend's timings), binds a
// Session to it and calls Mutex.TryLock: one transaction that creates the
// key <prefix><name>/<lease id> with the lease and reads the key of the
// prefix with the lowest create revision; the lock is ours if that is our
// key. Otherwise TryLock deletes our key and says concurrency.ErrLocked,
// which is locks.ErrNotAcquired here; the attempt's lease is revoked.
//
// No keep-alive. The session's keep-alive is stopped at once (the session
// is orphaned before TryLock): a lease lives exactly its TTL from its grant
// unless the holder calls Extend (one KeepAliveOnce). That keeps the
// holder's belief simple and checkable: ValidUntil is
//
//	start + min(asked TTL, granted TTL) − (that/100 + 2 ms)
//
// where start is taken before the lease is granted: etcd starts the lease's
// clock when it applies the grant, after start, and only ever lengthens a
// lease (a new leader renews every lease in full), so the key cannot
// vanish before the belief ends, up to the margin for the rate difference
// of the two monotonic clocks. Using the asked TTL when etcd granted more
// is safe too (the holder stops early); it means a TTL that is not a whole
// number of seconds keeps the key longer than the holder acts on it, so
// runs meant to outlive the lease should ask for whole seconds.
//
// Fencing. Fence is the lock key's create revision: etcd's revision grows
// with every write to the cluster, and a grant's key is created after the
// previous holder's key was deleted (otherwise that key would still have
// the lowest revision), so fences grow with every grant. GuardedPut is the
// other fencing style, done by etcd itself: a write in a transaction that
// only applies while the lock key still exists with our create revision.
//
// The etcd-session lock (EtcdOptions.KeepAlive) is the same recipe with
// the session left as applications leave it: the client's keep-alive
// renews the lease every TTL/3 in the background for as long as the
// holder runs, and the holder has no deadline of its own: ValidUntil is
// the zero time (no limit) while the session lives, and a time in the past
// once the session has ended (the client saw the lease expire or be
// revoked). This is the lock Jepsen found not mutually exclusive on etcd
// 3.4.3: a process that stalls past the TTL sends no keep-alive, loses the
// lease and the key, and wakes up believing it still holds the lock. Its
// fence (the create revision) is what keeps a resource safe then.
//
// Answers. locks.ErrNotAcquired is also returned when no lease was granted
// (nothing was written) and when TryLock's outcome was unknown but the
// lease, and with it any key it might have created, was then revoked.
// Errors without one of the package's sentinels (timeouts, no leader,
// connection errors) are unknown outcomes.

// EtcdKeyPrefix is where lock keys live: a lock named k is the key range
// EtcdKeyPrefix + k + "/".
const EtcdKeyPrefix = "lockjepsen/lock/"

// ErrGuardFailed is GuardedPut's definite answer that the write was not
// applied because the lock was no longer held. It wraps locks.ErrNotHeld, so
// locks.Definite reports it as definite.
var ErrGuardFailed = fmt.Errorf("guarded write refused: %w", locks.ErrNotHeld)

// EtcdOptions configures an etcd lock; zero values mean the defaults.
type EtcdOptions struct {
	// TokenPrefix makes tokens unique per client; a counter makes them
	// unique per grant.
	TokenPrefix string
	// KeyPrefix is where lock keys live (default EtcdKeyPrefix).
	KeyPrefix string
	// KeepAlive keeps each grant's lease alive in the background until
	// release (the etcd-session lock); see the comment at the top.
	KeepAlive bool
}

// EtcdLock is the etcd lock of one client process. It owns its etcd
// client when New or NewEtcdLock made it: Close closes it.
type EtcdLock struct {
	cli    *clientv3.Client
	owned  bool
	prefix string
	tokens string
	seq    atomic.Int64
	// keepAlive: the etcd-session lock.
	keepAlive bool
}

// NewEtcdClient makes an etcd client of the given client addresses
// (host:port; through per-client proxies in the harness), in order: no
// logging, no endpoint auto-sync (the client keeps to the addresses it was
// given and never learns the members' own), and no blocking dial (each
// call's context bounds it). gRPC spreads calls over the connected
// addresses.
func NewEtcdClient(addrs []string) (*clientv3.Client, error) {
	if len(addrs) == 0 {
		return nil, errors.New("etcd client: no address")
	}
	eps := make([]string, len(addrs))
	for i, a := range addrs {
		eps[i] = "http://" + a
	}
	return clientv3.New(clientv3.Config{Endpoints: eps, Logger: zap.NewNop()})
}

// NewEtcdLock makes an etcd lock with its own client of the nodes' Addr.
func NewEtcdLock(nodes []locks.Conn, opts EtcdOptions) (*EtcdLock, error) {
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		if n.Addr == "" {
			return nil, fmt.Errorf("etcd lock: node %d (%q) has no address", i+1, n.Name)
		}
		addrs[i] = n.Addr
	}
	cli, err := NewEtcdClient(addrs)
	if err != nil {
		return nil, err
	}
	l := NewEtcdLockWithClient(cli, opts)
	l.owned = true
	return l, nil
}

// NewEtcdLockWithClient makes an etcd lock on a client the caller owns.
func NewEtcdLockWithClient(cli *clientv3.Client, opts EtcdOptions) *EtcdLock {
	if opts.KeyPrefix == "" {
		opts.KeyPrefix = EtcdKeyPrefix
	}
	return &EtcdLock{cli: cli, prefix: opts.KeyPrefix, tokens: opts.TokenPrefix, keepAlive: opts.KeepAlive}
}

// Client is the lock's etcd client, for GuardedPut and reads of the
// resource.
func (l *EtcdLock) Client() *clientv3.Client { return l.cli }

// Close closes the client if the lock made it.
func (l *EtcdLock) Close() error {
	if l.owned {
		return l.cli.Close()
	}
	return nil
}

// EtcdLeaseTTL is the lease TTL, in seconds, asked of etcd for ttl: rounded
// up to a whole second, at least 1.
func EtcdLeaseTTL(ttl time.Duration) int64 {
	return max(int64((ttl+time.Second-1)/time.Second), 1)
}

// EtcdMargin is what the holder's belief leaves out of a lease of d:
// d/100 + 2 ms, as for the Redis locks.
func EtcdMargin(d time.Duration) time.Duration { return d/100 + 2*time.Millisecond }

// stopped is a context that is already over: a session made with it starts
// no keep-alive (the client drops the registration at once).
var stopped = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// TryAcquire makes one attempt (see the comment at the top of the file).
func (l *EtcdLock) TryAcquire(ctx context.Context, key string, ttl time.Duration) (locks.Lease, error) {
	if ttl <= 0 {
		return nil, fmt.Errorf("etcd acquire %s: needs a positive TTL, got %v", key, ttl)
	}
	start := time.Now()
	g, err := l.cli.Grant(ctx, EtcdLeaseTTL(ttl))
	if err != nil {
		return nil, fmt.Errorf("%w: etcd %s: no lease granted, so nothing was written: %w", locks.ErrNotAcquired, key, err)
	}
	// The session's keep-alive runs until sessionCtx ends: at once for the
	// plain lock, at release (or a failed attempt) for the session lock.
	// Its context is not ctx, which ends with this call.
	sessionCtx, stopKeepAlive := stopped, context.CancelFunc(func() {})
	if l.keepAlive {
		sessionCtx, stopKeepAlive = context.WithCancel(context.Background())
	}
	fail := func(err error) (locks.Lease, error) {
		stopKeepAlive()
		return nil, err
	}
	s, err := concurrency.NewSession(l.cli, concurrency.WithLease(g.ID), concurrency.WithContext(sessionCtx))
	if err != nil {
		l.revoke(ctx, g.ID)
		return fail(fmt.Errorf("%w: etcd %s: session: %w", locks.ErrNotAcquired, key, err))
	}
	if !l.keepAlive {
		s.Orphan() // no keep-alive: the lease lives its TTL unless extended
	}
	m := concurrency.NewMutex(s, l.prefix+key)
	err = m.TryLock(ctx)
	switch {
	case err == nil:
	case errors.Is(err, concurrency.ErrLocked):
		l.revoke(ctx, g.ID)
		return fail(fmt.Errorf("%w: etcd %s is held", locks.ErrNotAcquired, key))
	default:
		// TryLock may have created our key. Revoking the lease deletes
		// it if so; if the revoke is answered, nothing of ours remains.
		if rerr := l.revoke(ctx, g.ID); rerr == nil || errors.Is(rerr, rpctypes.ErrLeaseNotFound) {
			return fail(fmt.Errorf("%w: etcd %s: lock outcome unknown (%w), lease revoked", locks.ErrNotAcquired, key, err))
		}
		return fail(fmt.Errorf("etcd acquire %s: outcome unknown: %w", key, err))
	}
	e := &EtcdLease{
		lock: l, name: key, mutex: m, id: g.ID, rev: fenceOf(m),
		token:   l.tokens + "." + strconv.FormatInt(l.seq.Add(1), 10),
		granted: time.Duration(g.TTL) * time.Second,
		start:   start,
	}
	if l.keepAlive {
		e.session, e.stopKeepAlive = s, stopKeepAlive
		return e, nil
	}
	life := min(ttl, time.Duration(g.TTL)*time.Second)
	e.valid = start.Add(life - EtcdMargin(life))
	return e, nil
}

// revoke gives an attempt's lease back. It runs even if ctx has ended (that
// is often why the attempt failed), bounded by a short timeout of its own.
func (l *EtcdLock) revoke(ctx context.Context, id clientv3.LeaseID) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 250*time.Millisecond)
	defer cancel()
	_, err := l.cli.Revoke(ctx, id)
	return err
}

// fenceOf reads the create revision the mutex compares its key with.
func fenceOf(m *concurrency.Mutex) int64 {
	cmp := m.IsOwner()
	return cmp.GetCompare().GetCreateRevision()
}

// EtcdLease is a granted etcd lock.
type EtcdLease struct {
	lock    *EtcdLock
	name    string
	mutex   *concurrency.Mutex
	id      clientv3.LeaseID
	rev     int64
	token   string
	granted time.Duration
	start   time.Time
	// session and stopKeepAlive are set for the etcd-session lock.
	session       *concurrency.Session
	stopKeepAlive context.CancelFunc

	mu    sync.Mutex
	valid time.Time
}

// Token is unique per grant (TokenPrefix.n).
func (e *EtcdLease) Token() string { return e.token }

// StartedAt is when the lease's grant (or latest renewal) was sent: the
// lock dials etcd with clients of its own, which the harness cannot stamp,
// so it stamps itself (locks.Started).
func (e *EtcdLease) StartedAt() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.start
}

// ValidUntil is the holder's belief (see the comment at the top of the
// file).
func (e *EtcdLease) ValidUntil() time.Time {
	if e.session != nil {
		select {
		case <-e.session.Done():
			return e.start // the session ended: the belief is over
		default:
			return time.Time{}
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.valid
}

// Fence is the lock key's create revision.
func (e *EtcdLease) Fence() (int64, bool) { return e.rev, true }

// Key is the etcd key of this grant.
func (e *EtcdLease) Key() string { return e.mutex.Key() }

// LeaseID is the etcd lease the key is bound to.
func (e *EtcdLease) LeaseID() clientv3.LeaseID { return e.id }

// GrantedTTL is the lease's TTL as etcd granted it.
func (e *EtcdLease) GrantedTTL() time.Duration { return e.granted }

// Client is the etcd client of the lock that granted the lease.
func (e *EtcdLease) Client() *clientv3.Client { return e.lock.cli }

// IsOwner is the transaction guard that holds while this grant's key
// exists with its create revision: the lock is still ours.
func (e *EtcdLease) IsOwner() clientv3.Cmp { return e.mutex.IsOwner() }

// Extend renews the lease once (KeepAliveOnce). etcd renews a lease to its
// granted TTL, not to ttl: the belief becomes start + min(ttl, granted TTL)
// − margin, start taken before the renewal is sent. locks.ErrNotHeld if the lease
// is gone (expired, revoked or released).
func (e *EtcdLease) Extend(ctx context.Context, ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("etcd extend %s: needs a positive TTL, got %v", e.name, ttl)
	}
	start := time.Now()
	r, err := e.lock.cli.KeepAliveOnce(ctx, e.id)
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return fmt.Errorf("%w: etcd %s: lease %x is gone", locks.ErrNotHeld, e.name, int64(e.id))
	case err != nil:
		return fmt.Errorf("etcd extend %s: %w", e.name, err)
	}
	if e.session != nil {
		return nil // the session lock's belief has no deadline to move
	}
	life := min(ttl, e.granted, time.Duration(r.TTL)*time.Second)
	e.mu.Lock()
	e.valid, e.start = start.Add(life-EtcdMargin(life)), start
	e.mu.Unlock()
	return nil
}

// Release deletes the key if it is still this grant's (as Mutex.Unlock
// does, but guarded, so that it can tell), then revokes the lease.
// locks.ErrNotHeld if the key was gone. The lease is given back (and the session
// lock's keep-alive stopped) whatever the answer: a release that timed out
// must not leave a lease that is renewed for ever, and revoking it deletes
// the key if the delete did not.
func (e *EtcdLease) Release(ctx context.Context) error {
	defer func() {
		if e.stopKeepAlive != nil {
			e.stopKeepAlive()
		}
		e.lock.revoke(ctx, e.id)
	}()
	r, err := e.lock.cli.Txn(ctx).If(e.IsOwner()).Then(clientv3.OpDelete(e.Key())).Commit()
	if err != nil {
		return fmt.Errorf("etcd release %s: %w", e.name, err)
	}
	if !r.Succeeded {
		return fmt.Errorf("%w: etcd %s: key %s is gone", locks.ErrNotHeld, e.name, e.Key())
	}
	return nil
}

// Owner is a lock that can guard a transaction: an *EtcdLease or a
// *concurrency.Mutex.
type Owner interface{ IsOwner() clientv3.Cmp }

var (
	_ Owner = (*EtcdLease)(nil)
	_ Owner = (*concurrency.Mutex)(nil)
)

// GuardedPut writes key=value only if owner still holds its lock, in one
// transaction (Txn().If(owner.IsOwner())): the fencing that etcd does
// itself. ErrGuardFailed (definite: nothing was written) if the lock was
// lost; any other error is an unknown outcome.
func GuardedPut(ctx context.Context, cli *clientv3.Client, owner Owner, key, value string) error {
	r, err := cli.Txn(ctx).If(owner.IsOwner()).Then(clientv3.OpPut(key, value)).Commit()
	if err != nil {
		return fmt.Errorf("guarded put %s: %w", key, err)
	}
	if !r.Succeeded {
		return fmt.Errorf("%w: put %s: the lock key is gone", ErrGuardFailed, key)
	}
	return nil
}
