// Package checker decides whether a lockjepsen history is safe: the lock's
// mutual exclusion (believed holds that overlap), the same question put to
// porcupine as linearizability of a mutex, what a protected resource
// suffered, and liveness. It is pure computation over a history that
// history.Decode validated, and must never panic on one (an empty history
// included).
package checker

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/lockjepsen/lockjepsen/history"
)

// Options tune the checkers; the zero value means the defaults.
type Options struct {
	// TTL is the lock's lease. It scales StuckAfter's default, and a
	// violation's witness lists the faults active from a TTL before the
	// first hold (a fault that ended before an overlap often caused it).
	TTL time.Duration
	// StuckAfter is how long a key must be unavailable up to the end of
	// the history to be stuck. Default max(5×TTL, 2s).
	StuckAfter time.Duration
	// MaxSegmentOps caps a linearizability segment; bigger segments are
	// reported unknown rather than risk porcupine's memory. Default 2000.
	MaxSegmentOps int
	// SegmentTimeout bounds porcupine on one segment. Default 10s.
	SegmentTimeout time.Duration
	// LinearizabilityBudget bounds the whole porcupine check; segments left
	// when it runs out are unknown. Default 60s.
	LinearizabilityBudget time.Duration
	// OutDir receives porcupine's HTML visualizations; "" writes none.
	// Check first removes the linearizability-*.html files already there, so
	// that the directory holds only those its results list.
	OutDir string
	// ServerRenewsLeases, when set, says why the servers may keep a key
	// past its TTL by themselves (etcd's leader renews leases when
	// leadership changes): the lease model then judges no release or
	// extend for honesty.
	ServerRenewsLeases string
	// ClockFaults names the faults that move a server's clock; while one
	// is active, a key may honestly outlive its TTL, and the lease model
	// judges no release or extend whose window it overlaps.
	ClockFaults []string
	// KeyLossFaults name the faults that can take a key from a correct
	// lock's holder by themselves (a restart without fsync, a clock moved):
	// an overlap they explain is the deployment's, not the lock's.
	KeyLossFaults []string
	// ClientClockFaults name the faults that move a protocol client's
	// wall clock; the moments count what a moved client did.
	ClientClockFaults []string
	// CutOffFaults name the faults that keep a node's writes from reaching
	// the rest of its cluster (isolate): a hold granted by a node while
	// one cut it off, overlapped by a grant of another node, is the
	// failover's, not the lock's.
	CutOffFaults []string
	// ReplyLossFaults name the faults that lose replies of requests the
	// server may have applied (reply-loss): a lock call under one whose
	// outcome is unknown counts as MomentRepliesLost.
	ReplyLossFaults []string
	// InOpFaults name the client faults that kill a client with a request
	// in flight: one that hits a process with a lock call pending counts
	// as MomentKilledInOp.
	InOpFaults []string
	// DisruptFaults name the faults that make a node slow, silent or
	// erroring for a while (a pause, a partition, a kill, slow links): a
	// request in flight while one is active may be applied as late as its
	// stop, and a refusal meanwhile may be the fault's doing. The
	// never-frees check (stream_neverfree.go) excuses both.
	DisruptFaults []string
	// Faults are the meanings of the run's faults, by name, as their
	// descriptors say (the harness fills it from them, run.json records
	// it); a fault it lacks is read by name (LegacyFaultMeaning).
	Faults FaultMeanings
	// MajorityOf is the number of independent nodes whose majority a
	// grant needs (Redlock's N); 0 for a lock on one node or one
	// replicated system.
	MajorityOf int

	ctx context.Context // CheckContext's; nil is never done
}

func (o Options) isClockFault(name string) bool { return slices.Contains(o.ClockFaults, name) }

func (o Options) withDefaults() Options {
	if o.StuckAfter <= 0 {
		o.StuckAfter = max(5*o.TTL, 2*time.Second)
	}
	if o.MaxSegmentOps <= 0 {
		o.MaxSegmentOps = 2000
	}
	if o.SegmentTimeout <= 0 {
		o.SegmentTimeout = 10 * time.Second
	}
	if o.ctx == nil {
		o.ctx = context.Background()
	}
	if o.LinearizabilityBudget <= 0 {
		o.LinearizabilityBudget = 60 * time.Second
	}
	return o
}

// Validity is true, false or unknown; it is JSON true, false or "unknown".
type Validity int8

const (
	// ValidUnknown is the zero value, so that a forgotten verdict is not
	// read as a pass.
	ValidUnknown Validity = iota
	// ValidTrue: checked, and no violation.
	ValidTrue
	// ValidFalse: a violation was found.
	ValidFalse
)

func (v Validity) String() string {
	switch v {
	case ValidTrue:
		return "true"
	case ValidFalse:
		return "false"
	}
	return "unknown"
}

