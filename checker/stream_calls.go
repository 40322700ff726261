package checker

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/lockjepsen/lockjepsen/history"
)

// results assembles the Results once every event is in.
func (s *Stream) results(ctx context.Context) (*Results, error) {
	for _, c := range s.inFlight() {
		s.stats.pending(c)
		s.lease.called(c, s)
		s.res.called(c)
	}
	r := &Results{Exclusion: s.exclusionResult()}
	if r.Linearizability = s.lin.finish(); ctx.Err() != nil {
		return nil, ctx.Err()
	}
	r.Resource, r.Liveness, r.Stats, r.Failover = s.res.result(), s.liveness(), s.stats.result(), s.fo.result(s.stats.last)
	r.Lease = s.lease.result(s)
	r.Exercised = s.moments.result()
	r.NeverFrees = s.nf.result()
	r.ExtendGrants = s.eg.result()
	for _, c := range s.checks {
		c.result(r)
	}
	r.Fences = s.fences.result()
	s.finished = r
	verdict(r)
	r.Answers = answer(r, s.opts.KeyLossFaults, s.opts.CutOffFaults, s.opts.Faults)
	return r, nil
}

// verdict fills in the verdict and the summary counts from the checkers'
// results.
func verdict(r *Results) {
	r.First = firsts(r.Exclusion, r.Lease)
	if nf := r.NeverFrees; nf != nil && len(nf.Witnesses) > 0 {
		r.First.NeverFrees = history.I64(nf.Witnesses[0].Flagged)
	}
	r.Violations = r.Exclusion.Count
	r.Incidents = r.Exclusion.Incidents
	r.Ops = r.Stats.Ops
	lin := r.Linearizability.Valid
	switch {
	case r.Exclusion.Count > 0 || (r.Resource.Checked && !r.Resource.Valid) || lin == ValidFalse || !r.Lease.Valid || checksSay(r, VerdictUnsafe):
		r.Verdict, r.Valid = VerdictUnsafe, ValidFalse
	case r.Liveness.Stuck || checksSay(r, VerdictStuck):
		r.Verdict, r.Valid = VerdictStuck, ValidFalse
	case r.Exclusion.untested():
		// A run where no lock was granted (a dead server, a broken lock)
		// found no violation only because it tested nothing.
		r.Verdict, r.Valid = VerdictUnknown, ValidUnknown
	case lin == ValidUnknown:
		r.Verdict, r.Valid = VerdictUnknown, ValidUnknown
	default:
		r.Verdict, r.Valid = VerdictSafe, ValidTrue
	}
	switch {
	case r.Exclusion.Count > 0 && lin == ValidTrue:
		r.Disagreement = fmt.Sprintf("harness bug: the exclusion checker found %d violations but porcupine found every segment linearizable", r.Exclusion.Count)
	case r.Exclusion.Count == 0 && lin == ValidFalse:
		r.Disagreement = fmt.Sprintf("harness bug: porcupine found %d illegal segments but the exclusion checker found no overlapping holds", r.Linearizability.SegmentsIllegal)
	}
}

// cutKey cuts key's porcupine operations as far as none still to come can
// sort before them: an acquire's operation is called at its invoke (one
// in flight, or granted at this instant), a release's at the hold's end,
// which for a belief still held is at or after now.
func (e *linEngine) cutKey(ks *skey, s *Stream) {
	k := e.keys[ks.name]
	if k == nil {
		return
	}
	w := s.now
	for _, c := range ks.acquiring {
		w = min(w, c.Inv.Time)
	}
	for _, h := range s.undecided {
		if h.Key == ks.name {
			w = min(w, h.Invoke)
		}
	}
	e.advance(k, w)
}

func (c *cutter) openOps() int {
	if c.seg == nil {
		return 0
	}
	return len(c.seg.ops)
}

