package checker

import (
	"fmt"
	"math"
	"sort"

	"github.com/lockjepsen/lockjepsen/history"
)

// Reasons a believed hold ended (Hold.EndReason).
const (
	EndRelease    = "release"     // the holder invoked its release
	EndValidUntil = "valid-until" // the lease's valid_until (as extended) passed
	EndLost       = "lost"        // a failed extend or release told the holder it had lost the lock
	EndCrash      = "crash"       // the nemesis crashed the holder
	EndAbandoned  = "abandoned"   // the holder invoked a new acquire without releasing
	EndOpen       = "open"        // nothing ended it: the belief never ends
)

// Never is the End of a hold whose belief never ends (no TTL, never
// released).
const Never = math.MaxInt64

// Hold is a believed hold: the span during which a client, going only by
// what it had been told, was entitled to think it held the lock.
type Hold struct {
	Key     string `json:"key"`
	Process int    `json:"process"`
	Token   string `json:"token,omitempty"`
	Fence   *int64 `json:"fence,omitempty"`
	// Nodes granted the lease, when the lock says (multi-node locks, and
	// the primary a Sentinel client was talking to).
	Nodes []string `json:"nodes,omitempty"`
	// Invoke is the acquire's invocation time; the grant happened somewhere
	// in [Invoke, Start], which is what the linearizability check uses.
	Invoke int64 `json:"invoke"`
	// Start is the ok completion of the acquire: the belief starts when the
	// client is told, not when the server decided.
	Start int64 `json:"start"`
	// End is when the belief ends; Never when it does not. End == Start
	// means the client never had a usable hold (its lease had already run
	// out when the ok arrived, or it crashed first).
	End       int64  `json:"end"`
	EndReason string `json:"end_reason"`
	// AcquireIndex is the event index of the ok acquire.
	AcquireIndex int64 `json:"acquire_index"`
	// EndIndex is the event that ended the belief (release invoke, failed
	// extend/release completion, crash, new acquire), -1 when the lease ran
	// out or the belief never ended.
	EndIndex int64 `json:"end_index"`
	// ValidUntil is the last valid_until the client was told (acquire or
	// ok extend); nil means no limit.
	ValidUntil *int64 `json:"valid_until,omitempty"`
	// ValidFrom is when the operation that told ValidUntil started (its
	// invoke, or the lock's own stamp of its first send): no server can
	// keep the key past ValidFrom + TTL.
	ValidFrom int64 `json:"valid_from"`
}

// Empty reports whether the hold confers no belief at all. Empty holds take
// part in neither the exclusion nor the linearizability check, so that the
// two agree: a client whose lease expired before it heard "ok" never
// believed it held the lock.
func (h *Hold) Empty() bool { return h.End <= h.Start }

// Holds returns the believed holds of a history, one per ok acquire, in
// order of Start.
func Holds(ops []history.Op) []Hold { return scan(ops).holds }

// call is a client operation as indices into the history, a compact
// history.Operation: a million of these cost 16 MB instead of 100+.
type call struct {
	inv, comp int   // comp is -1 when the operation never completed
	leaseEnd  int64 // a release's or extend's own lease end (Event.LeaseEnd)
}

// fault is a nemesis fault's active interval.
type fault struct {
	Fault
}

// analysis is one pass over a history shared by all checkers.
type analysis struct {
	ops    []history.Op
	holds  []Hold
	calls  []call
	faults []fault
	// summaries are the summary events (failed acquires counted, not
	// recorded one by one), by index.
	summaries []int
	end       int64 // time of the last event
	// ttls are the TTLs the holds' acquires asked for, by AcquireIndex.
	ttls map[int64]int64
}

type procState struct {
	pending int // index of the pending invoke, -1 if none
	call    int // index into analysis.calls of the pending call
	hold    int // index of the latest hold, -1 if none
	crashState
}

// procTable maps process numbers to their state; a slice covers the usual
// small process numbers without hashing.
type procTable struct {
	small []procState
	big   map[int]*procState
}

func (t *procTable) get(p int) *procState {
	if p >= 0 && p < smallProcs {
		for p >= len(t.small) {
			t.small = append(t.small, procState{pending: -1, hold: -1})
		}
		return &t.small[p]
	}
	if t.big == nil {
		t.big = map[int]*procState{}
	}
	s := t.big[p]
	if s == nil {
		s = &procState{pending: -1, hold: -1}
		t.big[p] = s
	}
	return s
}

func scan(ops []history.Op) *analysis {
	a := &analysis{ops: ops, calls: make([]call, 0, len(ops)/2+1)}
	if len(ops) > 0 {
		a.end = ops[len(ops)-1].Time
	}
	var procs procTable
	openFault := map[string]int{}
	for i := range ops {
		op := &ops[i]
		if op.Process == history.NemesisProcess {
			a.nemesis(i, openFault, &procs)
			continue
		}
		if op.Type == history.Summary {
			a.summaries = append(a.summaries, i)
			continue
		}
		if op.Type == history.Background {
			continue // a lock's own renewal: no operation of the holder's
		}
		ps := procs.get(op.Process)
		if op.Type == history.Invoke {
			ps.pending = i
			ps.call = len(a.calls)
			a.calls = append(a.calls, call{inv: i, comp: -1, leaseEnd: a.leaseEnd(op, ps)})
			ps.invoked(op.Time)
			a.invoke(i, ps)
			continue
		}
		if ps.pending < 0 {
			continue // a completion without an invoke: not a validated history
		}
		inv := ps.pending
		ps.pending = -1
		a.calls[ps.call].comp = i
		a.complete(inv, i, ps)
	}
	for i := range a.holds {
		h := &a.holds[i]
		if h.EndReason == "" {
			if h.ValidUntil != nil {
				h.End, h.EndReason, h.EndIndex = max(*h.ValidUntil, h.Start), EndValidUntil, -1
			} else {
				h.End, h.EndReason, h.EndIndex = Never, EndOpen, -1
			}
		}
	}
	// Holds are appended at their ok completion, so they are in Start order
	// for any validated history; sort only if given something else.
	if !sort.SliceIsSorted(a.holds, func(i, j int) bool { return a.holds[i].Start < a.holds[j].Start }) {
		sort.SliceStable(a.holds, func(i, j int) bool { return a.holds[i].Start < a.holds[j].Start })
	}
	return a
}

