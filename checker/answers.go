package checker

import (
	"fmt"
	"slices"
	"strings"

	"github.com/lockjepsen/lockjepsen/history"
)

// A design review must know which of three things to fix, so every run
// answers three questions separately (DESIGN.md, "Two verdicts"):
//
//   - The lock: did something the lock did break its promise? An overlap
//     that a release or extend of another client explains, or that no
//     server-side fault explains; a grant that over-claimed its validity;
//     a release or extend that reported success on a lease that had
//     expired.
//   - The deployment: did a server-side fault take the key from under a
//     lock that did nothing wrong? A restart without fsync, a clock moved
//     forward, a failover to a replica that never saw the key. Any lock on
//     that deployment breaks the same way.
//   - Its use: did the resource suffer although no two holds overlapped?
//     A holder acted after its lease (Kleppmann's pause); only fencing
//     closes it.
//
// The answers are computed from the results alone, so that a stored run
// re-checked later gives the same ones.

// Answer states.
const (
	AnswerUnsafe   = "unsafe"
	AnswerNotFound = "not-found"
)

// Mechanism kinds. The lock's own: overlap, over-claimed-validity,
// dishonest-release, dishonest-extend, never-frees. The deployment's:
// key-lost. The use's: lost-update.
const (
	MechOverlap          = "overlap"
	MechOverClaim        = "over-claimed-validity"
	MechDishonestRelease = "dishonest-release"
	MechDishonestExtend  = "dishonest-extend"
	MechNeverFrees       = "never-frees"
	MechKeyLost          = "key-lost"
	MechLostUpdate       = "lost-update"
)

// Overlap causes (Mechanism.Cause for an overlap).
const (
	CauseForeignRelease = "foreign-release" // another client's release deleted the key
	CauseForeignExtend  = "foreign-extend"  // another client's extend succeeded on the key
	CauseSharedToken    = "shared-token"    // two grants carried one token
	CauseOverClaim      = "over-claim"      // the first holder believed past invoke + TTL
	CauseNoServerCause  = "no-server-cause" // no server-side fault explains it
	CauseFailover       = "failover"        // granted by two different primaries
)

// Answers are a run's three answers and the mechanisms behind them.
type Answers struct {
	Lock       string `json:"lock"`
	Deployment string `json:"deployment"`
	Use        string `json:"use"`
	// Mechanisms are the lock's own broken promises, each distinct one
	// once; Losses the deployment's, by cause; Damage the use's.
	Mechanisms []Mechanism `json:"mechanisms,omitempty"`
	Losses     []Mechanism `json:"losses,omitempty"`
	Damage     []Mechanism `json:"damage,omitempty"`
}

// Mechanism is one way a promise broke, with how often and an example.
type Mechanism struct {
	Kind string `json:"kind"`
	// Cause narrows an overlap or a lost key: who or what took the key.
	Cause string `json:"cause,omitempty"`
	Count int    `json:"count"`
	// Says is the mechanism in words, for a verdict ("a release deleted
	// another client's key"); Example is the first witness's story.
	Says    string `json:"says"`
	Example string `json:"example,omitempty"`
}

// answer classifies a run's findings. keyLoss names the faults that can
// take a key from a correct lock by themselves; cutOff those that keep a
// node's writes from the rest of its cluster (Options).
func answer(r *Results, keyLoss, cutOff []string, fm FaultMeanings) *Answers {
	a := &Answers{Lock: AnswerNotFound, Deployment: AnswerNotFound, Use: AnswerNotFound}
	if r.Exclusion != nil {
		for i := range r.Exclusion.Violations {
			v := &r.Exclusion.Violations[i]
			if story := minorityHold(v, r.Quorum); story != "" && v.OverClaim == 0 && !v.sharesToken() {
				a.Mechanisms = addMechanism(a.Mechanisms, MechOverlap, CauseMinorityGrant, "a hold was granted by fewer than a majority of the nodes", story, 1)
			} else if cause, lock := classifyOverlap(v, r.Exclusion.Violations, keyLoss, cutOff, fm); lock {
				a.Mechanisms = addMechanism(a.Mechanisms, MechOverlap, cause, overlapSays(cause), v.Story, 1)
			} else {
				a.Losses = addMechanism(a.Losses, MechKeyLost, cause, lossSays(cause), v.Story, 1)
			}
		}
	}
	a.Mechanisms = append(a.Mechanisms, leaseMechanisms(r.Lease)...)
	for _, k := range checks {
		if k.answer != nil {
			k.answer(r, a)
		}
	}
	if res := r.Resource; res != nil && res.Checked && !res.Valid && (r.Exclusion == nil || r.Exclusion.Count == 0) {
		a.Damage = append(a.Damage, useDamage(res))
	}
	if len(a.Mechanisms) > 0 {
		a.Lock = AnswerUnsafe
	}
	if len(a.Losses) > 0 {
		a.Deployment = AnswerUnsafe
	}
	if len(a.Damage) > 0 {
		a.Use = AnswerUnsafe
	}
	return a
}

