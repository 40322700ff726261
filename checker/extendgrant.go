package checker

import (
	"fmt"
	"slices"
	"time"

	"github.com/lockjepsen/lockjepsen/history"
)

// An ok extend with another client's grant inside it (DESIGN.md, "Judging
// from first principles"). Take an ok extend E of hold A (invoked at ei,
// answered at ec, asking for a TTL T) and an ok grant G of the same key to
// another process's hold B (invoked at bi, answered at bc), where A's own
// grant was answered before B's acquire was invoked, so that A's key was
// set before G took effect. A compare-and-extend takes effect at one
// instant e in [ei, ec]; G at one instant g in [bi, bc].
//
//   - If e > g: G's SET NX found no key at g, so A's key was gone by then,
//     and nothing sets A's token again (A's only grant came before); a
//     compare at e finds B's key or none, and cannot answer ok.
//   - If e < g: E left A's key to live until e + T at least, and g − e <
//     bc − ei. When bc − ei < T − tolerance, A's key still lived at g
//     unless something deleted it, and G's SET NX could not succeed.
//
// So when bc − ei < T − tolerance neither order is valid, unless the key
// was deleted or its state restored, which the check rules out before
// judging: a release on the key (anyone's, ok or unknown when the pair
// is judged: A's own release, or another client's, which is its own
// finding; a failed one deleted nothing) invoked before bc and not
// answered before A's acquire was invoked; a fault that loses
// or restores keys, moves a node's clock or cuts a node off (the key-loss,
// clock and cut-off faults) active between A's acquire and the later of ec
// and bc, or servers that renew leases themselves; holds granted by
// disjoint nodes (two primaries in a failover). On Redlock the argument
// holds on a node both majorities share (a quorum of N/2+1 granted G and
// a quorum extended E, and any two quorums intersect), which fails for a
// grant by a minority of the nodes: that is its own finding
// (minority-grant), and such a pair is not judged. The tolerance is the
// lease model's (the larger of 1 ms and 1% of T): Redis counts expiry in
// milliseconds. The argument also takes later extends of A not to shorten
// its TTL, as every workload's extends ask for the same TTL.
//
// Only extends invoked less than T after G was answered are paired with
// it: memory stays bounded, and an extend that late follows earlier ones
// that are judged. Extends and grants with unknown outcomes are never
// judged.

// ExtendOverGrant is an ok extend with another client's grant inside it.
type ExtendOverGrant struct {
	Key string `json:"key"`
	// Extend is the ok extend: its process, token, invoke and answer;
	// TTL what it asked for.
	Process int    `json:"process"`
	Token   string `json:"token,omitempty"`
	Invoke  int64  `json:"invoke"`
	At      int64  `json:"at"`
	Index   int64  `json:"index"`
	TTL     int64  `json:"ttl_ns"`
	// The grant that fell inside it.
	GrantProcess int      `json:"grant_process"`
	GrantToken   string   `json:"grant_token,omitempty"`
	GrantInvoke  int64    `json:"grant_invoke"`
	GrantAt      int64    `json:"grant_at"`
	GrantIndex   int64    `json:"grant_index"`
	GrantNodes   []string `json:"grant_nodes,omitempty"`
	Story        string   `json:"story"`
}

// ExtendGrantResult is the check's verdict.
type ExtendGrantResult struct {
	// Pairs counts the ok extends and other clients' ok grants close
	// enough to judge; Excused those of them a release, a fault or
	// disjoint nodes left unjudged.
	Pairs   int `json:"pairs"`
	Excused int `json:"excused,omitempty"`
	// Count is the extends with a grant inside them; Examples the first
	// MaxViolations, in invoke order.
	Count    int               `json:"count"`
	Examples []ExtendOverGrant `json:"examples,omitempty"`
}

// egExt is an ok extend as the check keeps it, with its hold's grant.
type egExt struct {
	seq, idx         int64
	proc             int
	key, token       string
	ei, ec, ttl      int64
	holdInv, holdEnd int64 // A's acquire's invoke and answer
	nodes            []string
	flagged          bool
}

