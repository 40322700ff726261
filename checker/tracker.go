package checker

import "github.com/lockjepsen/lockjepsen/history"

// Tracker is the one engine of the believed-hold rules: fed a history's
// events in order, it follows per process the call in flight, the latest
// hold and the latest crash, and decides when each belief starts and ends
// (the rules are Hold's: see EndRelease and the other reasons). It keeps
// nothing else: what a user needs of the calls and holds (an overlap, a
// witness, a drawing) it takes through the callbacks, and holds it no
// longer needs are left to the garbage collector. The Stream, the Watcher
// and the report's timeline are built on it, so a rule is written once.
//
// X is the user's own state of each hold (Belief.X). The callbacks may be
// nil.
type Tracker[X any] struct {
	// OnInvoke receives each client call at its invoke, after the rules
	// applied it (an acquire or release has ended the hold it ends).
	OnInvoke func(c *Call)
	// OnComplete receives each call at its completion, after the rules
	// applied it (an ok acquire has granted its hold).
	OnComplete func(c *Call)
	// OnGrant receives the hold each ok acquire confers. One that confers
	// no belief (its lease ran out before the ok arrived, or the ok reached
	// a crashed client) comes already ended, and never to OnEnd.
	OnGrant func(h *Belief[X])
	// OnExtend receives a hold whose ValidUntil an ok extend moved, before
	// OnEnd when the new one has already passed.
	OnExtend func(h *Belief[X])
	// OnEnd receives each hold once, when its belief ends (End and
	// EndReason are then final).
	OnEnd func(h *Belief[X])
	// Faults say which nemesis events crash clients (Options.Faults);
	// nil reads them by name (LegacyFaultMeaning).
	Faults FaultMeanings

	small        []*trackedProc[X] // the usual small process numbers, without hashing
	big          map[int]*trackedProc[X]
	holds, calls int64
}

// Call is a client call: its invoke and, once Done, its completion.
type Call struct {
	Inv, Comp history.Op
	Done      bool
	// Seq numbers the calls in invoke order.
	Seq int64
	// LeaseEnd is a release's or extend's own lease end (Event.LeaseEnd):
	// the hold it refers to, from its last grant or extend's start, plus
	// its TTL; 0 if unknown.
	LeaseEnd int64
}

// Outcome is ok, fail or info; a call that never completed counts as info.
func (c *Call) Outcome() history.Type {
	if !c.Done {
		return history.Info
	}
	return c.Comp.Type
}

// Belief is a hold as the Tracker follows it: EndReason is "" while the
// belief has not ended.
type Belief[X any] struct {
	Hold
	// TTL is the one the hold's acquire asked for (0 when unknown).
	TTL int64
	// Seq numbers the holds in creation order, which is Start order.
	Seq int64
	// X is the user's state of the hold.
	X X
}

// Resolved reports whether the belief has ended.
func (h *Belief[X]) Resolved() bool { return h.EndReason != "" }

// BelievedAfter reports whether the belief lasts past t as far as the
// events so far tell: its lease has not run out by t, and nothing ended
// it at or before t.
func (h *Belief[X]) BelievedAfter(t int64) bool {
	return (h.ValidUntil == nil || *h.ValidUntil > t) && (!h.Resolved() || h.End > t)
}

type trackedProc[X any] struct {
	call *Call      // the pending invoke, nil if none
	hold *Belief[X] // the latest hold, ended or not
	// spare is a completed call the next invoke reuses, kept only when
	// OnInvoke and OnComplete are nil: then nobody else holds calls.
	spare *Call
	crashState
}

// smallProcs bounds the process numbers kept in a slice.
const smallProcs = 1 << 16

func (t *Tracker[X]) proc(p int) *trackedProc[X] {
	if p >= 0 && p < smallProcs {
		for p >= len(t.small) {
			t.small = append(t.small, nil)
		}
		if t.small[p] == nil {
			t.small[p] = &trackedProc[X]{}
		}
		return t.small[p]
	}
	if t.big == nil {
		t.big = map[int]*trackedProc[X]{}
	}
	ps := t.big[p]
	if ps == nil {
		ps = &trackedProc[X]{}
		t.big[p] = ps
	}
	return ps
}

// each calls f on every process seen.
func (t *Tracker[X]) each(f func(*trackedProc[X])) {
	for _, ps := range t.small {
		if ps != nil {
			f(ps)
		}
	}
	for _, ps := range t.big {
		f(ps)
	}
}

// Observe takes the next event: a client's invoke or completion, or a
// nemesis event, whose crashes end their clients' beliefs. Summaries and
// background renewals change no belief; a background event by which the
// lock ended its holder's belief does (Background).
func (t *Tracker[X]) Observe(op *history.Op) {
	switch {
	case op.Process == history.NemesisProcess:
		t.Crash(op)
	case op.Type == history.Summary:
	case op.Type == history.Background:
		t.Background(op)
	case op.Type == history.Invoke:
		t.Invoke(op)
	default:
		t.Complete(op)
	}
}

