package checker

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/lockjepsen/lockjepsen/history"
)

// The batch analysis: the check as it was before it streamed, every
// checker over one in-memory pass over the whole history. It is kept as
// the tests' oracle: TestMain and the random-history tests compare the
// Stream with it, and TestTrackerMatchesOracle compares the Tracker's
// holds with its own. Its hold rules are written here again on purpose,
// another way (indices into the history, every hold kept), and must not
// call the Tracker's code: it checks that code.

// call is a client operation as indices into the history.
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

// oproc is what the oracle knows of one client process.
type oproc struct {
	pending int   // history index of its open invoke, -1 for none
	call    int   // index into analysis.calls of that invoke's call
	hold    int   // index into analysis.holds of its latest hold, -1 for none
	crashAt int64 // when it last crashed, -1 if it has not, or acted since
}

func scan(ops []history.Op) *analysis {
	a := &analysis{ops: ops}
	if len(ops) > 0 {
		a.end = ops[len(ops)-1].Time
	}
	procs := map[int]*oproc{}
	get := func(p int) *oproc {
		if procs[p] == nil {
			procs[p] = &oproc{pending: -1, hold: -1, crashAt: -1}
		}
		return procs[p]
	}
	openFault := map[string]int{}
	for i := range ops {
		op := &ops[i]
		switch {
		case op.Process == history.NemesisProcess:
			a.nemesis(i, openFault, get)
		case op.Type == history.Summary:
			a.summaries = append(a.summaries, i)
		case op.Type == history.Background:
			// a lock's own renewal: no operation of the holder's; one that
			// ended the holder's belief ends it
			if h := a.refers(op, get(op.Process)); h != nil && h.EndReason == "" && op.Value != nil && op.Value.Ended != "" {
				stop(h, op.Time, EndRevoked, op.Index)
				if h.EndReason == EndRevoked {
					h.RevokedBy = op.Value.Ended
				}
			}
		case op.Type == history.Invoke:
			ps := get(op.Process)
			ps.pending, ps.call = i, len(a.calls)
			a.calls = append(a.calls, call{inv: i, comp: -1, leaseEnd: a.leaseEnd(op, ps)})
			if ps.crashAt >= 0 && op.Time > ps.crashAt {
				ps.crashAt = -1 // it acts again: a new client
			}
			a.invoke(op, ps)
		default:
			ps := get(op.Process)
			if ps.pending < 0 {
				continue // a completion without an invoke
			}
			a.calls[ps.call].comp = i
			a.complete(&ops[ps.pending], op, ps)
			ps.pending = -1
		}
	}
	for i := range a.holds {
		if h := &a.holds[i]; h.EndReason == "" && h.ValidUntil == nil {
			h.End, h.EndReason, h.EndIndex = Never, EndOpen, -1
		} else if h.EndReason == "" {
			h.End, h.EndReason, h.EndIndex = max(h.Start, *h.ValidUntil), EndValidUntil, -1
		}
	}
	sort.SliceStable(a.holds, func(i, j int) bool { return a.holds[i].Start < a.holds[j].Start })
	return a
}

// refers is whether release or extend op names hold h: a key or token
// left out on either side names any.
func (a *analysis) refers(op *history.Op, ps *oproc) *Hold {
	if ps.hold < 0 {
		return nil
	}
	h := &a.holds[ps.hold]
	var tok string
	if op.Value != nil {
		tok = op.Value.Token
	}
	sameKey := op.Key == "" || h.Key == "" || op.Key == h.Key
	sameTok := tok == "" || h.Token == "" || tok == h.Token
	if sameKey && sameTok {
		return h
	}
	return nil
}

// stop ends h's belief at t for why, or at its lease's end when that came
// first; an ended belief stays as it ended.
func stop(h *Hold, t int64, why string, idx int64) {
	switch {
	case h.EndReason != "":
	case h.ValidUntil != nil && *h.ValidUntil <= t:
		h.End, h.EndReason, h.EndIndex = max(h.Start, *h.ValidUntil), EndValidUntil, -1
	default:
		h.End, h.EndReason, h.EndIndex = max(h.Start, t), why, idx
	}
}

// began is when the server may first have seen the call: its invoke, or
// the lock's own later stamp, capped by the reply.
func began(inv, comp *history.Op) int64 {
	if comp.Value == nil || comp.Value.Started == nil {
		return inv.Time
	}
	return max(inv.Time, min(*comp.Value.Started, comp.Time))
}