// egGrant is an ok grant as the check keeps it.
type egGrant struct {
	idx    int64
	proc   int
	token  string
	bi, bc int64
	nodes  []string
}

// egRelease is a release call: comp is Never while it has no answer.
type egRelease struct{ inv, comp int64 }

// egWorld is what a pair is judged against: the key's releases and the
// faults seen so far, and the options.
type egWorld struct {
	releases []egRelease
	// prunedComp is the latest answer among releases no longer kept
	// (all invoked before any grant still judged).
	prunedComp int64
	faults     []*Fault
	opts       Options
}

// inWindow reports whether e and g are a pair to judge: another process,
// A's grant answered before G's acquire was invoked, distinct tokens, and
// −T < bc − ei.
func (e *egExt) inWindow(g *egGrant) bool {
	if g.proc == e.proc || g.bi <= e.holdEnd || (e.token != "" && e.token == g.token) {
		return false
	}
	return g.bc-e.ei > -e.ttl && g.bc-e.ei < e.ttl
}

// violates reports whether the pair has no valid order: bc − ei < T −
// tolerance.
func (e *egExt) violates(g *egGrant) bool {
	return g.bc-e.ei < e.ttl-int64(LeaseTolerance(time.Duration(e.ttl)))
}

// excuse says why the pair may have a valid order after all ("" if
// nothing does).
func (w *egWorld) excuse(e *egExt, g *egGrant) string {
	switch {
	case w.opts.ServerRenewsLeases != "":
		return w.opts.ServerRenewsLeases
	case len(e.nodes) > 0 && len(g.nodes) > 0 && !intersects(e.nodes, g.nodes):
		return "the holds were granted by disjoint nodes"
	case w.opts.MajorityOf > 0 && (minority(g.nodes, w.opts.MajorityOf) || minority(e.nodes, w.opts.MajorityOf)):
		return "a hold was granted by a minority of the nodes"
	case w.prunedComp > e.holdInv:
		return "a release may have deleted the key"
	}
	for _, r := range w.releases {
		if r.inv < g.bc && r.comp > e.holdInv {
			return "a release may have deleted the key"
		}
	}
	until := max(e.ec, g.bc)
	for _, f := range w.faults {
		if f.Start <= until && f.End >= e.holdInv && w.opts.restores(f.Name) {
			return fmt.Sprintf("a %s may have lost or restored a key", f.Name)
		}
	}
	return ""
}

// restores reports whether a fault can take or restore a key, or move
// the time it expires by: a key-loss, clock or cut-off fault.
func (o Options) restores(name string) bool {
	return slices.Contains(o.KeyLossFaults, name) || o.isClockFault(name) || slices.Contains(o.CutOffFaults, name)
}

// minority reports whether nodes, when known, are fewer than a majority
// of n.
func minority(nodes []string, n int) bool {
	return len(nodes) > 0 && len(nodes) < n/2+1
}

// judge takes a pair: it counts it, and flags e when it has no valid
// order; true when e is newly flagged.
func (r *ExtendGrantResult) judge(w *egWorld, e *egExt, g *egGrant) bool {
	if !e.inWindow(g) {
		return false
	}
	r.Pairs++
	if !e.violates(g) {
		return false
	}
	if w.excuse(e, g) != "" {
		r.Excused++
		return false
	}
	if e.flagged {
		return false
	}
	e.flagged = true
	r.Count++
	return true
}

