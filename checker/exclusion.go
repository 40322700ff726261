package checker

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lockjepsen/lockjepsen/history"
)

// MaxViolations is how many violations (and interleavings) are kept in
// detail; the counts are always complete.
const MaxViolations = 100

// maxBetween bounds the events listed as a violation's possible cause: the
// ones closest to the second acquire are the telling ones.
const maxBetween = 10

// Fault is a nemesis fault and the span it was active. End is Never for a
// fault that was never stopped; instant faults (client-crash) have End ==
// Start.
type Fault struct {
	Name    string   `json:"name"`
	Start   int64    `json:"start"`
	End     int64    `json:"end"`
	Targets []string `json:"targets,omitempty"`
	Clients []int    `json:"clients,omitempty"`
	Detail  string   `json:"detail,omitempty"`
}

// Event is a client event shown as context for a violation.
type Event struct {
	Index   int64        `json:"index"`
	Time    int64        `json:"time"`
	Process int          `json:"process"`
	F       string       `json:"f"`
	Type    history.Type `json:"type"`
	Token   string       `json:"token,omitempty"`
	Error   string       `json:"error,omitempty"`
	// Invoked is the operation's invocation; InFlight marks one that had
	// not completed by the end of the history (Time is then Invoked).
	Invoked  int64 `json:"invoked,omitempty"`
	InFlight bool  `json:"in_flight,omitempty"`
	// LeaseEnd is, for a release or extend, the earliest time its own
	// client's key could expire on a server (its lease's start, no later
	// than the SET, + the TTL); 0 when unknown. Such a call can have
	// deleted or lengthened another client's key only if its own had run
	// out before that client's grant, or been lost: until then no other
	// grant could happen (followsKeyLoss).
	LeaseEnd int64 `json:"lease_end,omitempty"`
}

// Violation is a mutual-exclusion violation: Second started while First's
// holder still believed it held the key.
type Violation struct {
	Key    string `json:"key"`
	First  Hold   `json:"first"`
	Second Hold   `json:"second"`
	// OverlapStart/OverlapEnd bound the time both believed they held the
	// key; OverlapEnd is Never when neither belief ever ended, and Overlap
	// is then measured to the end of the history.
	OverlapStart int64 `json:"overlap_start"`
	OverlapEnd   int64 `json:"overlap_end"`
	Overlap      int64 `json:"overlap_ns"`
	// Between are the release and extend calls on the key that may have
	// touched either holder's key before Second was granted
	// (mayHaveTouched): usually the cause (someone deleting a lock that
	// was not theirs).
	Between []Event `json:"between,omitempty"`
	// Faults are the nemesis faults active during the overlap and, when the
	// TTL is known, those active in the TTL before First.Start: the cause is
	// often a fault that ended just before the overlap (a client paused past
	// its lease wakes and deletes someone's key). A fault whose End is before
	// OverlapStart is one of the latter.
	Faults []Fault `json:"faults,omitempty"`
	// OverClaim is by how much the first hold's validity passed the start
	// of the acquire or extend that told it, plus the TTL (see the lease model); 0 for none.
	OverClaim int64  `json:"over_claim_ns,omitempty"`
	Story     string `json:"story"`
}

// ExclusionResult is the mutual-exclusion checker's verdict.
type ExclusionResult struct {
	Valid bool `json:"valid"`
	// Holds counts believed holds; EmptyHolds those that never conferred a
	// usable belief.
	Holds      int `json:"holds"`
	EmptyHolds int `json:"empty_holds"`
	Keys       int `json:"keys"`
	// Count is the number of holds that started while another hold on the
	// same key was believed.
	Count int `json:"count"`
	// Incidents is the number of connected groups of overlapping holds (per
	// key, holds linked by overlap: a–b and b–c are one incident). One stale
	// hold that overlaps dozens of later ones is one incident, and so is the
	// chain of wrong deletes one bad release starts.
	Incidents  int         `json:"incidents"`
	Violations []Violation `json:"violations,omitempty"`
}

// callEvent is a call as a witness lists it: its completion, or its
// invoke while it is still in flight (comp nil).
func callEvent(inv, comp *history.Op, leaseEnd int64) Event {
	e := Event{Index: inv.Index, Time: inv.Time, Invoked: inv.Time, Process: inv.Process, F: inv.F, Type: history.Info, InFlight: true, LeaseEnd: leaseEnd}
	if comp != nil {
		e.Index, e.Time, e.Type, e.Error, e.InFlight = comp.Index, comp.Time, comp.Type, comp.Error, false
	}
	if inv.Value != nil {
		e.Token = inv.Value.Token
	}
	return e
}