// leaseState is the lease model over calls as they complete. A lease's
// calls are one process's, one after another, so completion order is
// invoke order for them; calls that never completed are judged at the
// end, in invoke order.
type leaseState struct {
	opts   Options
	r      *LeaseResult
	latest map[leaseKey]expiry
	tokens map[int]leaseKey // a process's latest lease, for release invokes without a token
	refs   map[leaseKey]int // processes whose latest lease it is
	// ended are the context leases whose belief has ended, with its end,
	// awaiting judgeBelief
	ended map[leaseKey]int64
	// the invoke order of the kept over-claims and dishonest calls, which
	// are the first MaxViolations in that order
	overSeq, disSeq []int64
}

func newLeaseState(opts Options) *leaseState {
	l := &leaseState{opts: opts, r: &LeaseResult{Valid: true}, latest: map[leaseKey]expiry{},
		tokens: map[int]leaseKey{}, refs: map[leaseKey]int{}, ended: map[leaseKey]int64{}}
	if opts.TTL > 0 {
		l.r.ToleranceNs = int64(LeaseTolerance(opts.TTL))
	}
	return l
}

func (l *leaseState) retained() int { return len(l.latest) + len(l.tokens) + len(l.ended) }

// called runs the lease model's step for one call.
func (l *leaseState) called(c *scall, s *Stream) {
	inv := &c.Inv
	if inv.F != history.Acquire && inv.F != history.Extend && inv.F != history.Release {
		return
	}
	lk := l.leaseKeyOf(c, s)
	if lk.token == "" {
		return
	}
	ttl := int64(0)
	if inv.Value != nil {
		ttl = inv.Value.TTL
	}
	outcome := c.Outcome()
	if e := l.latest[lk]; outcome == history.OK && (inv.F == history.Release || inv.F == history.Extend) && e.grant == nil {
		// A context lease's release ends its belief, which judgeBelief
		// judges once the renewals in flight are in.
		l.judgeHonesty(c, lk, e, s)
	}
	if inv.F == history.Release || outcome == history.Fail {
		return
	}
	// A grant or an extend that happened, or may have.
	switch {
	case outcome == history.OK && inv.F == history.Acquire && ttl > 0 && c.Comp.Value != nil && c.Comp.Value.Context:
		// A context lease: no deadline of its own, but its key lives by
		// the grant and the lock's renewals (background), by which its
		// belief is judged when it ends (believed).
		g := &contextGrant{op: leaseOp(inv, &c.Comp, lk.key, lk.token), seq: c.Seq}
		l.latest[lk] = expiry{at: c.Comp.Time + ttl, ttl: ttl, since: inv.Time, grant: g}
	case outcome != history.OK, ttl <= 0, !claimsValidity(&c.Comp):
		// Unknown, no TTL recorded, or a lock that claims no deadline
		// (no TTL, or one renewed in the background): no promise that
		// its key expires.
		l.latest[lk] = expiry{unknown: true}
	default:
		e, end := l.latest[lk], c.Comp.Time+ttl
		if e.at == 0 {
			e.since = inv.Time
		}
		if !e.unknown && end > e.at {
			l.latest[lk] = expiry{at: end, ttl: ttl, since: e.since}
		}
		l.judgeClaim(c, ttl)
	}
}

// background takes a lock's own renewal of a context lease: one that
// succeeded, or may have, lets the key live until its completion + TTL at
// the latest. Renewals of other leases are not the lease model's.
func (l *leaseState) background(op *history.Op) {
	v := op.Value
	if v == nil || v.Outcome == history.Fail || v.TTL <= 0 {
		return
	}
	lk := leaseKey{key: op.Key, token: v.Token}
	if lk.token == "" {
		if prev, ok := l.tokens[op.Process]; ok && prev.key == lk.key {
			lk.token = prev.token
		}
	}
	if e, ok := l.latest[lk]; ok && e.grant != nil && op.Time+v.TTL > e.at {
		e.at, e.ttl = op.Time+v.TTL, v.TTL
		l.latest[lk] = e
	}
}

// believed notes when a context lease's belief ended, to be judged once
// its lock's acts are all in (judgeBelief): a renewal in flight when the
// belief ended is recorded at its completion, later, and may have kept
// the key.
func (l *leaseState) believed(h *Hold, s *Stream) {
	lk := leaseKey{key: h.Key, token: h.Token}
	e, ok := l.latest[lk]
	if !ok || e.grant == nil || h.Empty() {
		return
	}
	end := h.End
	if end == Never {
		end = s.stats.last // still believed when the history ends
	}
	l.ended[lk] = end
}