// MarshalJSON writes true, false or "unknown".
func (v Validity) MarshalJSON() ([]byte, error) {
	switch v {
	case ValidTrue:
		return []byte("true"), nil
	case ValidFalse:
		return []byte("false"), nil
	}
	return []byte(`"unknown"`), nil
}

// UnmarshalJSON reads true, false or "unknown".
func (v *Validity) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case "true":
		*v = ValidTrue
	case "false":
		*v = ValidFalse
	case `"unknown"`:
		*v = ValidUnknown
	default:
		return fmt.Errorf("validity must be true, false or \"unknown\", got %s", b)
	}
	return nil
}

// Verdicts (Results.Verdict).
const (
	VerdictSafe    = "safe"
	VerdictUnsafe  = "unsafe"
	VerdictStuck   = "stuck"
	VerdictUnknown = "unknown"
)

// Results is everything the checkers found; it is results.json.
type Results struct {
	Valid   Validity `json:"valid"`
	Verdict string   `json:"verdict"`
	// Violations counts mutual-exclusion violations; Incidents the
	// connected groups of overlapping holds they form.
	Violations int `json:"violations"`
	Incidents  int `json:"incidents"`
	// Ops counts completed client operations.
	Ops int `json:"ops"`
	// Disagreement is set when the exclusion checker and porcupine give
	// opposite definite answers, which means a bug in lockjepsen itself.
	Disagreement    string                 `json:"disagreement,omitempty"`
	Exclusion       *ExclusionResult       `json:"exclusion"`
	Linearizability *LinearizabilityResult `json:"linearizability"`
	Resource        *ResourceResult        `json:"resource"`
	Liveness        *LivenessResult        `json:"liveness"`
	Stats           *Stats                 `json:"stats"`
	// Failover is about leases across Sentinel failovers and fences that
	// went backwards.
	Failover *FailoverResult `json:"failover,omitempty"`
	// Lease is the lease model: over-claimed validity and dishonest
	// releases and extends, which need no overlap to show.
	Lease *LeaseResult `json:"lease"`
	// NeverFrees is the never-frees check: keys that outlived every
	// client that could hold them (stream_neverfree.go).
	NeverFrees *NeverFreesResult `json:"never_frees,omitempty"`
	// ExtendGrants are the ok extends with another client's grant inside
	// them (extendgrant.go): dishonest extends, with no overlap needed.
	ExtendGrants *ExtendGrantResult `json:"extend_grants,omitempty"`
	// Quorum counts the grants by their nodes, on a system whose lock
	// needs a majority of independent nodes (Options.MajorityOf).
	Quorum *QuorumResult `json:"quorum,omitempty"`
	// Fences splits the fencing tokens that did not grow
	// (Failover.FenceRegressions) into the lock's and the deployment's
	// (fences.go); nil when no grant carried a fence.
	Fences *FenceAnswer `json:"fences,omitempty"`
	// First is when each kind of violation first showed.
	First Firsts `json:"first"`
	// Answers split the verdict by whose promise broke: the lock's, the
	// deployment's, or its use's (answers.go).
	Answers *Answers `json:"answers,omitempty"`
	// Exercised counts the dangerous moments the run's faults produced
	// (exercised.go): a safe verdict is evidence only where they happened.
	Exercised *Exercised `json:"exercised,omitempty"`
	// Checks holds the results of composed checks (checks) that have no
	// field of their own, by check name.
	Checks map[string]any `json:"checks,omitempty"`
}

// Firsts are the run times (ns) at which each kind of violation first
// showed; nil when it never did. Time to detect is what makes a CI gate
// cheap, so it is recorded with the verdict.
type Firsts struct {
	// Violation is the start of the first overlap of two believed holds.
	Violation *int64 `json:"violation_ns,omitempty"`
	// OverClaim is the completion of the first over-claimed grant or extend.
	OverClaim *int64 `json:"over_claim_ns,omitempty"`
	// Dishonest is the invocation of the first dishonest release or extend.
	Dishonest *int64 `json:"dishonest_ns,omitempty"`
	// NeverFrees is the invocation of the refusal that first showed a key
	// outliving every client that could hold it.
	NeverFrees *int64 `json:"never_frees_ns,omitempty"`
}

// Check runs every checker on a validated history.
func Check(ops []history.Op, opts Options) *Results {
	r, _ := CheckContext(context.Background(), ops, opts)
	return r
}

// CheckContext is Check that gives up when ctx is done (Ctrl-C during a
// long check), returning ctx's error and no results. Porcupine cannot be
// stopped mid-segment, so giving up can take one segment's timeout. It is
// a Stream fed the slice.
func CheckContext(ctx context.Context, ops []history.Op, opts Options) (*Results, error) {
	s := NewStreamContext(ctx, opts)
	for i := range ops {
		if i%tickEvents == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		s.Add(ops[i])
	}
	return s.Finish(ctx)
}

