package checker

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/lockjepsen/lockjepsen/history"
)

// foState is the failover check over holds as they are decided and end.
type foState struct {
	r          FailoverResult
	strandedEx []strandedAt // the first maxFailoverExamples in Start order
	fenced     bool
	best       map[string]*hrec // per key, the grant with the highest fence so far
	fences     []fenceAt        // the first maxFailoverExamples in key, then grant, order
	// deposedEx are the first deposed grants, completed at the end, when
	// their ends are known.
	deposedEx []*hrec
}

type strandedAt struct {
	seq int64
	s   StrandedHold
}

type fenceAt struct {
	key            string
	seq            int64
	earlier, later *hrec
	story          string
}

// primary applies a primary monitor event: a span per named primary.
func (fo *foState) primary(op *history.Op, end int64) {
	if op.F != PrimaryEvent || op.Value == nil || op.Value.Phase != "start" || len(op.Value.Targets) == 0 {
		return
	}
	r := &fo.r
	if n := len(r.Primaries); n > 0 {
		r.Primaries[n-1].End = op.Time
		if r.Primaries[n-1].Node != op.Value.Targets[0] {
			r.Failovers++
		}
	}
	r.Primaries = append(r.Primaries, Primary{Node: op.Value.Targets[0], Start: op.Time, End: Never})
	r.Key = op.Key
}

// stranded checks a hold, decided, not empty and ended, against the
// failovers during it: every primary named before its end is known.
func (fo *foState) stranded(h *hrec) {
	r := &fo.r
	if len(h.Nodes) != 1 || len(r.Primaries) < 2 || !r.follows(h.Key) {
		return
	}
	for _, p := range r.Primaries[1:] {
		if p.Start <= h.Start || p.Start >= h.End || p.Node == h.Nodes[0] {
			continue
		}
		s := StrandedHold{Hold: h.Hold, FailoverAt: p.Start, NewPrimary: p.Node, Lost: h.X.lost}
		r.Stranded++
		if s.Lost {
			r.Lost++
		}
		i, _ := slices.BinarySearchFunc(fo.strandedEx, h.Seq, func(x strandedAt, seq int64) int { return cmp.Compare(x.seq, seq) })
		if i >= maxFailoverExamples {
			return
		}
		s.Story = fmt.Sprintf("process %d was granted %s by %s at %s (%s); at %s %s became primary while %d still believed it held the lock",
			h.Process, h.Key, h.Nodes[0], fmtT(h.Start), h.describeAcquire(), fmtT(p.Start), p.Node, h.Process)
		if s.Lost {
			s.Story += "; another client was granted it by a different primary meanwhile: the lease was lost in the failover"
		}
		fo.strandedEx = slices.Insert(fo.strandedEx, i, strandedAt{h.Seq, s})
		if len(fo.strandedEx) > maxFailoverExamples {
			fo.strandedEx = fo.strandedEx[:maxFailoverExamples]
		}
		return
	}
}

// deposed checks a decided, non-empty grant against the primary named at
// its start; counted in the result only if the history names more than
// one primary.
func (fo *foState) deposed(h *hrec) {
	r := &fo.r
	if len(h.Nodes) != 1 || !r.follows(h.Key) {
		return
	}
	for _, p := range r.Primaries {
		if p.Start <= h.Start && h.Start < p.End && p.Node != h.Nodes[0] {
			r.Deposed++
			if len(r.DeposedHolds) < maxFailoverExamples {
				r.DeposedHolds = append(r.DeposedHolds, StrandedHold{FailoverAt: p.Start, NewPrimary: p.Node,
					Story: fmt.Sprintf("process %d was granted %s by %s at %s, while %s was primary (since %s): a deposed primary was still granting locks",
						h.Process, h.Key, h.Nodes[0], fmtT(h.Start), p.Node, fmtT(p.Start))})
				fo.deposedEx = append(fo.deposedEx, h)
			}
			return
		}
	}
}

// fence checks a grant's fence against the key's earlier grants.
func (fo *foState) fence(h *hrec) {
	if h.Fence == nil {
		return
	}
	fo.fenced = true
	if fo.best == nil {
		fo.best = map[string]*hrec{}
	}
	best := fo.best[h.Key]
	if best == nil || *h.Fence > *best.Fence {
		fo.best[h.Key] = h
		return
	}
	fo.r.FenceRegressions++
	at := func(x fenceAt) int {
		if c := cmp.Compare(x.key, h.Key); c != 0 {
			return c
		}
		return cmp.Compare(x.seq, h.Seq)
	}
	i, _ := slices.BinarySearchFunc(fo.fences, 0, func(x fenceAt, _ int) int { return at(x) })
	if i >= maxFailoverExamples {
		return
	}
	story := fmt.Sprintf("process %d was granted %s with fence %d at %s%s, not above fence %d granted to process %d at %s%s: the fencing counter went backwards",
		h.Process, h.Key, *h.Fence, fmtT(h.Start), by(&h.Hold), *best.Fence, best.Process, fmtT(best.Start), by(&best.Hold))
	fo.fences = slices.Insert(fo.fences, i, fenceAt{h.Key, h.Seq, best, h, story})
	if len(fo.fences) > maxFailoverExamples {
		fo.fences = fo.fences[:maxFailoverExamples]
	}
}

func (fo *foState) result(end int64) *FailoverResult {
	r := fo.r
	if n := len(r.Primaries); n > 0 {
		r.Primaries[n-1].End = end
	}
	for i, h := range fo.deposedEx {
		r.DeposedHolds[i].Hold = h.Hold
	}
	if len(r.Primaries) <= 1 {
		r.Deposed, r.DeposedHolds = 0, nil
	}
	for _, s := range fo.strandedEx {
		r.StrandedHolds = append(r.StrandedHolds, s.s)
	}
	for _, f := range fo.fences {
		r.FenceExamples = append(r.FenceExamples, FenceRegression{Earlier: f.earlier.Hold, Later: f.later.Hold, Story: f.story})
	}
	r.Checked = len(r.Primaries) > 0 || fo.fenced
	return &r
}
