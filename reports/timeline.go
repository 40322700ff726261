package reports

import (
	"fmt"
	"html/template"
	"sort"
	"strings"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/runfile"
)

// Geometry shared by the timeline and the plots, so that their time axes
// line up on the page.
const (
	svgW   = 1200.0
	plotX0 = 150.0
	plotW  = svgW - plotX0 - 16
	cols   = int(plotW) // pixel columns the plots aggregate into
)

// model is everything the page is drawn from: the run's files and what
// one pass over its history gathered (collect.go), never the history
// itself.
type model struct {
	rf      *runFiles
	hr      *histRead // nil when the history could not be read
	histErr error
	events  int   // events in the history
	end     int64 // the time axis runs over [0, end]
	holds   int   // believed holds, empty ones too
	ovl     []span
	faults  []faultSpan
	lanes   []lane
	full    map[int]*laneData // the run's timeline, per process
	keyBars map[string][]bar
	zooms   []map[int]*laneData // per witness drawn in full
	endOps  map[int64]history.Op
	lat     map[series][]latBin
	thr     *buckets
	clients int
	nodes   []cluster.Node
	keys    []string

	meanings checker.FaultMeanings // what the run's faults mean (runfile.RunInfo.FaultMeanings)
}

func newModel(rf *runFiles) *model {
	m := &model{rf: rf, meanings: rf.info.FaultMeanings()}
	if rf.cfg != nil {
		m.clients = rf.cfg.Clients
	}
	m.hr, m.histErr = readHistory(rf)
	c := newCollector(axisEnd(0, rf.cfg), rf.res, m.meanings)
	if m.hr != nil {
		c = m.hr.c
		m.events = m.hr.events
	} else {
		c.done()
	}
	m.end, m.holds, m.ovl, m.faults = c.end, c.sweep.holds, c.spans(), c.faults.out
	m.full, m.zooms, m.endOps = c.lanes, c.zooms, c.endOps
	m.lat, m.thr = c.lat.result(), c.thr
	m.lanes = clientLanesOf(m.clients, c.sweep.holders, m.faults)
	m.keyBars = map[string][]bar{}
	for k, u := range c.keyBars {
		m.keyBars[k] = u.out
	}
	for k := range c.sweep.keys {
		m.keys = append(m.keys, k)
	}
	m.keysAndNodes()
	return m
}

// keysAndNodes completes the lanes' keys (the configured ones when the
// history names none) and the nodes (run.json's, else nodes.json's).
func (m *model) keysAndNodes() {
	rf := m.rf
	if len(m.keys) == 0 && rf.cfg != nil {
		for k := 0; k < max(1, rf.cfg.Keys); k++ {
			m.keys = append(m.keys, fmt.Sprintf("lock-%d", k))
		}
	}
	sort.Strings(m.keys)
	if rf.info != nil {
		m.nodes = rf.info.Nodes
	}
	if len(m.nodes) == 0 {
		var ns []cluster.Node
		if readJSON(rf.dir+"/"+runfile.NodesFile, &ns) == nil {
			m.nodes = ns
		}
	}
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
	events []checker.Event   // extra event markers (a zoom's "in between")
	ops    bool              // draw each lane's operations under its holds
	hilite []span            // overlap spans to hilite across lanes
	data   map[int]*laneData // what each client lane draws, by process
	phase  int64             // end of the fault phase, 0 for none
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
	m.shadeServerFaults(s, sc, lanesTop, lanesBot)
	drawPhaseEnd(s, sp, lanesBot)
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
			m.drawKeyLane(s, sp, k, y)
			y += laneH + laneGap
		}
		y += 8
	}
	// Client lanes.
	for _, ln := range sp.lanes {
		laneRect(ln.Label, ln.Title)
		m.drawClientLane(s, sp, ln, y)
		y += laneH + laneGap
	}
	// Node lanes.
	if nNode > 0 {
		y += 8
		for _, n := range m.nodes {
			laneRect("node "+n.Name, n.Role+" "+n.Addr)
			m.drawNodeLane(s, sc, n.Name, y)
			y += laneH + laneGap
		}
	}
	// Event markers and hilites (zoomed timelines).
	for _, o := range sp.hilite {
		x0, x1 := sc.clampX(o.Start), sc.clampX(o.End)
		s.rect(x0, lanesTop-4, max(x1-x0, 1.5), lanesBot-lanesTop+4, "hilite", fmt.Sprintf("overlap %s–%s (%s)", fmtT(o.Start), fmtT(o.End), fmtD(o.End-o.Start)))
	}
	clientsTop := lanesTop
	if sp.keyLanes {
		clientsTop += float64(nKey)*(laneH+laneGap) + 8
	}
	drawEvents(s, sp, clientsTop)
	return s.html()
}

