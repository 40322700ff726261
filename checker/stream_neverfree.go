package checker

import (
	"fmt"
	"slices"
	"time"

	"github.com/lockjepsen/lockjepsen/history"
)

// The never-frees check: a lock promises that a key no live holder can
// hold frees itself within its TTL. A key that outlives every client that
// could hold it is the lock's failure (no TTL, a TTL far above the lease,
// a release that never deletes), not the deployment's: every client waits
// for ever. The check needs nothing of the lock but the history, so it
// judges a client in any language whose keys the harness never reads.
//
// A definite refusal of an acquire (fail: the server is up and says a key
// is there) invoked at t on key k is evidence when nothing that could have
// set or lengthened k can still be alive at t:
//
//   - every grant, extend or background renewal that was ok, at its
//     completion (its latest possible effect) + the TTL it asked for;
//   - every acquire or extend whose outcome is unknown likewise, and every
//     acquire refused while a disrupting fault was active (a multi-node
//     attempt sends its SET to nodes that never answered), from the
//     process's next answer (a client in another process may still be
//     working on it when the harness gives up, and answers in turn), and,
//     when a fault that disrupts nodes or links (Options.DisruptFaults: a
//     pause, a partition, slow links) was still active then, from the
//     moment no such fault is active any more: a paused server applies a
//     request when continued, a cut link delivers it when healed; a call
//     a crashed client left in flight, from the crash; one never answered,
//     never;
//   - no holder's belief is live at t (a lock with no deadline believes
//     until it releases; a crashed holder no longer holds);
//   - no clock fault was active from the key's last grant's invoke to t: a
//     node's clock slowed or moved back honestly lengthens a key's life, as
//     the lease model excuses (lease.go);
//   - no disrupting fault was active while the refusal was in flight: a
//     paused or cut-off node's refusal may be an error or a lost quorum,
//     not a key, and that is the deployment's unavailability.
//
// A refusal is judged once every acquire or extend of its key invoked
// before its completion has completed: one of those may be the grant
// whose key refused it. Refusals counted must come after the latest
// possible expiry by more than a margin (neverFreesMargin), and at least
// neverFreesMinRefusals of them, so that a lock that rounds its TTL up, or
// one odd refusal, is not a finding. Each run of refusals between two
// raises of the key's latest expiry is one episode, counted once.
//
// Multi-node locks (a grant named several nodes) take a key on some nodes
// in an attempt that then fails and give it back before answering; such
// a key can refuse another client's attempt in flight at the same time. On
// such a key a refusal overlapped by another attempt is not judged.
//
// What it cannot see: a refusal that is not about a key (a lock that
// reports a Redis error, or too few replicas, as not acquired) with no
// fault to explain it; a multi-node lock whose grants name no nodes, whose
// failed attempts then count as refusals. Both need every attempt of
// every client to fail for over a second with no grant.

// neverFreesMinRefusals is how many definite refusals past the key's
// latest possible expiry an episode needs: several, not one odd one.
const neverFreesMinRefusals = 3

// neverFreesPending bounds the refusals of one key awaiting calls in
// flight; past it the oldest are dropped unjudged (never flagged).
const neverFreesPending = 4096

// neverFreesMargin is how long past its latest possible expiry a key
// must still refuse for a lease of ttl: max(2×TTL, 2 s), and the lease
// model's tolerance (LeaseTolerance) for the harness's stamps and Redis's
// millisecond expiry. Libraries honestly set their keys somewhat above the
// lease they report: Laravel and etcd round a TTL up to whole seconds (1 s
// for 500 ms), which adds less than 1 s; malkusch/lock keeps its key for
// the timeout rounded up to whole seconds + 1 s (2 s for 500 ms), which
// adds less than 2 s; a lock that doubles or converts its TTL adds at most
// one TTL. A key still there after all of them was set by nothing that
// ends with its lease: no TTL, or one far above it (20× the lease).
func neverFreesMargin(ttl int64) int64 {
	return max(2*ttl, int64(2*time.Second)) + int64(LeaseTolerance(time.Duration(ttl)))
}

