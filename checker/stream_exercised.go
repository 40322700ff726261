package checker

import (
	"slices"
	"time"

	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/internal/drift"
)

// momentState counts the dangerous moments (exercised.go) as events come.
// It keeps its own account of leases, apart from the holds the exclusion
// checks use, because a moment needs a different end: a hold's belief ends
// when its lease runs out, but a stale holder is precisely one that goes on
// believing past that, until it releases, is told it lost the lock,
// crashes or acquires again. What it keeps is bounded by the processes and
// keys: each process's latest lease and pending call, each key's leases
// still believed and the number of its latest grant.
type momentState struct {
	e      Exercised
	events int64 // events seen, numbering them
	ttl    int64 // Options.TTL, for calls that ask for none
	procs  map[int]*mproc
	keys   map[string]*mkey
	// primary is the node the latest primary event named, "" before one:
	// a history with a primary monitor shows failovers as changes of it.
	primary string
	// replyLoss and inOp are Options.ReplyLossFaults and InOpFaults;
	// losing are the reply-loss faults in effect now.
	replyLoss, inOp []string
	losing          map[string]bool
	// clockFaults and clientClockFaults are Options'; movedNodes and
	// movedClients count the clock faults in effect on each node and
	// client process.
	clockFaults, clientClockFaults []string
	movedNodes                     map[string]int
	movedClients                   map[int]int
	// faults are Options.Faults: which events crash clients, and which
	// hit clients rather than nodes.
	faults FaultMeanings
}

// mlease is a granted lease as the moments see it.
type mlease struct {
	proc       int
	key, token string
	nodes      []string
	deadline   int64
	bounded    bool // false when the lock claimed no deadline: never stale
}

// staleAt reports whether the lease had run out by t; a lease runs out at
// its deadline, as a hold's belief does (finish).
func (l *mlease) staleAt(t int64) bool { return l.bounded && t >= l.deadline }

// mproc is a client process as the moments see it.
type mproc struct {
	lease   *mlease // believed, nil when none
	pending bool
	inv     history.Op // the pending invoke
	invAt   int64      // its event number
	crashed bool       // crashed, and has not invoked since
	// underLoss: a reply-loss fault was in effect while the pending lock
	// call ran.
	underLoss bool
}

// mkey is a lock key as the moments see it.
type mkey struct {
	believed  map[int]*mlease // by process
	lastGrant int64           // event number of the latest grant, -1 for none
}

func newMomentState(opts Options) *momentState {
	return &momentState{ttl: int64(opts.TTL), procs: map[int]*mproc{}, keys: map[string]*mkey{},
		replyLoss: opts.ReplyLossFaults, inOp: opts.InOpFaults, losing: map[string]bool{},
		clockFaults: opts.ClockFaults, clientClockFaults: opts.ClientClockFaults,
		movedNodes: map[string]int{}, movedClients: map[int]int{}, faults: opts.Faults}
}

func (m *momentState) proc(p int) *mproc {
	return entry(m.procs, p, func(int) *mproc { return &mproc{} })
}

func (m *momentState) key(k string) *mkey {
	return entry(m.keys, k, func(string) *mkey { return &mkey{believed: map[int]*mlease{}, lastGrant: -1} })
}

// retained counts the leases still believed, for Stream.Retained.
func (m *momentState) retained() int {
	n := 0
	for _, ks := range m.keys {
		n += len(ks.believed)
	}
	return n
}

// add takes the next event of the history.
func (m *momentState) add(op *history.Op) {
	switch {
	case op.Process == history.NemesisProcess:
		m.nemesis(op)
	case op.Type == history.Summary:
		// failed acquires only: no moment
	case op.Type == history.Invoke:
		m.invoke(op)
	default:
		m.complete(op)
	}
	m.events++
}

// end ends the belief in ps's lease.
func (m *momentState) end(ps *mproc) {
	if l := ps.lease; l != nil {
		delete(m.keys[l.key].believed, l.proc)
		ps.lease = nil
	}
}

