package reports

import (
	"container/heap"
	"fmt"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/history"
)

// The believed holds of a history, followed one event at a time by the
// checker's own engine (checker.Tracker), which keeps per process only its
// pending call and latest hold. The sweep keeps per key the holds still
// believed; a hold leaves as soon as its end and its colour are final, to
// be drawn, so memory is bounded by the clients, not by the history's
// length. The overlaps are found the way the old whole-history sweep
// (overlaps) found them: a hold is red when another hold of its key was
// believed at some instant of its own belief, and the overlap spans are
// the times when two or more were.

// shold is a believed hold while the pass follows it.
type shold = checker.Belief[sweepHold]

// sweepHold is what the sweep adds to a hold.
type sweepHold struct {
	counted bool // among its key's believed holds
	red     bool
	heapIdx int
}

// validUntil is h's lease end as extended; checker.Never when it has none.
func validUntil(h *shold) int64 {
	if h.ValidUntil == nil {
		return checker.Never
	}
	return *h.ValidUntil
}

// holdSweep applies the believed-hold rules and the overlap sweep.
type holdSweep struct {
	tr   checker.Tracker[sweepHold]
	keys map[string]*keySweep
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

func newHoldSweep(sc scale, emit func(*shold), fm checker.FaultMeanings) *holdSweep {
	s := &holdSweep{keys: map[string]*keySweep{}, holders: map[int]bool{}, sc: sc, emit: emit}
	s.tr = checker.Tracker[sweepHold]{OnGrant: s.grant, OnExtend: s.extended, OnEnd: s.ended, Faults: fm}
	return s
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
	s.tr.Observe(op)
}

// advance moves the clock from now to t: the leases that ran out by now
// end first, then the grants of the instant now are decided, then the
// leases that run out before t end, in the order they do.
func (s *holdSweep) advance(t int64) {
	s.expire(s.now, true)
	for _, h := range s.undecided {
		if !h.Resolved() {
			s.key(h.Key).grant(h)
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
		if vu := validUntil(h); vu > t || (!at && vu == t) {
			return
		}
		s.tr.Expire(h, t)
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
		s.tr.Finish(s.expiry.hs[0], checker.Never, checker.EndOpen, -1)
	}
}

// ended takes h out of the believed holds and hands it on to be drawn.
func (s *holdSweep) ended(h *shold) {
	if h.X.counted {
		heap.Remove(&s.expiry, h.X.heapIdx)
		s.key(h.Key).end(h)
	}
	if !h.Empty() {
		s.emit(h)
	}
}

// extended keeps the expiry order when an extend moved h's lease.
func (s *holdSweep) extended(h *shold) {
	if h.X.counted {
		heap.Fix(&s.expiry, h.X.heapIdx)
	}
}

// grant takes a new hold; one that confers no belief is only counted.
func (s *holdSweep) grant(h *shold) {
	s.holds++
	s.key(h.Key)
	s.holders[h.Process] = true
	if !h.Resolved() {
		s.undecided = append(s.undecided, h)
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
	h.X.counted = true
	if len(k.believed) > 0 {
		h.X.red = true
		for _, o := range k.believed {
			o.X.red = true
		}
		if len(k.believed) == 1 {
			k.openAt = h.Start
			if k.hasLast && k.lastEnd == h.Start {
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
	h.X.counted = false
	if len(k.believed) != 1 {
		return
	}
	k.spans = append(k.spans, span{Key: k.key, Start: k.openAt, End: min(h.End, k.sc.t1)})
	k.lastEnd, k.hasLast = h.End, true
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
func (e expiryHeap) Less(i, j int) bool { return validUntil(e.hs[i]) < validUntil(e.hs[j]) }
func (e expiryHeap) Swap(i, j int) {
	e.hs[i], e.hs[j] = e.hs[j], e.hs[i]
	e.hs[i].X.heapIdx, e.hs[j].X.heapIdx = i, j
}
func (e *expiryHeap) Push(x any) {
	h := x.(*shold)
	h.X.heapIdx = len(e.hs)
	e.hs = append(e.hs, h)
}
func (e *expiryHeap) Pop() any {
	n := len(e.hs)
	h := e.hs[n-1]
	e.hs[n-1] = nil
	e.hs = e.hs[:n-1]
	return h
}