// judgeBelief judges a context lease's belief that ended, when the lease
// is forgotten (its process's next grant) or the history ends: it must
// not outlast the key its grant and renewals could keep, unless a clock
// fault may have kept the key longer.
func (l *leaseState) judgeBelief(lk leaseKey, s *Stream) {
	end, ok := l.ended[lk]
	e := l.latest[lk]
	if !ok || e.grant == nil {
		return
	}
	delete(l.ended, lk)
	l.r.Claims++
	if end <= e.at+int64(LeaseTolerance(time.Duration(e.ttl))) {
		return
	}
	if why := serverMayKeep(s.faults.clock, e.since, end, l.opts); why != "" {
		l.r.Suspended++
		l.r.SuspendedWhy = why
		return
	}
	l.r.OverClaims++
	if i, keep := keepFirst(&l.overSeq, e.grant.seq); keep {
		l.r.OverClaimed = slices.Insert(l.r.OverClaimed, i, beliefPastKey(e.grant, e, end))[:len(l.overSeq)]
	}
}

// leaseKeyOf is the lease a call refers to: its own token, or for an
// acquire the one it was granted. A lease that is no longer any process's
// latest is forgotten: only its holder names it.
func (l *leaseState) leaseKeyOf(c *scall, s *Stream) leaseKey {
	inv := &c.Inv
	lk := leaseKey{key: inv.Key}
	if inv.Value != nil {
		lk.token = inv.Value.Token
	}
	if inv.F == history.Acquire {
		lk.token = ""
		if c.Done && c.Comp.Value != nil {
			lk.token = c.Comp.Value.Token
		}
		if lk.token != "" && c.Outcome() == history.OK {
			if old, ok := l.tokens[inv.Process]; ok && old != lk {
				if l.refs[old]--; l.refs[old] <= 0 {
					delete(l.refs, old)
					l.judgeBelief(old, s)
					delete(l.latest, old)
				}
			}
			if old, ok := l.tokens[inv.Process]; !ok || old != lk {
				l.refs[lk]++
			}
			l.tokens[inv.Process] = lk
		}
		return lk
	}
	if lk.token == "" {
		if prev, ok := l.tokens[inv.Process]; ok && prev.key == lk.key {
			lk.token = prev.token
		}
	}
	return lk
}

// judgeClaim checks an ok grant or extend's validity against invoke + TTL.
func (l *leaseState) judgeClaim(c *scall, ttl int64) {
	inv, comp := &c.Inv, &c.Comp
	r := l.r
	if !r.overClaims(inv, comp, ttl) {
		return
	}
	i, keep := keepFirst(&l.overSeq, c.Seq)
	if !keep {
		return
	}
	r.OverClaimed = slices.Insert(r.OverClaimed, i, overClaim(inv, comp, ttl))[:len(l.overSeq)]
}

// keepFirst places seq among the kept ones, which are the first
// MaxViolations in invoke order, and says where, or that it is not kept.
func keepFirst(seqs *[]int64, seq int64) (int, bool) {
	i, _ := slices.BinarySearch(*seqs, seq)
	if i >= MaxViolations {
		return 0, false
	}
	*seqs = slices.Insert(*seqs, i, seq)
	if len(*seqs) > MaxViolations {
		*seqs = (*seqs)[:MaxViolations]
	}
	return i, true
}

// judgeHonesty checks an ok release or extend against the latest expiry of
// its lease's key.
func (l *leaseState) judgeHonesty(c *scall, lk leaseKey, e expiry, s *Stream) {
	inv, comp := &c.Inv, &c.Comp
	r := l.r
	if e.unknown || e.at == 0 {
		return // the key's life is not bounded by what the history knows
	}
	if inv.Time <= e.at+int64(LeaseTolerance(time.Duration(e.ttl))) {
		r.Judged++
		return
	}
	if why := serverMayKeep(s.faults.clock, e.since, inv.Time, l.opts); why != "" {
		r.Suspended++
		r.SuspendedWhy = why
		return
	}
	r.Judged++
	r.DishonestOps++
	i, keep := keepFirst(&l.disSeq, c.Seq)
	if !keep {
		return
	}
	r.Dishonesty = slices.Insert(r.Dishonesty, i, dishonest(inv, comp, lk, e))[:len(l.disSeq)]
}

