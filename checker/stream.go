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
// The believed-hold rules are the Tracker's; the tests check that the
// Stream gives the Results of the in-memory oracle (oracle_test.go, the
// whole history in memory) on random histories; Check is Stream over a
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
	// tr applies the believed-hold rules; the stream takes its calls and
	// holds through the callbacks.
	tr Tracker[holdState]
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
	nf        *nfState
	lin       *linEngine
	eg        *egState
	checks    []check // the composed checks' states (checks)
	fences    *fenceState
	finished  *Results
}

// hrec is a believed hold as the stream tracks it.
type hrec = Belief[holdState]

// holdState is what the stream adds to a hold.
type holdState struct {
	decided bool
	settled bool // decided and its end known: handed to the end-time checks
	// lost is set when a grant by another single node overlapped it (the
	// failover check's proof that the key went missing).
	lost bool
}

// empty is Hold.Empty for a hold whose end may not be known yet.
func empty(h *hrec) bool { return h.Resolved() && h.Empty() }

// scall is a client call as the tracker keeps it.
type scall = Call

// tickEvents is how often the stream drops what no later event can need
// and cuts porcupine's segments.
const tickEvents = 4096

// NewStream returns a Stream that has seen nothing.
func NewStream(opts Options) *Stream {
	opts = opts.withDefaults()
	s := &Stream{opts: opts, keys: map[string]*skey{},
		faults: faultState{open: FaultPairer{Meanings: opts.Faults}}, lease: newLeaseState(opts), res: newResState(),
		stats: newStatState(), fo: &foState{}, moments: newMomentState(opts), nf: newNFState(opts), lin: newLinEngine(opts), eg: newEgState(opts), checks: newChecks(opts), fences: newFenceState(opts)}
	s.tr = Tracker[holdState]{OnInvoke: s.invoked, OnComplete: s.called, OnGrant: s.grant, OnEnd: s.onResolved, Faults: opts.Faults}
	return s
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
	s.nf.now = op.Time
	s.events++
	if op.Type == history.Background {
		// A lock's own renewal: the holder's belief is its operations',
		// but the key it lengthens is the never-frees check's and the
		// lease model's. One that ended the belief (value.ended) ends it.
		s.nf.background(&op)
		s.lease.background(&op)
		s.tr.Background(&op)
		return
	}
	s.moments.add(&op)
	switch {
	case op.Process == history.NemesisProcess:
		s.nemesis(&op)
	case op.Type == history.Summary:
		s.summary(&op)
	case op.Type == history.Invoke:
		s.tr.Invoke(&op)
	default:
		s.tr.Complete(&op)
	}
	if s.events%tickEvents == 0 {
		s.tick()
	}
}

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

// invoked takes a call at its invoke, once the tracker applied it.
func (s *Stream) invoked(c *scall) {
	s.nf.invoked(c)
	switch op := &c.Inv; op.F {
	case history.Acquire:
		ks := s.key(op.Key)
		ks.acquiring = append(ks.acquiring, c)
	case history.Release, history.Extend:
		s.key(op.Key).recordCall(c)
		s.eg.release(c)
	}
}

// grant takes the hold an ok acquire confers.
func (s *Stream) grant(h *hrec) {
	s.undecided = append(s.undecided, h)
	s.fo.fence(h)
	s.nf.grant(&h.Hold, h.TTL)
	s.fences.grant(&h.Hold, s.eg.faults, s.fo.r.Primaries)
}

func (s *Stream) onResolved(h *hrec) {
	s.lease.believed(&h.Hold, s)
	if h.X.decided {
		s.settle(h)
	}
}

// settle hands a decided hold whose end is known to the checks that need
// its end.
func (s *Stream) settle(h *hrec) {
	if h.X.settled {
		return
	}
	h.X.settled = true
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
	s.tr.Expire(h, s.now)
	h.X.decided = true
	s.ex.holds++
	if empty(h) {
		s.ex.empty++
		h.X.settled = true
		return
	}
	ks := s.key(h.Key)
	for _, c := range ks.cands {
		s.tr.Expire(c, s.now)
	}
	s.exclusion(ks, h)
	s.fo.deposed(h)
	s.lin.add(h.Key, linOp{call: h.Invoke, ret: h.Start, hold: &h.Hold})
	if h.Resolved() {
		s.settle(h)
	}
}

// tick ends the beliefs whose lease has run out, cuts porcupine's
// segments as far as no later operation can reach, checks the batch of
// them, and drops the faults no witness can need.
func (s *Stream) tick() {
	for _, ks := range s.keys {
		for _, c := range ks.cands {
			s.tr.Expire(c, s.now)
		}
		ks.pruneCands()
		s.lin.cutKey(ks, s)
	}
	// Most segments are decided as they close (sequentialLegal), so a
	// batch can take long to fill: check what it holds now, which bounds
	// its memory by the tick as before.
	s.lin.flush()
	s.faults.prune(s)
	s.eg.prune(s.now, s.tr.InFlight())
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
	s.tr.EndRemaining()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.results(ctx)
}

// called hands a completed call to the checks over calls.
func (s *Stream) called(c *scall) {
	s.stats.called(c)
	s.lease.called(c, s)
	s.res.called(c)
	s.nf.called(c)
	s.eg.called(c, s.holdOf(c))
	for _, ck := range s.checks {
		ck.called(c)
	}
	switch c.Inv.F {
	case history.Acquire:
		ks := s.key(c.Inv.Key)
		ks.attemptDone(c, s)
	case history.Release, history.Extend:
		if c.Comp.Type == history.Fail {
			s.key(c.Inv.Key).dropCall(c)
		}
	}
}

// inFlight lists the calls that never completed, in invoke order.
func (s *Stream) inFlight() []*scall {
	out := s.tr.InFlight()
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
	return n + s.res.retained() + s.lease.retained() + s.moments.retained() + s.eg.retained()
}

// holdOf is the hold an extend refers to, nil for none or another call.
func (s *Stream) holdOf(c *scall) *Hold {
	if c.Inv.F != history.Extend {
		return nil
	}
	if h := s.tr.proc(c.Inv.Process).current(&c.Inv); h != nil {
		return &h.Hold
	}
	return nil
}