// actsAs reports whether op (a release, extend or write) is the holder
// acting on ps's lease.
func actsAs(op *history.Op, ps *mproc) bool {
	return ps.lease != nil && refersTo(op, ps.lease.key, ps.lease.token)
}

func (m *momentState) invoke(op *history.Op) {
	ps := m.proc(op.Process)
	ps.crashed = false // a crashed process that acts again is a new client
	switch op.F {
	case history.Release, history.Extend, history.Write:
		if actsAs(op, ps) && ps.lease.staleAt(op.Time) {
			m.e.StaleActs++
		}
	}
	if op.F == history.Acquire && m.movedClients[op.Process] > 0 && m.othersLive(op) {
		m.e.MovedClientAcquires++
	}
	switch {
	case op.F == history.Acquire:
		m.end(ps) // acquiring again abandons the lease
	case op.F == history.Release && actsAs(op, ps):
		m.end(ps)
	}
	ps.pending, ps.inv, ps.invAt = true, *op, m.events
	ps.underLoss = len(m.losing) > 0
}

// lockCall reports whether f is a call on the lock itself.
func lockCall(f string) bool {
	return f == history.Acquire || f == history.Release || f == history.Extend
}

func (m *momentState) complete(op *history.Op) {
	ps := m.procs[op.Process]
	if ps == nil || !ps.pending {
		return // a completion without an invoke: not a validated history
	}
	ps.pending = false
	inv := &ps.inv
	if ps.underLoss && op.Type == history.Info && lockCall(inv.F) {
		m.e.RepliesLost++
	}
	switch inv.F {
	case history.Acquire:
		if op.Type == history.OK {
			m.countSlow(inv, op)
			m.granted(ps, inv, op)
		}
	case history.Extend:
		if actsAs(inv, ps) && ps.lease.bounded && inv.Time < ps.lease.deadline && op.Time >= ps.lease.deadline {
			m.e.AcrossExpiry++
		}
		switch {
		case op.Type == history.OK:
			m.countSlow(inv, op)
			if actsAs(inv, ps) {
				extendLease(ps.lease, inv, op)
			}
		case op.Type == history.Fail && actsAs(inv, ps):
			m.end(ps) // told it lost the lock
		}
	}
	if inv.F == history.Release || inv.F == history.Extend {
		if ks := m.keys[inv.Key]; ks != nil && ks.lastGrant > ps.invAt {
			m.e.AcrossGrants++
		}
	}
}

// granted counts a grant's stale grant and records its lease.
func (m *momentState) granted(ps *mproc, inv, op *history.Op) {
	ks := m.key(grantedKey(inv, op))
	for q, l := range ks.believed {
		if q != op.Process && l.staleAt(op.Time) {
			m.e.StaleGrants++
			break
		}
	}
	ks.lastGrant = m.events
	if m.movedOverlap(ks, op) {
		m.e.MovedClientAcquires++
	}
	if m.onMovedClock(op) {
		m.e.MovedClockGrants++
	}
	if ps.crashed {
		return // the grant reached a client that had crashed: nobody believes it
	}
	l := &mlease{proc: op.Process, key: grantedKey(inv, op)}
	if v := op.Value; v != nil {
		l.token, l.nodes = v.Token, v.Nodes
	}
	l.deadline, l.bounded = claimedDeadline(inv, op)
	ps.lease = l
	ks.believed[op.Process] = l
}

// countSlow counts an ok grant or extend whose reply came slower than the
// drift margin.
func (m *momentState) countSlow(inv, comp *history.Op) {
	if slowReply(inv, comp, m.ttl) {
		m.e.SlowReplies++
	}
}

