package workloads

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/internal/ctxsleep"
	"github.com/lockjepsen/lockjepsen/locks"
)

// The renewal workloads: critical sections longer than one TTL, kept alive
// the two ways applications keep them.
const (
	Renew        = "renew"         // mutex, with renewal
	RenewCounter = "renew-counter" // counter, writing at every step, with renewal
)

// Renewal modes (Config.RenewMode).
const (
	// RenewExplicit: the holder works in steps and calls Extend before
	// each one, acting only while its belief is valid. Every extend is in
	// the history.
	RenewExplicit = "explicit"
	// RenewWatchdog: a background renewer extends every TTL/3 while the
	// holder works, as Redisson's watchdog does; the holder has no
	// deadline of its own and believes until it releases. The renewals
	// are the library's business: the history records each as the
	// process's background event (history.Background), which changes
	// nothing the holder believes, so that a renewer that stopped before
	// the key expired shows.
	RenewWatchdog = "watchdog"
)

// RenewModes lists the renewal modes.
var RenewModes = []string{RenewExplicit, RenewWatchdog}

// UsesResource reports whether a workload writes to the protected
// resource.
func UsesResource(workload string) bool { return workload == Counter || workload == RenewCounter }

func renews(workload string) bool { return workload == Renew || workload == RenewCounter }

// renewCycle holds the lock for RenewTTLs TTLs in steps of TTL/3 (or
// until RenewBefore before the validity ends), renewing as RenewMode says; with RenewCounter every step is a fenced
// read-modify-write. It reports whether the client crashed.
func (c *client) renewCycle(ctx context.Context, key string) (crashed bool) {
	lease := c.acquire(ctx, key)
	if lease == nil {
		return false
	}
	cleanup := context.WithoutCancel(ctx)
	step := max(c.cfg.TTL/3, time.Millisecond)
	lo, hi := c.cfg.RenewTTLs[0], c.cfg.RenewTTLs[1]
	end := time.Now().Add(time.Duration((lo + c.rng.Float64()*(hi-lo)) * float64(c.cfg.TTL)))
	// With RenewBefore the first extend waits, as every later one does,
	// until that long before the validity ends.
	first := c.cfg.RenewBefore > 0
	for ctx.Err() == nil {
		if c.cfg.RenewMode == RenewExplicit && !first && !c.extend(ctx, key, lease) {
			if c.killed {
				return true // killed in the extend: a dead process releases nothing
			}
			break
		}
		first = false
		if vu := lease.ValidUntil(); !vu.IsZero() && time.Now().After(vu) {
			break // acts only while its belief is valid
		}
		if c.env.Hooks != nil && c.env.Hooks.InCriticalSection(ctx, c.worker, c.process, lease) {
			return true
		}
		if c.cfg.Workload == RenewCounter && !c.increment(ctx, key, fenceOf(lease)) {
			break
		}
		if !time.Now().Before(end) {
			break
		}
		ctxsleep.Sleep(ctx, c.nextStep(lease, step))
	}
	c.release(cleanup, key, lease)
	return false
}

// nextStep is how long the holder works before its next extend: a step,
// or with RenewBefore until that long before its validity ends (at least
// a millisecond).
func (c *client) nextStep(lease locks.Lease, step time.Duration) time.Duration {
	vu := lease.ValidUntil()
	if c.cfg.RenewBefore <= 0 || c.cfg.RenewMode != RenewExplicit || vu.IsZero() {
		return step
	}
	return max(time.Until(vu.Add(-c.cfg.RenewBefore)), time.Millisecond)
}

// extend renews the lease and reports whether the holder may go on: an
// ok extend moves its validity; a failed one ends its belief; an unknown
// one keeps only the validity it had, which the caller checks. An ok that
// arrives once the validity it was to extend has passed comes too late:
// the belief lapsed then, as the checkers count it (Tracker.extended), and
// the holder stops.
func (c *client) extend(ctx context.Context, key string, lease locks.Lease) bool {
	before := lease.ValidUntil()
	_, err := c.do(ctx, history.Extend, key, &history.Value{TTL: int64(c.cfg.TTL), Token: lease.Token()}, func(ctx context.Context) (*history.Value, error) {
		return c.lockCall(ctx, history.Extend, key, lease, func(ctx context.Context) (*history.Value, error) {
			ctx, sent := withSendStamp(ctx)
			if err := lease.Extend(ctx, c.cfg.TTL); err != nil {
				return nil, err
			}
			return c.leaseValue(lease, sent), nil
		})
	})
	if c.killed {
		return false
	}
	if err == nil {
		return !lapsed(before, time.Now())
	}
	return !definite(err)
}

// lapsed reports whether a belief valid until vu (zero: no deadline) had
// ended by now. The completion was stamped before now, so a belief the
// checkers end at an ok extend's completion has lapsed here too.
func lapsed(vu, now time.Time) bool { return !vu.IsZero() && !now.Before(vu) }

// increment reads the counter and writes it + 1, both with the fence;
// false when either failed.
func (c *client) increment(ctx context.Context, key string, fence *int64) bool {
	n, ok := c.readCounter(ctx, key, fence)
	return ok && c.writeCounter(ctx, key, n+1, fence)
}

