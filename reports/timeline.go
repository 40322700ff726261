package reports

import (
	"fmt"
	"html/template"
	"sort"
	"strings"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/history"
)

// Geometry shared by the timeline and the plots, so that their time axes
// line up on the page.
const (
	svgW   = 1200.0
	plotX0 = 150.0
	plotW  = svgW - plotX0 - 16
	cols   = int(plotW) // pixel columns the plots aggregate into
)

// model is everything the page is drawn from.
type model struct {
	rf      *runFiles
	hr      *history.LenientRead
	histErr error
	ops     []history.Op
	end     int64 // the time axis runs over [0, end]
	holds   []checker.Hold
	red     []bool
	ovl     []span
	faults  []faultSpan
	lanes   []lane
	clients int
	nodes   []cluster.Node
	keys    []string
	byProc  map[int][]int // process -> indices of its holds, in start order
}

func newModel(rf *runFiles) *model {
	m := &model{rf: rf}
	m.hr, m.histErr = history.ReadLenient(rf.dir + "/" + historyFile)
	if m.hr != nil {
		m.ops = m.hr.Ops
	}
	m.end = history.EndTime(m.ops)
	if rf.cfg != nil {
		m.clients = rf.cfg.Clients
		if m.end == 0 {
			m.end = int64(rf.cfg.TimeLimit + rf.cfg.Recovery)
		}
	}
	// A history of a few µs (a run killed at once) still gets a readable
	// axis.
	m.end = max(m.end, 100_000_000)
	m.holds = checker.Holds(m.ops)
	m.red, m.ovl = overlaps(m.holds, m.end)
	m.faults = faultSpans(m.ops)
	m.lanes = clientLanes(m.clients, m.holds, m.faults)
	m.byProc = map[int][]int{}
	keys := map[string]bool{}
	for i := range m.holds {
		m.byProc[m.holds[i].Process] = append(m.byProc[m.holds[i].Process], i)
		keys[m.holds[i].Key] = true
	}
	if len(keys) == 0 && rf.cfg != nil {
		for k := 0; k < max(1, rf.cfg.Keys); k++ {
			keys[fmt.Sprintf("lock-%d", k)] = true
		}
	}
	for k := range keys {
		m.keys = append(m.keys, k)
	}
	sort.Strings(m.keys)
	if rf.info != nil {
		m.nodes = rf.info.Nodes
	}
	if len(m.nodes) == 0 {
		var ns []cluster.Node
		if readJSON(rf.dir+"/"+nodesFile, &ns) == nil {
			m.nodes = ns
		}
	}
	return m
}

// nodeFaults are the applied server faults that hit node name (by its
// name in the fault's targets).
func (m *model) nodeHit(f *faultSpan, name string) bool {
	for _, t := range f.Targets {
		if t == name || strings.HasPrefix(t, name+" ") || strings.HasSuffix(t, " "+name) || strings.Contains(t, "→ "+name) || strings.Contains(t, "->"+name) {
			return true
		}
	}
	return false
}

// faultLabel is the short text drawn inside a node's fault bar.
func (m *model) faultLabel(f *faultSpan) string {
	d := m.faultDraw(f.Name)
	switch {
	case d.Label == "":
		return f.Name
	case !d.LabelDetail:
		return d.Label
	case f.Detail == "":
		return f.Name // a bare "clock" says less than the fault's name
	}
	// "wall clock +1.500s for 2s" under the label "clock": "clock +1.500s".
	detail := f.Detail
	if _, after, ok := strings.Cut(detail, d.Label+" "); ok {
		detail = after
	}
	if i := strings.Index(detail, " for "); i > 0 {
		detail = detail[:i]
	}
	return d.Label + " " + detail
}

func (f *faultSpan) describe() string {
	s := f.Name
	switch {
	case len(f.Targets) > 0:
		s += " on " + strings.Join(f.Targets, ", ")
	case len(f.Clients) > 0:
		s += fmt.Sprintf(" of processes %v", f.Clients)
	}
	switch {
	case !f.applied():
		s += fmt.Sprintf(" (%s at %s)", f.Phase, fmtT(f.Start))
	case f.End == f.Start:
		s += " at " + fmtT(f.Start)
	case f.Open:
		s += " from " + fmtT(f.Start) + ", never stopped"
	default:
		s += fmt.Sprintf(" from %s to %s (%s)", fmtT(f.Start), fmtT(f.End), fmtD(f.End-f.Start))
	}
	if f.Detail != "" {
		s += ": " + f.Detail
	}
	return s
}