// NeverFreesResult is the never-frees check's verdict.
type NeverFreesResult struct {
	Valid bool `json:"valid"`
	// Episodes counts the runs of refusals, per key, that came after every
	// lease that could hold the key had ended; Witnesses keeps the first
	// MaxViolations.
	Episodes  int         `json:"episodes"`
	Witnesses []NeverFree `json:"witnesses,omitempty"`
	// Judged counts the definite refusals judged; Late those that came
	// after every lease that could hold their key had ended, with nothing
	// else (a belief, a fault, a clock, an attempt in flight) to explain
	// them.
	Judged int `json:"judged"`
	Late   int `json:"late"`
	// Suspended says why no refusal was held against the lock: the
	// servers may keep a key past its TTL by themselves
	// (Options.ServerRenewsLeases: etcd's leader renews every lease when
	// leadership changes, and raises a TTL below its minimum).
	Suspended string `json:"suspended,omitempty"`
}

// NeverFree is one episode: a key refused to its clients after every
// lease that could hold it had ended.
type NeverFree struct {
	Key string `json:"key"`
	// Expiry is the latest any key that could be there could live: Lease's
	// latest possible effect + its TTL. Margin is how far past Expiry a
	// refusal had to come to count.
	Expiry int64 `json:"expiry"`
	Margin int64 `json:"margin_ns"`
	// First and Last are the invokes of the first and last refusals after
	// Expiry; Flagged that of the one that made the episode a finding.
	First    int64 `json:"first"`
	Last     int64 `json:"last"`
	Flagged  int64 `json:"flagged"`
	Refusals int   `json:"refusals"`
	Clients  int   `json:"clients"`
	// Lease is the operation whose key could live longest.
	Lease NeverFreeLease `json:"lease"`
	Story string         `json:"story"`
}

// NeverFreeLease is an operation that could have set or lengthened a key.
type NeverFreeLease struct {
	Process int          `json:"process"`
	F       string       `json:"f"` // acquire, extend, or renewal (a background extend)
	Outcome history.Type `json:"outcome"`
	// At is its latest possible effect; TTL the one it asked for.
	At  int64 `json:"at"`
	TTL int64 `json:"ttl_ns"`
	// Ended says how the grant's belief ended ("crashed at 1.31 s"), for
	// a grant whose belief has ended.
	Ended string `json:"ended,omitempty"`
}

// nfState is the never-frees check over a stream of events: the Stream's,
// or a NeverFreesWatcher's while a run goes. It keeps what it needs of
// the faults itself, so that both can feed it.
type nfState struct {
	opts Options
	now  int64 // the time of the latest event
	keys map[string]*nfKey
	// clock are the clock faults, open ones with End Never; clockOpen
	// the open ones by what a stop names.
	clock     []*Fault
	clockOpen map[string]*Fault
	// disruptOpen counts the disrupting faults started and not stopped,
	// by what a stop names; disrupting is their sum, lastDisrupt the
	// latest stop (or instant fault) of one.
	disruptOpen map[string]int
	disrupting  int
	lastDisrupt int64
	// waiting are unknown outcomes completed while a disrupting fault was
	// active: their latest effect is when none is.
	waiting []nfWaiter
	// calls are the acquires and extends in flight, by process; unanswered
	// the unknown outcomes of each process awaiting its next completion.
	calls      map[int]*scall
	unanswered map[int][]nfWaiter
	// dead are the processes a crash or an in-op kill ended: a call of
	// theirs completed later (an in-op kill is recorded before the killed
	// call's unknown completion) took effect by then, since no answer of
	// theirs will ever settle it.
	dead map[int]bool
	res  NeverFreesResult
}

type nfWaiter struct {
	ks    *nfKey
	lease NeverFreeLease
}

// nfKey is one key's state.
type nfKey struct {
	name string
	// set: some operation could have set the key; expiry and bound are
	// the latest possible expiry of any of them, and that plus its margin;
	// lease and hold the operation that gave expiry (hold when a grant).
	set           bool
	expiry, bound int64
	lease         NeverFreeLease
	hold          *Hold
	// waiting counts unknown outcomes whose effect waits on a fault;
	// unbounded: an operation asked for no TTL and the run has none.
	waiting   int
	unbounded bool
	multiNode bool
	// grantInvoke is the latest ok grant's invoke: a clock fault since
	// may lengthen the life of the key there.
	grantInvoke int64
	lastFail    int64 // the latest completion of a failed attempt
	beliefs     []*Hold
	inflight    []*scall
	pending     []nfRefusal
	ep          nfEpisode
}

