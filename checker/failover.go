package checker

import (
	"strings"
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

func by(h *Hold) string {
	if len(h.Nodes) == 0 {
		return ""
	}
	return " by " + strings.Join(h.Nodes, ", ")
}