func (l *leaseState) result(s *Stream) *LeaseResult {
	// In grant order, so that the results do not depend on a map's.
	pending := slices.Collect(maps.Keys(l.ended))
	slices.SortFunc(pending, func(a, b leaseKey) int { return cmp.Compare(l.latest[a].grant.seq, l.latest[b].grant.seq) })
	for _, lk := range pending {
		l.judgeBelief(lk, s)
	}
	l.r.Valid = l.r.OverClaims == 0 && l.r.DishonestOps == 0
	return l.r
}

// resState is the resource checker over calls as they complete.
type resState struct {
	keys        map[string]*resKey
	interleaved []resDup
	dupSeq      []int64
}

// resKey is one key's tally. Which values were written is kept as runs
// (a counter's values are consecutive), and the details of a value's
// first write only for the latest maxWriteDetails values: a duplicate of
// an older value is still counted, and its witness names the value.
type resKey struct {
	ResourceKey
	lastWriteEnd int64
	lastRead     int64 // invoke order of the ok read with the latest invoke, -1 for none
	lastReadAt   int64
	lastReadN    int64
	written      runs
	first        map[int64]firstWrite
	order        []int64 // values in first, oldest first
}

type firstWrite struct {
	w   Write
	seq int64
}

// resDup is a duplicate write and the value's first write.
type resDup struct {
	key           string
	first, second Write
}

const maxWriteDetails = 1 << 10

func newResState() *resState { return &resState{keys: map[string]*resKey{}} }

func (rs *resState) retained() int {
	n := len(rs.interleaved)
	for _, k := range rs.keys {
		n += len(k.written) + len(k.order)
	}
	return n
}

func (rs *resState) get(k string) *resKey {
	return entry(rs.keys, k, func(k string) *resKey {
		return &resKey{ResourceKey: ResourceKey{Key: k}, lastRead: -1, first: map[int64]firstWrite{}}
	})
}

// called runs the resource check's step for one call.
func (rs *resState) called(c *scall) {
	inv := &c.Inv
	switch inv.F {
	case history.Write:
		ks := rs.get(inv.Key)
		ks.Writes++
		end := int64(Never) // may still take effect: no read is "after" it
		if c.Done {
			end = c.Comp.Time
		}
		ks.lastWriteEnd = max(ks.lastWriteEnd, end)
		switch c.Outcome() {
		case history.OK:
			ks.Accepted++
			if v := inv.Value; v != nil && v.N != nil {
				w := Write{Process: inv.Process, Invoke: inv.Time, Time: c.Comp.Time, Index: c.Comp.Index,
					Token: v.Token, Fence: v.Fence, N: *v.N}
				rs.accepted(ks, w, c.Seq)
			}
		case history.Fail:
			ks.RejectedStale++
		default:
			ks.UnknownWrites++
		}
	case history.Read:
		ks := rs.get(inv.Key)
		ks.Reads++
		switch c.Outcome() {
		case history.OK:
			if v := c.Comp.Value; v != nil && v.N != nil && c.Seq > ks.lastRead {
				ks.lastRead, ks.lastReadAt, ks.lastReadN = c.Seq, inv.Time, *v.N
			}
		case history.Fail:
			ks.RejectedReads++
		}
	}
}