type nfRefusal struct {
	process   int
	inv, comp int64
	transient bool // overlapped by another attempt on a multi-node key
}

// nfEpisode is the run of refusals after the key's current expiry.
type nfEpisode struct {
	refusals    int
	first, last int64
	procs       map[int]bool
	w           int // 1 + the index of its witness, once flagged and kept
	flagged     bool
}

func newNFState(opts Options) *nfState {
	return &nfState{opts: opts, keys: map[string]*nfKey{}, clockOpen: map[string]*Fault{}, disruptOpen: map[string]int{}, lastDisrupt: -1,
		calls: map[int]*scall{}, unanswered: map[int][]nfWaiter{}, dead: map[int]bool{}}
}

func (n *nfState) key(k string) *nfKey {
	return entry(n.keys, k, func(k string) *nfKey { return &nfKey{name: k} })
}

// ttlOf is the TTL an acquire or extend asked for, or the run's.
func (n *nfState) ttlOf(v *history.Value) int64 {
	if v != nil && v.TTL > 0 {
		return v.TTL
	}
	return int64(n.opts.TTL)
}

// invoked notes an acquire or extend in flight.
func (n *nfState) invoked(c *scall) {
	delete(n.calls, c.Inv.Process)
	if c.Inv.F == history.Acquire || c.Inv.F == history.Extend {
		ks := n.key(c.Inv.Key)
		ks.inflight = append(ks.inflight, c)
		n.calls[c.Inv.Process] = c
	}
}

// answered settles process p's unknown outcomes at its answer at t: they
// took effect by then, or when the disrupting faults that may hold them
// end.
func (n *nfState) answered(p int, t int64) {
	ws := n.unanswered[p]
	if len(ws) == 0 {
		return
	}
	delete(n.unanswered, p)
	for _, w := range ws {
		w.ks.waiting--
		w.lease.At = t
		n.unknown(w.ks, w.lease)
		n.drain(w.ks)
	}
}

// crashed ends the calls in flight of the clients a crash killed: they
// will never complete, and a dead client's request was sent before it
// died, so it takes effect by then, or when the disrupting faults that
// may hold it end. Without this, one call killed in flight would keep
// every later refusal of its key from being judged.
func (n *nfState) crashed(op *history.Op) {
	killed := crashedClients(op, n.opts.Faults)
	if slices.Contains(n.opts.InOpFaults, op.F) && faultStarts(op.Value) {
		killed = append(killed, op.Value.Clients...)
	}
	for _, p := range killed {
		n.dead[p] = true
		n.answered(p, op.Time)
		c := n.calls[p]
		if c == nil || c.Done {
			continue
		}
		delete(n.calls, p)
		ks := n.key(c.Inv.Key)
		n.done(ks, c)
		n.unknown(ks, n.leaseOf(&c.Inv, history.Info, op.Time))
		n.drain(ks)
	}
}

func (n *nfState) leaseOf(inv *history.Op, outcome history.Type, at int64) NeverFreeLease {
	return NeverFreeLease{Process: inv.Process, F: inv.F, Outcome: outcome, At: at, TTL: n.ttlOf(inv.Value)}
}

func (n *nfState) done(ks *nfKey, c *scall) {
	if i := slices.Index(ks.inflight, c); i >= 0 {
		ks.inflight = slices.Delete(ks.inflight, i, i+1)
	}
}

// grant takes the hold an ok acquire that asked for ttl confers: a
// lease, and a belief.
func (n *nfState) grant(h *Hold, ttl int64) {
	ks := n.key(h.Key)
	ks.beliefs = append(ks.beliefs, h)
	ks.grantInvoke = h.Invoke
	ks.multiNode = ks.multiNode || len(h.Nodes) > 1
	if ttl <= 0 {
		ttl = int64(n.opts.TTL)
	}
	n.lease(ks, NeverFreeLease{Process: h.Process, F: history.Acquire, Outcome: history.OK, At: h.Start, TTL: ttl}, h)
}

