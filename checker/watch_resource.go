package checker

import (
	"fmt"

	"github.com/lockjepsen/lockjepsen/history"
)

// Kinds of resource damage a ResourceWatcher reports.
const (
	// DamageLostUpdate: an accepted write wrote a value already written,
	// so one increment overwrote another (the resource checker's
	// Duplicates, seen as it happens).
	DamageLostUpdate = "lost-update"
	// DamageRefusedStale: the resource refused a write or read for a
	// stale fence, so a holder acted after its lock had passed on. Fencing
	// saved the data, but the stale holder's act is what a fenced
	// resource-only test waits for.
	DamageRefusedStale = "refused-stale"
)

// ResourceWatcher finds the first damage to the protected resource while
// a run is still going, from events fed in the history's order, so that
// a run whose lock looks exclusive but whose data suffers (a holder that
// acts after its lease) can stop there as an overlapping one stops at its
// overlap. Lost updates that only the final read reveals are the resource
// checker's, after the run; every accepted write of a value already
// written shows here at its completion. Its memory is the clients' open
// calls plus, per key, the written values above the longest run 1, 2, …
// written so far: a counter's writes fill that run, so it stays small.
type ResourceWatcher struct {
	pending map[int]*history.Op // each process's open read or write invoke
	written map[string]*writtenValues
	first   *ResourceDamage
}

// ResourceDamage is the first damage a ResourceWatcher saw: Process's F
// on Key completed at At (event Index) either accepted a value already
// written (DamageLostUpdate, First being the earlier write of N) or was
// refused for a stale fence (DamageRefusedStale).
type ResourceDamage struct {
	Kind    string `json:"kind"`
	Key     string `json:"key"`
	Process int    `json:"process"`
	F       string `json:"f"`
	At      int64  `json:"at"`
	Index   int64  `json:"index"`
	N       int64  `json:"n,omitempty"`
	Fence   *int64 `json:"fence,omitempty"`
	// First is the earlier accepted write of N, for a lost update.
	First *Write `json:"first,omitempty"`
}

// String says what happened, for a run's reason to stop.
func (d *ResourceDamage) String() string {
	switch d.Kind {
	case DamageLostUpdate:
		s := fmt.Sprintf("process %d's write of %d to %s was accepted at %s", d.Process, d.N, d.Key, fmtT(d.At))
		if d.First != nil {
			s += fmt.Sprintf(" after process %d's write of the same value at %s", d.First.Process, fmtT(d.First.Time))
		}
		return s + ": a lost update"
	default:
		s := fmt.Sprintf("the resource refused process %d's %s of %s at %s for a stale fence", d.Process, d.F, d.Key, fmtT(d.At))
		if d.Fence != nil {
			s += fmt.Sprintf(" (%d)", *d.Fence)
		}
		return s
	}
}

// writtenValues are the values accepted on one key: every one of 1..run,
// and the others in more. more keeps the latest writes of the run too
// (keptBelowRun values), so that a lost update can name the write it
// repeated: a stale holder writes a value just below the top.
type writtenValues struct {
	run  int64
	more map[int64]Write
}

const keptBelowRun = 64

// add records w's value and returns whether it was written before, and
// the earlier write when it is still kept.
func (v *writtenValues) add(w Write) (earlier *Write, dup bool) {
	if e, ok := v.more[w.N]; ok {
		return &e, true
	}
	if w.N >= 1 && w.N <= v.run {
		return nil, true
	}
	v.more[w.N] = w
	for {
		if _, ok := v.more[v.run+1]; !ok {
			return nil, false
		}
		v.run++
		if old := v.run - keptBelowRun; old >= 1 {
			delete(v.more, old)
		}
	}
}

// NewResourceWatcher returns a ResourceWatcher that has seen nothing.
func NewResourceWatcher() *ResourceWatcher {
	return &ResourceWatcher{pending: map[int]*history.Op{}, written: map[string]*writtenValues{}}
}

// Observe takes the next event of the history and returns the first
// damage once seen (nil before). Unlike an overlap, damage is certain at
// the event that shows it: no later event at the same instant undoes it.
func (w *ResourceWatcher) Observe(op history.Op) *ResourceDamage {
	if w.first != nil || op.Process == history.NemesisProcess {
		return w.first
	}
	switch op.Type {
	case history.Invoke:
		if op.F == history.Write || op.F == history.Read {
			inv := op
			w.pending[op.Process] = &inv
		} else {
			delete(w.pending, op.Process)
		}
	case history.OK, history.Fail, history.Info:
		inv := w.pending[op.Process]
		delete(w.pending, op.Process)
		if inv != nil && inv.F == op.F {
			w.complete(inv, &op)
		}
	}
	return w.first
}

// First is the first damage seen, or nil.
func (w *ResourceWatcher) First() *ResourceDamage { return w.first }

func (w *ResourceWatcher) complete(inv, op *history.Op) {
	var fence *int64
	if inv.Value != nil {
		fence = inv.Value.Fence
	}
	if op.Type == history.Fail {
		w.first = &ResourceDamage{Kind: DamageRefusedStale, Key: inv.Key, Process: op.Process, F: op.F,
			At: op.Time, Index: op.Index, Fence: fence}
		return
	}
	if op.Type != history.OK || inv.F != history.Write || inv.Value == nil || inv.Value.N == nil {
		return
	}
	wr := Write{Process: op.Process, N: *inv.Value.N, Token: inv.Value.Token, Fence: fence,
		Invoke: inv.Time, Time: op.Time, Index: op.Index}
	vals := w.written[inv.Key]
	if vals == nil {
		vals = &writtenValues{more: map[int64]Write{}}
		w.written[inv.Key] = vals
	}
	if earlier, dup := vals.add(wr); dup {
		w.first = &ResourceDamage{Kind: DamageLostUpdate, Key: inv.Key, Process: op.Process, F: op.F,
			At: op.Time, Index: op.Index, N: wr.N, Fence: fence, First: earlier}
	}
}