// timelineSpec says what one timeline drawing shows.
type timelineSpec struct {
	sc        scale
	lanes     []lane // client lanes
	keyLanes  bool   // a lane per key: anyone's holds, overlaps, unavailability
	nodeLanes bool
	// marks are violation markers on the key lanes (index into stored
	// violations), with links to their witnesses.
	marks []checker.Violation
	// leases draws each hold's lease (acquire invoke to valid_until) as a
	// thin outline behind the belief: only in zoomed timelines.
	leases bool
	events []checker.Event // extra event markers (a zoom's "in between")
	ops    bool            // draw each lane's operations under its holds
	hilite []span          // overlap spans to hilite across lanes
	phase  int64           // end of the fault phase, 0 for none
	label  string
}

const (
	laneH   = 18.0
	laneGap = 4.0
	axisH   = 22.0
)

// drawTimeline draws lanes of holds over time with fault windows.
func (m *model) drawTimeline(sp timelineSpec) template.HTML {
	sc := sp.sc
	nKey := 0
	if sp.keyLanes {
		nKey = len(m.keys)
	}
	nNode := 0
	if sp.nodeLanes {
		nNode = len(m.nodes)
	}
	rows := nKey + len(sp.lanes) + nNode
	sepH := 0.0
	if nKey > 0 {
		sepH += 8
	}
	if nNode > 0 {
		sepH += 8
	}
	top := axisH + 6
	if sp.phase > 0 {
		top += 12
	}
	if len(sp.marks) > 0 {
		top += 10
	}
	h := top + float64(rows)*(laneH+laneGap) + sepH + axisH
	s := newSVG(svgW, h, "timeline", sp.label)
	lanesTop := top
	lanesBot := h - axisH
	// Background grid and axes.
	s.timeAxis(sc, 14, lanesTop-4, lanesBot, 12)
	for _, tk := range timeTicks(sc.t0, sc.t1, 12) {
		s.text(sc.x(tk.T), h-6, "axis", "middle", tk.Label)
	}
	// Server faults shade every lane.
	for i := range m.faults {
		f := &m.faults[i]
		if !f.applied() || f.isClientFault() {
			continue
		}
		a, b := f.Start, f.endOr(m.end)
		if b < sc.t0 || a > sc.t1 {
			continue
		}
		x0, x1 := sc.clampX(a), sc.clampX(b)
		s.rect(x0, lanesTop-4, max(x1-x0, 1.5), lanesBot-lanesTop+4, "shade "+m.faultClass(f.Name), f.describe())
	}
	if sp.phase > 0 && sp.phase > sc.t0 && sp.phase < sc.t1 {
		x := sc.x(sp.phase)
		s.line(x, axisH+4, x, lanesBot, "phase")
		s.text(x-4, axisH+14, "phase-label", "end", "faults ←")
		s.text(x+4, axisH+14, "phase-label", "start", "→ healed: recovery")
	}
	y := lanesTop
	laneRect := func(label, title string) {
		s.rect(plotX0, y, plotW, laneH, "lane", "")
		if title != "" {
			s.textTitle(plotX0-8, y+laneH-5, "lane-label", "end", label, title)
		} else {
			s.text(plotX0-8, y+laneH-5, "lane-label", "end", label)
		}
	}
	// Key lanes: the union of everyone's holds, overlaps in red, stuck and
	// unavailable spans.
	if nKey > 0 {
		for _, k := range m.keys {
			laneRect(k+" (any holder)", "who held "+k+": the union of every client's believed holds; red where two held it at once, orange where clients tried and nobody could get it")
			var starts, ends []int64
			for i := range m.holds {
				hd := &m.holds[i]
				if hd.Key != k || hd.Empty() || hd.End < sc.t0 || hd.Start > sc.t1 {
					continue
				}
				starts = append(starts, hd.Start)
				ends = append(ends, hd.End)
			}
			for _, b := range mergeBars(sc, starts, ends, nil, m.end) {
				s.rect(b.X0, y+3, b.X1-b.X0, laneH-6, "hold", "")
			}
			if live := m.liveness(); live != nil {
				for _, w := range live.Top {
					if w.Key != k || w.End < sc.t0 || w.Start > sc.t1 {
						continue
					}
					x0, x1 := sc.clampX(w.Start), sc.clampX(w.End)
					s.rect(x0, y+3, max(x1-x0, minBarPx), laneH-6, "unavail",
						fmt.Sprintf("%s unavailable %s–%s (%s): %d attempts failed or went unanswered", k, fmtT(w.Start), fmtT(w.End), fmtD(w.Duration), w.Attempts))
				}
				for _, st := range live.StuckKeys {
					if st.Key != k {
						continue
					}
					x0 := sc.clampX(st.Since)
					s.rect(x0, y+1, sc.x0+sc.w-x0, laneH-2, "stuck", fmt.Sprintf("STUCK: nobody could acquire %s from %s to the end (%s)", k, fmtT(st.Since), fmtD(st.For)))
				}
			}
			for _, o := range m.ovl {
				if o.Key != k || o.End < sc.t0 || o.Start > sc.t1 {
					continue
				}
				x0, x1 := sc.clampX(o.Start), sc.clampX(o.End)
				s.rect(x0, y+1, max(x1-x0, 1.5), laneH-2, "overlap", fmt.Sprintf("two clients held %s at once: %s–%s (%s)", k, fmtT(o.Start), fmtT(o.End), fmtD(o.End-o.Start)))
			}
			for i, v := range sp.marks {
				if v.Key != k || v.OverlapStart < sc.t0 || v.OverlapStart > sc.t1 {
					continue
				}
				x := sc.x(v.OverlapStart)
				fmt.Fprintf(&s.b, `<a href="#violation-%d"><path d="M%s %sl-4 -7h8z" class="vmark"><title>violation %d at %s: processes %d and %d (click for the witness)</title></path></a>`,
					i+1, num(x), num(y-1), i+1, fmtT(v.OverlapStart), v.First.Process, v.Second.Process)
			}
			y += laneH + laneGap
		}
		y += 8
	}
	// Client lanes.
	for _, ln := range sp.lanes {
		laneRect(ln.Label, ln.Title)
		for i := range m.faults {
			f := &m.faults[i]
			if !f.applied() || !containsInt(f.Clients, ln.Process) {
				continue
			}
			a, b := f.Start, f.endOr(m.end)
			if b < sc.t0 || a > sc.t1 {
				continue
			}
			x0, x1 := sc.clampX(a), sc.clampX(b)
			if f.End == f.Start {
				fmt.Fprintf(&s.b, `<path d="M%s %sl6 6m0 -6l-6 6" class="crash"><title>%s</title></path>`, num(x0-3), num(y+laneH/2-3), esc(f.describe()))
				continue
			}
			s.rect(x0, y, max(x1-x0, 1.5), laneH, "cfault "+m.faultClass(f.Name), f.describe())
		}
		idx := m.byProc[ln.Process]
		var starts, ends []int64
		var red []bool
		var leases [][2]int64
		for _, i := range idx {
			hd := &m.holds[i]
			if hd.Empty() {
				continue
			}
			vu := hd.End
			if hd.ValidUntil != nil {
				vu = *hd.ValidUntil
			}
			if max(hd.End, vu) < sc.t0 || hd.Invoke > sc.t1 {
				continue
			}
			starts = append(starts, hd.Start)
			ends = append(ends, hd.End)
			red = append(red, m.red[i])
			if sp.leases {
				end := int64(checker.Never)
				if hd.ValidUntil != nil {
					end = *hd.ValidUntil
				}
				leases = append(leases, [2]int64{hd.Invoke, end})
			}
		}
		for _, l := range leases {
			x0, x1 := sc.clampX(l[0]), sc.clampX(min(l[1], m.end))
			s.rect(x0, y+2, max(x1-x0, 1), laneH-4, "lease", fmt.Sprintf("lease: acquire invoked at %s, valid until %s", fmtT(l[0]), fmtT(l[1])))
		}
		if sp.ops {
			m.drawOps(s, sc, ln.Process, y+laneH-3)
		}
		for _, b := range mergeBars(sc, starts, ends, red, m.end) {
			cls := "hold"
			if b.Red {
				cls = "hold red"
			}
			var title string
			if b.N == 1 {
				title = fmt.Sprintf("process %d believed it held the lock %s–%s (%s)", ln.Process, fmtT(b.Start), endText(b), fmtD(b.End-b.Start))
			} else {
				title = fmt.Sprintf("process %d: %d holds between %s and %s (merged: closer than a pixel)", ln.Process, b.N, fmtT(b.Start), endText(b))
			}
			if b.Red {
				title += " — overlaps another client's hold"
			}
			s.rect(b.X0, y+4, b.X1-b.X0, laneH-8, cls, title)
		}
		y += laneH + laneGap
	}
	// Node lanes.
	if nNode > 0 {
		y += 8
		for _, n := range m.nodes {
			laneRect("node "+n.Name, n.Role+" "+n.Addr)
			for i := range m.faults {
				f := &m.faults[i]
				if !f.applied() || f.isClientFault() || !m.nodeHit(f, n.Name) {
					continue
				}
				a, b := f.Start, f.endOr(m.end)
				if b < sc.t0 || a > sc.t1 {
					continue
				}
				x0, x1 := sc.clampX(a), sc.clampX(b)
				w := max(x1-x0, 1.5)
				s.rect(x0, y+1, w, laneH-2, "nfault "+m.faultClass(f.Name), f.describe())
				lbl := m.faultLabel(f)
				if w > float64(len(lbl))*6+6 {
					s.text(x0+3, y+laneH-5, "nfault-label", "start", lbl)
				}
			}
			y += laneH + laneGap
		}
	}
	// Event markers and hilites (zoomed timelines).
	for _, o := range sp.hilite {
		x0, x1 := sc.clampX(o.Start), sc.clampX(o.End)
		s.rect(x0, lanesTop-4, max(x1-x0, 1.5), lanesBot-lanesTop+4, "hilite", fmt.Sprintf("overlap %s–%s (%s)", fmtT(o.Start), fmtT(o.End), fmtD(o.End-o.Start)))
	}
	for _, e := range sp.events {
		ly := -1.0
		yy := lanesTop
		if sp.keyLanes {
			yy += float64(nKey)*(laneH+laneGap) + 8
		}
		for _, ln := range sp.lanes {
			if ln.Process == e.Process {
				ly = yy
				break
			}
			yy += laneH + laneGap
		}
		if ly < 0 || e.Time < sc.t0 || e.Time > sc.t1 {
			continue
		}
		x := sc.x(e.Time)
		fmt.Fprintf(&s.b, `<path d="M%s %sv%s" class="evline"/><path d="M%s %sl5 -8h-10z" class="event"><title>%s</title></path>`,
			num(x), num(ly), num(laneH), num(x), num(ly+laneH/2+4), esc(eventText(e)))
	}
	return s.html()
}