// called takes a completed call: the process's earlier unknown outcomes
// are settled by it, and an acquire or extend is a lease or a refusal.
func (n *nfState) called(c *scall) {
	n.answered(c.Inv.Process, c.Comp.Time)
	if c.Inv.F != history.Acquire && c.Inv.F != history.Extend {
		return
	}
	ks := n.key(c.Inv.Key)
	n.done(ks, c)
	inv, comp := &c.Inv, &c.Comp
	switch {
	case comp.Type == history.OK && inv.F == history.Extend:
		n.lease(ks, n.leaseOf(inv, history.OK, comp.Time), nil)
	case comp.Type == history.Info, comp.Type == history.Fail && inv.F == history.Acquire && n.disruptedSince(inv.Time):
		// A client in another process may still be working on it when the
		// harness gives up; one that answers its requests in turn has
		// done with it by its next answer, which settles it (answered).
		// A refusal under a disrupting fault may leave a key too: a
		// multi-node attempt refused by a majority sends its SET to the
		// nodes that did not answer, and a cut link may deliver it late.
		if n.dead[inv.Process] {
			n.unknown(ks, n.leaseOf(inv, history.Info, comp.Time))
			if comp.Type == history.Fail {
				n.refused(ks, inv.Process, inv.Time, comp.Time)
			}
			break
		}
		n.unanswered[inv.Process] = append(n.unanswered[inv.Process], nfWaiter{ks, n.leaseOf(inv, history.Info, comp.Time)})
		ks.waiting++
		if comp.Type == history.Fail {
			n.refused(ks, inv.Process, inv.Time, comp.Time)
		}
	case comp.Type == history.Fail && inv.F == history.Acquire:
		n.refused(ks, inv.Process, inv.Time, comp.Time)
	}
	n.drain(ks)
}

// background takes a lock's own renewal, recorded whole at its completion.
func (n *nfState) background(op *history.Op) {
	if op.F != history.Extend || op.Value == nil {
		return
	}
	ks := n.key(op.Key)
	l := NeverFreeLease{Process: op.Process, F: "renewal", Outcome: op.Value.Outcome, At: op.Time, TTL: n.ttlOf(op.Value)}
	switch op.Value.Outcome {
	case history.OK:
		n.lease(ks, l, nil)
	case history.Info:
		n.unknown(ks, l)
	}
	n.drain(ks)
}

// unknown takes an operation whose outcome is unknown: it may take effect
// as late as the end of the disrupting faults active at its completion.
func (n *nfState) unknown(ks *nfKey, l NeverFreeLease) {
	if n.disrupting > 0 {
		ks.waiting++
		n.waiting = append(n.waiting, nfWaiter{ks, l})
		return
	}
	n.lease(ks, l, nil)
}

// lease takes an operation that may have set or lengthened the key.
func (n *nfState) lease(ks *nfKey, l NeverFreeLease, h *Hold) {
	ks.set = true
	if l.TTL <= 0 {
		ks.unbounded = true
		return
	}
	exp := l.At + l.TTL
	ks.bound = max(ks.bound, exp+neverFreesMargin(l.TTL))
	if exp > ks.expiry {
		ks.expiry, ks.lease, ks.hold = exp, l, h
		ks.ep = nfEpisode{}
	}
}

// refused takes a definite refusal: judged once the calls in flight
// before it complete, unless a disrupting fault was active meanwhile.
func (n *nfState) refused(ks *nfKey, process int, inv, comp int64) {
	if n.disruptedSince(inv) {
		n.res.Judged++
		return
	}
	transient := ks.multiNode && (ks.lastFail > inv || slices.ContainsFunc(ks.inflight, func(c *scall) bool {
		return c.Inv.F == history.Acquire && c.Inv.Process != process
	}))
	ks.lastFail = max(ks.lastFail, comp)
	if len(ks.pending) == neverFreesPending {
		ks.pending = slices.Delete(ks.pending, 0, 1)
	}
	ks.pending = append(ks.pending, nfRefusal{process: process, inv: inv, comp: comp, transient: transient})
}

// disruptedSince reports whether a disrupting fault has been active at
// some time since t.
func (n *nfState) disruptedSince(t int64) bool { return n.disrupting > 0 || n.lastDisrupt >= t }

// summary takes failed acquires recorded as a count: one refusal,
// invoked at the first one's invoke, the earliest any of them saw the key.
func (n *nfState) summary(op *history.Op) {
	ks := n.key(op.Key)
	n.refused(ks, op.Process, *op.Value.From, *op.Value.To)
	n.drain(ks)
}

