package reports

import (
	"container/heap"
	"fmt"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/history"
)

// The believed holds of a history, followed one event at a time. The
// rules are checker.Holds' (holds.go); what is kept is what later events
// can still change, as checker.Watcher keeps: per process its pending
// call and latest hold, per key the holds still believed. A hold leaves
// as soon as its end and its colour are final, to be drawn, so memory is
// bounded by the clients, not by the history's length. The overlaps are
// found the way the old whole-history sweep (overlaps) found them: a
// hold is red when another hold of its key was believed at some instant
// of its own belief, and the overlap spans are the times when two or more
// were.

// shold is a believed hold while the pass follows it.
type shold struct {
	key        string
	process    int
	invoke     int64
	start      int64
	end        int64 // final once ended
	validUntil int64 // as extended; checker.Never when the lease has none
	hasVU      bool
	token      string
	ended      bool // checker.Hold.EndReason != ""
	counted    bool // among its key's believed holds
	red        bool
	heapIdx    int
}

func (h *shold) empty() bool { return h.ended && h.end <= h.start }

// pendingCall is a client's invoke awaiting its completion.
type pendingCall struct {
	time  int64
	f     string
	key   string
	token string
}

// sproc is what the pass keeps of one client process.
type sproc struct {
	pending   *pendingCall
	hold      *shold // its latest hold, ended or not
	crashed   bool
	crashedAt int64
}

// holdSweep applies the believed-hold rules and the overlap sweep.
type holdSweep struct {
	procs map[int]*sproc
	keys  map[string]*keySweep
	// undecided are the holds granted at the instant now: whether one
	// overlaps another is known once the clock passes it, since a belief
	// that ends at that very instant does not overlap, and its end may be
	// recorded just after.
	undecided []*shold
	expiry    expiryHeap // believed holds by the end of their lease
	now       int64
	started   bool
	sc        scale // of the whole run, for spans merged on screen
	holds     int   // every hold, empty ones too
	holders   map[int]bool
	// emit receives each non-empty hold once its end and colour are final,
	// in start order for any one process.
	emit func(h *shold)
}

func newHoldSweep(sc scale, emit func(*shold)) *holdSweep {
	return &holdSweep{procs: map[int]*sproc{}, keys: map[string]*keySweep{}, holders: map[int]bool{}, sc: sc, emit: emit}
}

func (s *holdSweep) proc(p int) *sproc {
	ps := s.procs[p]
	if ps == nil {
		ps = &sproc{}
		s.procs[p] = ps
	}
	return ps
}

func (s *holdSweep) key(k string) *keySweep {
	ks := s.keys[k]
	if ks == nil {
		ks = &keySweep{key: k, sc: s.sc}
		s.keys[k] = ks
	}
	return ks
}

// add takes the next event.
func (s *holdSweep) add(op *history.Op) {
	if !s.started || op.Time > s.now {
		if s.started {
			s.advance(op.Time)
		}
		s.started, s.now = true, op.Time
	}
	if op.Process == history.NemesisProcess {
		s.nemesis(op)
		return
	}
	if op.Type == history.Summary || op.Type == history.Background {
		return // failed acquires, a lock's own renewals: no completion of a call
	}
	ps := s.proc(op.Process)
	if op.Type == history.Invoke {
		s.invoke(op, ps)
		return
	}
	if ps.pending == nil {
		return // a completion without an invoke: not a validated history
	}
	inv := ps.pending
	ps.pending = nil
	s.complete(inv, op, ps)
}

// advance moves the clock from now to t: the leases that ran out by now
// end first, then the grants of the instant now are decided, then the
// leases that run out before t end, in the order they do.
func (s *holdSweep) advance(t int64) {
	s.expire(s.now, true)
	for _, h := range s.undecided {
		if !h.ended {
			s.key(h.key).grant(h)
			heap.Push(&s.expiry, h)
		}
	}
	clear(s.undecided)
	s.undecided = s.undecided[:0]
	s.expire(t, false)
}

// expire ends the believed holds whose lease ran out before t (or at t).
func (s *holdSweep) expire(t int64, at bool) {
	for len(s.expiry.hs) > 0 {
		h := s.expiry.hs[0]
		if h.validUntil > t || (!at && h.validUntil == t) {
			return
		}
		s.finish(h, h.validUntil)
	}
}