// mayHaveTouched reports whether a release or extend by process, which
// completed at end (or is still in flight, end the history's last
// instant), may have touched the key of either hold of a violation before
// second was granted. The window opens with the earlier of the two
// acquires: second may have been granted first and told late, and a call
// that deleted its key before first even asked let first in. first's own
// calls count only from before its acquire (a stale release of a
// previous hold of its own); from its acquire on they are its own.
func mayHaveTouched(first, second *Hold, process int, end int64) bool {
	if end < min(first.Invoke, second.Invoke) {
		return false
	}
	return process != first.Process || end < first.Invoke
}

// indexOfEvent finds the event numbered idx (validated histories number
// events 0, 1, 2, ...; -1 when absent).
func indexOfEvent(ops []history.Op, idx int64) int {
	if idx >= 0 && idx < int64(len(ops)) && ops[idx].Index == idx {
		return int(idx)
	}
	return slices.IndexFunc(ops, func(op history.Op) bool { return op.Index == idx })
}

// overClaimOf is by how much the hold's validity passed invoke + TTL (0
// within the lease model's tolerance, or when nothing is known).
func overClaimOf(h *Hold, ttl int64) int64 {
	if h.ValidUntil == nil || ttl <= 0 {
		return 0
	}
	if m := *h.ValidUntil - (h.ValidFrom + ttl); m > int64(LeaseTolerance(time.Duration(ttl))) {
		return m
	}
	return 0
}

// tokenFence names a lease's token and fence, those it has.
func tokenFence(token string, fence *int64) []string {
	var parts []string
	if token != "" {
		parts = append(parts, "token "+token)
	}
	if fence != nil {
		parts = append(parts, fmt.Sprintf("fence %d", *fence))
	}
	return parts
}

func (h *Hold) describeAcquire() string {
	parts := tokenFence(h.Token, h.Fence)
	if h.ValidUntil != nil {
		parts = append(parts, "valid until "+fmtT(*h.ValidUntil))
	} else {
		parts = append(parts, "no deadline")
	}
	if len(h.Nodes) > 0 {
		parts = append(parts, "granted by "+strings.Join(h.Nodes, ", "))
	}
	return strings.Join(parts, ", ")
}

func (h *Hold) describeEnd() string {
	switch h.EndReason {
	case EndRelease:
		return "until it released at " + fmtT(h.End)
	case EndValidUntil:
		return "until its lease ran out at " + fmtT(h.End)
	case EndLost:
		return "until it learned it had lost the lock at " + fmtT(h.End)
	case EndRevoked:
		return "until its lock cancelled the context it held (" + h.RevokedBy + ") at " + fmtT(h.End)
	case EndCrash:
		return "until it crashed at " + fmtT(h.End)
	case EndAbandoned:
		return "until it tried to acquire again at " + fmtT(h.End)
	default:
		return "and never stopped believing it held it"
	}
}

// story tells the violation; keyLoss and cutOff name the faults that can
// take a key from a node and that keep a node's writes from the rest of
// its cluster (Options.KeyLossFaults, Options.CutOffFaults); fm says
// which faults fail over (Options.Faults).
func (v *Violation) story(keyLoss, cutOff []string, fm FaultMeanings) string {
	f, s := &v.First, &v.Second
	var b strings.Builder
	fmt.Fprintf(&b, "process %d held %s from %s (acquired, %s) %s; ", f.Process, v.Key, fmtT(f.Start), f.describeAcquire(), f.describeEnd())
	fmt.Fprintf(&b, "process %d acquired %s at %s (%s) while %d still believed it held it — %s of overlap",
		s.Process, v.Key, fmtT(s.Start), s.describeAcquire(), f.Process, fmtD(v.Overlap))
	if v.OverlapEnd == Never {
		b.WriteString(" (to the end of the history)")
	}
	b.WriteString(".")
	for _, c := range v.causes(keyLoss, cutOff, fm) {
		b.WriteString(" " + c)
	}
	var during, before []string
	for _, f := range v.Faults {
		switch {
		case f.End < v.OverlapStart && f.End == f.Start: // an instant fault: a crash
			before = append(before, fmt.Sprintf("%s, %s before the overlap", f.Describe(), fmtD(v.OverlapStart-f.End)))
		case f.End < v.OverlapStart:
			before = append(before, fmt.Sprintf("%s, ended %s before the overlap", f.Describe(), fmtD(v.OverlapStart-f.End)))
		default:
			during = append(during, f.Describe())
		}
	}
	if len(during) > 0 {
		b.WriteString(" Faults active during the overlap: " + strings.Join(during, "; ") + ".")
	}
	if len(before) > 0 {
		b.WriteString(" Earlier faults: " + strings.Join(before, "; ") + ".")
	}
	return b.String()
}

