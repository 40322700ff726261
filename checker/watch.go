package checker

import "github.com/lockjepsen/lockjepsen/history"

// Watcher finds mutual-exclusion violations while a run is still going,
// from events fed in the history's order, so that the run can stop at the
// first (--stop-on-first-violation) and progress can count them. It takes
// the holds from the Tracker and keeps per key only those still believed,
// so its memory is bounded by the clients, not by the history's length. It only decides when to stop: the verdict is still the checkers',
// over the whole stored history.
type Watcher struct {
	tr   Tracker[struct{}]
	open map[string][]*watchHold // per key, holds whose belief has not ended by an event
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

type watchHold = Belief[struct{}]

// EarlierHoldEnded reports whether an event has ended the belief of v's
// earlier holder since the overlap: it released, asked for the lock
// again, lost an extension or crashed. What it did while it still
// believed (a stale write the resource refused) is recorded by then.
func (v *WatchViolation) EarlierHoldEnded() bool {
	return v.first != nil && v.first.Resolved()
}

// NewWatcher returns a Watcher that has seen nothing and reads which
// faults crash clients by their names (LegacyFaultMeaning).
func NewWatcher() *Watcher { return NewWatcherWith(nil) }

// NewWatcherWith returns a Watcher that has seen nothing and reads which
// faults crash clients from fm (Options.Faults).
func NewWatcherWith(fm FaultMeanings) *Watcher {
	w := &Watcher{open: map[string][]*watchHold{}}
	w.tr = Tracker[struct{}]{OnGrant: w.granted, OnEnd: w.end, Faults: fm}
	return w
}

// Observe takes the next event of the history and returns the first
// violation once it is certain (nil before).
func (w *Watcher) Observe(op history.Op) *WatchViolation {
	if len(w.pending) > 0 && op.Time > w.at {
		w.confirm()
	}
	w.tr.Observe(&op)
	return w.first
}

// Count is the number of grants so far that started while another hold
// of their key was believed: the exclusion checker's count, once Done.
func (w *Watcher) Count() int { return w.count }

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
		if v.second == counted || !v.first.BelievedAfter(v.At) || !v.second.BelievedAfter(v.At) {
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

// end takes a hold whose belief an event ended out of its key's open ones.
func (w *Watcher) end(h *watchHold) {
	hs := w.open[h.Key]
	for i, x := range hs {
		if x == h {
			hs[i] = hs[len(hs)-1]
			w.open[h.Key] = hs[:len(hs)-1]
			break
		}
	}
}

// granted notes the overlaps of a new hold with its key's open ones.
func (w *Watcher) granted(h *watchHold) {
	if h.Resolved() {
		return // the ok reached a dead client, or a lease already run out: no belief
	}
	live := w.open[h.Key][:0]
	for _, o := range w.open[h.Key] {
		if o.ValidUntil != nil && *o.ValidUntil <= h.Start {
			continue // its lease ran out: forget it
		}
		live = append(live, o)
		// Observe confirmed every overlap of an earlier instant before
		// this event, so those pending are all of this one.
		w.pending = append(w.pending, WatchViolation{Key: h.Key, First: o.Process, Second: h.Process,
			At: h.Start, SecondIndex: h.AcquireIndex, first: o, second: h})
		w.at = h.Start
	}
	w.open[h.Key] = append(live, h)
}