func endText(b bar) string {
	if b.Open {
		return "never ended"
	}
	return fmtT(b.End)
}

func eventText(e checker.Event) string {
	s := e.Describe()
	if e.Error != "" {
		s += ": " + e.Error
	}
	return s
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func (m *model) liveness() *checker.LivenessResult {
	if m.rf.res == nil || m.rf.res.Results == nil {
		return nil
	}
	return m.rf.res.Liveness
}

// fullTimeline is the whole run.
func (m *model) fullTimeline() template.HTML {
	var phase int64
	if c := m.rf.cfg; c != nil && c.TimeLimit > 0 && c.Recovery > 0 && m.end > int64(c.TimeLimit) {
		phase = int64(c.TimeLimit)
	}
	var marks []checker.Violation
	if r := m.rf.res; r != nil && r.Exclusion != nil {
		marks = r.Exclusion.Violations
	}
	return m.drawTimeline(timelineSpec{
		sc:       scale{t0: 0, t1: m.end, x0: plotX0, w: plotW},
		lanes:    m.lanes,
		keyLanes: true, nodeLanes: true, marks: marks, phase: phase,
		label: "timeline of the run: one lane per client with its believed holds, fault windows shaded",
	})
}

// maxZoomOps bounds the operations drawn per lane in a zoomed timeline.
const maxZoomOps = 400

// drawOps draws process p's operations that overlap the scale's window as
// thin strips from invoke to completion at y: what the client was doing
// around a violation (a release that deleted someone's key, a stalled
// write).
func (m *model) drawOps(s *svg, sc scale, p int, y float64) {
	from := sort.Search(len(m.ops), func(i int) bool { return m.ops[i].Time >= sc.t0-int64(2e9) })
	pending := -1
	n := 0
	for i := from; i < len(m.ops) && m.ops[i].Time <= sc.t1 && n < maxZoomOps; i++ {
		op := &m.ops[i]
		if op.Process != p {
			continue
		}
		if op.Type == history.Invoke {
			pending = i
			continue
		}
		if pending < 0 {
			continue
		}
		inv := &m.ops[pending]
		pending = -1
		if op.Time < sc.t0 {
			continue
		}
		m.opStrip(s, sc, inv, op, y)
		n++
	}
	if pending >= 0 && n < maxZoomOps {
		m.opStrip(s, sc, &m.ops[pending], nil, y)
	}
}

func (m *model) opStrip(s *svg, sc scale, inv, comp *history.Op, y float64) {
	end, outcome := m.end, "never completed"
	if comp != nil {
		end, outcome = comp.Time, string(comp.Type)
		if comp.Error != "" {
			outcome += ": " + comp.Error
		}
	}
	x0, x1 := sc.clampX(inv.Time), sc.clampX(end)
	title := fmt.Sprintf("process %d %s %s–%s (%s): %s", inv.Process, inv.F, fmtTP(inv.Time), fmtTP(end), fmtD(end-inv.Time), outcome)
	if inv.Value != nil && inv.Value.Token != "" {
		title += ", token " + inv.Value.Token
	}
	cls := "op op-" + inv.F
	if comp != nil && comp.Type != history.OK {
		cls += " op-" + string(comp.Type)
	}
	s.rect(x0, y, max(x1-x0, 1.5), 3, cls, title)
}