// nemesis counts the moments a fault event makes.
func (m *momentState) nemesis(op *history.Op) {
	v := op.Value
	if v == nil {
		return
	}
	m.clockEvent(op)
	switch {
	case slices.Contains(m.replyLoss, op.F):
		m.replyLossEvent(op)
	case slices.Contains(m.inOp, op.F):
		if faultStarts(v) {
			m.killedInOp(op)
		}
		return
	}
	switch {
	case op.F == PrimaryEvent:
		if v.Phase != "start" || len(v.Targets) == 0 {
			return
		}
		old := m.primary
		m.primary = v.Targets[0]
		if old != "" && old != m.primary && m.anyLive(op.Time, func(l *mlease) bool { return failedOver(l.key, l.nodes, op.Key, old) }) {
			m.e.Failovers++
		}
	case manualFailover(op, m.faults):
		// With a primary monitor, the change of primary it records is
		// the failover; counting the request too would count it twice.
		if m.primary == "" && m.anyLive(op.Time, func(*mlease) bool { return true }) {
			m.e.Failovers++
		}
	case len(crashedClients(op, m.faults)) > 0:
		m.crash(op)
	case serverFault(op, m.faults):
		if m.anyLive(op.Time, func(l *mlease) bool { return onNodes(l.nodes, v.Targets) }) {
			m.e.NodeFaults++
		}
	}
}

// replyLossEvent follows the reply-loss faults in effect: from its start
// on, every pending lock call runs under it, as does every call invoked
// before its stop. Whatever nodes it targets: a call that came back
// unknown names none (exact on one Redis; elsewhere a call may have
// missed the faulted node).
func (m *momentState) replyLossEvent(op *history.Op) {
	if !faultStarts(op.Value) {
		delete(m.losing, op.F)
		return
	}
	m.losing[op.F] = true
	for _, ps := range m.procs {
		if ps.pending && lockCall(ps.inv.F) {
			ps.underLoss = true
		}
	}
}

// killedInOp counts the processes an in-op kill hit with a lock call
// pending.
func (m *momentState) killedInOp(op *history.Op) {
	for _, p := range op.Value.Clients {
		if ps := m.procs[p]; ps != nil && ps.pending && lockCall(ps.inv.F) {
			m.e.KilledInOp++
		}
	}
}

// clockEvent notes a clock fault's start or stop on its nodes or client
// processes.
func (m *momentState) clockEvent(op *history.Op) {
	v := op.Value
	step := 0
	switch v.Phase {
	case "start":
		step = 1
	case "stop":
		step = -1
	default:
		return
	}
	if slices.Contains(m.clockFaults, op.F) {
		for _, n := range v.Targets {
			m.movedNodes[n] = max(0, m.movedNodes[n]+step)
		}
	}
	if slices.Contains(m.clientClockFaults, op.F) {
		for _, p := range v.Clients {
			m.movedClients[p] = max(0, m.movedClients[p]+step)
		}
	}
}

// othersLive reports whether another process's lease on the key an
// acquire asks for is live when it is invoked.
func (m *momentState) othersLive(inv *history.Op) bool {
	ks := m.keys[inv.Key]
	if ks == nil {
		return false
	}
	for p, l := range ks.believed {
		if p != inv.Process && !l.staleAt(inv.Time) {
			return true
		}
	}
	return false
}

// movedOverlap reports whether a grant came while another process's
// lease on the key was live and the grantee or that holder had a moved
// clock: the moved client held the key while another's lease was live.
func (m *momentState) movedOverlap(ks *mkey, op *history.Op) bool {
	for p, l := range ks.believed {
		if p != op.Process && !l.staleAt(op.Time) && (m.movedClients[p] > 0 || m.movedClients[op.Process] > 0) {
			return true
		}
	}
	return false
}

// onMovedClock reports whether a grant came from a node whose clock a
// clock fault had moved; a grant that names no node (one Redis) came
// from any node.
func (m *momentState) onMovedClock(op *history.Op) bool {
	var nodes []string
	if op.Value != nil {
		nodes = op.Value.Nodes
	}
	for n, c := range m.movedNodes {
		if c > 0 && onNodes(nodes, []string{n}) {
			return true
		}
	}
	return false
}

// crash counts a client crash that hit a live lease's holder, and ends the
// crashed processes' beliefs.
func (m *momentState) crash(op *history.Op) {
	hit := false
	for _, p := range crashedClients(op, m.faults) {
		ps := m.proc(p)
		if l := ps.lease; l != nil && !l.staleAt(op.Time) {
			hit = true
		}
		m.end(ps)
		ps.crashed = true
	}
	if hit {
		m.e.HolderCrashes++
	}
}

