// Package workloads holds the client loops that drive a Locker and record
// every operation in the history: mutex (acquire, hold, release) and counter
// (acquire, read-modify-write a protected resource, release).
package workloads

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"slices"
	"sync"
	"time"

	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/internal/ctxsleep"
	"github.com/lockjepsen/lockjepsen/locks"
)

// Names of the workloads.
const (
	Mutex   = "mutex"
	Counter = "counter"
)

// Names lists every workload.
var Names = []string{Mutex, Counter, Renew, RenewCounter}

// Config is what every client of a run does.
type Config struct {
	Workload string
	Keys     []string
	TTL      time.Duration
	// Hold is how long a client keeps the lock (mutex) or works between its
	// read and its write (counter).
	Hold Dist
	// LongHoldRate is the fraction of holds that deliberately outlast the
	// lease (until half a TTL past ValidUntil), as a slow client would.
	LongHoldRate float64
	// RetryBackoff is the most a client waits after a failed acquire.
	RetryBackoff time.Duration
	// OpTimeout bounds each operation; past it the outcome is unknown.
	OpTimeout time.Duration
	Seed      int64
	// RenewMode (RenewExplicit or RenewWatchdog) and RenewTTLs (holds of
	// from..to TTLs) are the renewal workloads'.
	RenewMode string
	RenewTTLs [2]float64
	// RenewBefore, when set, is how long before its validity ends the
	// explicit holder extends, instead of every TTL/3: an extend sent
	// as the lease runs out races the key's expiry.
	RenewBefore time.Duration
}

// Hooks let a nemesis act inside clients. InCriticalSection is called after
// a client's last validity check and before it writes or releases; it may
// stall (a client pause) and returns true when the client must crash: stop
// for good without releasing, as a killed process would.
type Hooks interface {
	InCriticalSection(ctx context.Context, worker, process int, lease locks.Lease) (crash bool)
}

// CallHooks is optionally implemented by Hooks, to act inside a lock
// call (acquire, extend, release) rather than between calls: a client
// killed with its request in flight.
type CallHooks interface {
	// StartCall is called just before a lock call sends its request;
	// target is the client's own process, nil for a lock inside the
	// harness. It returns nil, or, when the client is killed with this
	// call in flight, what the client calls once the call has returned:
	// it returns when the process is dead. The call is then recorded as
	// an unknown outcome (ErrKilledInCall), and the client replaced as a
	// crashed one.
	StartCall(ctx context.Context, worker, process int, f, key string, target locks.ClientProcess) (killed func())
	// EndCall is told how long each lock call took.
	EndCall(f string, took time.Duration)
}

// ErrKilledInCall is the outcome of a lock call whose client was killed
// with it in flight: unknown, whatever reply came, since the client died
// before it could act on one.
var ErrKilledInCall = errors.New("the client's process was killed (SIGKILL) with this call in flight; its outcome is unknown")

// LockerFactory gives each client process its own Locker, as separate
// application instances would have. The closer releases its connections.
type LockerFactory func(process int) (locks.Locker, io.Closer, error)

// Env is what the clients run against.
type Env struct {
	Rec       *history.Recorder
	NewLocker LockerFactory
	Resource  *Resource // counter only
	Hooks     Hooks     // nil: no client faults
	// OnPanic is told of a panic inside a client; the client records the
	// operation as unknown and goes on.
	OnPanic func(process int, v any)
	// OnGrant is told of every granted lease and the nodes that granted
	// it (nil for a single-node lock), so that the nemesis can aim at the
	// holder's nodes.
	OnGrant func(key, token string, nodes []string)
}

// Validate checks a config against its workload.
func (c Config) Validate(env Env) error {
	switch {
	case !slices.Contains(Names, c.Workload):
		return fmt.Errorf("unknown workload %q (want one of %v)", c.Workload, Names)
	case UsesResource(c.Workload) && env.Resource == nil:
		return fmt.Errorf("the %s workload needs a resource store", c.Workload)
	}
	if err := c.validateRenewal(); err != nil {
		return err
	}
	if len(c.Keys) == 0 {
		return errors.New("no lock keys")
	}
	if c.OpTimeout <= 0 {
		return errors.New("op timeout must be positive")
	}
	return nil
}

// Run starts workers clients and returns when ctx is done and every client
// has stopped. Clients are numbered 0..workers-1; a client that crashes
// comes back as a new process (its number plus workers), as in Jepsen.
func Run(ctx context.Context, cfg Config, env Env, workers int) error {
	cs, err := Connect(cfg, env, workers)
	if err != nil {
		return err
	}
	return cs.Run(ctx)
}

// Clients are workers whose locks are built, ready to run.
type Clients struct {
	list []*client
}