// classifyOverlap decides whose an overlap is: the lock's (true), with
// its cause, or the deployment's (false), with the fault that took the
// key. The lock's own evidence comes first: a fault in the window does
// not excuse a release that deleted another client's key.
func classifyOverlap(v *Violation, all []Violation, keyLoss, cutOff []string, fm FaultMeanings) (cause string, lock bool) {
	switch {
	case v.OverClaim > 0:
		return CauseOverClaim, true
	case v.sharesToken():
		return CauseSharedToken, true
	case cutOffThroughout(v, cutOff) != nil:
		// Before the releases: one that completed between the grants
		// (a slow release of an expired lease, under load) acted on a
		// node whose writes never reached the second grant's.
		return CauseFailover, false
	}
	// On a node that lost no key, a key lost elsewhere excuses no call.
	excusable := v.unhurtNode(keyLoss, fm) == ""
	for _, e := range v.Between {
		// The first holder's own calls from its acquire on are its own;
		// an earlier one (a stale release of its previous hold) may have
		// deleted the second holder's key before it asked.
		own := e.Process == v.First.Process && e.Time >= v.First.Invoke
		if e.Type != history.OK || own || (excusable && chained(v, e, all)) {
			continue
		}
		if excusable && e.followsKeyLoss(&v.First) {
			continue // a restart, a clock jump, a failover took a key first
		}
		if e.F == history.Release {
			return CauseForeignRelease, true
		}
		return CauseForeignExtend, true
	}
	if disjoint(v.First.Nodes, v.Second.Nodes) {
		return CauseFailover, false
	}
	for _, f := range v.Faults {
		if slices.Contains(keyLoss, f.Name) && (len(f.Targets) == 0 || len(v.First.Nodes) == 0 || intersects(f.Targets, v.First.Nodes)) {
			return f.Name, false
		}
	}
	return CauseNoServerCause, true
}

// chained reports whether e, another client's ok release or extend
// between the first hold's start and the second's, belongs to a hold that
// itself overlapped the first one: a key the deployment lost was granted
// to that client, which then released its own key. Such a release is a
// consequence of the loss, not evidence against the lock.
func chained(v *Violation, e Event, all []Violation) bool {
	for i := range all {
		w := &all[i]
		if w.Key == v.Key && w.First.Process == v.First.Process && w.First.Start == v.First.Start &&
			w.Second.Process == e.Process && w.Second.Start <= e.Invoked {
			return true
		}
	}
	return false
}

// cutOffThroughout is the fault that cut the first hold's node off from
// the rest of its cluster (isolate) from the first acquire's invoke until
// the second grant, when two primaries granted the holds (disjoint); nil
// when there is none, and when the lock's own doing explains the overlap
// first (an over-claimed validity, a token both holds share), so that the
// story and the mechanism name the same cause. The first's key was
// written while its node was cut off, and the second's node was promoted
// before the cut healed or was a primary already, so it never held that
// key: no release or extend anywhere took it from there.
//
// What this cannot see: a fault's stop is recorded once the heal has
// returned, so a replica that resynced and was promoted inside the heal
// itself would have had the key; and of the earlier holds that overlap a
// grant, the witness is the one believed longest (Stream.violation), so a
// release that broke a hold of the new primary's is counted under the
// failover when a cut-off hold outlasts it. Both need the failover and
// the overlap within moments of each other.
func cutOffThroughout(v *Violation, cutOff []string) *Fault {
	if v.OverClaim > 0 || v.sharesToken() || !disjoint(v.First.Nodes, v.Second.Nodes) {
		return nil
	}
	for i := range v.Faults {
		f := &v.Faults[i]
		if slices.Contains(cutOff, f.Name) && slices.Contains(f.Targets, v.First.Nodes[0]) &&
			f.Start <= v.First.Invoke && f.End >= v.Second.Start {
			return f
		}
	}
	return nil
}

// sharesToken: one token was given to both grants.
func (v *Violation) sharesToken() bool {
	return v.First.Token != "" && v.First.Token == v.Second.Token
}