// current returns the process's hold that op (a release or extend) refers
// to, or nil when it refers to none.
func (a *analysis) current(op *history.Op, ps *procState) *Hold {
	if ps.hold < 0 {
		return nil
	}
	if h := &a.holds[ps.hold]; refersTo(op, h.Key, h.Token) {
		return h
	}
	return nil
}

// leaseEnd is a release's or extend's own lease end: the hold it refers
// to, from its last grant or extend's start, plus its TTL; 0 if unknown.
func (a *analysis) leaseEnd(op *history.Op, ps *procState) int64 {
	if op.F != history.Release && op.F != history.Extend {
		return 0
	}
	if h := a.current(op, ps); h != nil && a.ttls[h.AcquireIndex] > 0 {
		return h.ValidFrom + a.ttls[h.AcquireIndex]
	}
	return 0
}

func (a *analysis) invoke(i int, ps *procState) {
	op := &a.ops[i]
	switch op.F {
	case history.Acquire:
		if ps.hold >= 0 {
			finish(&a.holds[ps.hold], op.Time, EndAbandoned, op.Index)
		}
	case history.Release:
		if h := a.current(op, ps); h != nil {
			finish(h, op.Time, EndRelease, op.Index)
		}
	}
}

func (a *analysis) complete(inv, i int, ps *procState) {
	iop, op := &a.ops[inv], &a.ops[i]
	switch iop.F {
	case history.Acquire:
		if op.Type != history.OK {
			return // a failed or unknown acquire confers no belief
		}
		h := Hold{Key: grantedKey(iop, op), Process: op.Process, Invoke: iop.Time, Start: op.Time,
			AcquireIndex: op.Index, EndIndex: -1, ValidFrom: startOf(iop, op)}
		h.granted(op.Value, ps.crashedSince(iop.Time))
		if iop.Value != nil && iop.Value.TTL > 0 {
			if a.ttls == nil {
				a.ttls = map[int64]int64{}
			}
			a.ttls[op.Index] = iop.Value.TTL
		}
		ps.hold = len(a.holds)
		a.holds = append(a.holds, h)
	case history.Extend:
		h := a.current(iop, ps)
		if h == nil || h.EndReason != "" {
			return
		}
		switch op.Type {
		case history.OK:
			if h.ValidUntil != nil && *h.ValidUntil <= op.Time {
				// The lease ran out before the extension arrived; the
				// belief ended then and is not revived.
				finish(h, op.Time, EndValidUntil, -1)
				return
			}
			if op.Value != nil && op.Value.ValidUntil != nil {
				h.ValidUntil, h.ValidFrom = op.Value.ValidUntil, startOf(iop, op)
				if *h.ValidUntil <= op.Time {
					h.End, h.EndReason, h.EndIndex = op.Time, EndValidUntil, -1
				}
			}
		case history.Fail:
			finish(h, op.Time, EndLost, op.Index)
		}
	}
	// A release's outcome does not matter: the belief ended at its invoke,
	// before a failed release could tell the client it had lost the lock.
}

func (a *analysis) nemesis(i int, open map[string]int, procs *procTable) {
	op := &a.ops[i]
	var v history.Value
	if op.Value != nil {
		v = *op.Value
	}
	// Faults of one kind can overlap (two clients paused at once), so a
	// stop matches the start of the same fault on the same targets.
	id := faultID(op.F, v)
	switch v.Phase {
	case "start", "":
		f := fault{Fault: Fault{Name: op.F, Start: op.Time, End: op.Time, Targets: v.Targets,
			Clients: v.Clients, Detail: v.Detail}}
		if op.F != "client-crash" && v.Phase == "start" {
			open[id] = len(a.faults)
			f.End = Never
		}
		a.faults = append(a.faults, f)
	case "stop":
		if j, ok := open[id]; ok {
			a.faults[j].End = op.Time
			delete(open, id)
		}
	}
	for _, p := range crashedClients(op) {
		ps := procs.get(p)
		ps.crash(op.Time)
		if ps.hold >= 0 {
			finish(&a.holds[ps.hold], op.Time, EndCrash, op.Index)
		}
	}
}

func faultID(f string, v history.Value) string {
	return fmt.Sprintf("%s|%v|%v", f, v.Targets, v.Clients)
}

// outcome of a call: ok, fail or info (never completed counts as info).
func (a *analysis) outcome(c call) history.Type {
	if c.comp < 0 {
		return history.Info
	}
	return a.ops[c.comp].Type
}

// endOf is the completion time of c, or the end of the history.
func (a *analysis) endOf(c call) int64 {
	if c.comp < 0 {
		return a.end
	}
	return a.ops[c.comp].Time
}

// Faults are the nemesis faults of a history with the spans they were
// active, in the order they started: End is Never for a fault never
// stopped, and Start for an instant one (client-crash).
func Faults(ops []history.Op) []Fault {
	a := scan(ops)
	out := make([]Fault, len(a.faults))
	for i, f := range a.faults {
		out[i] = f.Fault
	}
	return out
}
