package checker

import (
	"fmt"
	"strings"
)

// A run that found no violation is evidence only if its faults produced
// the moment they are there to produce: a server crash that never hit a
// node holding a live lease proves nothing about crashes. Antithesis calls
// these "sometimes" properties. Each run counts, from its history and its
// fault events, the dangerous moments that happened; a threat declares
// which of them show it was exercised.

// Moment names, as results.json spells them under "exercised".
const (
	MomentStaleActs     = "stale_acts"
	MomentStaleGrants   = "stale_grants"
	MomentAcrossGrants  = "across_grants"
	MomentAcrossExpiry  = "extends_across_expiry"
	MomentSlowReplies   = "slow_replies"
	MomentNodeFaults    = "node_faults_on_live_lease"
	MomentFailovers     = "failovers_on_live_lease"
	MomentHolderCrashes = "holder_crashes"
	MomentRepliesLost   = "replies_lost"
	MomentKilledInOp    = "clients_killed_in_op"
	// MomentMovedClientAcquires: a client whose wall clock a client clock
	// fault had moved asked for a key, or was granted it or held it as
	// another was granted it, while another client's lease on it was live
	// (Options.ClientClockFaults).
	MomentMovedClientAcquires = "moved_client_acquires"
	// MomentMovedClockGrants: a node granted a lease while a clock fault
	// had its clock moved (Options.ClockFaults), as clock-offset does from
	// the first grant on.
	MomentMovedClockGrants = "grants_on_moved_clock"
)

// ExercisedMoment describes one kind of dangerous moment.
type ExercisedMoment struct {
	Name string
	// Description counts it in words: "a stale holder acted" reads
	// "a stale holder acted 14 times".
	Description string
	// Means is what it is, for docs and --help.
	Means string
}

var exercisedMoments = []ExercisedMoment{
	{MomentStaleActs, "a stale holder acted",
		"a holder released, extended or wrote the resource after its lease had run out"},
	{MomentStaleGrants, "another client was granted the key while a stale holder still believed",
		"another client was granted the key while an earlier holder whose lease had run out still believed it held it"},
	{MomentAcrossGrants, "a release or extend was in flight across another client's grant",
		"a release or extend was invoked before, and completed after, another client's grant of the same key"},
	{MomentAcrossExpiry, "an extend was in flight across its lease's expiry",
		"a holder's extend was invoked before its lease ran out (the validity the client believed) and completed at or after it: a race of the extend with the key's expiry"},
	{MomentSlowReplies, "a grant or extend's reply came slower than the drift margin",
		"a grant or extend took longer than the lock's drift margin (1% of the TTL + 2 ms) to come back"},
	{MomentNodeFaults, "a server fault hit a node holding a live lease's key",
		"a crash, restart, pause, clock fault or isolation began on a node that held the key of a lease still live"},
	{MomentFailovers, "a failover came while the old primary's lease was live",
		"a failover began while a lease granted through the old primary was still live"},
	{MomentHolderCrashes, "a holder crashed with its lease live",
		"a client crash or kill hit a process that believed it held a lock whose lease was live"},
	{MomentRepliesLost, "a reply was lost after the server may have applied its request",
		"an acquire, release or extend ran while a fault lost the servers' replies (reply-loss), and its outcome is unknown: the server may have applied it"},
	{MomentKilledInOp, "a client died with a request in flight",
		"a client's process was killed while one of its acquires, releases or extends was pending, between two of the lock's commands with luck"},
	{MomentMovedClientAcquires, "a client whose wall clock was moved asked for or held a key while another client's lease was live",
		"a client whose wall clock a client clock fault had moved asked for a key while another client's lease on it was live, or held it when a grant overlapped another's live lease"},
	{MomentMovedClockGrants, "a node whose clock was moved granted a lease",
		"a node granted a lease while a clock fault had its wall clock moved off the clients'"},
}

// ExercisedMoments lists every moment, in the order reports show them.
func ExercisedMoments() []ExercisedMoment { return append([]ExercisedMoment(nil), exercisedMoments...) }

// Exercised counts a run's dangerous moments (results.json "exercised").
type Exercised struct {
	StaleActs           int `json:"stale_acts"`
	StaleGrants         int `json:"stale_grants"`
	AcrossGrants        int `json:"across_grants"`
	SlowReplies         int `json:"slow_replies"`
	NodeFaults          int `json:"node_faults_on_live_lease"`
	Failovers           int `json:"failovers_on_live_lease"`
	HolderCrashes       int `json:"holder_crashes"`
	RepliesLost         int `json:"replies_lost"`
	KilledInOp          int `json:"clients_killed_in_op"`
	MovedClientAcquires int `json:"moved_client_acquires"`
	MovedClockGrants    int `json:"grants_on_moved_clock"`
	AcrossExpiry        int `json:"extends_across_expiry"`
}

// counter is the field a moment's name counts in.
func (e *Exercised) counter(name string) *int {
	switch name {
	case MomentStaleActs:
		return &e.StaleActs
	case MomentStaleGrants:
		return &e.StaleGrants
	case MomentAcrossGrants:
		return &e.AcrossGrants
	case MomentAcrossExpiry:
		return &e.AcrossExpiry
	case MomentSlowReplies:
		return &e.SlowReplies
	case MomentNodeFaults:
		return &e.NodeFaults
	case MomentFailovers:
		return &e.Failovers
	case MomentHolderCrashes:
		return &e.HolderCrashes
	case MomentRepliesLost:
		return &e.RepliesLost
	case MomentKilledInOp:
		return &e.KilledInOp
	case MomentMovedClientAcquires:
		return &e.MovedClientAcquires
	case MomentMovedClockGrants:
		return &e.MovedClockGrants
	}
	return nil
}

// Count is how often the named moment happened; 0 for a name it does not
// know and for a nil Exercised (a run stored before moments were counted).
func (e *Exercised) Count(name string) int {
	if e == nil {
		return 0
	}
	if p := e.counter(name); p != nil {
		return *p
	}
	return 0
}

// Total is every moment's count summed.
func (e *Exercised) Total() int {
	n := 0
	for _, m := range exercisedMoments {
		n += e.Count(m.Name)
	}
	return n
}

// SummaryLine is the moments for a run's summary; it says so when none
// happened, so that a safe verdict never reads as evidence by itself.
func (e *Exercised) SummaryLine() string {
	var parts []string
	for _, m := range exercisedMoments {
		if n := e.Count(m.Name); n > 0 {
			parts = append(parts, fmt.Sprintf("%s %s", m.Description, Times(n)))
		}
	}
	if len(parts) == 0 {
		return "exercised: no dangerous moment happened (no stale holder acted, no server fault hit a live lease): a safe verdict here is no evidence"
	}
	return "exercised: " + strings.Join(parts, "; ")
}

// Times is "once", "twice" or "N times", for counts in sentences.
func Times(n int) string {
	switch n {
	case 1:
		return "once"
	case 2:
		return "twice"
	}
	return fmt.Sprintf("%d times", n)
}