// leaseEnd is a release's or extend's own lease end, 0 if unknown.
func (a *analysis) leaseEnd(op *history.Op, ps *oproc) int64 {
	if op.F == history.Release || op.F == history.Extend {
		if h := a.refers(op, ps); h != nil && a.ttls[h.AcquireIndex] > 0 {
			return h.ValidFrom + a.ttls[h.AcquireIndex]
		}
	}
	return 0
}

func (a *analysis) invoke(op *history.Op, ps *oproc) {
	if op.F == history.Acquire && ps.hold >= 0 {
		stop(&a.holds[ps.hold], op.Time, EndAbandoned, op.Index)
	}
	if h := a.refers(op, ps); op.F == history.Release && h != nil {
		stop(h, op.Time, EndRelease, op.Index)
	}
}

func (a *analysis) complete(iop, op *history.Op, ps *oproc) {
	if iop.F == history.Acquire && op.Type == history.OK {
		a.grant(iop, op, ps)
		return
	}
	h := a.refers(iop, ps)
	if iop.F != history.Extend || h == nil || h.EndReason != "" {
		return // a release's outcome does not matter: its invoke ended the belief
	}
	switch {
	case op.Type == history.Fail:
		stop(h, op.Time, EndLost, op.Index)
	case op.Type != history.OK:
	case h.ValidUntil != nil && *h.ValidUntil <= op.Time:
		stop(h, op.Time, EndValidUntil, -1) // too late: not revived
	case op.Value != nil && op.Value.ValidUntil != nil:
		h.ValidUntil, h.ValidFrom = op.Value.ValidUntil, began(iop, op)
		if *h.ValidUntil <= op.Time {
			h.End, h.EndReason, h.EndIndex = op.Time, EndValidUntil, -1
		}
	}
}

func (a *analysis) grant(iop, op *history.Op, ps *oproc) {
	h := Hold{Key: iop.Key, Process: op.Process, Invoke: iop.Time, Start: op.Time,
		AcquireIndex: op.Index, EndIndex: -1, ValidFrom: began(iop, op)}
	if h.Key == "" {
		h.Key = op.Key
	}
	if v := op.Value; v != nil {
		h.Token, h.Fence, h.ValidUntil, h.Nodes = v.Token, v.Fence, v.ValidUntil, v.Nodes
	}
	switch {
	case ps.crashAt >= iop.Time: // the ok reached a dead client
		h.End, h.EndReason = h.Start, EndCrash
	case h.ValidUntil != nil && *h.ValidUntil <= h.Start:
		h.End, h.EndReason = h.Start, EndValidUntil
	}
	if iop.Value != nil && iop.Value.TTL > 0 {
		if a.ttls == nil {
			a.ttls = map[int64]int64{}
		}
		a.ttls[op.Index] = iop.Value.TTL
	}
	ps.hold = len(a.holds)
	a.holds = append(a.holds, h)
}

