package checker

// A checkKind is one check the Stream composes, declared once in checks:
// how it follows a history (new, fed by the one hold engine), and what it
// adds to the verdict and to the answers, both read from the results
// alone, so that a stored results.json and the in-memory oracle are
// judged by the same words. Each part may be nil: a check that only
// counts (quorum) says nothing of the verdict; one whose streaming state
// the Stream still wires by hand (the never-frees, extend-over-grant and
// fence checks, which take the hold engine's invokes, grants and faults)
// has no new here yet.
type checkKind struct {
	name string
	// new makes the check's state for a run checked with opts.
	new func(opts Options) check
	// verdict says whether the results show the run unsafe
	// (VerdictUnsafe), stuck (VerdictStuck), or neither ("").
	verdict func(r *Results) string
	// answer adds to a what the results show broken: the lock's
	// mechanisms, the deployment's losses.
	answer func(r *Results, a *Answers)
}

// check is a check's state as the Stream feeds it: each call the hold
// engine completes (the ones still in flight at the end are not), then
// the end of the history, when it puts its part into the results.
type check interface {
	called(c *Call)
	result(r *Results)
}

// checks are the Stream's composed checks, in the order their answers
// are given: a new check is its own file and one entry here.
var checks = []checkKind{
	{name: "never-frees", verdict: neverFreesVerdict, answer: neverFreesAnswer},
	{name: "extend-grants", verdict: extendGrantVerdict, answer: extendGrantAnswer},
	{name: "fences", answer: fencesAnswer},
	{name: "quorum", new: newQuorumCheck},
}

// newChecks makes the state of every check that has one.
func newChecks(opts Options) []check {
	var out []check
	for _, k := range checks {
		if k.new != nil {
			out = append(out, k.new(opts))
		}
	}
	return out
}

// checksSay reports whether any check's verdict on r is v.
func checksSay(r *Results, v string) bool {
	for _, k := range checks {
		if k.verdict != nil && k.verdict(r) == v {
			return true
		}
	}
	return false
}
