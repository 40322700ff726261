package checker

import (
	"cmp"
	"slices"
	"sort"
	"time"

	"github.com/lockjepsen/lockjepsen/history"
)

// skey is the stream's state for one key: the exclusion sweep, the
// unavailability windows, and the releases and extends a witness lists.
type skey struct {
	name string
	// cands are the decided holds that may still reach furthest: every one
	// whose end is unknown, and those that end after the current instant.
	// resolvedMax is the furthest end of the holds dropped from it.
	cands       []*hrec
	resolvedMax int64
	anyHold     bool
	inIncident  bool
	// acquiring are the key's acquires in flight.
	acquiring []*scall
	// recentCalls are, per process, its latest releases and extends on
	// the key that did not fail: what a witness's Between is drawn from.
	recentCalls map[int][]*scall
	// Liveness: the counts, the gap after the last hold (open), the gaps
	// that closed while attempts in them were in flight, and attempts
	// invoked and completed at the current instant, which belong to the
	// open gap only if no hold starts at that instant.
	kl          KeyLiveness
	open        gapAgg
	pendingGaps []*sgap
	tie         []*scall
	closedAt    int64
}

func newSkey(name string) *skey {
	return &skey{name: name, recentCalls: map[int][]*scall{}, kl: KeyLiveness{Key: name}, closedAt: -1, open: newGapAgg()}
}

// gapAgg sums the failed attempts of one gap between holds.
type gapAgg struct {
	attempts, failed, unknown int
	first, lastEnd            int64
}

func newGapAgg() gapAgg { return gapAgg{first: Never} }

// add counts attempt c, which ended at end (open: never completed), in a
// gap that starts at gs.
func (g *gapAgg) add(c *scall, end, gs int64, open bool) {
	g.attempts++
	g.first = min(g.first, max(c.Inv.Time, gs))
	g.lastEnd = max(g.lastEnd, end)
	if open || c.Outcome() == history.Fail {
		g.failed++
	} else {
		g.unknown++
	}
}

// sgap is a gap between holds that closed while attempts in it were
// still in flight: its window waits for their outcome.
type sgap struct {
	start, end int64
	agg        gapAgg
	waiting    []*scall
}

// exState is the exclusion checker's running tally.
type exState struct {
	holds, empty, count, incidents int
	witnesses                      []*switness
	live                           liveState
}

// switness is a violation found, completed at the end (both holds' ends,
// the calls in between and the faults are known only then).
type switness struct {
	cands  []*hrec // the earlier holds that may be the one reaching furthest
	second *hrec
	calls  []*scall
}

// exclusion runs the exclusion sweep for hold h, decided and
// not empty, and the liveness and failover checks that need the holds
// before it on its key.
func (s *Stream) exclusion(ks *skey, h *hrec) {
	overlap, unresolved := false, false
	maxEnd := ks.resolvedMax
	for _, c := range ks.cands {
		if !c.Resolved() {
			unresolved = true
		} else {
			maxEnd = max(maxEnd, c.End)
		}
		if !c.Resolved() || c.End > h.Start {
			overlap = true
			if len(c.Nodes) == 1 && len(h.Nodes) == 1 && c.Nodes[0] != h.Nodes[0] {
				c.X.lost, h.X.lost = true, true
			}
		}
	}
	switch {
	case !ks.anyHold:
		s.closeGap(ks, 0, h.Start)
	case !unresolved && h.Start > maxEnd:
		s.closeGap(ks, maxEnd, h.Start)
	}
	ks.open = newGapAgg()
	if overlap {
		s.ex.count++
		if !ks.inIncident {
			s.ex.incidents++
			ks.inIncident = true
		}
		if len(s.ex.witnesses) < MaxViolations {
			s.ex.witnesses = append(s.ex.witnesses, ks.witness(h))
		}
	} else {
		ks.inIncident = false
	}
	ks.anyHold = true
	ks.cands = append(ks.cands, h)
	ks.pruneCandsAt(h.Start)
}

// witness keeps what the violation of h will need: the holds that may be
// its first (those reaching past h's start), and the releases and extends
// invoked so far.
func (ks *skey) witness(h *hrec) *switness {
	w := &switness{second: h}
	for _, c := range ks.cands {
		if !c.Resolved() || c.End > h.Start {
			w.cands = append(w.cands, c)
		}
	}
	for _, calls := range ks.recentCalls {
		w.calls = append(w.calls, calls...)
	}
	return w
}

