package checker

import (
	"cmp"
	"slices"
	"sort"
	"time"

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

// Liveness measures acquire success and unavailability.
func Liveness(ops []history.Op, opts Options) *LivenessResult {
	return scan(ops).liveness(opts.withDefaults())
}

type attempt struct {
	invoke, end int64
	outcome     history.Type
	open        bool // never completed: counts as unknown, but as a failure for windows
}

// summarizedAttempts adds the failed acquires of the summaries, each as
// spanning its summary, and keeps every key's attempts in invoke order.
func (a *analysis) summarizedAttempts(attempts map[string][]attempt) {
	if len(a.summaries) == 0 {
		return
	}
	for _, i := range a.summaries {
		op := &a.ops[i]
		for range op.Value.Count {
			attempts[op.Key] = append(attempts[op.Key], attempt{invoke: *op.Value.From, end: *op.Value.To, outcome: history.Fail})
		}
	}
	for _, atts := range attempts {
		slices.SortStableFunc(atts, func(x, y attempt) int { return cmp.Compare(x.invoke, y.invoke) })
	}
}

func (a *analysis) liveness(opts Options) *LivenessResult {
	r := &LivenessResult{StuckAfter: int64(opts.StuckAfter)}
	attempts := map[string][]attempt{}
	for _, c := range a.calls {
		inv := &a.ops[c.inv]
		if inv.F != history.Acquire {
			continue
		}
		o := a.outcome(c)
		attempts[inv.Key] = append(attempts[inv.Key], attempt{invoke: inv.Time, end: a.endOf(c),
			outcome: o, open: c.comp < 0})
	}
	a.summarizedAttempts(attempts)
	// Union of believed holds per key, in Start order.
	type span struct{ start, end int64 }
	union := map[string][]span{}
	for i := range a.holds {
		h := &a.holds[i]
		if h.Empty() {
			continue
		}
		u := union[h.Key]
		if n := len(u); n > 0 && h.Start <= u[n-1].end {
			u[n-1].end = max(u[n-1].end, h.End)
		} else {
			u = append(u, span{h.Start, h.End})
		}
		union[h.Key] = u
	}
	keys := make([]string, 0, len(attempts))
	for k := range attempts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	// Attempts must reach this close to the end for a key to count as stuck
	// rather than abandoned by the workload.
	slack := max(int64(time.Second), a.end/10)
	for _, k := range keys {
		atts, u := attempts[k], union[k]
		kl := KeyLiveness{Key: k}
		for _, at := range atts {
			kl.count(at.outcome)
		}
		kl.rate()
		// Walk the gaps of the union; attempts are in invoke order. An
		// attempt counts for a gap when it was trying during the gap and
		// did not get the lock, even if it began during the previous hold
		// (clients blocked on a paused node) or ended after the next hold
		// began: someone wanted the lock while nobody held it.
		j := 0
		gapStart := int64(0)
		var carry []attempt // attempts that may still run into the next gap
		var last *Window
		for g := 0; g <= len(u); g++ {
			gapEnd := int64(Never)
			if g < len(u) {
				gapEnd = u[g].start
			}
			cand := carry[:0:0]
			for _, at := range carry {
				if at.end > gapStart {
					cand = append(cand, at)
				}
			}
			for ; j < len(atts) && atts[j].invoke < gapEnd; j++ {
				cand = append(cand, atts[j])
			}
			carry = carry[:0]
			w := Window{Key: k, Recovered: g < len(u)}
			first, lastEnd := int64(Never), int64(0)
			for _, at := range cand {
				if at.end > gapEnd {
					carry = append(carry, at)
				}
				if at.end <= gapStart || at.outcome == history.OK {
					continue
				}
				w.Attempts++
				first = min(first, max(at.invoke, gapStart))
				lastEnd = max(lastEnd, at.end)
				if at.outcome == history.Fail || at.open {
					w.Failed++
				} else {
					w.Unknown++
				}
			}
			if w.Failed+w.Unknown > 0 {
				w.Start = first
				if w.Recovered {
					w.End = gapEnd
				} else {
					w.End = min(lastEnd, a.end)
				}
				w.Duration = max(0, w.End-w.Start)
				kl.Windows++
				kl.Longest = max(kl.Longest, w.Duration)
				r.Windows++
				r.Top = insertTop(r.Top, w)
				last = &w
			} else {
				last = nil
			}
			if g < len(u) {
				gapStart = u[g].end
				if gapStart == Never {
					break
				}
			}
		}
		if last != nil && !last.Recovered && last.End >= a.end-slack && a.end-last.Start >= int64(opts.StuckAfter) {
			r.StuckKeys = append(r.StuckKeys, StuckKey{Key: k, Since: last.Start, For: a.end - last.Start})
		}
		r.addKey(kl)
	}
	r.finish()
	return r
}

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
