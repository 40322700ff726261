package checker

import (
	"fmt"
	"sort"
	"strings"

	"github.com/lockjepsen/lockjepsen/history"
)

// PrimaryEvent is the nemesis event f of the primary monitor on Sentinel
// and Redis Cluster: phase start names the node the sentinels (or the
// cluster's nodes, for the first lock key's slot) call primary from then
// on.
const PrimaryEvent = "primary"

// FailoverResult says what failovers did to leases: which believed holds
// outlived the primary that granted them, and whether fencing tokens went
// backwards (an INCR that did not replicate before the failover).
type FailoverResult struct {
	// Checked is set when the history has primary events or fences.
	Checked bool `json:"checked"`
	// Key is the key whose primary the events follow (Redis Cluster: the
	// primary of that key's slot), "" when one primary serves every key
	// (Sentinel); holds of other keys are not judged against it.
	Key       string    `json:"key,omitempty"`
	Failovers int       `json:"failovers"`
	Primaries []Primary `json:"primaries,omitempty"`
	// Stranded are holds still believed when the primary moved away from
	// the node that granted them; Lost those of them that another grant
	// on a new primary overlapped, which proves the key was missing there.
	Stranded      int            `json:"stranded"`
	Lost          int            `json:"lost"`
	StrandedHolds []StrandedHold `json:"stranded_holds,omitempty"`
	// Deposed counts grants made by a node while the system named
	// another primary: the old primary of a split brain, still serving
	// the clients that reach it.
	Deposed      int            `json:"deposed"`
	DeposedHolds []StrandedHold `json:"deposed_holds,omitempty"`
	// FenceRegressions count grants whose fence is not above every fence
	// granted before them on the key.
	FenceRegressions int               `json:"fence_regressions"`
	FenceExamples    []FenceRegression `json:"fence_examples,omitempty"`
}

// Primary is a span during which the system named one node primary.
type Primary struct {
	Node  string `json:"node"`
	Start int64  `json:"start"`
	End   int64  `json:"end"`
}

// StrandedHold is a hold that outlived its primary.
type StrandedHold struct {
	Hold       Hold   `json:"hold"`
	FailoverAt int64  `json:"failover_at"`
	NewPrimary string `json:"new_primary"`
	Lost       bool   `json:"lost"`
	Story      string `json:"story"`
}

// FenceRegression is a grant whose fence did not increase.
type FenceRegression struct {
	Earlier Hold   `json:"earlier"`
	Later   Hold   `json:"later"`
	Story   string `json:"story"`
}

const maxFailoverExamples = 20

// follows reports whether the primary events are about key.
func (r *FailoverResult) follows(key string) bool { return r.Key == "" || r.Key == key }

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

func by(h *Hold) string {
	if len(h.Nodes) == 0 {
		return ""
	}
	return " by " + strings.Join(h.Nodes, ", ")
}

// Failovers analyses a history on its own.
func Failovers(ops []history.Op) *FailoverResult { return scan(ops).failover() }