// pruneCands drops the holds that end by now: a hold granted later starts
// at a completion at or after now, so they cannot overlap it.
func (ks *skey) pruneCands() { ks.pruneCandsAt(Never) }

func (ks *skey) pruneCandsAt(now int64) {
	keep := ks.cands[:0]
	for _, c := range ks.cands {
		if c.Resolved() && c.End <= now && c.End != Never {
			ks.resolvedMax = max(ks.resolvedMax, c.End)
			continue
		}
		keep = append(keep, c)
	}
	clear(ks.cands[len(keep):])
	ks.cands = keep
}

// recordCall keeps a release or extend invoke among the key's recent ones:
// a process's calls are sequential, so all but its last have completed,
// and the latest maxBetween that did not fail are all a witness can list
// of it.
func (ks *skey) recordCall(c *scall) {
	calls := append(ks.recentCalls[c.Inv.Process], c)
	if len(calls) > maxBetween+1 {
		calls = slices.Delete(calls, 0, len(calls)-maxBetween-1)
	}
	ks.recentCalls[c.Inv.Process] = calls
}

// dropCall forgets a release or extend that failed: it changed nothing.
func (ks *skey) dropCall(c *scall) {
	calls := ks.recentCalls[c.Inv.Process]
	if i := slices.Index(calls, c); i >= 0 {
		ks.recentCalls[c.Inv.Process] = slices.Delete(calls, i, i+1)
	}
}

// closeGap ends the gap [gs, ge) between holds: its window is counted now,
// or once the attempts in flight in it complete.
func (s *Stream) closeGap(ks *skey, gs, ge int64) {
	g := &sgap{start: gs, end: ge, agg: ks.open}
	for _, c := range ks.acquiring {
		if c.Inv.Time < ge {
			g.waiting = append(g.waiting, c)
		}
	}
	ks.closedAt = s.now
	ks.tie = ks.tie[:0]
	if len(g.waiting) == 0 {
		s.ex.window(ks, g, true)
		return
	}
	ks.pendingGaps = append(ks.pendingGaps, g)
}

// attemptDone counts an acquire's outcome for liveness.
func (ks *skey) attemptDone(c *scall, s *Stream) {
	if i := slices.Index(ks.acquiring, c); i >= 0 {
		ks.acquiring = slices.Delete(ks.acquiring, i, i+1)
	}
	ks.count(c)
	ok := c.Outcome() == history.OK
	end := c.Comp.Time
	keep := ks.pendingGaps[:0]
	for _, g := range ks.pendingGaps {
		if i := slices.Index(g.waiting, c); i >= 0 {
			g.waiting = slices.Delete(g.waiting, i, i+1)
			if !ok && end > g.start {
				g.agg.add(c, end, g.start, false)
			}
		}
		if len(g.waiting) == 0 {
			s.ex.window(ks, g, true)
			continue
		}
		keep = append(keep, g)
	}
	ks.pendingGaps = keep
	if ok {
		return
	}
	gs, known := s.gapStart(ks)
	switch {
	case !known || end <= gs:
	case c.Inv.Time == s.now:
		if len(ks.tie) == 0 {
			s.tieKeys = append(s.tieKeys, ks)
		}
		ks.tie = append(ks.tie, c)
	default:
		ks.open.add(c, end, gs, false)
	}
}

// flushTie adds the attempts invoked and completed at the instant just
// passed to the open gap, unless a hold started at that instant.
func (s *Stream) flushTie(ks *skey) {
	if len(ks.tie) == 0 {
		return
	}
	if ks.closedAt != s.now {
		gs, known := s.gapStart(ks)
		for _, c := range ks.tie {
			if known && c.Comp.Time > gs {
				ks.open.add(c, c.Comp.Time, gs, false)
			}
		}
	}
	ks.tie = ks.tie[:0]
}

// gapStart is where the gap after the key's last hold starts, when it is
// known: every hold's end is.
func (s *Stream) gapStart(ks *skey) (int64, bool) {
	if !ks.anyHold {
		return 0, true
	}
	gs := ks.resolvedMax
	for _, c := range ks.cands {
		s.tr.Expire(c, s.now)
		if !c.Resolved() {
			return 0, false
		}
		gs = max(gs, c.End)
	}
	return gs, true
}

