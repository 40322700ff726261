package checker

import (
	"context"

	"github.com/lockjepsen/lockjepsen/history"
)

// Stream runs every checker over a history fed one event at a time, in the
// history's order, keeping only what later events can still change: the
// holds still believed, the calls in flight, per-key interval state,
// counters, and the first witnesses. Its memory is bounded by the clients
// and the longest lease, not by the history's length, so that an hour-long
// run is checked in the memory of a minute-long one.
//
// It applies the rules of the in-memory analysis (holds.go and the
// checkers over it) and gives the same Results; Check is Stream over a
// slice. Where it keeps less, it says so: latency percentiles come from a
// histogram (at most 0.8% above); the lease model takes a lease's calls in
// completion order, which is invoke order for one holder's calls (two
// processes sharing a token could be judged in another order), and forgets
// a lease once no process's latest grant is it; a duplicate write of a
// value first written more than maxWriteDetails values earlier names only
// the value as its first write. What still grows, slowly: clock faults and
// primaries (all kept), faults since the first witness, per-process state
// of replaced clients, and the gaps that close while one acquire stays in
// flight.
type Stream struct {
	opts   Options
	now    int64 // the time of the latest event
	events int
	holds  int64 // holds created, numbering them in Start order
	calls  int64 // calls invoked, numbering them in invoke order
	procs  map[int]*sproc
	// undecided are the holds granted at the current instant: whether one
	// overlaps an earlier hold, or is empty, is known once the clock
	// passes its Start (a belief can end at that very instant, recorded
	// just after).
	undecided []*hrec
	keys      map[string]*skey
	tieKeys   []*skey // keys with attempts in their tie
	ex        exState
	faults    faultState
	lease     *leaseState
	res       *resState
	stats     *statState
	fo        *foState
	moments   *momentState
	lin       *linEngine
	finished  *Results
}

// hrec is a believed hold as the stream tracks it.
type hrec struct {
	Hold
	seq     int64 // creation order, which is Start order
	ttl     int64 // the TTL its acquire asked for
	decided bool
	settled bool // decided and its end known: handed to the end-time checks
	// lost is set when a grant by another single node overlapped it (the
	// failover check's proof that the key went missing).
	lost bool
}

func (h *hrec) resolved() bool { return h.EndReason != "" }

// empty is Hold.Empty for a hold whose end may not be known yet.
func (h *hrec) empty() bool { return h.resolved() && h.Empty() }

// sproc is a client process's state.
type sproc struct {
	call *scall // the pending invoke, nil if none
	hold *hrec  // the latest hold
	crashState
}

// scall is a client call: its invoke and, once done, its completion.
type scall struct {
	inv, comp history.Op
	done      bool
	seq       int64
	leaseEnd  int64 // a release's or extend's own lease end (Event.LeaseEnd)
}

func (c *scall) outcome() history.Type {
	if !c.done {
		return history.Info
	}
	return c.comp.Type
}

// tickEvents is how often the stream drops what no later event can need
// and cuts porcupine's segments.
const tickEvents = 4096

// NewStream returns a Stream that has seen nothing.
func NewStream(opts Options) *Stream {
	opts = opts.withDefaults()
	return &Stream{opts: opts, procs: map[int]*sproc{}, keys: map[string]*skey{},
		faults: faultState{open: map[string]*Fault{}}, lease: newLeaseState(opts), res: newResState(),
		stats: newStatState(), fo: &foState{}, moments: newMomentState(opts), lin: newLinEngine(opts)}
}

// NewStreamContext is NewStream whose porcupine checks give up when ctx is
// done.
func NewStreamContext(ctx context.Context, opts Options) *Stream {
	opts.ctx = ctx
	return NewStream(opts)
}

// Add feeds the next event. Events must come in the history's order
// (validated histories do); Add after Finish is ignored.
func (s *Stream) Add(op history.Op) {
	if s.finished != nil {
		return
	}
	if op.Time > s.now {
		s.decide()
		for _, ks := range s.tieKeys {
			s.flushTie(ks)
		}
		clear(s.tieKeys)
		s.tieKeys = s.tieKeys[:0]
		s.now = op.Time
	}
	s.stats.last = op.Time
	s.events++
	if op.Type == history.Background {
		return // a lock's own renewal: the holder's belief is its operations'
	}
	s.moments.add(&op)
	switch {
	case op.Process == history.NemesisProcess:
		s.nemesis(&op)
	case op.Type == history.Summary:
		s.summary(&op)
	case op.Type == history.Invoke:
		s.invoke(op)
	default:
		s.complete(op)
	}
	if s.events%tickEvents == 0 {
		s.tick()
	}
}