// causes are the story's sentences on why the overlap happened, the likely
// cause first: what may have ended the first holder's key early (another
// process's release), an over-claimed validity, a token the two holds
// share; the faults come after them. Calls that followed a key's loss
// (followsKeyLoss) are named as such, after the causes, as the mechanism
// (classifyOverlap) discounts them. A witness with no cause says so.
// When two primaries granted the holds while a fault cut the first's off
// (cutOffThroughout), that is the cause, and no release or extend is.
func (v *Violation) causes(keyLoss, cutOff []string, fm FaultMeanings) []string {
	if cut := cutOffThroughout(v, cutOff); cut != nil {
		return v.splitBrainCauses(cut)
	}
	var early, releases, extends, afterLoss, lostElsewhere []string
	unhurt := v.unhurtNode(keyLoss, fm)
	for i := range v.Between {
		e := &v.Between[i]
		if unhurt != "" && e.followsKeyLoss(&v.First) {
			lostElsewhere = append(lostElsewhere, fmt.Sprintf("process %d's", e.Process))
		}
		switch {
		case unhurt == "" && e.followsKeyLoss(&v.First):
			afterLoss = append(afterLoss, e.keyLossSentence(&v.First))
		case e.F == history.Release && !e.InFlight && e.Time < v.First.Invoke:
			early = append(early, e.Describe())
		case e.F == history.Release:
			releases = append(releases, e.Describe())
		default:
			extends = append(extends, e.Describe())
		}
	}
	var out []string
	if len(early) > 0 {
		// Over before the first holder asked: only the second holder's
		// key, granted first and told late, was there to delete.
		out = append(out, fmt.Sprintf("Likely cause: %s, which may have deleted process %d's key before process %d asked for the lock.", andList(early), v.Second.Process, v.First.Process))
	}
	if len(releases) > 0 {
		lead := "Likely cause"
		if len(early) > 0 {
			lead = "Also"
		}
		out = append(out, fmt.Sprintf("%s: %s, which may have deleted process %d's key before its lease ran out.", lead, andList(releases), v.First.Process))
	}
	if v.OverClaim > 0 {
		out = append(out, fmt.Sprintf("Process %d's lock over-claimed its validity by %s: it believed past any key the server could keep (invoke + TTL).", v.First.Process, fmtD(v.OverClaim)))
	}
	if v.sharesToken() {
		out = append(out, fmt.Sprintf("Both holds carry the identical token %s: the lock gave one token to two grants, so the server cannot tell the holders apart.", v.First.Token))
	}
	if len(extends) > 0 {
		out = append(out, fmt.Sprintf("Also on the key in between: %s.", andList(extends)))
	}
	if len(lostElsewhere) > 0 {
		out = append(out, fmt.Sprintf("%s own key had been lost, but not on %s: %[2]s granted both holds and lost no key in between (no fault that loses keys hit it, and it stayed primary), so a call that compares its token would have changed nothing there.",
			capitalize(andList(lostElsewhere)), unhurt))
	}
	if len(out) == 0 && len(v.Faults) == 0 {
		others := "no other process released or extended the key"
		if len(afterLoss) > 0 {
			others = "the releases and extends in between followed a lost key"
		}
		out = append(out, "No cause was recorded: "+others+", neither lock over-claimed, and no fault was active; the server let the second client in while the first still believed it held the lock.")
	}
	return append(out, afterLoss...)
}

// splitBrainCauses are causes' sentences for a split brain: the first
// hold was granted by a node a fault had cut off, the second by another
// primary, which never had the first's key. The calls in between are
// named, and discounted.
func (v *Violation) splitBrainCauses(cut *Fault) []string {
	f, s := &v.First, &v.Second
	out := []string{fmt.Sprintf("Likely cause: two primaries. %s was cut off from the rest of its cluster (%s) from before process %d asked for the lock until after %s granted it to process %d, so %s never had process %d's key.",
		f.Nodes[0], cut.Describe(), f.Process, s.Nodes[0], s.Process, s.Nodes[0], f.Process)}
	var calls []string
	for i := range v.Between {
		calls = append(calls, v.Between[i].Describe())
	}
	if len(calls) > 0 {
		out = append(out, fmt.Sprintf("Not the cause: %s; %s had no key of process %d's to take.", andList(calls), s.Nodes[0], f.Process))
	}
	return out
}

