package reports

import (
	"fmt"
	"sort"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/runfile"
)

// The page is drawn from one pass over the history, in memory bounded by
// the clients, keys, pixel columns, faults and stored witnesses, not by
// the history's length: an hour-long run has some 18 million events,
// which the report once held all at once (several GB). Everything drawn
// against time needs the time axis before the pass, so the axis comes
// from results.json's duration; the pass checks it, and a second pass
// draws again when it was wrong (a history re-recorded since, or never
// checked).

// laneData is what one lane of a timeline draws.
type laneData struct {
	bars   *barAcc
	leases [][2]int64 // acquire invoke to valid_until, zoomed lanes only
	ops    *opStream  // the process's operations, zoomed lanes only
	// renewals are the lock's own, in the background (a watchdog's),
	// zoomed lanes only.
	renewals []strip
	sc       scale
}

// renewal adds a background renewal to a zoomed lane if it shows in the
// window.
func (l *laneData) renewal(op *history.Op) {
	v := op.Value
	if l.ops == nil || v == nil || v.From == nil || op.Time < l.sc.t0 || *v.From > l.sc.t1 || len(l.renewals) >= maxZoomLeases {
		return
	}
	from := *v.From
	title := fmt.Sprintf("process %d's lock renewed %s in the background %s–%s: %s", op.Process, op.Key, fmtTP(from), fmtTP(op.Time), v.Outcome)
	cls := "renewal"
	if v.Outcome == history.OK {
		title += fmt.Sprintf("; the key lives until %s at the earliest", fmtTP(from+v.TTL))
	} else {
		cls += " op-" + string(v.Outcome)
		if op.Error != "" {
			title += ": " + op.Error
		}
	}
	l.renewals = append(l.renewals, strip{x0: l.sc.clampX(from), x1: l.sc.clampX(op.Time), cls: cls, title: title,
		t0: from, t1: op.Time, f: history.Extend, n: 1, proc: op.Process})
}

// maxZoomLeases bounds the leases drawn in one zoomed lane: a zoom whose
// overlap never ends spans the rest of the run, and its lanes would keep
// a lease per hold. The holds themselves are still drawn.
const maxZoomLeases = 2000

// hold adds h to a zoomed lane if it shows in the window: its lease or
// its belief reaches into it.
func (l *laneData) hold(h *shold) {
	vu := h.End
	if h.ValidUntil != nil {
		vu = *h.ValidUntil
	}
	if max(h.End, vu) < l.sc.t0 || h.Invoke > l.sc.t1 {
		return
	}
	l.bars.add(h.Start, h.End, h.X.red)
	if l.ops != nil && len(l.leases) < maxZoomLeases {
		l.leases = append(l.leases, [2]int64{h.Invoke, validUntil(h)})
	}
}

// collector gathers, in one pass, what the page draws from the history.
type collector struct {
	end     int64 // the time axis drawn: [0, end]
	events  int
	last    int64 // time of the last event
	faults  faultAcc
	sweep   *holdSweep
	lanes   map[int]*laneData // the run's timeline, per process
	keyBars map[string]*unionBars
	lat     *latAcc
	thr     *buckets
	zooms   []map[int]*laneData // per witness drawn in full, per process
	zoomBy  map[int][]*laneData // process -> its zoomed lanes
	byEnd   []*opStream         // zoomed lanes' operations, by window end
	nextEnd int
	want    map[int64]bool // positions of the events the witnesses name
	endOps  map[int64]history.Op
}

// newCollector gathers a run's page; fm are its faults' meanings.
func newCollector(end int64, res *runResults, fm checker.FaultMeanings) *collector {
	full := scale{t0: 0, t1: end, x0: plotX0, w: plotW}
	fs := map[string]bool{}
	for _, f := range latencyOps {
		fs[f] = true
	}
	c := &collector{end: end, lanes: map[int]*laneData{}, keyBars: map[string]*unionBars{},
		lat: newLatAcc(full, cols, fs), thr: newBuckets(end, throughputBuckets),
		zoomBy: map[int][]*laneData{}, want: map[int64]bool{}, endOps: map[int64]history.Op{}}
	c.faults.pairer.Meanings = fm
	c.sweep = newHoldSweep(full, c.emit, fm)
	if res == nil || res.Exclusion == nil {
		return c
	}
	for i, v := range res.Exclusion.Violations {
		if i >= FullWitnesses {
			break
		}
		c.addZoom(v, end)
		for _, h := range []checker.Hold{v.First, v.Second} {
			if h.End != checker.Never && h.EndIndex >= 0 {
				c.want[h.EndIndex] = true
			}
		}
	}
	sort.SliceStable(c.byEnd, func(i, j int) bool { return c.byEnd[i].sc.t1 < c.byEnd[j].sc.t1 })
	return c
}