func (s *Stream) proc(p int) *sproc { return entry(s.procs, p, func(int) *sproc { return &sproc{} }) }

func (s *Stream) key(k string) *skey { return entry(s.keys, k, newSkey) }

// entry is m's state for k, made by mk and kept the first time k is seen.
func entry[K comparable, V any](m map[K]*V, k K, mk func(K) *V) *V {
	v := m[k]
	if v == nil {
		v = mk(k)
		m[k] = v
	}
	return v
}

func (s *Stream) invoke(op history.Op) {
	ps := s.proc(op.Process)
	c := &scall{inv: op, seq: s.calls}
	s.calls++
	if op.F == history.Release || op.F == history.Extend {
		if h := currentHold(&op, ps); h != nil && h.ttl > 0 {
			c.leaseEnd = h.ValidFrom + h.ttl
		}
	}
	ps.call = c
	ps.invoked(op.Time)
	switch op.F {
	case history.Acquire:
		if ps.hold != nil {
			s.finish(ps.hold, op.Time, EndAbandoned, op.Index)
		}
		s.key(op.Key).acquiring = append(s.key(op.Key).acquiring, c)
	case history.Release:
		if h := currentHold(&op, ps); h != nil {
			s.finish(h, op.Time, EndRelease, op.Index)
		}
	}
	if op.F == history.Release || op.F == history.Extend {
		s.key(op.Key).recordCall(c)
	}
}

func (s *Stream) complete(op history.Op) {
	ps := s.proc(op.Process)
	c := ps.call
	if c == nil {
		return // a completion without an invoke: not a validated history
	}
	ps.call = nil
	c.comp, c.done = op, true
	iop := &c.inv
	switch iop.F {
	case history.Acquire:
		if op.Type == history.OK {
			s.grant(c, ps)
		}
	case history.Extend:
		s.extended(c, ps)
	}
	// A release's outcome does not matter: the belief ended at its invoke,
	// before a failed release could tell the client it had lost the lock.
	s.called(c)
}

// grant records the hold an ok acquire confers.
func (s *Stream) grant(c *scall, ps *sproc) {
	iop, op := &c.inv, &c.comp
	h := &hrec{Hold: Hold{Key: grantedKey(iop, op), Process: op.Process, Invoke: iop.Time, Start: op.Time,
		AcquireIndex: op.Index, EndIndex: -1, ValidFrom: startOf(iop, op)}, seq: s.holds}
	s.holds++
	if iop.Value != nil {
		h.ttl = iop.Value.TTL
	}
	h.granted(op.Value, ps.crashedSince(iop.Time))
	ps.hold = h
	s.undecided = append(s.undecided, h)
	s.fo.fence(h)
}

// extended applies an extend's completion to the hold it refers to.
func (s *Stream) extended(c *scall, ps *sproc) {
	iop, op := &c.inv, &c.comp
	h := currentHold(iop, ps)
	if h == nil || h.resolved() {
		return
	}
	switch op.Type {
	case history.OK:
		if h.ValidUntil != nil && *h.ValidUntil <= op.Time {
			// The lease ran out before the extension arrived; the belief
			// ended then and is not revived.
			s.finish(h, op.Time, EndValidUntil, -1)
			return
		}
		if op.Value != nil && op.Value.ValidUntil != nil {
			h.ValidUntil, h.ValidFrom = op.Value.ValidUntil, startOf(iop, op)
			if *h.ValidUntil <= op.Time {
				h.End, h.EndReason, h.EndIndex = op.Time, EndValidUntil, -1
				s.onResolved(h)
			}
		}
	case history.Fail:
		s.finish(h, op.Time, EndLost, op.Index)
	}
}

// currentHold returns the process's hold that op (a release or extend) refers
// to, or nil when it refers to none.
func currentHold(op *history.Op, ps *sproc) *hrec {
	if h := ps.hold; h != nil && refersTo(op, h.Key, h.Token) {
		return h
	}
	return nil
}

// finish ends hold h's belief at t (event idx) unless its lease ran out
// first.
func (s *Stream) finish(h *hrec, t int64, reason string, idx int64) {
	if h.resolved() {
		return
	}
	finish(&h.Hold, t, reason, idx)
	s.onResolved(h)
}