// followsKeyLoss reports whether e, a completed release or extend, came
// after a key had been lost: its own lease ran past first's grant, and a
// lock grants no one while a live lease's key is there, so either e's
// key or (when e's client was granted after first) first's was gone
// before the grant that overlaps. That loss (a restart, a clock jump, a
// failover) explains the overlap before anything e deleted; with a
// correct release e deleted only its own key. An unknown outcome may have
// taken effect later, when its own key had run out, so only an ok one
// counts.
func (e *Event) followsKeyLoss(first *Hold) bool {
	return e.Type == history.OK && e.LeaseEnd > first.Start
}

// unhurtNode is the node that granted both holds when nothing listed with
// the overlap could have taken a key from it: no fault that loses keys
// (keyLoss, or a manual failover; with no list, any fault) targeted it,
// and it was not demoted between the first acquire's invoke and the
// second grant (a promotion keeps a replica's keys; a demoted primary
// resyncs them away); "" otherwise, and when the grants name no single
// node. Latency, a partition or a pause on the node take nothing from it:
// the failover threat slows every node's replies, and a release that had
// deleted another client's key on the new primary was excused for it. On
// such a node only a call it obeyed removed the first's key, so a release
// or extend in between is not excused by a key lost elsewhere
// (followsKeyLoss, chained): a split brain takes a holder's key with the
// old primary, and a release that compares its token then finds nothing
// of its own on the new one, where a plain DEL deletes another client's.
func (v *Violation) unhurtNode(keyLoss []string, fm FaultMeanings) string {
	a, b := v.First.Nodes, v.Second.Nodes
	if len(a) != 1 || len(b) != 1 || a[0] != b[0] {
		return ""
	}
	n := a[0]
	for _, f := range v.Faults {
		if len(f.Targets) > 0 && !slices.Contains(f.Targets, n) {
			continue
		}
		switch {
		case f.Name == PrimaryEvent:
			if f.End >= v.First.Invoke && f.End < v.Second.Start {
				return ""
			}
		case keyLoss == nil || slices.Contains(keyLoss, f.Name) || fm.Of(f.Name).FailsOver:
			return ""
		}
	}
	return n
}

func (e *Event) keyLossSentence(first *Hold) string {
	did := "deleted"
	if e.F != history.Release {
		did = "lengthened"
	}
	return fmt.Sprintf("Not the first cause: %s; its own lease ran until %s, past process %d's grant at %s, and a lock grants no one while a live lease's key is there, so a key had been lost before this call, whatever it %s.",
		e.Describe(), fmtT(e.LeaseEnd), first.Process, fmtT(first.Start), did)
}

// andList is "a", "a and b", "a, b and c".
func andList(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

// Describe tells the event in words, as the stories do.
func (e *Event) Describe() string {
	s := fmt.Sprintf("process %d's %s", e.Process, e.F)
	if e.Token != "" {
		s += " (token " + e.Token + ")"
	}
	if e.InFlight {
		return s + fmt.Sprintf(", invoked at %s and still in flight", fmtT(e.Invoked))
	}
	if e.Invoked != 0 && e.Invoked != e.Time {
		s += ", invoked at " + fmtT(e.Invoked) + ","
	}
	switch e.Type {
	case history.OK:
		s += " completed"
	case history.Fail:
		s += " failed"
	default:
		s += " ended with an unknown outcome"
	}
	return s + " at " + fmtT(e.Time)
}

// Describe tells the fault in words, as the stories do.
func (f *Fault) Describe() string {
	s := f.Name
	if len(f.Targets) > 0 {
		s += " on " + strings.Join(f.Targets, ", ")
	} else if len(f.Clients) > 0 {
		ps := make([]string, len(f.Clients))
		for i, c := range f.Clients {
			ps[i] = fmt.Sprint(c)
		}
		s += " of processes " + strings.Join(ps, ", ")
	}
	if f.End == f.Start {
		return s + " at " + fmtT(f.Start)
	}
	s += " from " + fmtT(f.Start)
	if f.End != Never {
		s += " to " + fmtT(f.End)
	}
	return s
}

// capitalize starts a sentence with its first word's capital.
func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
