package checker

import "github.com/lockjepsen/lockjepsen/history"

// NeverFreesWatcher finds the first key that outlived every client that
// could hold it while a run is still going, from events fed in the
// history's order, so that a run told to stop at its first violation
// stops there too: a lock that never frees has no overlap to stop at. It
// is the never-frees check of the Stream (stream_neverfree.go) on the
// Tracker's holds, so it flags exactly the Stream's first episode; its
// memory is the clients' calls and holds, and the refusals awaiting
// calls in flight.
type NeverFreesWatcher struct {
	tr    Tracker[struct{}]
	nf    *nfState
	first *NeverFree
}

// NewNeverFreesWatcher returns a watcher that has seen nothing; opts are
// the checkers' (the TTL, the clock and disrupting faults).
func NewNeverFreesWatcher(opts Options) *NeverFreesWatcher {
	w := &NeverFreesWatcher{nf: newNFState(opts.withDefaults())}
	w.tr = Tracker[struct{}]{OnInvoke: w.nf.invoked, OnComplete: w.nf.called,
		OnGrant: func(h *Belief[struct{}]) { w.nf.grant(&h.Hold, h.TTL) }, Faults: opts.Faults}
	return w
}

// Observe takes the next event of the history and returns the first
// episode once one is certain (nil before); its story tells it as far as
// it went then.
func (w *NeverFreesWatcher) Observe(op history.Op) *NeverFree {
	if w.first != nil {
		return w.first
	}
	w.nf.now = op.Time
	switch {
	case op.Process == history.NemesisProcess:
		w.tr.Crash(&op)
		w.nf.nemesis(&op)
	case op.Type == history.Summary:
		w.nf.summary(&op)
	case op.Type == history.Background:
		w.nf.background(&op)
		w.tr.Background(&op)
	default:
		w.tr.Observe(&op)
	}
	if len(w.nf.res.Witnesses) > 0 {
		f := w.nf.res.Witnesses[0]
		f.Story = f.story()
		w.first = &f
	}
	return w.first
}