// drain judges the key's pending refusals that no call in flight can
// explain any more: every call invoked before their completion is done.
func (n *nfState) drain(ks *nfKey) {
	horizon := n.now
	for _, c := range ks.inflight {
		horizon = min(horizon, c.Inv.Time)
	}
	i := 0
	for ; i < len(ks.pending) && ks.pending[i].comp <= horizon; i++ {
		n.judge(ks, ks.pending[i])
	}
	ks.pending = slices.Delete(ks.pending, 0, i)
	if len(ks.pending) > 0 {
		horizon = min(horizon, ks.pending[0].inv)
	}
	ks.beliefs = slices.DeleteFunc(ks.beliefs, func(h *Hold) bool { return !believedAfter(h, horizon) })
}

// judge decides one refusal: excused, or a count in the key's episode.
func (n *nfState) judge(ks *nfKey, r nfRefusal) {
	n.res.Judged++
	if r.inv <= ks.expiry || n.excused(ks, r) {
		return // the key may still be a lease's, or something else refused
	}
	n.res.Late++
	ep := &ks.ep
	if ep.refusals == 0 {
		ep.first, ep.procs = r.inv, map[int]bool{}
	}
	ep.refusals++
	ep.last = r.inv
	ep.procs[r.process] = true
	if !ep.flagged && ep.refusals >= neverFreesMinRefusals && r.inv > ks.bound {
		ep.flagged = true
		n.res.Episodes++
		if len(n.res.Witnesses) < MaxViolations {
			n.res.Witnesses = append(n.res.Witnesses, NeverFree{Key: ks.name, Expiry: ks.expiry, Margin: ks.bound - ks.expiry,
				First: ep.first, Flagged: r.inv, Lease: ks.lease})
			ep.w = len(n.res.Witnesses)
		}
	}
	if ep.w > 0 {
		w := &n.res.Witnesses[ep.w-1]
		w.Last, w.Refusals, w.Clients = ep.last, ep.refusals, len(ep.procs)
		if h := ks.hold; h != nil {
			w.Lease.Ended = beliefEnded(h)
		}
	}
}

// excused reports whether something other than a key outliving every
// client may explain refusal r.
func (n *nfState) excused(ks *nfKey, r nfRefusal) bool {
	if !ks.set || ks.unbounded || ks.waiting > 0 || r.transient || n.opts.ServerRenewsLeases != "" {
		return true
	}
	if slices.ContainsFunc(ks.beliefs, func(h *Hold) bool { return h.Start <= r.inv && believedAfter(h, r.inv) }) {
		return true
	}
	since := ks.grantInvoke
	if ks.multiNode {
		since = 0 // keys on the nodes a grant missed may be older
	}
	return slices.ContainsFunc(n.clock, func(f *Fault) bool { return f.Start <= r.inv && f.End >= since })
}

// believedAfter is Belief.BelievedAfter of a hold.
func believedAfter(h *Hold, t int64) bool {
	return (h.ValidUntil == nil || *h.ValidUntil > t) && (h.EndReason == "" || h.End > t)
}

// beliefEnded says how a grant's belief ended, "" while it has not.
func beliefEnded(h *Hold) string {
	if h.EndReason == "" || h.End == Never {
		return ""
	}
	at := fmtT(h.End)
	switch h.EndReason {
	case EndCrash:
		return fmt.Sprintf("process %d crashed at %s", h.Process, at)
	case EndRelease:
		return fmt.Sprintf("process %d released it at %s", h.Process, at)
	case EndValidUntil:
		return fmt.Sprintf("process %d's lease ran out at %s", h.Process, at)
	case EndAbandoned:
		return fmt.Sprintf("process %d asked for the lock again at %s", h.Process, at)
	case EndLost:
		return fmt.Sprintf("process %d learnt it had lost the lock at %s", h.Process, at)
	case EndRevoked:
		return fmt.Sprintf("process %d's lock cancelled its context (%s) at %s", h.Process, h.RevokedBy, at)
	}
	return fmt.Sprintf("process %d's belief ended at %s", h.Process, at)
}