// done ends the history: what is still believed ends with its lease, or
// never.
func (s *holdSweep) done() {
	if !s.started {
		return
	}
	s.advance(checker.Never)
	for len(s.expiry.hs) > 0 {
		h := s.expiry.hs[0]
		s.finish(h, h.validUntil)
	}
}

// finish ends h's belief at t unless its lease ran out first (holds.go's
// finish).
func (s *holdSweep) finish(h *shold, t int64) {
	if h.ended {
		return
	}
	end := t
	if h.hasVU && h.validUntil <= t {
		end = h.validUntil
	}
	s.endAt(h, max(end, h.start))
}

// endAt ends h at end, takes it out of the believed holds and hands it on
// to be drawn.
func (s *holdSweep) endAt(h *shold, end int64) {
	h.end, h.ended = end, true
	if h.counted {
		heap.Remove(&s.expiry, h.heapIdx)
		s.key(h.key).end(h)
	}
	if !h.empty() {
		s.emit(h)
	}
}

// current is the process's hold that a release or extend refers to.
func current(inv *pendingCall, ps *sproc) *shold {
	h := ps.hold
	if h == nil || (inv.key != "" && h.key != "" && inv.key != h.key) {
		return nil
	}
	if inv.token != "" && h.token != "" && inv.token != h.token {
		return nil
	}
	return h
}

func (s *holdSweep) invoke(op *history.Op, ps *sproc) {
	c := &pendingCall{time: op.Time, f: op.F, key: op.Key}
	if op.Value != nil {
		c.token = op.Value.Token
	}
	ps.pending = c
	if ps.crashed && op.Time > ps.crashedAt {
		ps.crashed = false // a crashed process that acts again is a new client
	}
	switch op.F {
	case history.Acquire:
		if ps.hold != nil {
			s.finish(ps.hold, op.Time)
		}
	case history.Release:
		if h := current(c, ps); h != nil {
			s.finish(h, op.Time)
		}
	}
}

func (s *holdSweep) complete(inv *pendingCall, op *history.Op, ps *sproc) {
	switch inv.f {
	case history.Acquire:
		if op.Type == history.OK {
			s.grant(inv, op, ps)
		}
	case history.Extend:
		h := current(inv, ps)
		if h == nil || h.ended {
			return
		}
		switch op.Type {
		case history.OK:
			if h.hasVU && h.validUntil <= op.Time {
				s.finish(h, op.Time) // the lease ran out before the extension arrived
				return
			}
			if op.Value != nil && op.Value.ValidUntil != nil {
				h.validUntil, h.hasVU = *op.Value.ValidUntil, true
				if h.counted {
					heap.Fix(&s.expiry, h.heapIdx)
				}
				if h.validUntil <= op.Time {
					s.endAt(h, op.Time)
				}
			}
		case history.Fail:
			s.finish(h, op.Time)
		}
	}
}

func (s *holdSweep) grant(inv *pendingCall, op *history.Op, ps *sproc) {
	key := inv.key
	if key == "" {
		key = op.Key
	}
	h := &shold{key: key, process: op.Process, invoke: inv.time, start: op.Time, validUntil: checker.Never}
	if v := op.Value; v != nil {
		h.token = v.Token
		if v.ValidUntil != nil {
			h.validUntil, h.hasVU = *v.ValidUntil, true
		}
	}
	s.holds++
	s.key(key)
	s.holders[op.Process] = true
	ps.hold = h
	if (ps.crashed && ps.crashedAt >= inv.time) || (h.hasVU && h.validUntil <= h.start) {
		// The ok reached a dead client, or a lease already run out: the
		// hold confers no belief.
		h.end, h.ended = h.start, true
		return
	}
	s.undecided = append(s.undecided, h)
}

func (s *holdSweep) nemesis(op *history.Op) {
	v := op.Value
	// Only a crash that happened ends beliefs: "error" and "skipped" mark
	// one that was never applied.
	if op.F != "client-crash" || v == nil || (v.Phase != "start" && v.Phase != "") {
		return
	}
	for _, p := range v.Clients {
		ps := s.proc(p)
		ps.crashed, ps.crashedAt = true, op.Time
		if ps.hold != nil {
			s.finish(ps.hold, op.Time)
		}
	}
}

