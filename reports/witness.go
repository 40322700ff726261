package reports

import (
	"fmt"
	"html/template"
	"sort"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/history"
)

// witness is one violation as the page tells it.
type witness struct {
	N        int
	ID       string
	Title    string
	Story    string
	Leases   []leaseRow
	Events   []eventRow
	Faults   []string
	Timeline template.HTML
	// Brief witnesses get a table row, not a zoom and event tables.
	Brief bool
}

// FullWitnesses is how many witnesses a page draws in full. A zoomed
// timeline costs thousands of elements when clients retry fast; beyond
// these, a row each keeps the page light (a 60 s setnx-del run's page
// was 15 MB with all 100 kept witnesses drawn), and results.json holds
// every kept witness whole.
const FullWitnesses = 10

type leaseRow struct {
	Who        string
	Token      string
	Invoked    string
	Granted    string
	ValidUntil string
	Budget     string // TTL budget left when the client was told
	Ended      string
	Expires    string // when the key would vanish by itself
}

type eventRow struct {
	Time    string
	Process string
	What    string
	Class   string
}

func (m *model) witnesses() []witness {
	r := m.rf.res
	if r == nil || r.Exclusion == nil {
		return nil
	}
	var ttl int64
	if m.rf.cfg != nil {
		ttl = int64(m.rf.cfg.TTL)
	}
	out := make([]witness, 0, len(r.Exclusion.Violations))
	for i, v := range r.Exclusion.Violations {
		w := witness{N: i + 1, ID: fmt.Sprintf("violation-%d", i+1), Story: v.Story}
		w.Title = fmt.Sprintf("Processes %d and %d both held %s for %s (from %s)", v.First.Process, v.Second.Process, v.Key, fmtD(v.Overlap), fmtT(v.OverlapStart))
		if i >= FullWitnesses {
			w.Brief = true
			for _, f := range v.Faults {
				w.Faults = append(w.Faults, describeFault(f))
			}
			out = append(out, w)
			continue
		}
		for _, h := range []checker.Hold{v.First, v.Second} {
			w.Leases = append(w.Leases, m.leaseRow(h, ttl))
		}
		w.Events = m.violationEvents(v)
		for _, f := range v.Faults {
			w.Faults = append(w.Faults, describeFault(f))
		}
		w.Timeline = m.zoom(v, i)
		out = append(out, w)
	}
	return out
}

func describeFault(f checker.Fault) string {
	fs := spanOf(f)
	return fs.describe()
}

func (m *model) leaseRow(h checker.Hold, ttl int64) leaseRow {
	row := leaseRow{Who: fmt.Sprintf("process %d", h.Process), Token: h.Token,
		Invoked: fmtTP(h.Invoke), Granted: fmtTP(h.Start) + fmt.Sprintf(" (after %s)", fmtD(h.Start-h.Invoke))}
	if h.Fence != nil {
		row.Token += fmt.Sprintf(", fence %d", *h.Fence)
	}
	if h.ValidUntil != nil {
		row.ValidUntil = fmtTP(*h.ValidUntil)
		row.Budget = fmt.Sprintf("%s of %s left", fmtD(*h.ValidUntil-h.Start), fmtD(ttl))
		if ttl == 0 {
			row.Budget = fmtD(*h.ValidUntil-h.Start) + " left"
		}
	} else if m.renewsInBackground() {
		row.ValidUntil = "none of its own: held until released or the client learns the lease is gone"
		row.Budget = fmt.Sprintf("a %s lease, renewed by the client in the background", fmtD(ttl))
	} else {
		row.ValidUntil = "no expiry"
		row.Budget = "unbounded"
	}
	row.Ended = endReason(h)
	if h.ValidUntil != nil && ttl > 0 {
		// The server set the key's expiry when it ran the SET, somewhere
		// between the invoke and the ok, on its own clock.
		row.Expires = fmt.Sprintf("between %s and %s, if nobody deleted it and the server's clock kept time (not observed)", fmtTP(h.Invoke+ttl), fmtTP(h.Start+ttl))
	} else if h.ValidUntil == nil && m.renewsInBackground() {
		row.Expires = fmt.Sprintf("%s after the last renewal to reach the server: while the client is stopped, nothing renews it", fmtD(ttl))
	} else if h.ValidUntil == nil {
		row.Expires = "never by itself (no TTL)"
	}
	return row
}

// renewsInBackground reports whether the run's lock keeps its lease alive
// from a background task (etcd-session's keep-alive): its holds have no
// deadline, yet their keys do expire when the renewals stop.
func (m *model) renewsInBackground() bool { return described(m.rf.info).BackgroundRenewal }

func endReason(h checker.Hold) string {
	switch h.EndReason {
	case checker.EndRelease:
		return "released at " + fmtT(h.End)
	case checker.EndValidUntil:
		return "lease ran out at " + fmtT(h.End)
	case checker.EndLost:
		return "learned it had lost the lock at " + fmtT(h.End)
	case checker.EndRevoked:
		return "its lock cancelled its context (" + h.RevokedBy + ") at " + fmtT(h.End)
	case checker.EndCrash:
		return "crashed at " + fmtT(h.End)
	case checker.EndAbandoned:
		return "acquired again at " + fmtT(h.End)
	}
	return "never (still believed at the end)"
}