// withWatchdog gives a lease of key just granted a background renewer in
// the watchdog mode, started inside the acquire as a library's lock call
// starts its own.
func (c *client) withWatchdog(lease locks.Lease, key string) locks.Lease {
	if _, itself := lease.(locks.Revocable); itself || !renews(c.cfg.Workload) || c.cfg.RenewMode != RenewWatchdog {
		return lease // a Revocable lease's lock renews it, and its renewals are recorded (recordActs)
	}
	wl := &watchdogLease{Lease: lease, ttl: c.cfg.TTL, stop: make(chan struct{}), resume: make(chan struct{}),
		rec: c.env.Rec, process: c.process, key: key}
	wl.wg.Add(1)
	go wl.renew()
	return wl
}

// watchdogLease is renewed every TTL/3 until it is released or its
// client crashes; a client pause pauses the renewals, as it stops every
// thread of a process.
type watchdogLease struct {
	locks.Lease
	rec     *history.Recorder
	process int
	key     string
	ttl     time.Duration
	wg      sync.WaitGroup
	once    sync.Once
	stop    chan struct{}

	mu     sync.Mutex
	paused bool
	resume chan struct{}
}

// ValidUntil is zero: the holder has no deadline of its own.
func (w *watchdogLease) ValidUntil() time.Time { return time.Time{} }

func (w *watchdogLease) renew() {
	defer w.wg.Done()
	t := time.NewTicker(max(w.ttl/3, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		w.mu.Lock()
		paused, resume := w.paused, w.resume
		w.mu.Unlock()
		if paused {
			select {
			case <-w.stop:
				return
			case <-resume:
			}
		}
		from := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), w.ttl)
		err := w.Lease.Extend(ctx, w.ttl) // a failed renewal is the library's to hide, as a watchdog's is
		cancel()
		w.recordRenewal(from, err)
	}
}

// recordRenewal records one renewal, sent at from, as the process's
// background event: the holder is not told, as a watchdog's is not.
func (w *watchdogLease) recordRenewal(from time.Time, err error) {
	if w.rec == nil {
		return
	}
	v := &history.Value{TTL: int64(w.ttl), Token: w.Lease.Token(), From: history.I64(w.rec.At(from)), Outcome: history.OK}
	op := history.Op{Process: w.process, Type: history.Background, F: history.Extend, Key: w.key, Value: v}
	switch {
	case err != nil && definite(err):
		v.Outcome, op.Error = history.Fail, err.Error()
	case err != nil:
		v.Outcome, op.Error = history.Info, err.Error()
	default:
		if vu := w.Lease.ValidUntil(); !vu.IsZero() {
			v.ValidUntil = history.I64(w.rec.At(vu))
		}
	}
	w.rec.Record(op)
}

// recordActs records a Revocable lease's own acts, each as the process's
// background event when it reaches the harness, until the lock is done
// with the lease; the client waits for it before it closes (acts).
func (c *client) recordActs(key, token string, r locks.Revocable) {
	rec, process := c.env.Rec, c.process
	c.acts.Add(1)
	go func() {
		defer c.acts.Done()
		for a := range r.Acts() {
			if rec == nil {
				continue
			}
			v := &history.Value{Token: token, From: history.I64(rec.At(a.From)), Outcome: history.OK, TTL: int64(a.TTL)}
			op := history.Op{Process: process, Type: history.Background, F: history.Extend, Key: key, Value: v}
			switch {
			case a.Ended != "":
				v.TTL, v.Outcome, v.Ended = 0, history.Fail, a.Ended
			case a.Err != nil && definite(a.Err):
				v.Outcome, op.Error = history.Fail, a.Err.Error()
			case a.Err != nil:
				v.Outcome, op.Error = history.Info, a.Err.Error()
			}
			rec.Record(op)
		}
	}()
}

func (w *watchdogLease) end() {
	w.once.Do(func() { close(w.stop) })
	w.wg.Wait()
}

// Release stops the renewals, then releases.
func (w *watchdogLease) Release(ctx context.Context) error {
	w.end()
	return w.Lease.Release(ctx)
}

// PauseRenewal, ResumeRenewal and StopRenewal let client faults act on
// the background renewer (locks.Background).
func (w *watchdogLease) PauseRenewal() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.paused {
		w.paused, w.resume = true, make(chan struct{})
	}
}

func (w *watchdogLease) ResumeRenewal() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.paused {
		w.paused = false
		close(w.resume)
	}
}

func (w *watchdogLease) StopRenewal() { w.end() }

func (c Config) validateRenewal() error {
	if !renews(c.Workload) {
		return nil
	}
	if c.RenewMode != RenewExplicit && c.RenewMode != RenewWatchdog {
		return fmt.Errorf("unknown renewal mode %q (want explicit or watchdog)", c.RenewMode)
	}
	if lo, hi := c.RenewTTLs[0], c.RenewTTLs[1]; lo <= 0 || hi < lo {
		return fmt.Errorf("renewed holds of %v..%v TTLs: want 0 < from ≤ to", lo, hi)
	}
	return nil
}
