package checker

import (
	"math"
	"sort"

	"github.com/lockjepsen/lockjepsen/history"
)

// Reasons a believed hold ended (Hold.EndReason).
const (
	EndRelease    = "release"     // the holder invoked its release
	EndValidUntil = "valid-until" // the lease's valid_until (as extended) passed
	EndLost       = "lost"        // a failed extend or release told the holder it had lost the lock
	EndCrash      = "crash"       // the nemesis crashed the holder
	EndAbandoned  = "abandoned"   // the holder invoked a new acquire without releasing
	EndOpen       = "open"        // nothing ended it: the belief never ends
	// EndRevoked: the lock ended the belief itself (it cancelled the
	// context it gave the holder: a background event with value.ended).
	EndRevoked = "revoked"
)

// Never is the End of a hold whose belief never ends (no TTL, never
// released).
const Never = math.MaxInt64

// Hold is a believed hold: the span during which a client, going only by
// what it had been told, was entitled to think it held the lock.
type Hold struct {
	Key     string `json:"key"`
	Process int    `json:"process"`
	Token   string `json:"token,omitempty"`
	Fence   *int64 `json:"fence,omitempty"`
	// Nodes granted the lease, when the lock says (multi-node locks, and
	// the primary a Sentinel client was talking to).
	Nodes []string `json:"nodes,omitempty"`
	// Invoke is the acquire's invocation time; the grant happened somewhere
	// in [Invoke, Start], which is what the linearizability check uses.
	Invoke int64 `json:"invoke"`
	// Start is the ok completion of the acquire: the belief starts when the
	// client is told, not when the server decided.
	Start int64 `json:"start"`
	// End is when the belief ends; Never when it does not. End == Start
	// means the client never had a usable hold (its lease had already run
	// out when the ok arrived, or it crashed first).
	End       int64  `json:"end"`
	EndReason string `json:"end_reason"`
	// AcquireIndex is the event index of the ok acquire.
	AcquireIndex int64 `json:"acquire_index"`
	// EndIndex is the event that ended the belief (release invoke, failed
	// extend/release completion, crash, new acquire), -1 when the lease ran
	// out or the belief never ended.
	EndIndex int64 `json:"end_index"`
	// ValidUntil is the last valid_until the client was told (acquire or
	// ok extend); nil means no limit.
	ValidUntil *int64 `json:"valid_until,omitempty"`
	// ValidFrom is when the operation that told ValidUntil started (its
	// invoke, or the lock's own stamp of its first send): no server can
	// keep the key past ValidFrom + TTL.
	ValidFrom int64 `json:"valid_from"`
	// RevokedBy is why the lock ended the belief itself (EndRevoked):
	// history.EndedNotification, EndedDeadline or EndedError.
	RevokedBy string `json:"revoked_by,omitempty"`
}

// Empty reports whether the hold confers no belief at all. Empty holds take
// part in neither the exclusion nor the linearizability check, so that the
// two agree: a client whose lease expired before it heard "ok" never
// believed it held the lock.
func (h *Hold) Empty() bool { return h.End <= h.Start }

// Holds returns the believed holds of a history, one per ok acquire, in
// order of Start: the Tracker's, every one kept.
func Holds(ops []history.Op) []Hold {
	var hs []*Belief[struct{}]
	t := Tracker[struct{}]{OnGrant: func(h *Belief[struct{}]) { hs = append(hs, h) }}
	for i := range ops {
		t.Observe(&ops[i])
	}
	t.EndRemaining()
	out := make([]Hold, len(hs))
	for i, h := range hs {
		out[i] = h.Hold
	}
	// Holds are made at their ok completion, so they are in Start order for
	// any validated history; sort only if given something else.
	if !sort.SliceIsSorted(out, func(i, j int) bool { return out[i].Start < out[j].Start }) {
		sort.SliceStable(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	}
	return out
}