// nemesis follows the clock faults and the disrupting ones; when no
// disrupting fault is active any more, the unknown outcomes waiting on
// them take effect now at the latest.
func (n *nfState) nemesis(op *history.Op) {
	if op.Value == nil {
		return
	}
	n.crashed(op)
	id := fmt.Sprintf("%s|%v|%v", op.F, op.Value.Targets, op.Value.Clients)
	if n.opts.isClockFault(op.F) {
		n.clockFault(op, id)
	}
	if !slices.Contains(n.opts.DisruptFaults, op.F) {
		return
	}
	switch op.Value.Phase {
	case "start":
		n.disruptOpen[id]++
		n.disrupting++
	case "":
		n.lastDisrupt = op.Time
	case "stop":
		if n.disruptOpen[id] > 0 {
			n.disruptOpen[id]--
			n.disrupting--
			n.lastDisrupt = op.Time
		}
	}
	if n.disrupting > 0 || len(n.waiting) == 0 {
		return
	}
	for _, w := range n.waiting {
		w.ks.waiting--
		w.lease.At = op.Time
		n.lease(w.ks, w.lease, nil)
		n.drain(w.ks)
	}
	n.waiting = n.waiting[:0]
}

// clockFault follows a clock fault's start and stop.
func (n *nfState) clockFault(op *history.Op, id string) {
	switch op.Value.Phase {
	case "start", "":
		f := &Fault{Name: op.F, Start: op.Time, End: op.Time, Targets: op.Value.Targets}
		if op.Value.Phase == "start" {
			f.End = Never
			n.clockOpen[id] = f
		}
		n.clock = append(n.clock, f)
	case "stop":
		if f := n.clockOpen[id]; f != nil {
			f.End = op.Time
			delete(n.clockOpen, id)
		}
	}
}

// result finishes the check: the calls that never completed may take
// effect at any time, so the refusals waiting on them are excused.
// neverFreesVerdict: a key that outlived every client that could hold it
// is the lock's liveness failure even when it freed before the end.
func neverFreesVerdict(r *Results) string {
	if r.NeverFrees != nil && !r.NeverFrees.Valid {
		return VerdictStuck
	}
	return ""
}

// neverFreesAnswer: a key outliving every client that could hold it is
// the lock's failure (DESIGN.md, "Judging from first principles"): the
// check excuses what a fault or a clock could explain.
func neverFreesAnswer(r *Results, a *Answers) {
	if nf := r.NeverFrees; nf != nil && nf.Episodes > 0 && len(nf.Witnesses) > 0 {
		a.Mechanisms = append(a.Mechanisms, Mechanism{Kind: MechNeverFrees, Count: nf.Episodes, Example: nf.Witnesses[0].Story,
			Says: "the lock never frees: a key outlived every client that could hold it, and every client was refused"})
	}
}

func (n *nfState) result() *NeverFreesResult {
	r := n.res
	for _, ks := range n.keys {
		r.Judged += len(ks.pending)
	}
	r.Witnesses = slices.Clone(r.Witnesses)
	for i := range r.Witnesses {
		r.Witnesses[i].Story = r.Witnesses[i].story()
	}
	r.Valid = r.Episodes == 0
	r.Suspended = n.opts.ServerRenewsLeases
	return &r
}

func (w *NeverFree) story() string {
	l := w.Lease
	what := map[string]string{history.Acquire: "grant", history.Extend: "extend", "renewal": "background renewal"}[l.F]
	if l.Outcome == history.Info {
		what = map[bool]string{true: "acquire", false: what}[l.F == history.Acquire] + " whose outcome is unknown"
	}
	ended := ""
	if l.Ended != "" {
		ended = "; " + l.Ended
	}
	return fmt.Sprintf("%s was refused %s to %d %s from %s to %s, %s after every lease that could hold it had ended "+
		"(the last: process %d's %s at %s, TTL %s, which could keep the key until %s at the latest%s): "+
		"the key outlived every client that could hold it by more than %s (the lock never frees: it sets no TTL, a TTL far above its lease, or a key its release does not delete)",
		w.Key, Times(w.Refusals), w.Clients, plural(w.Clients, "client", "clients"), fmtT(w.First), fmtT(w.Last), fmtD(w.Last-w.Expiry),
		l.Process, what, fmtT(l.At), fmtD(l.TTL), fmtT(w.Expiry), ended, fmtD(w.Margin))
}

// headline names the check's findings in one sentence.
func (r *NeverFreesResult) headline() string {
	if r == nil || len(r.Witnesses) == 0 {
		return "no key outlived every client that could hold it"
	}
	w := r.Witnesses[0]
	return fmt.Sprintf("%d %s of a key refused to every client after every lease that could hold it had ended; the first: %s",
		r.Episodes, plural(r.Episodes, "episode", "episodes"), w.Story)
}