// LockVersusResource tells apart the two questions a design review asks,
// when their answers differ: was the lock exclusive, and was the resource
// it protects safe. "" when they agree or the resource was not checked.
func LockVersusResource(ex *ExclusionResult, res *ResourceResult) string {
	if ex == nil || res == nil || !res.Checked {
		return ""
	}
	switch {
	case ex.Count > 0 && res.Valid:
		s := "The lock was not exclusive, but the resource was safe"
		if res.RejectedStale > 0 {
			s += fmt.Sprintf(": fencing refused %d stale %s from holders whose lock had already passed to another", res.RejectedStale, plural(res.RejectedStale, "write", "writes"))
		}
		return s + ". The verdict is about the lock; only a fenced resource survives it."
	case ex.Count == 0 && !res.Valid:
		return "The lock looked exclusive (no overlapping holds), but the resource was not safe: a holder acted after its lease had run out."
	}
	return ""
}

// Summary is a few lines for a human, the verdict first.
func (r *Results) Summary() []string {
	lines := []string{r.headline()}
	if r.Answers != nil && r.Verdict != "" && (r.Verdict != VerdictStuck || r.Answers.Lock == AnswerUnsafe) {
		lines = append(lines, r.Answers.Line())
	}
	if r.Exercised != nil {
		// Right after the answers: a safe answer weighs only as much as
		// the dangerous moments the run got to.
		lines = append(lines, r.Exercised.SummaryLine())
	}
	if r.Disagreement != "" {
		lines = append(lines, "WARNING: "+r.Disagreement)
	}
	if line := LockVersusResource(r.Exclusion, r.Resource); line != "" {
		lines = append(lines, line)
	}
	lines = append(lines, r.leaseLines()...)
	if nf := r.NeverFrees; nf != nil && !nf.Valid {
		lines = append(lines, "never frees: "+nf.headline())
	}
	if l := r.Quorum.line(); l != "" {
		lines = append(lines, l)
	}
	for _, line := range []func() string{r.resourceLine, r.failoverLine, r.livenessLine, r.linearizabilityLine, r.statsLine} {
		if s := line(); s != "" {
			lines = append(lines, s)
		}
	}
	return lines
}

// headline is the summary's first line: the verdict and what decided it.
func (r *Results) headline() string {
	ex, res, live, lin := r.Exclusion, r.Resource, r.Liveness, r.Linearizability
	switch r.Verdict {
	case VerdictUnsafe:
		switch {
		case ex != nil && ex.Count > 0:
			s := fmt.Sprintf("UNSAFE: %d mutual-exclusion %s in %d %s", ex.Count, plural(ex.Count, "violation", "violations"),
				ex.Incidents, plural(ex.Incidents, "incident", "incidents"))
			if len(ex.Violations) > 0 {
				v := ex.Violations[0]
				s += fmt.Sprintf(": processes %d and %d held %s at the same time for %s", v.First.Process, v.Second.Process, v.Key, fmtD(v.Overlap))
				// The first witness is not the worst; a reader weighing
				// the risk wants the longest overlap too.
				longest := v
				for _, w := range ex.Violations[1:] {
					if w.Overlap > longest.Overlap {
						longest = w
					}
				}
				if longest.Overlap > v.Overlap {
					s += fmt.Sprintf(" (the longest overlap: %s)", fmtD(longest.Overlap))
				}
			}
			return s
		case res != nil && res.Checked && !res.Valid:
			return "UNSAFE: the lock looked fine but the protected resource was corrupted: " + res.Explanation
		case r.Lease != nil && !r.Lease.Valid:
			return "UNSAFE: " + r.Lease.headline()
		case r.ExtendGrants.found():
			return "UNSAFE: " + r.ExtendGrants.headline()
		default:
			return fmt.Sprintf("UNSAFE: porcupine found %d non-linearizable segments", lin.SegmentsIllegal)
		}
	case VerdictStuck:
		if live == nil || !live.Stuck {
			return "STUCK: " + r.NeverFrees.headline()
		}
		return fmt.Sprintf("STUCK: nobody could acquire %s from %s to the end of the run (%s) although clients kept trying",
			live.StuckKey, fmtT(live.StuckSince), fmtD(live.StuckKeys[0].For))
	case VerdictUnknown:
		switch {
		case ex != nil && ex.untested():
			s := "UNKNOWN: no lock was ever granted: nothing was tested"
			switch {
			case ex.Holds > 0:
				s = fmt.Sprintf("UNKNOWN: no lock was ever granted usably: nothing was tested (%d %s, each arriving after its lease had run out or its holder had crashed)",
					ex.Holds, plural(ex.Holds, "grant", "grants"))
			case live != nil:
				s += fmt.Sprintf(" (%d acquire %s, none ok)", live.AcquireAttempts, plural(live.AcquireAttempts, "attempt", "attempts"))
			}
			return s
		case lin != nil:
			return fmt.Sprintf("UNKNOWN: no violation found, but porcupine could not check %d of %d segments (%d too large, %d timed out, %d over budget)",
				lin.SegmentsUnknown, lin.Segments, lin.TooLarge, lin.TimedOut, lin.OverBudget)
		default:
			return "UNKNOWN"
		}
	case VerdictSafe:
		return fmt.Sprintf("SAFE: no mutual-exclusion violations in %d %s; porcupine found the history linearizable", ex.Holds, plural(ex.Holds, "hold", "holds"))
	default:
		return "NOT CHECKED"
	}
}