// Connect builds every worker's lock, all at once, before the run's clock
// starts: a client of another language can take seconds to start (an
// interpreter behind a version manager's shim on a loaded machine took
// 4 s), and that must not eat the time limit, or a short run tests
// nothing and says only that no lock was granted. A worker that cannot
// connect fails Connect, and the others are closed again.
func Connect(cfg Config, env Env, workers int) (*Clients, error) {
	if err := cfg.Validate(env); err != nil {
		return nil, err
	}
	cs := &Clients{}
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		c := &client{cfg: cfg, env: env, worker: w, process: w, workers: workers,
			rng: rand.New(rand.NewSource(cfg.Seed*1_000_003 + int64(w)))}
		cs.list = append(cs.list, c)
		wg.Go(func() {
			if err := c.connect(); err != nil {
				errs[w] = fmt.Errorf("client worker %d: %w", w, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		cs.Close()
		return nil, err
	}
	return cs, nil
}

// Run runs the clients until ctx is done and every client has stopped; it
// closes their locks.
func (cs *Clients) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(cs.list))
	for _, c := range cs.list {
		wg.Go(func() {
			if err := c.run(ctx); err != nil {
				errs <- fmt.Errorf("client worker %d (process %d): %w", c.worker, c.process, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	return errors.Join(collect(errs)...)
}

// Close closes the locks of clients that will not run.
func (cs *Clients) Close() {
	for _, c := range cs.list {
		if c.closer != nil {
			c.closer.Close()
			c.closer = nil
		}
	}
}

func collect(ch <-chan error) []error {
	var out []error
	for e := range ch {
		out = append(out, e)
	}
	return out
}

type client struct {
	cfg     Config
	env     Env
	worker  int
	process int
	workers int
	rng     *rand.Rand

	locker locks.Locker
	closer io.Closer
	// killed: a lock call's process was killed (CallHooks); the cycle
	// ends as a crash, and the client comes back as a new process.
	killed bool
	// acts are the goroutines recording Revocable leases' own acts; the
	// closed locker ends them.
	acts sync.WaitGroup
	// deadlines gives the operations of run their timeouts; nil outside
	// run.
	deadlines *clientDeadlines
}

// takeKilled reports whether the client was killed in a call, and
// forgets it.
func (c *client) takeKilled() bool {
	k := c.killed
	c.killed = false
	return k
}

// lockCall runs fn, a lock call of the lease's or the locker's client,
// inside the call hooks: timed, and killed with its request in flight if
// the nemesis armed it (then ErrKilledInCall, whatever fn returned).
func (c *client) lockCall(ctx context.Context, f, key string, lease locks.Lease, fn func(context.Context) (*history.Value, error)) (*history.Value, error) {
	ch, ok := c.env.Hooks.(CallHooks)
	if !ok {
		return fn(ctx)
	}
	var target locks.ClientProcess
	if p, isProc := lease.(locks.ClientProcess); isProc {
		target = p
	} else if p, isProc := c.locker.(locks.ClientProcess); isProc {
		target = p
	}
	killed := ch.StartCall(ctx, c.worker, c.process, f, key, target)
	if killed != nil {
		// Deferred, so that a call that panics still waits for its kill.
		defer func() {
			killed()
			c.killed = true
			if b, ok := lease.(locks.Background); ok {
				b.StopRenewal() // the renewer was a thread of the dead process
			}
		}()
	}
	start := time.Now()
	out, err := fn(ctx)
	if killed != nil {
		return nil, ErrKilledInCall
	}
	ch.EndCall(f, time.Since(start))
	return out, err
}

func (c *client) run(ctx context.Context) error {
	defer func() {
		c.closer.Close()
		c.acts.Wait()
	}()
	c.deadlines = newClientDeadlines(ctx)
	defer func() {
		c.deadlines.close()
		c.deadlines = nil
	}()
	for ctx.Err() == nil {
		key := c.cfg.Keys[c.rng.Intn(len(c.cfg.Keys))]
		crashed := c.safeCycle(ctx, key)
		if crashed {
			// A crashed process never acts again; its replacement is a new
			// process with fresh connections.
			c.closer.Close()
			c.process += c.workers
			if err := c.connect(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *client) connect() error {
	l, closer, err := c.env.NewLocker(c.process)
	if err != nil {
		return fmt.Errorf("connect process %d: %w", c.process, err)
	}
	c.locker, c.closer = l, closer
	return nil
}

// safeCycle is cycle with a guard: a panic outside an operation (in a
// lease's accessors, say) is reported and the client goes on with a fresh
// process, since the one that panicked is in an unknown state.
func (c *client) safeCycle(ctx context.Context, key string) (crashed bool) {
	defer func() {
		if v := recover(); v != nil {
			if c.env.OnPanic != nil {
				c.env.OnPanic(c.process, v)
			}
			c.takeKilled() // replaced either way
			crashed = true
		}
	}()
	if renews(c.cfg.Workload) {
		crashed = c.renewCycle(ctx, key)
	} else {
		crashed = c.cycle(ctx, key)
	}
	return c.takeKilled() || crashed
}

// cycle runs one acquire ... release; it reports whether the client crashed.
func (c *client) cycle(ctx context.Context, key string) (crashed bool) {
	lease := c.acquire(ctx, key)
	if lease == nil {
		return false
	}
	// Whatever happens to the run, a holder gives the lock back.
	cleanup := context.WithoutCancel(ctx)
	fence := fenceOf(lease)

	var read int64
	if c.cfg.Workload == Counter {
		var ok bool
		if read, ok = c.readCounter(ctx, key, fence); !ok {
			c.release(cleanup, key, lease)
			return false
		}
	}

	ctxsleep.Sleep(ctx, c.holdFor(lease))

	if c.cfg.Workload == Counter {
		// The last validity check: a careful client stops here when its
		// lease has run out. A pause after this line is Kleppmann's case.
		if vu := lease.ValidUntil(); !vu.IsZero() && time.Now().After(vu) {
			c.release(cleanup, key, lease)
			return false
		}
	}
	if c.env.Hooks != nil && c.env.Hooks.InCriticalSection(ctx, c.worker, c.process, lease) {
		return true
	}
	if c.cfg.Workload == Counter && ctx.Err() == nil {
		c.writeCounter(ctx, key, read+1, fence)
	}
	c.release(cleanup, key, lease)
	return false
}

func (c *client) holdFor(lease locks.Lease) time.Duration {
	if c.cfg.LongHoldRate > 0 && c.rng.Float64() < c.cfg.LongHoldRate {
		if vu := lease.ValidUntil(); !vu.IsZero() {
			return time.Until(vu) + c.cfg.TTL/2
		}
		return c.cfg.TTL * 3 / 2
	}
	return c.cfg.Hold.Sample(c.rng)
}

// acquire tries the lock once; nil when it was not granted, after a
// random wait of up to RetryBackoff, so that the caller can try again.
func (c *client) acquire(ctx context.Context, key string) locks.Lease {
	// The previous lease's own acts are all recorded before the next
	// acquire: a renewal in flight when its belief ended is judged with it.
	c.acts.Wait()
	var lease locks.Lease
	c.do(ctx, history.Acquire, key, &history.Value{TTL: int64(c.cfg.TTL)}, func(ctx context.Context) (*history.Value, error) {
		return c.lockCall(ctx, history.Acquire, key, nil, func(ctx context.Context) (*history.Value, error) { return c.grant(ctx, key, &lease) })
	})
	if c.killed && lease != nil {
		// The grant reached a dead process: nobody holds it.
		if b, ok := lease.(locks.Background); ok {
			b.StopRenewal()
		}
		if r, ok := lease.(locks.Revocable); ok {
			go func() {
				for range r.Acts() { // a dead process records nothing; its lock ends them at close
				}
			}()
		}
		lease = nil
	}
	if lease == nil && !c.killed {
		ctxsleep.Sleep(ctx, time.Duration(c.rng.Int63n(int64(c.cfg.RetryBackoff)+1)))
	}
	if r, ok := lease.(locks.Revocable); ok && lease != nil {
		c.recordActs(key, lease.Token(), r) // after its ok: they refer to its hold
	}
	return lease
}

// grant takes the lock once and, when granted, sets *lease and returns
// the acquire's value.
func (c *client) grant(ctx context.Context, key string, lease *locks.Lease) (*history.Value, error) {
	ctx, sent := withSendStamp(ctx)
	l, err := c.locker.TryAcquire(ctx, key, c.cfg.TTL)
	if err != nil {
		return nil, err
	}
	if l == nil {
		return nil, errors.New("lock returned neither a lease nor an error")
	}
	l = c.withWatchdog(l, key)
	*lease = l
	v := c.leaseValue(l, sent)
	v.Token, v.Fence = l.Token(), fenceOf(l)
	_, v.Context = l.(locks.Revocable)
	if nr, ok := l.(interface{ GrantedBy() []string }); ok {
		v.Nodes = nr.GrantedBy()
	}
	if c.env.OnGrant != nil {
		c.env.OnGrant(key, v.Token, v.Nodes)
	}
	return v, nil
}

func (c *client) release(ctx context.Context, key string, lease locks.Lease) {
	c.do(ctx, history.Release, key, &history.Value{Token: lease.Token()}, func(ctx context.Context) (*history.Value, error) {
		return c.lockCall(ctx, history.Release, key, lease, func(ctx context.Context) (*history.Value, error) {
			return nil, lease.Release(ctx)
		})
	})
}

// do records one operation: its invoke, then ok, fail (a definite no) or
// info (unknown outcome, including a panic inside the lock).
func (c *client) do(ctx context.Context, f, key string, in *history.Value, fn func(context.Context) (*history.Value, error)) (out *history.Value, err error) {
	rec := c.env.Rec
	rec.Record(history.Op{Process: c.process, Type: history.Invoke, F: f, Key: key, Value: in})
	opCtx, end := c.withTimeout(ctx)
	defer end.end()
	func() {
		defer func() {
			if v := recover(); v != nil {
				out, err = nil, fmt.Errorf("panic: %v", v)
				if c.env.OnPanic != nil {
					c.env.OnPanic(c.process, v)
				}
			}
		}()
		out, err = fn(opCtx)
	}()
	done := history.Op{Process: c.process, Type: history.OK, F: f, Key: key, Value: out}
	if err != nil {
		done.Type, done.Value, done.Error = history.Info, nil, err.Error()
		if definite(err) {
			done.Type = history.Fail
		}
	}
	rec.Record(done)
	return out, err
}

// withTimeout is context.WithTimeout(ctx, OpTimeout) for one operation,
// through the client's deadlines while it runs (see clientDeadlines).
func (c *client) withTimeout(ctx context.Context) (context.Context, opEnd) {
	if c.deadlines == nil {
		ctx, cancel := context.WithTimeout(ctx, c.cfg.OpTimeout)
		return ctx, opEnd{cancel: cancel}
	}
	return c.deadlines.start(ctx, c.cfg.OpTimeout)
}

func definite(err error) bool {
	return locks.Definite(err) || errors.Is(err, ErrStaleFence)
}

func fenceOf(l locks.Lease) *int64 {
	if f, ok := l.Fence(); ok {
		return &f
	}
	return nil
}

// Describe tells what the named workload does, for reports.
func Describe(name string) string { return descriptions[name] }

var descriptions = map[string]string{
	Mutex:        "each client loops acquire → hold → release",
	Counter:      "under the lock each client reads a counter from a separate Redis, works, checks its lease, and writes the value + 1",
	Renew:        "each client holds the lock for several TTLs in steps of TTL/3, renewing it (explicitly before each step, or by a background watchdog)",
	RenewCounter: "the same, with a fenced read-modify-write of the counter at every step",
}

// leaseValue is an ok acquire's or extend's value: the lease's validity
// and when the lock began it, on the history's clock. The value and the
// numbers it points to are one allocation: the clients' hot path makes
// one per grant.
func (c *client) leaseValue(l locks.Lease, sent *sendStamp) *history.Value {
	g := &struct {
		v                   history.Value
		validUntil, started int64
	}{}
	if vu := l.ValidUntil(); !vu.IsZero() {
		g.validUntil = c.env.Rec.At(vu)
		g.v.ValidUntil = &g.validUntil
	}
	if t, ok := c.startedAt(l, sent); ok {
		g.started = t
		g.v.Started = &g.started
	}
	return &g.v
}

// startedAt is when a grant or extend began, as the lease model counts
// its TTL: the client's own stamp for a lock in another process, else the
// first request the lock sent through the harness's clients; false when
// neither is known (a lock with clients of its own), and the invoke counts.
func (c *client) startedAt(l locks.Lease, sent *sendStamp) (int64, bool) {
	if s, ok := l.(locks.Started); ok && !s.StartedAt().IsZero() {
		return c.env.Rec.At(s.StartedAt()), true
	}
	if t := sent.at(); !t.IsZero() {
		return c.env.Rec.At(t), true
	}
	return 0, false
}

// readCounter reads the protected counter with the lease's fence; false
// when the read failed.
func (c *client) readCounter(ctx context.Context, key string, fence *int64) (int64, bool) {
	v, err := c.do(ctx, history.Read, key, &history.Value{Fence: fence}, func(ctx context.Context) (*history.Value, error) {
		n, err := c.env.Resource.Read(ctx, key, fence)
		if err != nil {
			return nil, err
		}
		return &history.Value{N: history.I64(n)}, nil
	})
	if err != nil {
		return 0, false
	}
	return *v.N, true
}

// writeCounter writes n to the protected counter with the lease's fence;
// false when the write failed.
func (c *client) writeCounter(ctx context.Context, key string, n int64, fence *int64) bool {
	_, err := c.do(ctx, history.Write, key, &history.Value{N: &n, Fence: fence}, func(ctx context.Context) (*history.Value, error) {
		return nil, c.env.Resource.Write(ctx, key, n, fence)
	})
	return err == nil
}
