package workloads

import (
	"context"
	"slices"
	"sync"
	"time"
)

// A client's operations each run under a deadline (Config.OpTimeout). With
// context.WithTimeout each one cost a timer started and stopped, its
// context, registering with the run's context and, since go-redis asks
// for Done before every command, a channel: five allocations (384 bytes)
// and about a microsecond of CPU per operation, two to four operations a
// lock cycle. clientDeadlines gives the same contexts for less. The
// timer and the watch on the run's context are the client's, made once
// (a client runs one operation at a time), and the timer is not stopped
// when an operation returns: it fires at the deadline of the operation
// it was set for, and is set again for the one then in flight, if any,
// whose deadline is later. So it fires about once per OpTimeout, not
// twice per operation, and an operation's context is one allocation,
// plus its channel once asked for.
//
// What an operation sees is what context.WithTimeout gave it
// (TestOpContextActsAsWithTimeout compares the two): Done closes and Err
// is context.DeadlineExceeded once the deadline passes, the run's Err
// (and Cause) once the run is cancelled, context.Canceled once the
// operation returns; Deadline is the earlier of its own and the run's;
// values are the parent's. Contexts made from it (a lock's per-node
// timeouts) follow it without a goroutine of their own, through its
// AfterFunc method, as they follow a context of package context. An
// operation's context stays its own after the operation returns, so a
// lock's goroutine that outlives the call still sees it done. Any parent
// but the client's run and contexts that are never cancelled (the
// release's context.WithoutCancel) gets context.WithTimeout as before.
type clientDeadlines struct {
	run       context.Context
	timer     *time.Timer // fires expire
	stopWatch func() bool // ends the watch on run
	mu        sync.Mutex
	cur       *opContext // the operation in flight, nil between
	armed     bool       // the timer will fire, at fireAt
	fireAt    time.Time
	closed    bool
}

func newClientDeadlines(run context.Context) *clientDeadlines {
	d := &clientDeadlines{run: run}
	d.timer = time.AfterFunc(time.Hour, d.expire)
	d.timer.Stop()
	d.stopWatch = context.AfterFunc(run, d.cancelled)
	return d
}

// close stops the timer and the watch; the client runs no more operations.
func (d *clientDeadlines) close() {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	d.stopWatch()
	d.timer.Stop()
}

// opEnd ends one operation's context: its cancel, without a closure to
// allocate.
type opEnd struct {
	d      *clientDeadlines
	c      *opContext
	cancel context.CancelFunc // when context.WithTimeout made it
}

func (e opEnd) end() {
	if e.cancel != nil {
		e.cancel()
		return
	}
	e.d.end(e.c)
}

// start is context.WithTimeout(parent, timeout) for the client's next
// operation.
func (d *clientDeadlines) start(parent context.Context, timeout time.Duration) (context.Context, opEnd) {
	watched := parent == d.run
	if !watched {
		if _, has := parent.Deadline(); has || parent.Done() != nil {
			ctx, cancel := context.WithTimeout(parent, timeout)
			return ctx, opEnd{cancel: cancel}
		}
	}
	c := &opContext{parent: parent, deadline: time.Now().Add(timeout), watched: watched}
	d.mu.Lock()
	d.cur = c
	arm := !d.armed || c.deadline.Before(d.fireAt)
	if arm {
		d.armed, d.fireAt = true, c.deadline
		d.timer.Reset(timeout)
	}
	d.mu.Unlock()
	if watched {
		// After cur is set, so that a cancellation is either seen here or
		// by cancelled.
		if err := parent.Err(); err != nil {
			c.finish(err)
		}
	}
	return c, opEnd{d: d, c: c}
}

// end is the operation's cancel: it returned. The timer stays set.
func (d *clientDeadlines) end(c *opContext) {
	d.mu.Lock()
	if d.cur == c {
		d.cur = nil
	}
	d.mu.Unlock()
	c.finish(context.Canceled)
}

// expire runs at the timer: it ends the operation in flight if its
// deadline has passed, or sets the timer for it if not.
func (d *clientDeadlines) expire() {
	d.mu.Lock()
	c := d.cur
	d.armed = false
	if c != nil && !d.closed {
		if wait := time.Until(c.deadline); wait > 0 {
			d.armed, d.fireAt = true, c.deadline
			d.timer.Reset(wait)
			c = nil
		}
	}
	d.mu.Unlock()
	if c != nil {
		c.finish(context.DeadlineExceeded)
	}
}

// cancelled runs once the client's run is done.
func (d *clientDeadlines) cancelled() {
	d.mu.Lock()
	c := d.cur
	d.mu.Unlock()
	if c != nil && c.watched {
		c.finish(d.run.Err())
	}
}

// opContext is one operation's context.
type opContext struct {
	parent   context.Context
	deadline time.Time
	watched  bool // parent is the client's run

	mu    sync.Mutex
	done  chan struct{} // made by the first Done
	err   error
	after []*afterFunc // to call when done
}

type afterFunc struct{ f func() }

func (c *opContext) Deadline() (time.Time, bool) {
	if pd, ok := c.parent.Deadline(); ok && pd.Before(c.deadline) {
		return pd, true
	}
	return c.deadline, true
}

func (c *opContext) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		if c.err != nil {
			close(c.done)
		}
	}
	return c.done
}

func (c *opContext) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *opContext) Value(key any) any { return c.parent.Value(key) }

func (c *opContext) String() string { return "workloads.opContext" }

// finish makes the context done with err, once, and calls what AfterFunc
// registered.
func (c *opContext) finish(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	if c.done != nil {
		close(c.done)
	}
	after := c.after
	c.after = nil
	c.mu.Unlock()
	for _, a := range after {
		a.f()
	}
}

// AfterFunc calls f once the context is done (at once, in a goroutine, if
// it is), unless stop comes first. Package context looks for this method
// (its afterFuncer), so that a context made from this one, and
// context.AfterFunc, follow it without a goroutine each.
func (c *opContext) AfterFunc(f func()) (stop func() bool) {
	a := &afterFunc{f: f}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		go f()
		return func() bool { return false }
	}
	c.after = append(c.after, a)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		i := slices.Index(c.after, a)
		if i < 0 {
			return false // called, or being called
		}
		c.after = slices.Delete(c.after, i, i+1)
		return true
	}
}