// current is the process's hold that op (a release or extend) refers to,
// or nil when it refers to none.
func (ps *trackedProc[X]) current(op *history.Op) *Belief[X] {
	if h := ps.hold; h != nil && refersTo(op, h.Key, h.Token) {
		return h
	}
	return nil
}

// Invoke takes a client's invoke.
func (t *Tracker[X]) Invoke(op *history.Op) {
	ps := t.proc(op.Process)
	c := ps.spare
	if c != nil {
		ps.spare = nil
		*c = Call{Inv: *op, Seq: t.calls}
	} else {
		c = &Call{Inv: *op, Seq: t.calls}
	}
	t.calls++
	if op.F == history.Release || op.F == history.Extend {
		if h := ps.current(op); h != nil && h.TTL > 0 {
			c.LeaseEnd = h.ValidFrom + h.TTL
		}
	}
	ps.call = c
	ps.invoked(op.Time)
	switch op.F {
	case history.Acquire:
		if ps.hold != nil {
			t.Finish(ps.hold, op.Time, EndAbandoned, op.Index)
		}
	case history.Release:
		if h := ps.current(op); h != nil {
			t.Finish(h, op.Time, EndRelease, op.Index)
		}
	}
	if t.OnInvoke != nil {
		t.OnInvoke(c)
	}
}

// Complete takes a client's completion; one without an invoke (not a
// validated history) is ignored.
func (t *Tracker[X]) Complete(op *history.Op) {
	ps := t.proc(op.Process)
	c := ps.call
	if c == nil {
		return
	}
	ps.call = nil
	c.Comp, c.Done = *op, true
	switch c.Inv.F {
	case history.Acquire:
		if op.Type == history.OK {
			t.grant(c, ps)
		}
	case history.Extend:
		t.extended(c, ps)
	}
	// A release's outcome does not matter: the belief ended at its invoke,
	// before a failed release could tell the client it had lost the lock.
	if t.OnComplete != nil {
		t.OnComplete(c)
	} else if t.OnInvoke == nil {
		ps.spare = c
	}
}

// grant makes the hold an ok acquire confers.
func (t *Tracker[X]) grant(c *Call, ps *trackedProc[X]) {
	iop, op := &c.Inv, &c.Comp
	h := &Belief[X]{Hold: Hold{Key: grantedKey(iop, op), Process: op.Process, Invoke: iop.Time, Start: op.Time,
		AcquireIndex: op.Index, EndIndex: -1, ValidFrom: startOf(iop, op)}, Seq: t.holds}
	t.holds++
	if iop.Value != nil {
		h.TTL = iop.Value.TTL
	}
	h.granted(op.Value, ps.crashedSince(iop.Time))
	ps.hold = h
	if t.OnGrant != nil {
		t.OnGrant(h)
	}
}

// extended applies an extend's completion to the hold it refers to.
func (t *Tracker[X]) extended(c *Call, ps *trackedProc[X]) {
	iop, op := &c.Inv, &c.Comp
	h := ps.current(iop)
	if h == nil || h.Resolved() {
		return
	}
	switch op.Type {
	case history.OK:
		if h.ValidUntil != nil && *h.ValidUntil <= op.Time {
			// The lease ran out before the extension arrived; the belief
			// ended then and is not revived.
			t.Finish(h, op.Time, EndValidUntil, -1)
			return
		}
		if op.Value == nil || op.Value.ValidUntil == nil {
			return
		}
		h.ValidUntil, h.ValidFrom = op.Value.ValidUntil, startOf(iop, op)
		if t.OnExtend != nil {
			t.OnExtend(h)
		}
		if *h.ValidUntil <= op.Time {
			t.end(h, op.Time, EndValidUntil, -1)
		}
	case history.Fail:
		t.Finish(h, op.Time, EndLost, op.Index)
	}
}

// Background takes a lock's own act (a background event): one with
// value.ended is the lock cancelling the context it gave its holder, and
// ends the belief of the hold it refers to there. Renewals change no
// belief.
func (t *Tracker[X]) Background(op *history.Op) {
	if op.Value == nil || op.Value.Ended == "" {
		return
	}
	if h := t.proc(op.Process).current(op); h != nil && !h.Resolved() {
		if h.ValidUntil == nil || *h.ValidUntil > op.Time {
			h.RevokedBy = op.Value.Ended
		}
		t.Finish(h, op.Time, EndRevoked, op.Index)
	}
}