// disjoint: both holds were granted by single nodes, and different ones
// (two primaries of one Sentinel or Cluster system).
func disjoint(a, b []string) bool {
	return len(a) == 1 && len(b) == 1 && a[0] != b[0]
}

func intersects(a, b []string) bool {
	return slices.ContainsFunc(a, func(s string) bool { return slices.Contains(b, s) })
}

func addMechanism(ms []Mechanism, kind, cause, says, example string, n int) []Mechanism {
	i := slices.IndexFunc(ms, func(m Mechanism) bool { return m.Kind == kind && m.Cause == cause })
	if i < 0 {
		return append(ms, Mechanism{Kind: kind, Cause: cause, Count: n, Says: says, Example: example})
	}
	ms[i].Count += n
	return ms
}

func overlapSays(cause string) string {
	switch cause {
	case CauseForeignRelease:
		return "a release deleted another client's key"
	case CauseForeignExtend:
		return "an extend succeeded on another client's key"
	case CauseSharedToken:
		return "two grants carried the same token"
	case CauseOverClaim:
		return "a holder believed past any key the server could keep"
	}
	return "two clients held the lock at once with no server-side fault to explain it"
}

func lossSays(cause string) string {
	if cause == CauseFailover {
		return "a failover granted the key again on a new primary while the old primary's holder still believed"
	}
	return fmt.Sprintf("%s took the key from a holder that did nothing wrong", cause)
}

// leaseMechanisms are the lease model's findings: over-claimed grants and
// extends, dishonest releases and extends, each with its first story.
func leaseMechanisms(l *LeaseResult) []Mechanism {
	if l == nil {
		return nil
	}
	var out []Mechanism
	if l.OverClaims > 0 && len(l.OverClaimed) > 0 {
		worst := slices.MaxFunc(l.OverClaimed, func(a, b OverClaim) int { return int(a.Margin - b.Margin) })
		out = append(out, Mechanism{Kind: MechOverClaim, Count: l.OverClaims,
			Says:    fmt.Sprintf("a grant claimed up to %s more validity than the TTL allows", fmtD(worst.Margin)),
			Example: l.OverClaimed[0].Story})
	}
	counts := map[string]int{}
	examples := map[string]string{}
	for _, d := range l.Dishonesty {
		kind := MechDishonestRelease
		if d.F == history.Extend {
			kind = MechDishonestExtend
		}
		if counts[kind]++; examples[kind] == "" {
			examples[kind] = d.Story
		}
	}
	// The list keeps the first MaxViolations; the rest are counted alike.
	if listed := len(l.Dishonesty); l.DishonestOps > listed && listed > 0 {
		for k := range counts {
			counts[k] = counts[k] * l.DishonestOps / listed
		}
	}
	for _, kind := range []string{MechDishonestRelease, MechDishonestExtend} {
		if n := counts[kind]; n > 0 {
			what := strings.TrimPrefix(kind, "dishonest-")
			out = append(out, Mechanism{Kind: kind, Count: n, Example: examples[kind],
				Says: fmt.Sprintf("%s %s reported success on a lock it no longer held", article(what), what)})
		}
	}
	return out
}

func article(w string) string {
	if strings.IndexByte("aeiou", w[0]) >= 0 {
		return "an"
	}
	return "a"
}

// useDamage is what the resource suffered with no overlap to blame: a
// holder acted after its lease.
func useDamage(res *ResourceResult) Mechanism {
	m := Mechanism{Kind: MechLostUpdate, Count: res.LostUpdates + res.Duplicates, Example: res.Explanation}
	if len(res.Interleaved) > 0 && res.Interleaved[0].Story != "" {
		m.Example = res.Interleaved[0].Story
	}
	m.Says = fmt.Sprintf("the resource lost %d %s although no two holds overlapped: a holder acted after its lease", m.Count, plural(m.Count, "update", "updates"))
	return m
}

// Line is the three answers in one line, for a run's summary.
func (a *Answers) Line() string {
	lock := "the lock held"
	if a.Lock == AnswerUnsafe {
		lock = "THE LOCK BROKE: " + saysList(a.Mechanisms)
	}
	dep := "the deployment kept the key"
	if a.Deployment == AnswerUnsafe {
		dep = "the deployment lost the key: " + saysList(a.Losses)
	}
	use := "its use was safe"
	if a.Use == AnswerUnsafe {
		use = "its use was unsafe: " + saysList(a.Damage)
	}
	return "answers: " + lock + "; " + dep + "; " + use
}

func saysList(ms []Mechanism) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = fmt.Sprintf("%s (%d %s)", m.Says, m.Count, plural(m.Count, "time", "times"))
	}
	return strings.Join(parts, "; ")
}
