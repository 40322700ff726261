package checker

import (
	"math"

	"github.com/lockjepsen/lockjepsen/history"
)

// Watcher finds mutual-exclusion violations while a run is still going,
// from events fed in the history's order, so that the run can stop at the
// first (--stop-on-first-violation) and progress can count them. It applies the believed-hold rules of
// holds.go but keeps only the holds still believed and the clients' pending
// calls, so its memory is bounded by the clients, not by the history's
// length. It only decides when to stop: the verdict is still the checkers',
// over the whole stored history.
type Watcher struct {
	procs map[int]*watchProc
	open  map[string][]*watchHold // per key, holds whose belief has not ended by an event
	// pending are overlaps seen at time at, confirmed once the history's
	// clock passes at: a belief that ends at the very instant another
	// starts does not overlap it, and that end may be recorded just after.
	pending []WatchViolation
	at      int64
	first   *WatchViolation
	count   int
}

// WatchViolation is the first overlap a Watcher saw: Second's holder was
// granted Key at At while First's holder still believed it held it.
type WatchViolation struct {
	Key    string
	First  int // process
	Second int // process
	// At is the second grant's completion, on the history's clock;
	// SecondIndex is its event index.
	At          int64
	SecondIndex int64

	first, second *watchHold
}

type watchHold struct {
	key, token string
	process    int
	start      int64
	validUntil int64 // math.MaxInt64 when the lease has no limit
	end        int64 // when an event ended the belief; math.MaxInt64 while none has
}

// believedAfter reports whether the belief lasts past t.
func (h *watchHold) believedAfter(t int64) bool { return min(h.validUntil, h.end) > t }

type watchProc struct {
	pending *history.Op // the invoke awaiting its completion
	hold    *watchHold  // the latest hold, nil once its belief ended
	crashState
}

// EarlierHoldEnded reports whether an event has ended the belief of v's
// earlier holder since the overlap: it released, asked for the lock
// again, lost an extension or crashed. What it did while it still
// believed (a stale write the resource refused) is recorded by then.
func (v *WatchViolation) EarlierHoldEnded() bool {
	return v.first != nil && v.first.end != math.MaxInt64
}

// NewWatcher returns a Watcher that has seen nothing.
func NewWatcher() *Watcher {
	return &Watcher{procs: map[int]*watchProc{}, open: map[string][]*watchHold{}}
}

// Observe takes the next event of the history and returns the first
// violation once it is certain (nil before).
func (w *Watcher) Observe(op history.Op) *WatchViolation {
	if len(w.pending) > 0 && op.Time > w.at {
		w.confirm()
	}
	w.observe(op)
	return w.first
}

// Count is the number of grants so far that started while another hold
// of their key was believed: the exclusion checker's count, once Done.
func (w *Watcher) Count() int { return w.count }

func (w *Watcher) observe(op history.Op) {
	if op.Process == history.NemesisProcess {
		w.nemesis(op)
		return
	}
	if op.Type == history.Summary || op.Type == history.Background {
		return // failed acquires, a lock's own renewals: no completion of a call
	}
	ps := w.proc(op.Process)
	if op.Type == history.Invoke {
		w.invoke(op, ps)
		return
	}
	if ps.pending == nil {
		return
	}
	inv := ps.pending
	ps.pending = nil
	w.complete(inv, op, ps)
}

// Done confirms the overlaps still waiting for the clock to pass them: at
// the end of the history, or after any event of a history whose times
// strictly increase (the harness's recorder), where no end can share their
// instant.
func (w *Watcher) Done() *WatchViolation {
	w.confirm()
	return w.first
}

// confirm counts each pending grant that still overlaps a hold at its
// instant, once, however many holds it overlaps.
func (w *Watcher) confirm() {
	var counted *watchHold
	for i := range w.pending {
		v := w.pending[i]
		if v.second == counted || !v.first.believedAfter(v.At) || !v.second.believedAfter(v.At) {
			continue
		}
		counted = v.second
		w.count++
		if w.first == nil {
			w.first = &v
		}
	}
	w.pending = w.pending[:0]
}

func (w *Watcher) end(h *watchHold, t int64) {
	if h.end == math.MaxInt64 {
		h.end = max(t, h.start)
	}
	hs := w.open[h.key]
	for i, x := range hs {
		if x == h {
			hs[i] = hs[len(hs)-1]
			w.open[h.key] = hs[:len(hs)-1]
			break
		}
	}
}

func (w *Watcher) proc(p int) *watchProc {
	return entry(w.procs, p, func(int) *watchProc { return &watchProc{} })
}

// current is the process's hold that op (a release or extend) refers to.
func current(op *history.Op, ps *watchProc) *watchHold {
	if h := ps.hold; h != nil && refersTo(op, h.key, h.token) {
		return h
	}
	return nil
}

func (w *Watcher) invoke(op history.Op, ps *watchProc) {
	inv := op
	ps.pending = &inv
	ps.invoked(op.Time)
	switch op.F {
	case history.Acquire:
		if ps.hold != nil {
			w.end(ps.hold, op.Time)
			ps.hold = nil
		}
	case history.Release:
		if h := current(&op, ps); h != nil {
			w.end(h, op.Time)
			ps.hold = nil
		}
	}
}

func (w *Watcher) complete(inv *history.Op, op history.Op, ps *watchProc) {
	switch inv.F {
	case history.Acquire:
		if op.Type == history.OK {
			w.granted(inv, op, ps)
		}
	case history.Extend:
		h := current(inv, ps)
		if h == nil {
			return
		}
		switch {
		case op.Type == history.Fail, op.Type == history.OK && h.validUntil <= op.Time:
			// Lost, or the lease ran out before the extension arrived.
			w.end(h, op.Time)
			ps.hold = nil
		case op.Type == history.OK && op.Value != nil && op.Value.ValidUntil != nil:
			h.validUntil = *op.Value.ValidUntil
		}
	}
}

func (w *Watcher) granted(inv *history.Op, op history.Op, ps *watchProc) {
	key := grantedKey(inv, &op)
	h := &watchHold{key: key, process: op.Process, start: op.Time, validUntil: math.MaxInt64, end: math.MaxInt64}
	if v := op.Value; v != nil {
		h.token = v.Token
		if v.ValidUntil != nil {
			h.validUntil = *v.ValidUntil
		}
	}
	ps.hold = nil
	if ps.crashedSince(inv.Time) || h.validUntil <= h.start {
		return // the ok reached a dead client, or a lease already run out: no belief
	}
	live := w.open[key][:0]
	for _, o := range w.open[key] {
		if o.validUntil <= op.Time {
			continue // its lease ran out: forget it
		}
		live = append(live, o)
		// Observe confirmed every overlap of an earlier instant before
		// this event, so those pending are all of this one.
		w.pending = append(w.pending, WatchViolation{Key: key, First: o.process, Second: op.Process,
			At: op.Time, SecondIndex: op.Index, first: o, second: h})
		w.at = op.Time
	}
	w.open[key] = append(live, h)
	ps.hold = h
}

func (w *Watcher) nemesis(op history.Op) {
	for _, p := range crashedClients(&op) {
		ps := w.proc(p)
		ps.crash(op.Time)
		if ps.hold != nil {
			w.end(ps.hold, op.Time)
			ps.hold = nil
		}
	}
}