// Crash ends the beliefs of the clients nemesis event op crashed.
func (t *Tracker[X]) Crash(op *history.Op) {
	for _, p := range crashedClients(op, t.Faults) {
		ps := t.proc(p)
		ps.crash(op.Time)
		if ps.hold != nil {
			t.Finish(ps.hold, op.Time, EndCrash, op.Index)
		}
	}
}

// Finish ends h's belief at time at (event idx, -1 for none) for reason,
// unless its lease ran out first; a belief already ended is left alone.
func (t *Tracker[X]) Finish(h *Belief[X], at int64, reason string, idx int64) {
	if h.Resolved() {
		return
	}
	finish(&h.Hold, at, reason, idx)
	if t.OnEnd != nil {
		t.OnEnd(h)
	}
}

// Expire ends h's belief at its lease's end if that is at or before now:
// nothing later can change that end.
func (t *Tracker[X]) Expire(h *Belief[X], now int64) {
	if !h.Resolved() && h.ValidUntil != nil && *h.ValidUntil <= now {
		t.end(h, max(*h.ValidUntil, h.Start), EndValidUntil, -1)
	}
}

// EndRemaining ends, at the end of the history, the beliefs nothing
// ended: at their lease's end, or never.
func (t *Tracker[X]) EndRemaining() {
	t.each(func(ps *trackedProc[X]) {
		if h := ps.hold; h != nil && !h.Resolved() {
			if h.ValidUntil != nil {
				t.end(h, max(*h.ValidUntil, h.Start), EndValidUntil, -1)
			} else {
				t.end(h, Never, EndOpen, -1)
			}
		}
	})
}

// InFlight lists the calls still awaiting their completion, in no order.
func (t *Tracker[X]) InFlight() []*Call {
	var out []*Call
	t.each(func(ps *trackedProc[X]) {
		if ps.call != nil {
			out = append(out, ps.call)
		}
	})
	return out
}

func (t *Tracker[X]) end(h *Belief[X], at int64, reason string, idx int64) {
	h.End, h.EndReason, h.EndIndex = at, reason, idx
	if t.OnEnd != nil {
		t.OnEnd(h)
	}
}

// granted fills in what an ok acquire's value says of the hold; a hold
// whose ok reached a dead client (crashed), or whose validity ended
// before the grant, is empty.
func (h *Hold) granted(v *history.Value, crashed bool) {
	if v != nil {
		h.Token, h.Fence, h.ValidUntil, h.Nodes = v.Token, v.Fence, v.ValidUntil, v.Nodes
	}
	if crashed {
		h.End, h.EndReason = h.Start, EndCrash
	} else if h.ValidUntil != nil && *h.ValidUntil <= h.Start {
		h.End, h.EndReason = h.Start, EndValidUntil
	}
}

// finish ends hold h's belief at t (event idx) unless its lease ran out
// first.
func finish(h *Hold, t int64, reason string, idx int64) {
	if h.EndReason != "" {
		return
	}
	if h.ValidUntil != nil && *h.ValidUntil <= t {
		h.End, h.EndReason, h.EndIndex = max(*h.ValidUntil, h.Start), EndValidUntil, -1
		return
	}
	h.End, h.EndReason, h.EndIndex = max(t, h.Start), reason, idx
}

// refersTo reports whether op (a release or extend) can refer to the hold
// of key and token: every checker matches an operation to a process's hold
// alike. A key or token either side leaves out matches any.
func refersTo(op *history.Op, key, token string) bool {
	if op.Key != "" && key != "" && op.Key != key {
		return false
	}
	return op.Value == nil || op.Value.Token == "" || token == "" || op.Value.Token == token
}

// grantedKey is the key an ok acquire granted: its invoke's, or the
// completion's when the invoke named none.
func grantedKey(inv, op *history.Op) string {
	if inv.Key == "" {
		return op.Key
	}
	return inv.Key
}

// startOf is when an operation began at the server at the earliest: its
// invoke, or the lock's own stamp of its first send when it reports one
// (a client in another process), which cannot be earlier than the invoke
// nor later than the answer. A TTL counts from there.
func startOf(inv, comp *history.Op) int64 {
	from := inv.Time
	if comp.Value != nil && comp.Value.Started != nil && *comp.Value.Started > from {
		from = min(*comp.Value.Started, comp.Time)
	}
	return from
}

// crashState is what every checker keeps of a process's latest crash.
type crashState struct {
	crashed   bool
	crashedAt int64
}

func (c *crashState) crash(t int64) { c.crashed, c.crashedAt = true, t }

// invoked notes an invoke at t: a crashed process that acts again is a new
// client.
func (c *crashState) invoked(t int64) {
	if c.crashed && t > c.crashedAt {
		c.crashed = false
	}
}

// crashedSince reports whether the process crashed at or after t: an ok to
// what it invoked at t then reached a dead client.
func (c *crashState) crashedSince(t int64) bool { return c.crashed && c.crashedAt >= t }
