package checker

import "github.com/lockjepsen/lockjepsen/history"

// ExtendGrantWatcher finds, while a run is still going, the first ok
// extend with another client's grant inside it (extendgrant.go), from
// events fed in the history's order, so that a run can stop there
// (--stop-on-first-violation): such an extend shows no overlap of two
// beliefs to stop at. Its memory is bounded as the stream's check is; the
// verdict is still the checkers', over the whole stored history.
type ExtendGrantWatcher struct {
	tr     Tracker[struct{}]
	st     *egState
	faults FaultPairer
	events int
	keep   bool // never prune (the tests' unpruned check)
}

// NewExtendGrantWatcher returns a watcher that has seen nothing; opts are
// the checkers' (the faults that excuse a pair, MajorityOf).
func NewExtendGrantWatcher(opts Options) *ExtendGrantWatcher {
	w := &ExtendGrantWatcher{st: newEgState(opts), faults: FaultPairer{Meanings: opts.Faults}}
	w.tr.Faults = opts.Faults
	w.tr.OnInvoke = w.st.release
	w.tr.OnComplete = func(c *Call) {
		var h *Hold
		if c.Inv.F == history.Extend {
			if b := w.tr.proc(c.Inv.Process).current(&c.Inv); b != nil {
				h = &b.Hold
			}
		}
		w.st.called(c, h)
	}
	return w
}

// Observe takes the next event and returns the first finding (nil before).
func (w *ExtendGrantWatcher) Observe(op history.Op) *ExtendOverGrant {
	if op.Process == history.NemesisProcess {
		if f, _ := w.faults.Apply(&op); f != nil {
			w.st.fault(f)
		}
	}
	w.tr.Observe(&op) // a background event ends a belief only when the lock revoked it
	if w.events++; w.events%tickEvents == 0 && !w.keep {
		w.st.prune(op.Time, w.tr.InFlight())
	}
	if len(w.st.r.Examples) > 0 {
		return &w.st.r.Examples[0]
	}
	return nil
}