// accepted records an accepted write: the value's first write (in invoke
// order) is kept, any other is a duplicate.
func (rs *resState) accepted(ks *resKey, w Write, seq int64) {
	if !ks.written.add(w.N) {
		ks.first[w.N] = firstWrite{w, seq}
		ks.order = append(ks.order, w.N)
		if len(ks.order) > maxWriteDetails {
			delete(ks.first, ks.order[0])
			ks.order = ks.order[1:]
		}
		return
	}
	ks.Duplicates++
	dupSeq, dup := seq, w
	first, known := ks.first[w.N]
	if known && seq < first.seq {
		// Completed later but invoked earlier: this one is the first, of
		// the duplicates kept too.
		ks.first[w.N] = firstWrite{w, seq}
		dupSeq, dup = first.seq, first.w
		for i := range rs.interleaved {
			if d := &rs.interleaved[i]; d.key == ks.Key && d.second.N == w.N {
				d.first = w
			}
		}
		first.w = w
	}
	if !known {
		first.w = Write{N: w.N} // written too long ago to be remembered
	}
	i, keep := keepFirst(&rs.dupSeq, dupSeq)
	if keep {
		rs.interleaved = slices.Insert(rs.interleaved, i, resDup{key: ks.Key, first: first.w, second: dup})[:len(rs.dupSeq)]
	}
}

func (rs *resState) result() *ResourceResult {
	r := &ResourceResult{Valid: true}
	for _, d := range rs.interleaved {
		r.Interleaved = append(r.Interleaved, interleaving(d.key, d.first, d.second))
	}
	names := make([]string, 0, len(rs.keys))
	for k, ks := range rs.keys {
		if ks.Writes > 0 {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	var why []string
	for _, k := range names {
		ks := rs.keys[k]
		// lastRead is the latest-invoked ok read; it counts only if no
		// write could land after it.
		if ks.lastRead >= 0 && ks.lastReadAt > ks.lastWriteEnd {
			ks.Final = history.I64(ks.lastReadN)
		}
		why = r.addKey(&ks.ResourceKey, why)
	}
	r.finish(why)
	return r
}

// runs is a set of integers as sorted, disjoint, non-adjacent [lo, hi]
// runs.
type runs [][2]int64

// add inserts n and reports whether it was already there.
func (rs *runs) add(n int64) bool {
	r := *rs
	i := sort.Search(len(r), func(i int) bool { return r[i][1] >= n-1 })
	switch {
	case i < len(r) && r[i][0] <= n && n <= r[i][1]:
		return true
	case i < len(r) && r[i][1] == n-1:
		r[i][1] = n
		if i+1 < len(r) && r[i+1][0] == n+1 {
			r[i][1] = r[i+1][1]
			r = slices.Delete(r, i+1, i+2)
		}
	case i < len(r) && r[i][0] == n+1:
		r[i][0] = n
	default:
		r = slices.Insert(r, i, [2]int64{n, n})
	}
	*rs = r
	return false
}

// statState counts and times calls; latencies go into histograms.
type statState struct {
	ops, pendingN int
	summarized    int // failed acquires known only from summaries
	nemesis       int
	last          int64
	counts        map[string]map[string]int
	latency       map[string]*histogram
}

func newStatState() *statState {
	return &statState{counts: map[string]map[string]int{}, latency: map[string]*histogram{}}
}

func (st *statState) count(f, outcome string) { st.countN(f, outcome, 1) }

func (st *statState) countN(f, outcome string, n int) {
	m := st.counts[f]
	if m == nil {
		m = map[string]int{}
		st.counts[f] = m
	}
	m[outcome] += n
}

func (st *statState) called(c *scall) {
	st.ops++
	st.count(c.Inv.F, string(c.Comp.Type))
	h := st.latency[c.Inv.F]
	if h == nil {
		h = &histogram{}
		st.latency[c.Inv.F] = h
	}
	h.add(c.Comp.Time - c.Inv.Time)
}

func (st *statState) pending(c *scall) {
	st.pendingN++
	st.count(c.Inv.F, "pending")
}

func (st *statState) result() *Stats {
	s := &Stats{Ops: st.ops, Pending: st.pendingN, Counts: st.counts, Duration: st.last, NemesisEvents: st.nemesis,
		SummarizedFailedAcquires: st.summarized, Latency: map[string]*Latency{}}
	for f, h := range st.latency {
		s.Latency[f] = h.latency()
	}
	if s.rated() {
		secs := float64(st.last) / 1e9
		s.AcquireThroughput = float64(s.Counts[history.Acquire]["ok"]) / secs
		s.OpThroughput = float64(s.Ops) / secs
	}
	return s
}