// shadeServerFaults shades every lane, from top to bot, where a server
// fault was in effect.
func (m *model) shadeServerFaults(s *svg, sc scale, top, bot float64) {
	m.eachFaultShown(sc, func(f *faultSpan) bool { return !m.hitsClients(f) }, func(f *faultSpan, x0, x1 float64) {
		s.rect(x0, top-4, max(x1-x0, 1.5), bot-top+4, "shade "+m.faultClass(f.Name), f.describe())
	})
}

// eachFaultShown calls draw with the on-screen span, clamped to sc, of
// every applied fault that keep accepts and sc shows.
func (m *model) eachFaultShown(sc scale, keep func(*faultSpan) bool, draw func(f *faultSpan, x0, x1 float64)) {
	for i := range m.faults {
		f := &m.faults[i]
		if !f.applied() || !keep(f) {
			continue
		}
		a, b := f.Start, f.endOr(m.end)
		if b < sc.t0 || a > sc.t1 {
			continue
		}
		draw(f, sc.clampX(a), sc.clampX(b))
	}
}

// drawPhaseEnd marks where the fault phase ended and recovery began, if
// the timeline shows that moment.
func drawPhaseEnd(s *svg, sp timelineSpec, bot float64) {
	sc := sp.sc
	if sp.phase <= 0 || sp.phase <= sc.t0 || sp.phase >= sc.t1 {
		return
	}
	x := sc.x(sp.phase)
	s.line(x, axisH+4, x, bot, "phase")
	s.text(x-4, axisH+14, "phase-label", "end", "faults ←")
	s.text(x+4, axisH+14, "phase-label", "start", "→ healed: recovery")
}

// drawKeyLane draws key k's lane at y: the union of everyone's holds,
// stuck and unavailable spans, overlaps in red, and the violation marks.
func (m *model) drawKeyLane(s *svg, sp timelineSpec, k string, y float64) {
	sc := sp.sc
	for _, b := range m.keyBars[k] {
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
		s.rect(x0, y+1, max(x1-x0, 1.5), laneH-2, "overlap", o.title())
	}
	for i, v := range sp.marks {
		if v.Key != k || v.OverlapStart < sc.t0 || v.OverlapStart > sc.t1 {
			continue
		}
		x := sc.x(v.OverlapStart)
		fmt.Fprintf(&s.b, `<a href="#violation-%d"><path d="M%s %sl-4 -7h8z" class="vmark"><title>violation %d at %s: processes %d and %d (click for the witness)</title></path></a>`,
			i+1, num(x), num(y-1), i+1, fmtT(v.OverlapStart), v.First.Process, v.Second.Process)
	}
}

// drawClientLane draws a client's lane at y: the client faults that hit
// it, then what the pass gathered for it (leases and operations in a
// zoom), then its holds on top.
func (m *model) drawClientLane(s *svg, sp timelineSpec, ln lane, y float64) {
	sc := sp.sc
	m.eachFaultShown(sc, func(f *faultSpan) bool { return containsInt(f.Clients, ln.Process) }, func(f *faultSpan, x0, x1 float64) {
		if f.End == f.Start {
			fmt.Fprintf(&s.b, `<path d="M%s %sl6 6m0 -6l-6 6" class="crash"><title>%s</title></path>`, num(x0-3), num(y+laneH/2-3), esc(f.describe()))
			return
		}
		s.rect(x0, y, max(x1-x0, 1.5), laneH, "cfault "+m.faultClass(f.Name), f.describe())
	})
	ld := sp.data[ln.Process]
	if ld == nil {
		return // no hold, and not in a zoom
	}
	for _, l := range ld.leases {
		x0, x1 := sc.clampX(l[0]), sc.clampX(min(l[1], m.end))
		s.rect(x0, y+2, max(x1-x0, 1), laneH-4, "lease", fmt.Sprintf("lease: acquire invoked at %s, valid until %s", fmtT(l[0]), fmtT(l[1])))
	}
	if sp.ops && ld.ops != nil {
		for _, st := range ld.ops.bin.out {
			st.draw(s, y+laneH-3)
		}
		for _, st := range ld.renewals {
			st.draw(s, y)
		}
	}
	for _, b := range ld.bars.out {
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
}

// drawNodeLane draws the server faults that hit node name, labelled
// where they are wide enough.
func (m *model) drawNodeLane(s *svg, sc scale, name string, y float64) {
	onNode := func(f *faultSpan) bool { return !m.hitsClients(f) && m.nodeHit(f, name) }
	m.eachFaultShown(sc, onNode, func(f *faultSpan, x0, x1 float64) {
		w := max(x1-x0, 1.5)
		s.rect(x0, y+1, w, laneH-2, "nfault "+m.faultClass(f.Name), f.describe())
		lbl := m.faultLabel(f)
		if w > float64(len(lbl))*6+6 {
			s.text(x0+3, y+laneH-5, "nfault-label", "start", lbl)
		}
	})
}

// drawEvents marks the events of sp on their processes' lanes, the
// first of which is at top.
func drawEvents(s *svg, sp timelineSpec, top float64) {
	sc := sp.sc
	for _, e := range sp.events {
		ly := -1.0
		yy := top
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
		sc:    scale{t0: 0, t1: m.end, x0: plotX0, w: plotW},
		lanes: m.lanes, data: m.full,
		keyLanes: true, nodeLanes: true, marks: marks, phase: phase,
		label: "timeline of the run: one lane per client with its believed holds, fault windows shaded",
	})
}