// addZoom prepares the lanes of the zoomed timeline around v.
func (c *collector) addZoom(v checker.Violation, end int64) {
	a, b, procs := zoomWindow(v, end)
	sc := scale{t0: a, t1: b, x0: plotX0, w: plotW}
	z := map[int]*laneData{}
	for _, p := range procs {
		ops := &opStream{sc: sc, end: end, proc: p}
		l := &laneData{bars: newBarAcc(sc, end), ops: ops, sc: sc}
		z[p] = l
		c.zoomBy[p] = append(c.zoomBy[p], l)
		c.byEnd = append(c.byEnd, ops)
	}
	c.zooms = append(c.zooms, z)
}

// add takes the next event.
func (c *collector) add(op *history.Op) {
	pos := int64(c.events)
	c.events++
	c.last = op.Time
	if c.want[pos] && op.Index == pos {
		c.endOps[pos] = *op
	}
	for c.nextEnd < len(c.byEnd) && op.Time > c.byEnd[c.nextEnd].sc.t1 {
		c.byEnd[c.nextEnd].finish()
		c.nextEnd++
	}
	if op.Type == history.Summary {
		// Failed acquires counted, not recorded one by one: they have no
		// bar in a lane, latency or hold, only a place in the rates.
		c.thr.addSummary(op)
		return
	}
	if op.Type == history.Background {
		// A lock's own renewal: a tick in the zoomed lanes, so that a
		// renewer that stopped before the key expired shows; never a
		// hold, a latency or a rate.
		for _, l := range c.zoomBy[op.Process] {
			l.renewal(op)
		}
		return
	}
	if op.Process == history.NemesisProcess {
		c.faults.add(op)
	} else {
		for _, l := range c.zoomBy[op.Process] {
			l.ops.add(op)
		}
	}
	c.sweep.add(op)
	c.lat.add(op)
	c.thr.add(op)
}

// done ends the history.
func (c *collector) done() {
	c.sweep.done()
	for _, o := range c.byEnd[c.nextEnd:] {
		o.finish()
	}
	c.nextEnd = len(c.byEnd)
}

// emit draws a hold whose end and colour are final.
func (c *collector) emit(h *shold) {
	l := c.lanes[h.Process]
	full := scale{t0: 0, t1: c.end, x0: plotX0, w: plotW}
	if l == nil {
		l = &laneData{bars: newBarAcc(full, c.end), sc: full}
		c.lanes[h.Process] = l
	}
	l.bars.add(h.Start, h.End, h.X.red)
	u := c.keyBars[h.Key]
	if u == nil {
		u = &unionBars{sc: full, end: c.end}
		c.keyBars[h.Key] = u
	}
	u.add(h.Start, h.End)
	for _, z := range c.zoomBy[h.Process] {
		z.hold(h)
	}
}

// spans are the overlap spans of every key, by key then start.
func (c *collector) spans() []span {
	var out []span
	for _, ks := range c.sweep.keys {
		out = append(out, ks.result()...)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Key != out[j].Key {
			return out[i].Key < out[j].Key
		}
		return out[i].Start < out[j].Start
	})
	return out
}

// histRead is one pass over a history file.
type histRead struct {
	c         *collector // nil for a pass that only finds the end
	events    int
	last      int64
	bad       int
	firstBad  string
	truncated bool
	corrupt   string // where damaged compressed data ended the reading
}

// scanHistory reads the history at path into c (when not nil), leniently:
// unreadable lines are counted, not fatal.
func scanHistory(path string, c *collector) (*histRead, error) {
	s, err := history.OpenLenient(path)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	r := &histRead{c: c}
	for op, ok := s.Next(); ok; op, ok = s.Next() {
		r.last = op.Time
		if c != nil {
			c.add(&op)
		}
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	if c != nil {
		c.done()
	}
	r.events = s.Events()
	r.bad, r.firstBad = s.Bad()
	r.truncated = s.Truncated()
	r.corrupt = s.Corrupt()
	return r, nil
}

// axisEnd is the end of the time axis for a history whose last event is
// at last: the run's planned length when nothing was recorded, and at
// least 100 ms, so that a history of a few µs (a run killed at once)
// still gets a readable axis.
func axisEnd(last int64, cfg *runConfig) int64 {
	if last == 0 && cfg != nil {
		last = int64(cfg.TimeLimit + cfg.Recovery)
	}
	return max(last, 100_000_000)
}

// readHistory draws the run's history: against results.json's duration
// when it has one, else after a first pass that finds the end.
func readHistory(rf *runFiles) (*histRead, error) {
	path := runfile.HistoryPath(rf.dir) // either format
	var end int64
	if r := rf.res; r != nil && r.Stats != nil {
		end = axisEnd(r.Stats.Duration, rf.cfg)
	} else {
		first, err := scanHistory(path, nil)
		if err != nil {
			return nil, err
		}
		end = axisEnd(first.last, rf.cfg)
	}
	r, err := scanHistory(path, newCollector(end, rf.res, rf.info.FaultMeanings()))
	if err != nil || axisEnd(r.last, rf.cfg) == end {
		return r, err
	}
	// The duration was not this history's (it was checked before it was
	// re-recorded, or it is still being written): draw it again against
	// its own end. A history still growing may have grown meanwhile; its
	// newest events are then drawn at the axis's end.
	return scanHistory(path, newCollector(axisEnd(r.last, rf.cfg), rf.res, rf.info.FaultMeanings()))
}