// keySweep is one key's believed holds and the spans when two or more
// were believed at once.
type keySweep struct {
	key      string
	sc       scale
	believed []*shold
	spans    []span
	openAt   int64 // start of the open span, while two or more are believed
	lastEnd  int64 // unclipped end of the last span
	hasLast  bool
	merged   bool // spans were merged on screen: all are, in the end
}

// maxSpans bounds a key's overlap spans kept apart; beyond it, spans
// closer than a pixel on the run's timeline are merged (a run with
// violations every second for an hour would otherwise keep them all).
const maxSpans = 1024

// grant takes h, granted at h.start while the others are believed: if
// any is, every one of them and h are red, and an overlap begins.
func (k *keySweep) grant(h *shold) {
	h.counted = true
	if len(k.believed) > 0 {
		h.red = true
		for _, o := range k.believed {
			o.red = true
		}
		if len(k.believed) == 1 {
			k.openAt = h.start
			if k.hasLast && k.lastEnd == h.start {
				// The last overlap ended at this instant: it goes on.
				k.openAt = k.spans[len(k.spans)-1].Start
				k.spans = k.spans[:len(k.spans)-1]
			}
		}
	}
	k.believed = append(k.believed, h)
}

// end takes h out of the believed holds; the overlap ends when fewer than
// two are left.
func (k *keySweep) end(h *shold) {
	for i, o := range k.believed {
		if o == h {
			k.believed = append(k.believed[:i], k.believed[i+1:]...)
			break
		}
	}
	h.counted = false
	if len(k.believed) != 1 {
		return
	}
	k.spans = append(k.spans, span{Key: k.key, Start: k.openAt, End: min(h.end, k.sc.t1)})
	k.lastEnd, k.hasLast = h.end, true
	if len(k.spans) > maxSpans {
		k.spans, k.merged = mergeOnScreen(k.sc, k.spans), true
	}
}

// result is the key's overlap spans: merged on screen throughout when
// they had to be anywhere, so that the lane reads the same everywhere.
func (k *keySweep) result() []span {
	if k.merged {
		k.spans = mergeOnScreen(k.sc, k.spans)
	}
	return k.spans
}

// mergeOnScreen merges spans less than a pixel apart on sc.
func mergeOnScreen(sc scale, in []span) []span {
	out := in[:0]
	for _, s := range in {
		if n := len(out); n > 0 && sc.x(s.Start)-sc.x(out[n-1].End) < 1 {
			out[n-1].End = max(out[n-1].End, s.End)
			out[n-1].N = max(out[n-1].N, 1) + max(s.N, 1)
			continue
		}
		out = append(out, s)
	}
	return out
}

// title is the overlap span's tooltip.
func (o span) title() string {
	if o.N > 1 {
		return fmt.Sprintf("two clients held %s at once %d times between %s and %s (closer than a pixel)", o.Key, o.N, fmtT(o.Start), fmtT(o.End))
	}
	return fmt.Sprintf("two clients held %s at once: %s–%s (%s)", o.Key, fmtT(o.Start), fmtT(o.End), fmtD(o.End-o.Start))
}

// expiryHeap orders the believed holds by the end of their lease.
type expiryHeap struct{ hs []*shold }

func (e expiryHeap) Len() int           { return len(e.hs) }
func (e expiryHeap) Less(i, j int) bool { return e.hs[i].validUntil < e.hs[j].validUntil }
func (e expiryHeap) Swap(i, j int) {
	e.hs[i], e.hs[j] = e.hs[j], e.hs[i]
	e.hs[i].heapIdx, e.hs[j].heapIdx = i, j
}
func (e *expiryHeap) Push(x any) {
	h := x.(*shold)
	h.heapIdx = len(e.hs)
	e.hs = append(e.hs, h)
}
func (e *expiryHeap) Pop() any {
	n := len(e.hs)
	h := e.hs[n-1]
	e.hs[n-1] = nil
	e.hs = e.hs[:n-1]
	return h
}
