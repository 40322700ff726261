package checker

import (
	"slices"

	"github.com/lockjepsen/lockjepsen/history"
)

// egState is the extend-over-grant check (extendgrant.go) over calls as
// they complete: each pair is judged when the later of the two is
// answered, against what was seen by then.
type egState struct {
	r      ExtendGrantResult
	opts   Options
	keys   map[string]*egKey
	faults []*Fault // every fault that can lose or restore a key (few)
	maxTTL int64
	seqs   []int64 // the invoke order of the kept examples
	// world is the key's releases as a pair is judged against them,
	// built once per answered call (they do not change while its pairs
	// are judged) in a buffer kept between calls: built per pair, it was
	// most of the check's time on a long history.
	world egWorld
}

// egKey is one key's extends that a grant to come may fall inside, its
// grants that an extend to come may hold, and its releases.
type egKey struct {
	exts   []*egExt
	grants []*egGrant
	rels   []*Call
	// prunedComp is the latest answer of a release no longer kept.
	prunedComp int64
}

func newEgState(opts Options) *egState { return &egState{opts: opts, keys: map[string]*egKey{}} }

func (st *egState) key(k string) *egKey {
	return entry(st.keys, k, func(string) *egKey { return &egKey{} })
}

func (st *egState) retained() int {
	n := 0
	for _, k := range st.keys {
		n += len(k.exts) + len(k.grants) + len(k.rels)
	}
	return n
}

// fault keeps a fault that can lose or restore a key.
func (st *egState) fault(f *Fault) {
	if st.opts.restores(f.Name) {
		st.faults = append(st.faults, f)
	}
}

// release keeps a release at its invoke.
func (st *egState) release(c *Call) {
	if c.Inv.F == history.Release {
		k := st.key(c.Inv.Key)
		k.rels = append(k.rels, c)
	}
}

// called takes an answered call; h is the hold an extend refers to.
func (st *egState) called(c *Call, h *Hold) {
	if e := extendOf(c, h); e != nil {
		st.maxTTL = max(st.maxTTL, e.ttl)
		k := st.key(e.key)
		st.worldOf(k)
		for _, g := range k.grants {
			st.judge(e, g)
		}
		k.exts = append(k.exts, e)
	}
	if g := grantOf(c); g != nil {
		k := st.key(c.Inv.Key)
		st.worldOf(k)
		for _, e := range k.exts {
			st.judge(e, g)
		}
		k.grants = append(k.grants, g)
	}
}

// worldOf sets st.world to key k's releases, the ones that did not
// surely fail.
func (st *egState) worldOf(k *egKey) {
	w := &st.world
	*w = egWorld{releases: w.releases[:0], prunedComp: k.prunedComp, faults: st.faults, opts: st.opts}
	for _, c := range k.rels {
		if c.Outcome() != history.Fail || !c.Done {
			w.releases = append(w.releases, egRelease{inv: c.Inv.Time, comp: releaseAnswer(c)})
		}
	}
}

// judge judges one pair against st.world, which worldOf set for its key.
func (st *egState) judge(e *egExt, g *egGrant) {
	if !st.r.judge(&st.world, e, g) {
		return
	}
	i, keep := keepFirst(&st.seqs, e.seq)
	if keep {
		st.r.Examples = slices.Insert(st.r.Examples, i, extendOverGrant(e, g))[:len(st.seqs)]
	}
}

// releaseAnswer is a release's answer, Never while it has none.
func releaseAnswer(c *Call) int64 {
	if c.Done {
		return c.Comp.Time
	}
	return Never
}

// prune drops what no pair to come can need. An extend answered later
// pairs with grants answered less than its TTL before its invoke, which
// is now or an extend in flight's; a grant to come with extends invoked
// less than their TTL before it is answered, which is now or later. A
// release answered before every grant still kept is summed up in
// prunedComp (it was invoked before any of them).
func (st *egState) prune(now int64, inFlight []*Call) {
	horizon := now - st.maxTTL
	for _, c := range inFlight {
		if c.Inv.F == history.Extend && c.Inv.Value != nil {
			horizon = min(horizon, c.Inv.Time-max(st.maxTTL, c.Inv.Value.TTL))
		}
	}
	for name, k := range st.keys {
		k.exts = slices.DeleteFunc(k.exts, func(e *egExt) bool { return e.ei+e.ttl <= now })
		k.grants = slices.DeleteFunc(k.grants, func(g *egGrant) bool { return g.bc < horizon })
		k.rels = slices.DeleteFunc(k.rels, func(c *Call) bool {
			if c.Done && c.Comp.Time < horizon {
				if c.Comp.Type != history.Fail {
					k.prunedComp = max(k.prunedComp, c.Comp.Time)
				}
				return true
			}
			return false
		})
		if len(k.exts)+len(k.grants)+len(k.rels) == 0 && k.prunedComp == 0 {
			delete(st.keys, name)
		}
	}
}

func (st *egState) result() *ExtendGrantResult {
	r := st.r
	return &r
}