func (a *analysis) nemesis(i int, open map[string]int, get func(int) *oproc) {
	op := &a.ops[i]
	var v history.Value
	if op.Value != nil {
		v = *op.Value
	}
	// Faults of one kind can overlap (two clients paused at once), so a
	// stop matches the start of the same fault on the same targets.
	id := fmt.Sprint(op.F, v.Targets, v.Clients)
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
	if op.F != "client-crash" || (v.Phase != "start" && v.Phase != "") {
		return // a crash that failed or was skipped ends no belief
	}
	for _, p := range v.Clients {
		ps := get(p)
		ps.crashAt = op.Time
		if ps.hold >= 0 {
			stop(&a.holds[ps.hold], op.Time, EndCrash, op.Index)
		}
	}
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

// Exclusion checks that no two believed holds on one key overlap.
func Exclusion(ops []history.Op) *ExclusionResult { return scan(ops).exclusion(Options{}) }

// ExclusionWith is Exclusion with options: Options.TTL widens the faults
// listed with a violation to those active in the TTL before it.
func ExclusionWith(ops []history.Op, opts Options) *ExclusionResult {
	return scan(ops).exclusion(opts)
}

func (a *analysis) exclusion(opts Options) *ExclusionResult {
	r := &ExclusionResult{Holds: len(a.holds)}
	type pair struct{ first, second int }
	var found []pair
	// Sweep in Start order keeping, per key, the hold whose belief reaches
	// furthest: a new hold overlaps some earlier one iff it overlaps that
	// one, and a hold that overlaps none starts a new connected group.
	type keyState struct {
		furthest   int
		inIncident bool // the current group already counts as an incident
	}
	active := map[string]*keyState{}
	for i := range a.holds {
		h := &a.holds[i]
		if h.Empty() {
			r.EmptyHolds++
			continue
		}
		ks := active[h.Key]
		if ks == nil {
			active[h.Key] = &keyState{furthest: i}
			continue
		}
		j := ks.furthest
		if h.Start < a.holds[j].End {
			r.Count++
			if !ks.inIncident {
				r.Incidents++
				ks.inIncident = true
			}
			if len(found) < MaxViolations {
				found = append(found, pair{j, i})
			}
		} else {
			ks.inIncident = false
		}
		if h.End > a.holds[j].End {
			ks.furthest = i
		}
	}
	r.Keys = len(active)
	r.Valid = r.Count == 0
	if len(found) == 0 {
		return r
	}
	between := a.releaseExtendByKey()
	for _, p := range found {
		r.Violations = append(r.Violations, a.violation(&a.holds[p.first], &a.holds[p.second], between, opts))
	}
	return r
}

// releaseExtendByKey lists the releases and extends per key that may have
// changed the key (every outcome but a definite failure), in invocation
// order; built only when there are violations to explain.
func (a *analysis) releaseExtendByKey() map[string][]call {
	m := map[string][]call{}
	for _, c := range a.calls {
		inv := &a.ops[c.inv]
		if (inv.F != history.Release && inv.F != history.Extend) || a.outcome(c) == history.Fail {
			continue
		}
		m[inv.Key] = append(m[inv.Key], c) // a.calls is in invocation order
	}
	return m
}

// between lists the releases and extends of other processes that may have
// touched the key while the first holder held it and before the second was
// granted: invoked before the second grant, and completed (or still in
// flight) after the first acquire of the two was invoked (mayHaveTouched).
// A release invoked
// earlier still counts, since a GET-then-DEL can read its own token before
// the key expires and delete the next holder's key afterwards. One whose
// outcome is unknown counts whenever it was invoked, the first holder's
// own included: the client gave up on it, but its DEL can still reach the
// server after the holder's next grant (a loaded CI run showed a plain-DEL
// release that timed out deleting its own process's next key).
func (a *analysis) between(first, second *Hold, calls []call) []Event {
	hi := sort.Search(len(calls), func(i int) bool { return a.ops[calls[i].inv].Time > second.Start })
	var out []Event
	perProcess := map[int]int{}
	for i := hi - 1; i >= 0 && len(out) < maxBetween; i-- {
		c := calls[i]
		inv := &a.ops[c.inv]
		// A process's latest maxBetween+1 calls, as the stream keeps.
		if perProcess[inv.Process]++; perProcess[inv.Process] > maxBetween+1 {
			continue
		}
		unknown := c.comp >= 0 && a.ops[c.comp].Type == history.Info
		if !unknown && !mayHaveTouched(first, second, inv.Process, a.endOf(c)) {
			continue
		}
		var comp *history.Op
		if c.comp >= 0 {
			comp = &a.ops[c.comp]
		}
		out = append(out, callEvent(inv, comp, c.leaseEnd))
	}
	slices.Reverse(out) // oldest first reads better
	return out
}

func (a *analysis) violation(first, second *Hold, between map[string][]call, opts Options) Violation {
	v := Violation{Key: second.Key, First: *first, Second: *second,
		OverlapStart: second.Start, OverlapEnd: min(first.End, second.End)}
	end := v.OverlapEnd
	if end == Never {
		end = max(a.end, v.OverlapStart)
	}
	v.Overlap = end - v.OverlapStart
	v.Between = a.between(first, second, between[v.Key])
	from := v.OverlapStart
	if opts.TTL > 0 {
		from = min(from, first.Start-int64(opts.TTL))
	}
	for _, f := range a.faults {
		if f.Start <= end && f.End >= from {
			v.Faults = append(v.Faults, f.Fault)
		}
	}
	v.OverClaim = overClaimOf(first, a.ttlOf(first))
	v.Story = v.story(opts.KeyLossFaults, opts.CutOffFaults, opts.Faults)
	return v
}

// ttlOf is the TTL the hold's acquire asked for (0 when not recorded).
func (a *analysis) ttlOf(h *Hold) int64 {
	i := indexOfEvent(a.ops, h.AcquireIndex)
	for j := i - 1; j >= 0; j-- {
		if op := &a.ops[j]; op.Process == h.Process && op.Type == history.Invoke {
			if op.F == history.Acquire && op.Value != nil {
				return op.Value.TTL
			}
			return 0
		}
	}
	return 0
}

func (a *analysis) failover() *FailoverResult {
	r := &FailoverResult{}
	// Primary spans from the monitor's events.
	for i := range a.ops {
		op := &a.ops[i]
		if !op.IsNemesis() || op.F != PrimaryEvent || op.Value == nil || op.Value.Phase != "start" || len(op.Value.Targets) == 0 {
			continue
		}
		if n := len(r.Primaries); n > 0 {
			r.Primaries[n-1].End = op.Time
			if r.Primaries[n-1].Node != op.Value.Targets[0] {
				r.Failovers++
			}
		}
		r.Primaries = append(r.Primaries, Primary{Node: op.Value.Targets[0], Start: op.Time, End: a.end})
		r.Key = op.Key
	}
	holds := a.holds
	// Holds stranded by a failover.
	for i := range holds {
		h := &holds[i]
		if h.Empty() || len(h.Nodes) != 1 || len(r.Primaries) < 2 || !r.follows(h.Key) {
			continue
		}
		for _, p := range r.Primaries[1:] {
			if p.Start <= h.Start || p.Start >= h.End || p.Node == h.Nodes[0] {
				continue
			}
			s := StrandedHold{Hold: *h, FailoverAt: p.Start, NewPrimary: p.Node}
			for j := range holds {
				o := &holds[j]
				if o.Key == h.Key && !o.Empty() && len(o.Nodes) == 1 && o.Nodes[0] != h.Nodes[0] &&
					o.Start < h.End && h.Start < o.End {
					s.Lost = true
					break
				}
			}
			r.Stranded++
			if s.Lost {
				r.Lost++
			}
			if len(r.StrandedHolds) < maxFailoverExamples {
				s.Story = fmt.Sprintf("process %d was granted %s by %s at %s (%s); at %s %s became primary while %d still believed it held the lock",
					h.Process, h.Key, h.Nodes[0], fmtT(h.Start), h.describeAcquire(), fmtT(p.Start), p.Node, h.Process)
				if s.Lost {
					s.Story += "; another client was granted it by a different primary meanwhile: the lease was lost in the failover"
				}
				r.StrandedHolds = append(r.StrandedHolds, s)
			}
			break
		}
	}
	// Grants by a node that was not the primary then.
	if len(r.Primaries) > 1 {
		for i := range holds {
			h := &holds[i]
			if h.Empty() || len(h.Nodes) != 1 || !r.follows(h.Key) {
				continue
			}
			for j, p := range r.Primaries {
				last := j == len(r.Primaries)-1 // open-ended: the history may end on this grant
				if p.Start <= h.Start && (h.Start < p.End || last) && p.Node != h.Nodes[0] {
					r.Deposed++
					if len(r.DeposedHolds) < maxFailoverExamples {
						r.DeposedHolds = append(r.DeposedHolds, StrandedHold{Hold: *h, FailoverAt: p.Start, NewPrimary: p.Node,
							Story: fmt.Sprintf("process %d was granted %s by %s at %s, while %s was primary (since %s): a deposed primary was still granting locks",
								h.Process, h.Key, h.Nodes[0], fmtT(h.Start), p.Node, fmtT(p.Start))})
					}
					break
				}
			}
		}
	}
	// Fences that went backwards, per key in grant order.
	byKey := map[string][]*Hold{}
	for i := range holds {
		if holds[i].Fence != nil {
			byKey[holds[i].Key] = append(byKey[holds[i].Key], &holds[i])
		}
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		hs := byKey[k]
		sort.SliceStable(hs, func(i, j int) bool { return hs[i].Start < hs[j].Start })
		var best *Hold
		for _, h := range hs {
			if best != nil && *h.Fence <= *best.Fence {
				r.FenceRegressions++
				if len(r.FenceExamples) < maxFailoverExamples {
					r.FenceExamples = append(r.FenceExamples, FenceRegression{Earlier: *best, Later: *h,
						Story: fmt.Sprintf("process %d was granted %s with fence %d at %s%s, not above fence %d granted to process %d at %s%s: the fencing counter went backwards",
							h.Process, k, *h.Fence, fmtT(h.Start), by(h), *best.Fence, best.Process, fmtT(best.Start), by(best))})
				}
				continue
			}
			best = h
		}
	}
	r.Checked = len(r.Primaries) > 0 || len(byKey) > 0
	return r
}

// Failovers analyses a history on its own.
func Failovers(ops []history.Op) *FailoverResult { return scan(ops).failover() }

// leaseModel runs the over-claim and honesty checks over a.calls.
func (a *analysis) leaseModel(opts Options) *LeaseResult {
	r := &LeaseResult{Valid: true}
	if opts.TTL > 0 {
		r.ToleranceNs = int64(LeaseTolerance(opts.TTL))
	}
	latest := map[leaseKey]expiry{}
	tokens := map[int]leaseKey{} // a process's latest lease, for release invokes without a token
	for _, c := range a.calls {
		inv := &a.ops[c.inv]
		if inv.F != history.Acquire && inv.F != history.Extend && inv.F != history.Release {
			continue
		}
		lk := a.leaseKeyOf(c, tokens)
		if lk.token == "" {
			continue
		}
		ttl := int64(0)
		if inv.Value != nil {
			ttl = inv.Value.TTL
		}
		outcome := a.outcome(c)
		if e := latest[lk]; outcome == history.OK && (inv.F == history.Release || inv.F == history.Extend) && e.grant == nil {
			a.judgeHonesty(r, c, lk, e, opts) // a context lease's belief is judged instead
		}
		if inv.F == history.Release || outcome == history.Fail {
			continue
		}
		// A grant or an extend that happened, or may have.
		switch {
		case outcome == history.OK && inv.F == history.Acquire && ttl > 0 && a.ops[c.comp].Value != nil && a.ops[c.comp].Value.Context:
			g := &contextGrant{op: leaseOp(inv, &a.ops[c.comp], lk.key, lk.token)}
			latest[lk] = expiry{at: a.ops[c.comp].Time + ttl, ttl: ttl, since: inv.Time, grant: g}
			a.judgeBelief(r, c, latest[lk], opts)
		case outcome != history.OK:
			latest[lk] = expiry{unknown: true}
		case ttl <= 0:
			latest[lk] = expiry{unknown: true} // the TTL asked for is not recorded
		case !claimsValidity(&a.ops[c.comp]):
			// A lock that claims no deadline (no TTL, or one renewed in
			// the background) does not promise that its key expires.
			latest[lk] = expiry{unknown: true}
		default:
			e, end := latest[lk], a.ops[c.comp].Time+ttl
			if e.at == 0 {
				e.since = inv.Time
			}
			if !e.unknown && end > e.at {
				latest[lk] = expiry{at: end, ttl: ttl, since: e.since}
			}
			a.judgeClaim(r, c, ttl)
		}
	}
	r.Valid = r.OverClaims == 0 && r.DishonestOps == 0
	return r
}

// renewedUntil is the latest a context lease's key could live by the
// lock's renewals of it recorded before event index before: each one that
// may have happened, completion + TTL.
func (a *analysis) renewedUntil(p int, lk leaseKey, before int64) int64 {
	var at int64
	for i := range a.ops[:before] {
		op := &a.ops[i]
		if op.Type != history.Background || op.Process != p || op.Key != lk.key || op.Value == nil ||
			op.Value.Token != lk.token || op.Value.Outcome == history.Fail || op.Value.TTL <= 0 {
			continue
		}
		at = max(at, op.Time+op.Value.TTL)
	}
	return at
}

// judgeBelief judges the belief of the context lease granted by c against
// its key's life when the belief ended: the grant's and the renewals
// recorded before the event that ended it.
func (a *analysis) judgeBelief(r *LeaseResult, c call, e expiry, opts Options) {
	var h *Hold
	for i := range a.holds {
		if a.holds[i].AcquireIndex == int64(c.comp) {
			h = &a.holds[i]
		}
	}
	if h == nil || h.Empty() {
		return
	}
	end, endIdx := h.End, int64(len(a.ops))
	if h.EndIndex >= 0 {
		endIdx = h.EndIndex
	}
	if end == Never {
		end = a.end
	}
	for _, o := range a.calls {
		if inv := &a.ops[o.inv]; inv.F == history.Extend && inv.Process == h.Process && o.comp >= 0 && int64(o.comp) < endIdx &&
			a.outcome(o) != history.Fail && (inv.Value == nil || inv.Value.Token == "" || inv.Value.Token == h.Token) {
			return // an extend of its own made its key's life unknown
		}
	}
	// Every renewal of it counts, even one recorded after the end: it was
	// in flight then, and may have kept the key.
	e.at = max(e.at, a.renewedUntil(h.Process, leaseKey{key: h.Key, token: h.Token}, int64(len(a.ops))))
	r.Claims++
	if end <= e.at+int64(LeaseTolerance(time.Duration(e.ttl))) {
		return
	}
	if why := a.serverMayKeep(e.since, end, opts); why != "" {
		r.Suspended++
		r.SuspendedWhy = why
		return
	}
	r.OverClaims++
	if len(r.OverClaimed) < MaxViolations {
		r.OverClaimed = append(r.OverClaimed, beliefPastKey(e.grant, e, end))
	}
}

// leaseKeyOf is the lease a call refers to: its own token, or for an
// acquire the one it was granted.
func (a *analysis) leaseKeyOf(c call, tokens map[int]leaseKey) leaseKey {
	inv := &a.ops[c.inv]
	lk := leaseKey{key: inv.Key}
	if inv.Value != nil {
		lk.token = inv.Value.Token
	}
	if inv.F == history.Acquire {
		lk.token = ""
		if c.comp >= 0 {
			if v := a.ops[c.comp].Value; v != nil {
				lk.token = v.Token
			}
		}
		if lk.token != "" && a.outcome(c) == history.OK {
			tokens[inv.Process] = lk
		}
		return lk
	}
	if lk.token == "" {
		if prev, ok := tokens[inv.Process]; ok && prev.key == lk.key {
			lk.token = prev.token
		}
	}
	return lk
}

// judgeClaim checks an ok grant or extend's validity against invoke + TTL.
func (a *analysis) judgeClaim(r *LeaseResult, c call, ttl int64) {
	inv, comp := &a.ops[c.inv], &a.ops[c.comp]
	if comp.Value == nil || comp.Value.ValidUntil == nil {
		return // no limit claimed: nothing to over-claim
	}
	if !r.overClaims(inv, comp, ttl) || len(r.OverClaimed) >= MaxViolations {
		return
	}
	r.OverClaimed = append(r.OverClaimed, overClaim(inv, comp, ttl))
}

// judgeHonesty checks an ok release or extend against the latest expiry of
// its lease's key.
func (a *analysis) judgeHonesty(r *LeaseResult, c call, lk leaseKey, e expiry, opts Options) {
	inv, comp := &a.ops[c.inv], &a.ops[c.comp]
	if e.unknown || e.at == 0 {
		return // the key's life is not bounded by what the history knows
	}
	if inv.Time <= e.at+int64(LeaseTolerance(time.Duration(e.ttl))) {
		r.Judged++
		return
	}
	if why := a.serverMayKeep(e.since, inv.Time, opts); why != "" {
		r.Suspended++
		r.SuspendedWhy = why
		return
	}
	r.Judged++
	r.DishonestOps++
	if len(r.Dishonesty) >= MaxViolations {
		return
	}
	r.Dishonesty = append(r.Dishonesty, dishonest(inv, comp, lk, e))
}

// serverMayKeep says why the server may honestly have kept a key past its
// TTL between from and to, or "" when nothing could have.
func (a *analysis) serverMayKeep(from, to int64, opts Options) string {
	faults := make([]*Fault, len(a.faults))
	for i := range a.faults {
		faults[i] = &a.faults[i].Fault
	}
	return serverMayKeep(faults, from, to, opts)
}

// Linearizability checks the holds of a history against a mutex model with
// porcupine.
func Linearizability(ops []history.Op, opts Options) *LinearizabilityResult {
	return scan(ops).linearizability(opts.withDefaults())
}

// linearizability feeds the analysis's holds to a linEngine: the in-memory
// path, which the streaming one must agree with.
func (a *analysis) linearizability(opts Options) *LinearizabilityResult {
	e := newLinEngine(opts)
	for i := range a.holds {
		h := &a.holds[i]
		if h.Empty() {
			continue
		}
		e.add(h.Key, linOp{call: h.Invoke, ret: h.Start, hold: h})
		if h.End != Never {
			e.add(h.Key, linOp{call: h.End, ret: h.End, hold: h, release: true})
		}
	}
	return e.finish()
}

// Liveness measures acquire success and unavailability.
func Liveness(ops []history.Op, opts Options) *LivenessResult {
	return scan(ops).liveness(opts.withDefaults())
}

type attempt struct {
	invoke, end int64
	outcome     history.Type
	open        bool // never completed: counts as unknown, but as a failure for windows
}

// summarizedAttempts adds the failed acquires of the summaries, each as
// spanning its summary, and keeps every key's attempts in invoke order.
func (a *analysis) summarizedAttempts(attempts map[string][]attempt) {
	if len(a.summaries) == 0 {
		return
	}
	for _, i := range a.summaries {
		op := &a.ops[i]
		for range op.Value.Count {
			attempts[op.Key] = append(attempts[op.Key], attempt{invoke: *op.Value.From, end: *op.Value.To, outcome: history.Fail})
		}
	}
	for _, atts := range attempts {
		slices.SortStableFunc(atts, func(x, y attempt) int { return cmp.Compare(x.invoke, y.invoke) })
	}
}

func (a *analysis) liveness(opts Options) *LivenessResult {
	r := &LivenessResult{StuckAfter: int64(opts.StuckAfter)}
	attempts := map[string][]attempt{}
	for _, c := range a.calls {
		inv := &a.ops[c.inv]
		if inv.F != history.Acquire {
			continue
		}
		o := a.outcome(c)
		attempts[inv.Key] = append(attempts[inv.Key], attempt{invoke: inv.Time, end: a.endOf(c),
			outcome: o, open: c.comp < 0})
	}
	a.summarizedAttempts(attempts)
	// Union of believed holds per key, in Start order.
	type span struct{ start, end int64 }
	union := map[string][]span{}
	for i := range a.holds {
		h := &a.holds[i]
		if h.Empty() {
			continue
		}
		u := union[h.Key]
		if n := len(u); n > 0 && h.Start <= u[n-1].end {
			u[n-1].end = max(u[n-1].end, h.End)
		} else {
			u = append(u, span{h.Start, h.End})
		}
		union[h.Key] = u
	}
	keys := make([]string, 0, len(attempts))
	for k := range attempts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	// Attempts must reach this close to the end for a key to count as stuck
	// rather than abandoned by the workload.
	slack := max(int64(time.Second), a.end/10)
	for _, k := range keys {
		atts, u := attempts[k], union[k]
		kl := KeyLiveness{Key: k}
		for _, at := range atts {
			kl.count(at.outcome)
		}
		kl.rate()
		// Walk the gaps of the union; attempts are in invoke order. An
		// attempt counts for a gap when it was trying during the gap and
		// did not get the lock, even if it began during the previous hold
		// (clients blocked on a paused node) or ended after the next hold
		// began: someone wanted the lock while nobody held it.
		j := 0
		gapStart := int64(0)
		var carry []attempt // attempts that may still run into the next gap
		var last *Window
		for g := 0; g <= len(u); g++ {
			gapEnd := int64(Never)
			if g < len(u) {
				gapEnd = u[g].start
			}
			cand := carry[:0:0]
			for _, at := range carry {
				if at.end > gapStart {
					cand = append(cand, at)
				}
			}
			for ; j < len(atts) && atts[j].invoke < gapEnd; j++ {
				cand = append(cand, atts[j])
			}
			carry = carry[:0]
			w := Window{Key: k, Recovered: g < len(u)}
			first, lastEnd := int64(Never), int64(0)
			for _, at := range cand {
				if at.end > gapEnd {
					carry = append(carry, at)
				}
				if at.end <= gapStart || at.outcome == history.OK {
					continue
				}
				w.Attempts++
				first = min(first, max(at.invoke, gapStart))
				lastEnd = max(lastEnd, at.end)
				if at.outcome == history.Fail || at.open {
					w.Failed++
				} else {
					w.Unknown++
				}
			}
			if w.Failed+w.Unknown > 0 {
				w.Start = first
				if w.Recovered {
					w.End = gapEnd
				} else {
					w.End = min(lastEnd, a.end)
				}
				w.Duration = max(0, w.End-w.Start)
				kl.Windows++
				kl.Longest = max(kl.Longest, w.Duration)
				r.Windows++
				r.Top = insertTop(r.Top, w)
				last = &w
			} else {
				last = nil
			}
			if g < len(u) {
				gapStart = u[g].end
				if gapStart == Never {
					break
				}
			}
		}
		if last != nil && !last.Recovered && last.End >= a.end-slack && a.end-last.Start >= int64(opts.StuckAfter) {
			r.StuckKeys = append(r.StuckKeys, StuckKey{Key: k, Since: last.Start, For: a.end - last.Start})
		}
		r.addKey(kl)
	}
	r.finish()
	return r
}

// Resource checks the protected resource's reads and writes.
func Resource(ops []history.Op) *ResourceResult { return scan(ops).resource() }

func (a *analysis) resource() *ResourceResult {
	r := &ResourceResult{Valid: true}
	type keyState struct {
		ResourceKey
		lastWriteEnd int64
		lastRead     int // call index of the ok read with the latest invoke
		firstWrite   map[int64]Write
	}
	keys := map[string]*keyState{}
	get := func(k string) *keyState {
		ks := keys[k]
		if ks == nil {
			ks = &keyState{ResourceKey: ResourceKey{Key: k}, lastRead: -1, firstWrite: map[int64]Write{}}
			keys[k] = ks
		}
		return ks
	}
	for ci, c := range a.calls {
		inv := &a.ops[c.inv]
		switch inv.F {
		case history.Write:
			ks := get(inv.Key)
			ks.Writes++
			end := a.endOf(c)
			if c.comp < 0 {
				end = Never // may still take effect: no read is "after" it
			}
			ks.lastWriteEnd = max(ks.lastWriteEnd, end)
			switch a.outcome(c) {
			case history.OK:
				ks.Accepted++
				w := Write{Process: inv.Process, Invoke: inv.Time, Time: a.ops[c.comp].Time, Index: a.ops[c.comp].Index}
				if v := inv.Value; v != nil {
					w.Token, w.Fence = v.Token, v.Fence
					if v.N == nil {
						continue
					}
					w.N = *v.N
				} else {
					continue
				}
				if first, dup := ks.firstWrite[w.N]; dup {
					ks.Duplicates++
					if len(r.Interleaved) < MaxViolations {
						r.Interleaved = append(r.Interleaved, interleaving(inv.Key, first, w))
					}
				} else {
					ks.firstWrite[w.N] = w
				}
			case history.Fail:
				ks.RejectedStale++
			default:
				ks.UnknownWrites++
			}
		case history.Read:
			ks := get(inv.Key)
			ks.Reads++
			switch a.outcome(c) {
			case history.OK:
				if v := a.ops[c.comp].Value; v != nil && v.N != nil {
					ks.lastRead = ci
				}
			case history.Fail:
				ks.RejectedReads++
			}
		}
	}
	names := make([]string, 0, len(keys))
	for k, ks := range keys {
		if ks.Writes > 0 {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	var why []string
	for _, k := range names {
		ks := keys[k]
		// Calls are in invoke order, so lastRead is the latest-invoked ok
		// read; it counts only if no write could land after it.
		if ks.lastRead >= 0 && a.ops[a.calls[ks.lastRead].inv].Time > ks.lastWriteEnd {
			ks.Final = a.ops[a.calls[ks.lastRead].comp].Value.N
		}
		why = r.addKey(&ks.ResourceKey, why)
	}
	r.finish(why)
	return r
}

// ComputeStats counts and times a history's operations.
func ComputeStats(ops []history.Op) *Stats { return scan(ops).stats() }

func (a *analysis) stats() *Stats {
	s := &Stats{Counts: map[string]map[string]int{}, Latency: map[string]*Latency{}, Duration: a.end}
	lat := map[string][]int64{}
	for _, c := range a.calls {
		f := a.ops[c.inv].F
		m := s.Counts[f]
		if m == nil {
			m = map[string]int{}
			s.Counts[f] = m
		}
		if c.comp < 0 {
			s.Pending++
			m["pending"]++
			continue
		}
		s.Ops++
		m[string(a.ops[c.comp].Type)]++
		lat[f] = append(lat[f], a.ops[c.comp].Time-a.ops[c.inv].Time)
	}
	for _, op := range a.ops {
		if op.Process == history.NemesisProcess {
			s.NemesisEvents++
		}
	}
	for _, i := range a.summaries {
		n := int(a.ops[i].Value.Count)
		s.Ops += n
		s.SummarizedFailedAcquires += n
		if s.Counts[history.Acquire] == nil {
			s.Counts[history.Acquire] = map[string]int{}
		}
		s.Counts[history.Acquire][string(history.Fail)] += n
	}
	for f, ds := range lat {
		slices.Sort(ds)
		q := func(p float64) int64 { return ds[min(len(ds)-1, int(p*float64(len(ds))))] }
		s.Latency[f] = &Latency{Count: len(ds), P50: q(0.50), P90: q(0.90), P99: q(0.99), Max: ds[len(ds)-1]}
	}
	if s.rated() {
		secs := float64(a.end) / 1e9
		s.AcquireThroughput = float64(s.Counts[history.Acquire]["ok"]) / secs
		s.OpThroughput = float64(s.Ops) / secs
	}
	return s
}