// summary counts failed acquires recorded as a count: in the key's
// tallies, the operation counts, and the gap open since the key's last
// hold. A summary spans up to a second (history.SummaryBucket), so the
// window it adds to is exact to that second: the failures are counted in
// it, from its start or the summary's first invoke, whichever is later,
// when the summary's last failure came after the gap began.
func (s *Stream) summary(op *history.Op) {
	s.nf.summary(op)
	ks, n := s.key(op.Key), int(op.Value.Count)
	ks.kl.AcquireAttempts += n
	ks.kl.AcquireFail += n
	s.stats.ops += n
	s.stats.summarized += n
	s.stats.countN(history.Acquire, string(history.Fail), n)
	from, to := *op.Value.From, *op.Value.To
	if gs, known := s.gapStart(ks); known && to > gs {
		g := &ks.open
		g.attempts += n
		g.failed += n
		g.first = min(g.first, max(from, gs))
		g.lastEnd = max(g.lastEnd, to)
	}
}

func (ks *skey) count(c *scall) { ks.kl.count(c.Outcome()) }

// liveState is the liveness checker's running tally.
type liveState struct {
	windows int
	top     []Window
}

// window counts the window of a closed gap, if anyone tried in it.
func (e *exState) window(ks *skey, g *sgap, recovered bool) *Window {
	if g.agg.failed+g.agg.unknown == 0 {
		return nil
	}
	w := Window{Key: ks.name, Start: g.agg.first, End: g.end, Attempts: g.agg.attempts, Failed: g.agg.failed,
		Unknown: g.agg.unknown, Recovered: recovered}
	w.Duration = max(0, w.End-w.Start)
	ks.kl.Windows++
	ks.kl.Longest = max(ks.kl.Longest, w.Duration)
	e.live.windows++
	e.live.top = insertTopOrdered(e.live.top, w)
	return &w
}

// insertTopOrdered keeps the topWindows longest windows, longest first;
// among equal durations by key and then time, which is the order the
// in-memory oracle meets them in.
func insertTopOrdered(top []Window, w Window) []Window {
	less := func(a, b Window) bool { // a before b
		if a.Duration != b.Duration {
			return a.Duration > b.Duration
		}
		if a.Key != b.Key {
			return a.Key < b.Key
		}
		return a.Start < b.Start
	}
	i := sort.Search(len(top), func(i int) bool { return less(w, top[i]) })
	if i >= topWindows {
		return top
	}
	top = slices.Insert(top, i, w)
	if len(top) > topWindows {
		top = top[:topWindows]
	}
	return top
}