// extendOverGrant is the witness of a flagged pair.
func extendOverGrant(e *egExt, g *egGrant) ExtendOverGrant {
	x := ExtendOverGrant{Key: e.key, Process: e.proc, Token: e.token, Invoke: e.ei, At: e.ec, Index: e.idx, TTL: e.ttl,
		GrantProcess: g.proc, GrantToken: g.token, GrantInvoke: g.bi, GrantAt: g.bc, GrantIndex: g.idx, GrantNodes: g.nodes}
	x.Story = fmt.Sprintf("process %d's extend of %s (token %s), sent at %s with a TTL of %s, answered ok at %s, "+
		"while process %d's grant fell inside it (asked at %s, granted at %s%s, %s after the extend was sent): "+
		"either the extend came after the grant, when the key was no longer its own, or the key it extended lived past the grant; "+
		"a compare-and-extend allows neither (an extend answered ok while process %d's grant fell inside it: "+
		"an extend that reads the token, then sets the TTL in a second command, extended the next holder's key)",
		e.proc, e.key, e.token, fmtT(e.ei), fmtD(e.ttl), fmtT(e.ec), g.proc, fmtT(g.bi), fmtT(g.bc), grantedBy(g.nodes), fmtD(g.bc-e.ei), g.proc)
	return x
}

func grantedBy(nodes []string) string {
	if len(nodes) == 0 {
		return ""
	}
	return fmt.Sprintf(" by %v", nodes)
}

// extendGrantMechanisms are the check's findings, under the lock's
// dishonest extends.
func extendGrantMechanisms(r *ExtendGrantResult) []Mechanism {
	if r == nil || r.Count == 0 || len(r.Examples) == 0 {
		return nil
	}
	return []Mechanism{{Kind: MechDishonestExtend, Cause: CauseGrantInsideExtend, Count: r.Count, Example: r.Examples[0].Story,
		Says: "an extend answered ok while another client's grant fell inside it"}}
}

// CauseGrantInsideExtend narrows a dishonest extend: another client was
// granted the key inside the extend's TTL.
const CauseGrantInsideExtend = "grant-inside-extend"

// extendOf is the kept form of an ok extend c of hold h (nil when it is
// not one to judge).
func extendOf(c *Call, h *Hold) *egExt {
	if c.Inv.F != history.Extend || c.Outcome() != history.OK || h == nil || c.Inv.Value == nil || c.Inv.Value.TTL <= 0 {
		return nil
	}
	token := c.Inv.Value.Token
	if token == "" {
		token = h.Token
	}
	return &egExt{seq: c.Seq, idx: c.Comp.Index, proc: c.Inv.Process, key: c.Inv.Key, token: token,
		ei: c.Inv.Time, ec: c.Comp.Time, ttl: c.Inv.Value.TTL, holdInv: h.Invoke, holdEnd: h.Start, nodes: h.Nodes}
}

// grantOf is the kept form of an ok acquire c (nil when it is not one).
func grantOf(c *Call) *egGrant {
	if c.Inv.F != history.Acquire || c.Outcome() != history.OK {
		return nil
	}
	g := &egGrant{idx: c.Comp.Index, proc: c.Inv.Process, bi: c.Inv.Time, bc: c.Comp.Time}
	if v := c.Comp.Value; v != nil {
		g.token, g.nodes = v.Token, v.Nodes
	}
	return g
}

// found reports whether the check flagged an extend.
// extendGrantVerdict: an ok extend with another client's grant inside it
// makes the run unsafe, with no overlap needed.
func extendGrantVerdict(r *Results) string {
	if r.ExtendGrants.found() {
		return VerdictUnsafe
	}
	return ""
}

// extendGrantAnswer names the lock's mechanisms the extends broke.
func extendGrantAnswer(r *Results, a *Answers) {
	a.Mechanisms = append(a.Mechanisms, extendGrantMechanisms(r.ExtendGrants)...)
}

func (r *ExtendGrantResult) found() bool { return r != nil && r.Count > 0 }

// headline names the finding in one sentence.
func (r *ExtendGrantResult) headline() string {
	return fmt.Sprintf("%d %s answered ok while another client's grant fell inside %s: %s", r.Count,
		plural(r.Count, "extend", "extends"), plural(r.Count, "it", "them"), r.Examples[0].Story)
}
