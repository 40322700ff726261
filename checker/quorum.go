package checker

import (
	"fmt"
	"slices"
	"strings"

	"github.com/lockjepsen/lockjepsen/history"
)

// On a system whose lock needs a majority of N independent nodes
// (Redlock; Options.MajorityOf), a grant by fewer is a broken promise of
// the lock: two clients can each be granted by a minority at once, and
// the argument that two grants share a node fails. The nodes are those
// the grant's event names (value.nodes): what the lock reported as it
// answered (NodeReporter.GrantedBy, a client's granted_by). They are
// never read back from the servers later: a node killed or restarted
// meanwhile may have lost the key, so a count read then could call a
// majority grant a minority one. A grant that names no nodes is not
// counted.

// CauseMinorityGrant narrows an overlap: one of its holds was granted by
// fewer than a majority of the nodes.
const CauseMinorityGrant = "minority-grant"

// QuorumResult counts the grants by their nodes.
type QuorumResult struct {
	// Nodes is N; a majority is N/2+1.
	Nodes int `json:"nodes"`
	// Grants counts the ok grants that named their nodes; ByNodes them by
	// how many nodes granted; Minority those by fewer than a majority.
	Grants   int         `json:"grants"`
	ByNodes  map[int]int `json:"by_nodes,omitempty"`
	Minority int         `json:"minority"`
	// Example is the first minority grant's story.
	Example string `json:"example,omitempty"`
}

type quorumState struct{ r *QuorumResult }

// newQuorumCheck is the quorum check's state as the Stream composes it.
func newQuorumCheck(opts Options) check { return newQuorumState(opts) }

func newQuorumState(opts Options) *quorumState {
	if opts.MajorityOf <= 0 {
		return &quorumState{}
	}
	return &quorumState{r: &QuorumResult{Nodes: opts.MajorityOf}}
}

// result puts the counts into the results.
func (q *quorumState) result(r *Results) { r.Quorum = q.r }

// called counts an ok grant's nodes.
func (q *quorumState) called(c *Call) {
	if q.r == nil || c.Inv.F != history.Acquire || c.Outcome() != history.OK || c.Comp.Value == nil || len(c.Comp.Value.Nodes) == 0 {
		return
	}
	r, nodes := q.r, c.Comp.Value.Nodes
	r.Grants++
	if r.ByNodes == nil {
		r.ByNodes = map[int]int{}
	}
	r.ByNodes[len(nodes)]++
	if minority(nodes, r.Nodes) {
		if r.Minority++; r.Example == "" {
			r.Example = fmt.Sprintf("process %d's grant of %s at %s, %s", c.Inv.Process, grantedKey(&c.Inv, &c.Comp), fmtT(c.Comp.Time), minorityWords(nodes, r.Nodes))
		}
	}
}

// minorityWords: "granted by n2, n4: 2 of 5 nodes, not a majority".
func minorityWords(nodes []string, n int) string {
	return fmt.Sprintf("granted by %s: %d of %d nodes, not a majority", strings.Join(nodes, ", "), len(nodes), n)
}

// line is the summary's line on the grants' nodes.
func (r *QuorumResult) line() string {
	if r == nil || r.Grants == 0 {
		return ""
	}
	counts := slices.Sorted(func(yield func(int) bool) {
		for k := range r.ByNodes {
			if !yield(k) {
				return
			}
		}
	})
	var parts []string
	for _, k := range counts {
		parts = append(parts, fmt.Sprintf("%d by %d of %d", r.ByNodes[k], k, r.Nodes))
	}
	s := fmt.Sprintf("quorum: %d %s named their nodes (%s)", r.Grants, plural(r.Grants, "grant", "grants"), strings.Join(parts, ", "))
	if r.Minority > 0 {
		s += fmt.Sprintf("; %d by fewer than a majority of %d, e.g. %s", r.Minority, r.Nodes/2+1, r.Example)
	}
	return s
}

// minorityHold is the story of the first of v's holds granted by fewer
// than a majority of q's nodes, "" when neither was.
func minorityHold(v *Violation, q *QuorumResult) string {
	if q == nil {
		return ""
	}
	for _, h := range []*Hold{&v.Second, &v.First} {
		if minority(h.Nodes, q.Nodes) {
			return fmt.Sprintf("process %d's hold of %s (from %s) was %s, so another majority could grant the key at the same time: %s",
				h.Process, h.Key, fmtT(h.Start), minorityWords(h.Nodes, q.Nodes), v.Story)
		}
	}
	return ""
}
