package checker

import (
	"fmt"
	"strings"
)

// Write is an accepted write to the protected resource.
type Write struct {
	Process int    `json:"process"`
	N       int64  `json:"n"`
	Token   string `json:"token,omitempty"`
	Fence   *int64 `json:"fence,omitempty"`
	Invoke  int64  `json:"invoke"`
	Time    int64  `json:"time"` // completion
	Index   int64  `json:"index"`
}

// Interleaving is a pair of accepted writes of the same value: both writers
// read n-1, so one increment overwrote the other.
type Interleaving struct {
	Key    string `json:"key"`
	First  Write  `json:"first"`
	Second Write  `json:"second"`
	Story  string `json:"story"`
}

// ResourceCounts tallies the resource's reads and writes.
type ResourceCounts struct {
	Writes        int `json:"writes"`
	Accepted      int `json:"accepted"`
	RejectedStale int `json:"rejected_stale"`
	UnknownWrites int `json:"unknown_writes"`
	Reads         int `json:"reads"`
	RejectedReads int `json:"rejected_reads"`
	// Final is the value of the last ok read invoked after every write had
	// completed; nil when there is none (in a result: the single key's,
	// nil with several keys).
	Final       *int64 `json:"final"`
	LostUpdates int    `json:"lost_updates"`
	// Duplicates counts accepted writes that wrote a value already written.
	Duplicates int `json:"duplicates"`
}

// add sums o's counts into c (not Final, which is one key's).
func (c *ResourceCounts) add(o ResourceCounts) {
	c.Writes += o.Writes
	c.Accepted += o.Accepted
	c.RejectedStale += o.RejectedStale
	c.UnknownWrites += o.UnknownWrites
	c.Reads += o.Reads
	c.RejectedReads += o.RejectedReads
	c.LostUpdates += o.LostUpdates
	c.Duplicates += o.Duplicates
}

// ResourceKey is the resource checker's tally for one key.
type ResourceKey struct {
	Key string `json:"key"`
	ResourceCounts
	Valid bool `json:"valid"`
}

// ResourceResult is what the application would have suffered: the counter
// workload's reads and writes under the lock.
type ResourceResult struct {
	// Checked is false when the history has no writes (not a counter run);
	// Valid is then true.
	Checked bool `json:"checked"`
	Valid   bool `json:"valid"`
	ResourceCounts
	Interleaved []Interleaving `json:"interleaved,omitempty"`
	Keys        []ResourceKey  `json:"keys,omitempty"`
	Explanation string         `json:"explanation,omitempty"`
}

// judgeResourceKey judges one key's tally, whose Final is set, and says
// why it is not valid.
func judgeResourceKey(ks *ResourceKey) []string {
	var why []string
	k := ks.Key
	ks.Valid = true
	if ks.Final != nil && *ks.Final < int64(ks.Accepted) {
		ks.LostUpdates = ks.Accepted - int(*ks.Final)
	}
	if ks.Duplicates > 0 {
		ks.Valid = false
		why = append(why, fmt.Sprintf("%s: %d accepted writes wrote a value already written (interleaved read-modify-write)", k, ks.Duplicates))
	}
	if ks.LostUpdates > 0 {
		ks.Valid = false
		why = append(why, fmt.Sprintf("%s: %d accepted increments but the final value is %d: %d lost updates", k, ks.Accepted, *ks.Final, ks.LostUpdates))
	}
	if ks.Final != nil && *ks.Final > int64(ks.Accepted+ks.UnknownWrites) {
		ks.Valid = false
		why = append(why, fmt.Sprintf("%s: final value %d exceeds the %d accepted and %d unknown writes", k, *ks.Final, ks.Accepted, ks.UnknownWrites))
	}
	return why
}

// addKey judges one key's tally, whose Final is set, adds it to the
// result, and returns why with the reasons it is not valid added.
func (r *ResourceResult) addKey(ks *ResourceKey, why []string) []string {
	why = append(why, judgeResourceKey(ks)...)
	r.Checked = true
	r.Valid = r.Valid && ks.Valid
	r.add(ks.ResourceCounts)
	r.Keys = append(r.Keys, *ks)
	return why
}

// finish sets the single key's final value and the explanation.
func (r *ResourceResult) finish(why []string) {
	if len(r.Keys) == 1 {
		r.Final = r.Keys[0].Final
	}
	r.Explanation = strings.Join(why, "; ")
}

func interleaving(key string, first, second Write) Interleaving {
	desc := func(w Write) string {
		parts := tokenFence(w.Token, w.Fence)
		s := fmt.Sprintf("process %d", w.Process)
		if len(parts) > 0 {
			s += " (" + strings.Join(parts, ", ") + ")"
		}
		return s
	}
	story := fmt.Sprintf("%s and %s both wrote %d to %s, accepted at %s and %s: each had read %d, so one increment overwrote the other.",
		desc(first), desc(second), second.N, key, fmtT(first.Time), fmtT(second.Time), second.N-1)
	return Interleaving{Key: key, First: first, Second: second, Story: story}
}