// maxZoomOps bounds the operations drawn per lane in a zoomed timeline.
const maxZoomOps = 400

// opStream gathers a zoomed lane's operations, those of process proc
// that overlap the window, as thin strips from invoke to completion:
// what the client was doing around a violation (a release that deleted
// someone's key, a stalled write). It is fed the process's events from 2 s
// before the window; finish ends it at the first event after the window
// or at the end of the history, and an operation still in flight then is
// drawn as never completed. Strips of one kind that touch on screen are
// drawn as one, so that a client retrying a failed acquire every
// millisecond costs a rect per pixel, not per attempt (a 60 s setnx-del
// run's page once held 74,000 of them).
type opStream struct {
	sc      scale
	end     int64
	proc    int
	pending *history.Op
	n       int
	done    bool
	bin     opBin
}

// add takes the next event of the lane's process.
func (o *opStream) add(op *history.Op) {
	if o.done || op.Time < o.sc.t0-int64(2e9) {
		return
	}
	if op.Type == history.Invoke {
		inv := *op
		o.pending = &inv
		return
	}
	if o.pending == nil {
		return
	}
	inv := o.pending
	o.pending = nil
	if op.Time < o.sc.t0 {
		return
	}
	o.bin.add(opStrip(o.sc, inv, op, o.end))
	o.n++
	if o.n >= maxZoomOps {
		o.bin.flush()
		o.done = true
	}
}

// finish ends the window.
func (o *opStream) finish() {
	if o.done {
		return
	}
	if o.pending != nil {
		o.bin.add(opStrip(o.sc, o.pending, nil, o.end))
		o.pending = nil
	}
	o.bin.flush()
	o.done = true
}

// strip is one operation as drawn.
type strip struct {
	x0, x1 float64
	cls    string
	title  string
	t0, t1 int64
	f      string
	n      int
	proc   int
}

func (st *strip) draw(s *svg, y float64) {
	s.rect(st.x0, y, max(st.x1-st.x0, 1.5), 3, st.cls, st.title)
}

// opBin merges consecutive strips of one class that touch on screen.
type opBin struct {
	cur *strip
	out []strip
}

func (b *opBin) add(st strip) {
	if c := b.cur; c != nil && c.cls == st.cls && st.x0 <= c.x1+1 {
		c.x1, c.t1 = max(c.x1, st.x1), max(c.t1, st.t1)
		c.n++
		return
	}
	b.flush()
	b.cur = &st
}

func (b *opBin) flush() {
	c := b.cur
	if c == nil {
		return
	}
	if c.n > 1 {
		outcome := strings.TrimPrefix(strings.TrimPrefix(c.cls, "op op-"+c.f), " op-")
		if outcome == "" {
			outcome = "ok"
		}
		c.title = fmt.Sprintf("process %d: %d %s operations %s–%s, each %s", c.proc, c.n, c.f, fmtTP(c.t0), fmtTP(c.t1), outcome)
	}
	b.out = append(b.out, *c)
	b.cur = nil
}

// opStrip is the strip of one operation; a nil comp never completed
// before end.
func opStrip(sc scale, inv, comp *history.Op, end int64) strip {
	outcome := "never completed"
	if comp != nil {
		end, outcome = comp.Time, string(comp.Type)
		if comp.Error != "" {
			outcome += ": " + comp.Error
		}
	}
	title := fmt.Sprintf("process %d %s %s–%s (%s): %s", inv.Process, inv.F, fmtTP(inv.Time), fmtTP(end), fmtD(end-inv.Time), outcome)
	if inv.Value != nil && inv.Value.Token != "" {
		title += ", token " + inv.Value.Token
	}
	cls := "op op-" + inv.F
	if comp != nil && comp.Type != history.OK {
		cls += " op-" + string(comp.Type)
	}
	return strip{x0: sc.clampX(inv.Time), x1: sc.clampX(end), cls: cls, title: title, t0: inv.Time, t1: end, f: inv.F, n: 1, proc: inv.Process}
}