// anyLive reports whether a lease that is believed and has not run out at
// t satisfies ok.
func (m *momentState) anyLive(t int64, ok func(*mlease) bool) bool {
	for _, ps := range m.procs {
		if l := ps.lease; l != nil && !l.staleAt(t) && ok(l) {
			return true
		}
	}
	return false
}

func (m *momentState) result() *Exercised {
	e := m.e
	return &e
}

// extendLease applies an ok extend to the lease it refers to. An extend
// whose reply came after the lease ran out does not revive it: its holder
// stays stale, as a hold's belief stays ended.
func extendLease(l *mlease, inv, comp *history.Op) {
	if l.staleAt(comp.Time) {
		return
	}
	if d, ok := claimedDeadline(inv, comp); ok {
		l.deadline, l.bounded = d, true
	}
}

// claimedDeadline is when the lease an ok grant or extend gave runs out:
// the validity the lock claimed, bounded by the start + TTL past which no
// server keeps the key (a lock that over-claims leaves its holder acting
// on a key already gone). false when the lock claimed no deadline (no TTL,
// or one renewed in the background).
func claimedDeadline(inv, comp *history.Op) (int64, bool) {
	if !claimsValidity(comp) {
		return 0, false
	}
	d := *comp.Value.ValidUntil
	if inv.Value != nil && inv.Value.TTL > 0 {
		d = min(d, startOf(inv, comp)+inv.Value.TTL)
	}
	return d, true
}

// DriftMargin is the time a lock sets aside for clock drift and the
// network (drift.Margin, the locks' own: 1% of the TTL + 2 ms, as Redlock
// does). A reply slower than it ate into the validity its client was told.
func DriftMargin(ttl time.Duration) time.Duration { return drift.Margin(ttl) }

// slowReply reports whether an ok grant or extend took longer than the
// drift margin of its TTL (the call's own, else defTTL); a call with no TTL
// has no lease to eat into and is never slow.
func slowReply(inv, comp *history.Op, defTTL int64) bool {
	ttl := defTTL
	if inv.Value != nil && inv.Value.TTL > 0 {
		ttl = inv.Value.TTL
	}
	return ttl > 0 && comp.Time-inv.Time > int64(DriftMargin(time.Duration(ttl)))
}

// faultStarts reports whether a nemesis event starts a fault that was
// applied ("" is an instant fault's single event).
func faultStarts(v *history.Value) bool { return v != nil && (v.Phase == "start" || v.Phase == "") }

// manualFailover reports whether op starts a failover the nemesis asked
// for (FaultMeaning.FailsOver).
func manualFailover(op *history.Op, fm FaultMeanings) bool {
	return fm.Of(op.F).FailsOver && faultStarts(op.Value)
}

// serverFault reports whether op starts a fault on server nodes: any fault
// naming nodes that is not a client's, a failover or the primary monitor.
func serverFault(op *history.Op, fm FaultMeanings) bool {
	v := op.Value
	return faultStarts(v) && len(v.Targets) > 0 && len(v.Clients) == 0 &&
		!fm.Of(op.F).AimsAtClients() && !fm.Of(op.F).FailsOver && op.F != PrimaryEvent
}

// onNodes reports whether a fault on targets hits a lease granted by
// nodes; a grant that names no node (one Redis) is on every node.
func onNodes(nodes, targets []string) bool {
	if len(nodes) == 0 {
		return true
	}
	for _, n := range nodes {
		for _, t := range targets {
			if n == t {
				return true
			}
		}
	}
	return false
}

// failedOver reports whether a failover of the primary of key evKey (""
// for every key) away from old hits a lease on key granted by nodes: one
// granted through the old primary, or through a node it does not name.
func failedOver(key string, nodes []string, evKey, old string) bool {
	return (evKey == "" || evKey == key) && onNodes(nodes, []string{old})
}