// violationEvents lists, in time order, the operations that tell the
// violation: both acquires, what ended each belief, the other processes'
// releases in between and the faults.
func (m *model) violationEvents(v checker.Violation) []eventRow {
	type ev struct {
		t int64
		r eventRow
	}
	var evs []ev
	add := func(t int64, p, what, cls string) {
		evs = append(evs, ev{t, eventRow{Time: fmtTP(t), Process: p, What: what, Class: cls}})
	}
	for i, h := range []checker.Hold{v.First, v.Second} {
		p := fmt.Sprint(h.Process)
		role := "first"
		if i == 1 {
			role = "second"
		}
		add(h.Invoke, p, "invokes acquire ("+role+" holder)", "")
		desc := "acquire ok: token " + h.Token
		if h.Fence != nil {
			desc += fmt.Sprintf(", fence %d", *h.Fence)
		}
		if h.ValidUntil != nil {
			desc += ", valid until " + fmtT(*h.ValidUntil)
		} else {
			desc += ", no deadline"
		}
		add(h.Start, p, desc, "grant")
		if h.End != checker.Never {
			what := endReason(h)
			if op, ok := m.endOps[h.EndIndex]; ok {
				if op.Process != history.NemesisProcess {
					what += fmt.Sprintf(" (%s %s)", op.Type, op.F)
					if op.Error != "" {
						what += ": " + op.Error
					}
				}
			}
			add(h.End, p, "belief ends: "+what, "end")
		}
	}
	for _, e := range v.Between {
		add(e.Time, fmt.Sprint(e.Process), eventText(e), "cause")
	}
	for _, f := range v.Faults {
		p := "nemesis"
		add(f.Start, p, "fault starts: "+describeFault(f), "fault")
		if f.End != f.Start && f.End != checker.Never {
			add(f.End, p, "fault ends: "+f.Name, "fault")
		}
	}
	add(v.OverlapStart, "", fmt.Sprintf("overlap begins: processes %d and %d both hold %s", v.First.Process, v.Second.Process, v.Key), "overlap")
	if v.OverlapEnd != checker.Never {
		add(v.OverlapEnd, "", fmt.Sprintf("overlap ends after %s", fmtD(v.Overlap)), "overlap")
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].t < evs[j].t })
	out := make([]eventRow, len(evs))
	for i, e := range evs {
		out[i] = e.r
	}
	return out
}

// zoomWindow is the span of the timeline zoomed around v, for a run whose
// axis ends at end, and the processes it shows: both holders, the
// processes of the events between, and the clients the faults hit.
func zoomWindow(v checker.Violation, end int64) (a, b int64, procs []int) {
	oend := v.OverlapEnd
	if oend == checker.Never {
		oend = end
	}
	a = min(v.First.Start, v.Second.Invoke)
	for _, e := range v.Between {
		a = min(a, e.Time)
	}
	b = max(oend, v.OverlapStart)
	if v.Second.End != checker.Never && v.Second.End-a < 3*(b-a+1) {
		b = max(b, v.Second.End)
	}
	pad := max((b-a)/8, 1_000_000)
	a, b = max(0, a-pad), b+pad
	procs = []int{v.First.Process, v.Second.Process}
	for _, e := range v.Between {
		if !containsInt(procs, e.Process) {
			procs = append(procs, e.Process)
		}
	}
	for _, f := range v.Faults {
		for _, c := range f.Clients {
			if !containsInt(procs, c) {
				procs = append(procs, c)
			}
		}
	}
	return a, b, procs
}

// zoom draws the timeline around violation i: the lanes of the processes
// involved, their leases and beliefs, the cause's events and the faults.
func (m *model) zoom(v checker.Violation, i int) template.HTML {
	a, b, procs := zoomWindow(v, m.end)
	end := v.OverlapEnd
	if end == checker.Never {
		end = m.end
	}
	lanes := make([]lane, len(procs))
	for j, p := range procs {
		lanes[j] = lane{Process: p, Label: fmt.Sprintf("process %d", p)}
		switch p {
		case v.First.Process:
			lanes[j].Label += " (1st)"
		case v.Second.Process:
			lanes[j].Label += " (2nd)"
		}
	}
	var data map[int]*laneData
	if i < len(m.zooms) {
		data = m.zooms[i]
	}
	return m.drawTimeline(timelineSpec{
		sc:     scale{t0: a, t1: b, x0: plotX0, w: plotW},
		lanes:  lanes,
		data:   data,
		leases: true, nodeLanes: len(m.nodes) > 0,
		events: v.Between,
		ops:    true,
		hilite: []span{{Key: v.Key, Start: v.OverlapStart, End: end}},
		label:  fmt.Sprintf("zoomed timeline of violation %d", i+1),
	})
}
