package checker

import (
	"fmt"
	"sort"
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
	// Between are other processes' release and extend completions on the
	// key between First.Start and Second.Start: usually the cause (someone
	// deleting a lock that was not theirs).
	Between []Event `json:"between,omitempty"`
	// Faults are the nemesis faults active during the overlap and, when the
	// TTL is known, those active in the TTL before First.Start: the cause is
	// often a fault that ended just before the overlap (a client paused past
	// its lease wakes and deletes someone's key). A fault whose End is before
	// OverlapStart is one of the latter.
	Faults []Fault `json:"faults,omitempty"`
	Story  string  `json:"story"`
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

// Exclusion checks that no two believed holds on one key overlap.
func Exclusion(ops []history.Op) *ExclusionResult { return scan(ops).exclusion(0) }

// ExclusionWith is Exclusion with options: Options.TTL widens the faults
// listed with a violation to those active in the TTL before it.
func ExclusionWith(ops []history.Op, opts Options) *ExclusionResult {
	return scan(ops).exclusion(opts.TTL)
}

func (a *analysis) exclusion(ttl time.Duration) *ExclusionResult {
	r := &ExclusionResult{Holds: len(a.holds)}
	type pair struct{ first, second int }
	var found []pair
	// Sweep in Start order keeping, per key, the hold whose belief reaches
	// furthest: a new hold overlaps some earlier one iff it overlaps that
	// one, and a hold that overlaps none starts a new connected group.
	type keyState struct {
		furthest   int
		inIncident bool // the current group already counts as an incident
	}
	active := map[string]*keyState{}
	for i := range a.holds {
		h := &a.holds[i]
		if h.Empty() {
			r.EmptyHolds++
			continue
		}
		ks := active[h.Key]
		if ks == nil {
			active[h.Key] = &keyState{furthest: i}
			continue
		}
		j := ks.furthest
		if h.Start < a.holds[j].End {
			r.Count++
			if !ks.inIncident {
				r.Incidents++
				ks.inIncident = true
			}
			if len(found) < MaxViolations {
				found = append(found, pair{j, i})
			}
		} else {
			ks.inIncident = false
		}
		if h.End > a.holds[j].End {
			ks.furthest = i
		}
	}
	r.Keys = len(active)
	r.Valid = r.Count == 0
	if len(found) == 0 {
		return r
	}
	between := a.releaseExtendByKey()
	for _, p := range found {
		r.Violations = append(r.Violations, a.violation(&a.holds[p.first], &a.holds[p.second], between, ttl))
	}
	return r
}

type keyedEvent struct {
	time int64
	idx  int // index of the completion event
	inv  int // index of the invoke event
}

// releaseExtendByKey lists release and extend completions per key in time
// order; built only when there are violations to explain.
func (a *analysis) releaseExtendByKey() map[string][]keyedEvent {
	m := map[string][]keyedEvent{}
	for _, c := range a.calls {
		inv := &a.ops[c.inv]
		if c.comp < 0 || (inv.F != history.Release && inv.F != history.Extend) {
			continue
		}
		m[inv.Key] = append(m[inv.Key], keyedEvent{a.ops[c.comp].Time, c.comp, c.inv})
	}
	for _, evs := range m {
		sort.SliceStable(evs, func(i, j int) bool { return evs[i].time < evs[j].time })
	}
	return m
}

func (a *analysis) violation(first, second *Hold, between map[string][]keyedEvent, ttl time.Duration) Violation {
	v := Violation{Key: second.Key, First: *first, Second: *second,
		OverlapStart: second.Start, OverlapEnd: min(first.End, second.End)}
	end := v.OverlapEnd
	if end == Never {
		end = max(a.end, v.OverlapStart)
	}
	v.Overlap = end - v.OverlapStart
	evs := between[v.Key]
	lo := sort.Search(len(evs), func(i int) bool { return evs[i].time >= first.Start })
	hi := sort.Search(len(evs), func(i int) bool { return evs[i].time > second.Start })
	for i := hi - 1; i >= lo && len(v.Between) < maxBetween; i-- {
		comp, inv := &a.ops[evs[i].idx], &a.ops[evs[i].inv]
		if comp.Process == first.Process {
			continue
		}
		e := Event{Index: comp.Index, Time: comp.Time, Process: comp.Process, F: inv.F, Type: comp.Type, Error: comp.Error}
		if inv.Value != nil {
			e.Token = inv.Value.Token
		}
		v.Between = append(v.Between, e)
	}
	// Oldest first reads better.
	for i, j := 0, len(v.Between)-1; i < j; i, j = i+1, j-1 {
		v.Between[i], v.Between[j] = v.Between[j], v.Between[i]
	}
	from := v.OverlapStart
	if ttl > 0 {
		from = min(from, first.Start-int64(ttl))
	}
	for _, f := range a.faults {
		if f.Start <= end && f.End >= from {
			v.Faults = append(v.Faults, f.Fault)
		}
	}
	v.Story = v.story()
	return v
}

func (h *Hold) describeAcquire() string {
	var parts []string
	if h.Token != "" {
		parts = append(parts, "token "+h.Token)
	}
	if h.Fence != nil {
		parts = append(parts, fmt.Sprintf("fence %d", *h.Fence))
	}
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
	case EndCrash:
		return "until it crashed at " + fmtT(h.End)
	case EndAbandoned:
		return "until it tried to acquire again at " + fmtT(h.End)
	default:
		return "and never stopped believing it held it"
	}
}

func (v *Violation) story() string {
	f, s := &v.First, &v.Second
	var b strings.Builder
	fmt.Fprintf(&b, "process %d held %s from %s (acquired, %s) %s; ", f.Process, v.Key, fmtT(f.Start), f.describeAcquire(), f.describeEnd())
	fmt.Fprintf(&b, "process %d acquired %s at %s (%s) while %d still believed it held it — %s of overlap",
		s.Process, v.Key, fmtT(s.Start), s.describeAcquire(), f.Process, fmtD(v.Overlap))
	if v.OverlapEnd == Never {
		b.WriteString(" (to the end of the history)")
	}
	b.WriteString(".")
	if len(v.Between) > 0 {
		b.WriteString(" In between, ")
		for i, e := range v.Between {
			switch {
			case i > 0 && i == len(v.Between)-1:
				b.WriteString(" and ")
			case i > 0:
				b.WriteString(", ")
			}
			b.WriteString(e.Describe())
		}
		b.WriteString(".")
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

// Describe tells the event in words, as the stories do.
func (e *Event) Describe() string {
	s := fmt.Sprintf("process %d's %s", e.Process, e.F)
	if e.Token != "" {
		s += " (token " + e.Token + ")"
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
