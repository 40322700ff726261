package checker

import (
	"sort"

	"github.com/lockjepsen/lockjepsen/history"
)

// Window is a span during which clients tried to acquire a key and nobody
// held it (by anyone's belief) and every attempt failed or went unanswered.
type Window struct {
	Key      string `json:"key"`
	Start    int64  `json:"start"`
	End      int64  `json:"end"`
	Duration int64  `json:"duration_ns"`
	Attempts int    `json:"attempts"`
	Failed   int    `json:"failed"`
	Unknown  int    `json:"unknown"`
	// Recovered is true when a hold followed the window.
	Recovered bool `json:"recovered"`
}

// AcquireCounts tallies acquire attempts by outcome.
type AcquireCounts struct {
	AcquireAttempts int     `json:"acquire_attempts"`
	AcquireOK       int     `json:"acquire_ok"`
	AcquireFail     int     `json:"acquire_fail"`
	AcquireUnknown  int     `json:"acquire_unknown"`
	SuccessRate     float64 `json:"success_rate"`
}

func (a *AcquireCounts) add(o AcquireCounts) {
	a.AcquireAttempts += o.AcquireAttempts
	a.AcquireOK += o.AcquireOK
	a.AcquireFail += o.AcquireFail
	a.AcquireUnknown += o.AcquireUnknown
}

// count adds one attempt with its outcome (info: unknown).
func (a *AcquireCounts) count(outcome history.Type) {
	a.AcquireAttempts++
	switch outcome {
	case history.OK:
		a.AcquireOK++
	case history.Fail:
		a.AcquireFail++
	default:
		a.AcquireUnknown++
	}
}

func (a *AcquireCounts) rate() {
	if a.AcquireAttempts > 0 {
		a.SuccessRate = float64(a.AcquireOK) / float64(a.AcquireAttempts)
	}
}

// KeyLiveness is the liveness tally for one key.
type KeyLiveness struct {
	Key string `json:"key"`
	AcquireCounts
	Windows int   `json:"windows"`
	Longest int64 `json:"longest_ns"`
}

// StuckKey is a key that nobody could acquire from Since to the end of the
// history although clients kept trying.
type StuckKey struct {
	Key   string `json:"key"`
	Since int64  `json:"since"`
	For   int64  `json:"for_ns"`
}

// LivenessResult is the liveness checker's report.
type LivenessResult struct {
	AcquireCounts
	// Windows counts unavailability windows; Top lists the longest ones.
	Windows int      `json:"windows"`
	Longest *Window  `json:"longest,omitempty"`
	Top     []Window `json:"top,omitempty"`
	// Stuck is set when a key was unavailable from some point to the end of
	// the history for at least Options.StuckAfter.
	Stuck      bool          `json:"stuck"`
	StuckKey   string        `json:"stuck_key,omitempty"`
	StuckSince int64         `json:"stuck_since,omitempty"`
	StuckAfter int64         `json:"stuck_after_ns"`
	StuckKeys  []StuckKey    `json:"stuck_keys,omitempty"`
	Keys       []KeyLiveness `json:"keys,omitempty"`
}

const topWindows = 10

// addKey adds one key's tallies to the totals.
func (r *LivenessResult) addKey(kl KeyLiveness) {
	r.add(kl.AcquireCounts)
	r.Keys = append(r.Keys, kl)
}

// finish derives the rate, the longest window and the first stuck key
// from the totals, windows and stuck keys.
func (r *LivenessResult) finish() {
	r.rate()
	if len(r.Top) > 0 {
		l := r.Top[0]
		r.Longest = &l
	}
	if len(r.StuckKeys) > 0 {
		sort.SliceStable(r.StuckKeys, func(i, j int) bool { return r.StuckKeys[i].Since < r.StuckKeys[j].Since })
		r.Stuck, r.StuckKey, r.StuckSince = true, r.StuckKeys[0].Key, r.StuckKeys[0].Since
	}
}

// insertTop keeps the topWindows longest windows, longest first, without
// sorting all of them.
func insertTop(top []Window, w Window) []Window {
	if len(top) == topWindows && top[len(top)-1].Duration >= w.Duration {
		return top
	}
	i := sort.Search(len(top), func(i int) bool { return top[i].Duration < w.Duration })
	if len(top) < topWindows {
		top = append(top, Window{})
	}
	copy(top[i+1:], top[i:])
	top[i] = w
	return top
}