// resolveDue ends h's belief at its lease's end once the clock has passed
// it: nothing after can change that end.
func (s *Stream) resolveDue(h *hrec) {
	if !h.resolved() && h.ValidUntil != nil && *h.ValidUntil <= s.now {
		h.End, h.EndReason, h.EndIndex = max(*h.ValidUntil, h.Start), EndValidUntil, -1
		s.onResolved(h)
	}
}

func (s *Stream) onResolved(h *hrec) {
	if h.decided {
		s.settle(h)
	}
}

// settle hands a decided hold whose end is known to the checks that need
// its end.
func (s *Stream) settle(h *hrec) {
	if h.settled {
		return
	}
	h.settled = true
	if h.Empty() {
		return
	}
	if h.End != Never {
		s.lin.add(h.Key, linOp{call: h.End, ret: h.End, hold: &h.Hold, release: true})
	}
	s.fo.stranded(h)
}

// decide settles the holds granted at the current instant, now that the
// clock has passed it.
func (s *Stream) decide() {
	for _, h := range s.undecided {
		s.decideHold(h)
	}
	clear(s.undecided)
	s.undecided = s.undecided[:0]
}

func (s *Stream) decideHold(h *hrec) {
	s.resolveDue(h)
	h.decided = true
	s.ex.holds++
	if h.empty() {
		s.ex.empty++
		h.settled = true
		return
	}
	ks := s.key(h.Key)
	for _, c := range ks.cands {
		s.resolveDue(c)
	}
	s.exclusion(ks, h)
	s.fo.deposed(h)
	s.lin.add(h.Key, linOp{call: h.Invoke, ret: h.Start, hold: &h.Hold})
	if h.resolved() {
		s.settle(h)
	}
}

// tick ends the beliefs whose lease has run out, cuts porcupine's
// segments as far as no later operation can reach, and drops the faults
// no witness can need.
func (s *Stream) tick() {
	for _, ks := range s.keys {
		for _, c := range ks.cands {
			s.resolveDue(c)
		}
		ks.pruneCands()
		s.lin.cutKey(ks, s)
	}
	s.faults.prune(s)
}

// Finish runs what only the end of the history can settle and returns the
// results. ctx is checked between the checks; porcupine cannot be stopped
// mid-segment, so giving up can take one segment's timeout.
func (s *Stream) Finish(ctx context.Context) (*Results, error) {
	if s.finished != nil {
		return s.finished, nil
	}
	s.opts.ctx = ctx
	s.lin.lc.opts.ctx = ctx
	// The holds granted at the last instant first, while every belief
	// still open counts as reaching past it; then the beliefs nothing
	// ended end at their lease, or never.
	s.decide()
	for _, ps := range s.procs {
		if h := ps.hold; h != nil && !h.resolved() {
			s.endAtLast(h)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.results(ctx)
}

// endAtLast ends a belief that nothing ended: at its lease's end, or never.
func (s *Stream) endAtLast(h *hrec) {
	if h.ValidUntil != nil {
		h.End, h.EndReason, h.EndIndex = max(*h.ValidUntil, h.Start), EndValidUntil, -1
	} else {
		h.End, h.EndReason, h.EndIndex = Never, EndOpen, -1
	}
	s.onResolved(h)
}

// called hands a completed call to the checks over calls.
func (s *Stream) called(c *scall) {
	s.stats.called(c)
	s.lease.called(c, s)
	s.res.called(c)
	switch c.inv.F {
	case history.Acquire:
		ks := s.key(c.inv.Key)
		ks.attemptDone(c, s)
	case history.Release, history.Extend:
		if c.comp.Type == history.Fail {
			s.key(c.inv.Key).dropCall(c)
		}
	}
}

// inFlight lists the calls that never completed, in invoke order.
func (s *Stream) inFlight() []*scall {
	var out []*scall
	for _, ps := range s.procs {
		if ps.call != nil {
			out = append(out, ps.call)
		}
	}
	sortCalls(out)
	return out
}

// Retained counts what the stream keeps between events: holds still
// believed or awaiting a decision, calls kept as witnesses' context,
// faults, porcupine operations not yet checked. Tests use it to show that
// memory does not grow with the history.
func (s *Stream) Retained() int {
	n := len(s.undecided) + len(s.faults.kept) + len(s.lin.batch)*chunkOps
	for _, ks := range s.keys {
		n += len(ks.cands) + len(ks.acquiring) + len(ks.pendingGaps)
		for _, calls := range ks.recentCalls {
			n += len(calls)
		}
		if k := s.lin.keys[ks.name]; k != nil {
			n += len(k.buf) + k.cut.openOps()
		}
	}
	return n + s.res.retained() + s.lease.retained() + s.moments.retained()
}