// resourceLine counts the protected resource's writes ("" without one).
func (r *Results) resourceLine() string {
	res := r.Resource
	if res == nil || !res.Checked {
		return ""
	}
	s := fmt.Sprintf("resource: %d writes, %d accepted, %d rejected as stale, %d unknown", res.Writes, res.Accepted, res.RejectedStale, res.UnknownWrites)
	if res.Final != nil {
		s += fmt.Sprintf("; final value %d", *res.Final)
	}
	if res.LostUpdates > 0 {
		s += fmt.Sprintf("; %d lost updates", res.LostUpdates)
	}
	if res.Duplicates > 0 {
		s += fmt.Sprintf("; %d interleaved writes", res.Duplicates)
	}
	return s
}

// failoverLine says what the failovers did to leases ("" with none).
func (r *Results) failoverLine() string {
	fo := r.Failover
	if fo == nil || (fo.Failovers == 0 && fo.FenceRegressions == 0) {
		return ""
	}
	s := fmt.Sprintf("failover: %d %s; %d %s outlived the primary that granted %s, %d of them lost to a grant on the new primary; %d %s by a deposed primary",
		fo.Failovers, plural(fo.Failovers, "failover", "failovers"), fo.Stranded, plural(fo.Stranded, "lease", "leases"),
		plural(fo.Stranded, "it", "them"), fo.Lost, fo.Deposed, plural(fo.Deposed, "grant", "grants"))
	if fo.FenceRegressions > 0 {
		s += fmt.Sprintf("; the fencing counter went backwards %d %s", fo.FenceRegressions, plural(fo.FenceRegressions, "time", "times"))
	}
	return s
}

// livenessLine counts the acquires and the longest unavailability.
func (r *Results) livenessLine() string {
	live := r.Liveness
	if live == nil {
		return ""
	}
	s := fmt.Sprintf("liveness: %d acquire %s, %d ok (%.1f%%), %d failed, %d unknown",
		live.AcquireAttempts, plural(live.AcquireAttempts, "attempt", "attempts"), live.AcquireOK, 100*live.SuccessRate, live.AcquireFail, live.AcquireUnknown)
	if st := r.Stats; st != nil && st.SummarizedFailedAcquires > 0 {
		s += fmt.Sprintf(" (%d of the failures recorded as per-second counts)", st.SummarizedFailedAcquires)
	}
	if live.Longest != nil {
		s += fmt.Sprintf("; longest unavailability %s on %s from %s", fmtD(live.Longest.Duration), live.Longest.Key, fmtT(live.Longest.Start))
	}
	return s
}

// linearizabilityLine is porcupine's count of segments.
func (r *Results) linearizabilityLine() string {
	lin := r.Linearizability
	if lin == nil {
		return ""
	}
	return fmt.Sprintf("linearizability: %s (%d segments, %d checked, %d illegal, %d unknown; %d of %d ops checked)",
		lin.Valid, lin.Segments, lin.SegmentsChecked, lin.SegmentsIllegal, lin.SegmentsUnknown, lin.OpsChecked, lin.Ops)
}

// statsLine is the run's size and rate.
func (r *Results) statsLine() string {
	st := r.Stats
	if st == nil {
		return ""
	}
	s := fmt.Sprintf("%d %s in %s", st.Ops, plural(st.Ops, "operation", "operations"), fmtD(st.Duration))
	if st.rated() {
		s += fmt.Sprintf(" (%.0f ops/s, %.1f acquires/s)", st.OpThroughput, st.AcquireThroughput)
	}
	return s
}

// untested reports whether the history had no believed hold at all, so that
// finding no violation in it says nothing about the lock.
func (r *ExclusionResult) untested() bool { return r.Holds == r.EmptyHolds }

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

var _ json.Marshaler = ValidTrue