// liveness finishes the windows: the gaps waiting on attempts that never
// completed, and the gap after each key's last hold.
func (s *Stream) liveness() *LivenessResult {
	r := &LivenessResult{StuckAfter: int64(s.opts.StuckAfter)}
	end := s.stats.last
	// Attempts must reach this close to the end for a key to count as stuck
	// rather than abandoned by the workload.
	slack := max(int64(time.Second), end/10)
	names := make([]string, 0, len(s.keys))
	for k, ks := range s.keys {
		if ks.kl.AcquireAttempts > 0 || len(ks.acquiring) > 0 {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		ks := s.keys[k]
		for _, c := range ks.acquiring {
			ks.count(c)
		}
		for _, g := range ks.pendingGaps {
			for _, c := range g.waiting {
				if end > g.start {
					g.agg.add(c, end, g.start, true)
				}
			}
			s.ex.window(ks, g, true)
		}
		s.flushTie(ks)
		var last *Window
		if gs, _ := s.gapStart(ks); gs != Never {
			g := &sgap{start: gs, agg: ks.open}
			for _, c := range ks.acquiring {
				if end > gs {
					g.agg.add(c, end, gs, true)
				}
			}
			g.end = min(g.agg.lastEnd, end)
			last = s.ex.window(ks, g, false)
		}
		kl := ks.kl
		kl.rate()
		if last != nil && last.End >= end-slack && end-last.Start >= int64(s.opts.StuckAfter) {
			r.StuckKeys = append(r.StuckKeys, StuckKey{Key: k, Since: last.Start, For: end - last.Start})
		}
		r.addKey(kl)
	}
	r.Windows, r.Top = s.ex.live.windows, s.ex.live.top
	r.finish()
	return r
}

// exclusionResult completes the witnesses, now that every end is known.
func (s *Stream) exclusionResult() *ExclusionResult {
	r := &ExclusionResult{Holds: s.ex.holds, EmptyHolds: s.ex.empty, Count: s.ex.count, Incidents: s.ex.incidents}
	for _, ks := range s.keys {
		if ks.anyHold {
			r.Keys++
		}
	}
	r.Valid = r.Count == 0
	for _, w := range s.ex.witnesses {
		r.Violations = append(r.Violations, s.violation(w))
	}
	return r
}

func (s *Stream) violation(w *switness) Violation {
	first := w.cands[0]
	for _, c := range w.cands[1:] {
		if c.End > first.End {
			first = c
		}
	}
	second := w.second
	v := Violation{Key: second.Key, First: first.Hold, Second: second.Hold,
		OverlapStart: second.Start, OverlapEnd: min(first.End, second.End)}
	end := v.OverlapEnd
	if end == Never {
		end = max(s.stats.last, v.OverlapStart)
	}
	v.Overlap = end - v.OverlapStart
	v.Between = s.between(first, second, w.calls)
	from := v.OverlapStart
	if ttl := s.opts.TTL; ttl > 0 {
		from = min(from, first.Start-int64(ttl))
	}
	for _, f := range s.faults.kept {
		if f.Start <= end && f.End >= from {
			v.Faults = append(v.Faults, *f)
		}
	}
	v.OverClaim = overClaimOf(&first.Hold, first.TTL)
	v.Story = v.story(s.opts.KeyLossFaults, s.opts.CutOffFaults, s.opts.Faults)
	return v
}

// between lists the calls a witness kept that may explain it.
func (s *Stream) between(first, second *hrec, calls []*scall) []Event {
	calls = slices.Clone(calls)
	sortCalls(calls)
	var out []Event
	for i := len(calls) - 1; i >= 0 && len(out) < maxBetween; i-- {
		c := calls[i]
		inv := &c.Inv
		end := s.stats.last
		if c.Done {
			end = c.Comp.Time
		}
		// An unknown outcome may take effect later.
		unknown := c.Done && c.Comp.Type == history.Info
		if inv.Time > second.Start || c.Outcome() == history.Fail || (!unknown && !mayHaveTouched(&first.Hold, &second.Hold, inv.Process, end)) {
			continue
		}
		var comp *history.Op
		if c.Done {
			comp = &c.Comp
		}
		out = append(out, callEvent(inv, comp, c.LeaseEnd))
	}
	slices.Reverse(out) // oldest first reads better
	return out
}

func sortCalls(calls []*scall) {
	slices.SortFunc(calls, func(a, b *scall) int { return cmp.Compare(a.Seq, b.Seq) })
}

// faultState keeps the faults a witness may still list, the open ones, and
// every clock fault (the lease model asks about them; there are few).
type faultState struct {
	kept  []*Fault
	open  FaultPairer
	clock []*Fault
}

// nemesis applies a nemesis event: its fault, and the crashes that end
// beliefs.
func (s *Stream) nemesis(op *history.Op) {
	s.stats.nemesis++
	s.fo.primary(op, s.stats.last)
	if f, _ := s.faults.open.Apply(op); f != nil {
		s.faults.kept = append(s.faults.kept, f)
		s.eg.fault(f)
		if s.opts.isClockFault(f.Name) {
			s.faults.clock = append(s.faults.clock, f)
		}
	}
	s.tr.Crash(op)
	s.nf.nemesis(op)
}

// prune drops the faults that ended before any witness still to be found
// can reach: a witness lists faults from a TTL before its first hold's
// start, and that hold is one still believed or yet to come.
func (fs *faultState) prune(s *Stream) {
	horizon := s.now
	for _, h := range s.undecided {
		horizon = min(horizon, h.Start)
	}
	for _, ks := range s.keys {
		for _, c := range ks.cands {
			horizon = min(horizon, c.Start)
		}
	}
	for _, w := range s.ex.witnesses {
		for _, c := range w.cands {
			horizon = min(horizon, c.Start)
		}
	}
	horizon -= int64(s.opts.TTL)
	keep := fs.kept[:0]
	for _, f := range fs.kept {
		if f.End >= horizon {
			keep = append(keep, f)
		}
	}
	clear(fs.kept[len(keep):])
	fs.kept = keep
}
