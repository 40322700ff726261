package reports

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/history"
)

// The data behind the plots. Everything here maps history time (ns since
// the run started) to a fixed number of pixel columns, so that the page's
// size depends on the screen, not on the history's length; what no eye
// can see is aggregated, but every violation and every fault is kept.

// scale maps [t0, t1] ns onto [x0, x0+w] px.
type scale struct {
	t0, t1 int64
	x0, w  float64
}

func (s scale) x(t int64) float64 {
	if s.t1 <= s.t0 {
		return s.x0
	}
	return s.x0 + s.w*float64(t-s.t0)/float64(s.t1-s.t0)
}

// clampX is x clipped to the plot.
func (s scale) clampX(t int64) float64 {
	return math.Max(s.x0, math.Min(s.x0+s.w, s.x(t)))
}

// col is the pixel column of t, in [0, cols).
func (s scale) col(t int64, cols int) int {
	if s.t1 <= s.t0 || cols <= 0 {
		return 0
	}
	c := int(float64(t-s.t0) / float64(s.t1-s.t0) * float64(cols))
	return max(0, min(cols-1, c))
}

// tick is a labelled position on a time axis.
type tick struct {
	T     int64
	Label string
}

// niceStep is the 1, 2 or 5 × 10^k ns step that cuts span into about n
// parts.
func niceStep(span int64, n int) int64 {
	if span <= 0 || n <= 0 {
		return 1
	}
	raw := float64(span) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			return max(1, int64(math.Round(m*mag)))
		}
	}
	return max(1, int64(10*mag))
}

// timeTicks returns about n ticks in [t0, t1] at a nice step, labelled in
// seconds with as many decimals as the step needs.
func timeTicks(t0, t1 int64, n int) []tick {
	if t1 <= t0 {
		return []tick{{t0, fmtSec(t0, 0)}}
	}
	step := niceStep(t1-t0, n)
	dec := 0
	for s := int64(1e9); s > step && dec < 9; s /= 10 {
		dec++
	}
	first := (t0 + step - 1) / step * step
	if t0 < 0 {
		first = t0 / step * step
	}
	var ts []tick
	for t := first; t <= t1; t += step {
		ts = append(ts, tick{t, fmtSec(t, dec)})
	}
	return ts
}

func fmtSec(ns int64, dec int) string {
	return strconvF(float64(ns)/1e9, dec) + "s"
}

func strconvF(f float64, dec int) string { return fmt.Sprintf("%.*f", dec, f) }

// lane is one row of the timeline.
type lane struct {
	Process int // client process, or -1 for other lanes
	Label   string
	Title   string
}

// clientLanesOf gives one lane per client process that holds a lock (in
// holders), is hit by a client fault, or is one of the configured
// clients; a crashed client's replacement (process + clients) is labelled
// with the worker it replaces. Processes that only read the resource at
// the end (the counter workload's final reads) get no lane.
func clientLanesOf(clients int, holders map[int]bool, faults []faultSpan) []lane {
	seen := map[int]bool{}
	for p := 0; p < clients; p++ {
		seen[p] = true
	}
	for p := range holders {
		seen[p] = true
	}
	for _, f := range faults {
		for _, c := range f.Clients {
			seen[c] = true
		}
	}
	ps := make([]int, 0, len(seen))
	for p := range seen {
		ps = append(ps, p)
	}
	// Worker order: a replacement sits right below the process it replaced.
	sort.Slice(ps, func(i, j int) bool {
		wi, wj := worker(ps[i], clients), worker(ps[j], clients)
		if wi != wj {
			return wi < wj
		}
		return ps[i] < ps[j]
	})
	lanes := make([]lane, len(ps))
	for i, p := range ps {
		l := lane{Process: p, Label: fmt.Sprintf("process %d", p)}
		if clients > 0 && p >= clients {
			l.Title = fmt.Sprintf("process %d replaced crashed client worker %d", p, p%clients)
			l.Label = fmt.Sprintf("process %d ↳", p)
		}
		lanes[i] = l
	}
	return lanes
}

func worker(p, clients int) int {
	if clients <= 0 {
		return p
	}
	return p % clients
}

// faultSpan is one fault as the nemesis recorded it.
type faultSpan struct {
	Name    string
	Start   int64
	End     int64 // checker.Never when never stopped; == Start for instants
	Targets []string
	Clients []int
	Detail  string
	// Phase is "" for a fault that took effect; "error" or "skipped" for
	// one that did not.
	Phase string
	Open  bool // never stopped
}

// faultAcc pairs the nemesis start and stop events as the checkers do
// (checker.FaultPairer); every event is kept, those of faults that never
// took effect too.
type faultAcc struct {
	out    []faultSpan
	pairer checker.FaultPairer
	at     map[*checker.Fault]int // an open fault's place in out
}

// add takes the next nemesis event.
func (a *faultAcc) add(op *history.Op) {
	var v history.Value
	if op.Value != nil {
		v = *op.Value
	}
	started, stopped := a.pairer.Apply(op)
	switch {
	case started != nil:
		if started.End == checker.Never {
			if a.at == nil {
				a.at = map[*checker.Fault]int{}
			}
			a.at[started] = len(a.out)
		}
		a.out = append(a.out, spanOf(*started))
	case stopped != nil:
		j := a.at[stopped]
		delete(a.at, stopped)
		a.out[j].End, a.out[j].Open = stopped.End, false
		if v.Detail != "" && a.out[j].Detail == "" {
			a.out[j].Detail = v.Detail
		}
	case v.Phase != "stop":
		a.out = append(a.out, faultSpan{Name: op.F, Start: op.Time, End: op.Time, Targets: v.Targets,
			Clients: v.Clients, Detail: v.Detail, Phase: v.Phase})
	}
}

// spanOf is a fault that took effect as the report keeps it.
func spanOf(f checker.Fault) faultSpan {
	return faultSpan{Name: f.Name, Start: f.Start, End: f.End, Targets: f.Targets, Clients: f.Clients, Detail: f.Detail, Open: f.End == checker.Never}
}

// applied reports whether the fault took effect.
func (f *faultSpan) applied() bool { return f.Phase == "" }

// endOr is the fault's end, or end when it never stopped.
func (f *faultSpan) endOr(end int64) int64 {
	if f.End == checker.Never {
		return end
	}
	return f.End
}

// hitsClients: the fault hits client processes, not nodes, by its meaning
// or by the clients its events name as targets.
func (m *model) hitsClients(f *faultSpan) bool {
	return m.faultMeaning(f.Name).AimsAtClients() || (len(f.Clients) > 0 && len(f.Targets) > 0 && strings.HasPrefix(f.Targets[0], "client"))
}

// span is a time interval on one key: where two or more clients held it
// at once.
type span struct {
	Key        string
	Start, End int64
	N          int // overlaps merged into it because they were closer than a pixel; 0 for one
}

// bar is a drawn interval: one or more holds merged because the gap
// between them is under a pixel.
type bar struct {
	Start, End int64
	X0, X1     float64
	N          int  // holds merged into it
	Red        bool // part of a mutual-exclusion violation
	Open       bool // the last hold's belief never ended
}

// minBarPx is the narrowest bar drawn: a 40µs hold in a 9s run is still
// visible.
const minBarPx = 1.0

// barAcc turns one lane's intervals, given in start order, into bars.
// Two intervals of the same colour merge when the gap between their
// pixels is under a pixel; red never merges with normal, so every
// violation stays red and visible, and a bar is at least minBarPx wide.
// A lane's bars are so bounded by its pixels, however many holds it had.
type barAcc struct {
	sc   scale
	end  int64 // where a belief that never ends is drawn to
	out  []bar
	last [2]int // index in out of the last bar of each colour, -1 for none
}

func newBarAcc(sc scale, end int64) *barAcc { return &barAcc{sc: sc, end: end, last: [2]int{-1, -1}} }

func (a *barAcc) add(s, e int64, red bool) {
	open := e == checker.Never
	if open {
		e = a.end
	}
	x0, x1 := a.sc.clampX(s), a.sc.clampX(e)
	if x1-x0 < minBarPx {
		x1 = x0 + minBarPx
	}
	r := 0
	if red {
		r = 1
	}
	if j := a.last[r]; j >= 0 && x0-a.out[j].X1 < 1 {
		b := &a.out[j]
		b.End = max(b.End, e)
		b.X1 = math.Max(b.X1, x1)
		b.N++
		b.Open = b.Open || open
		return
	}
	a.out = append(a.out, bar{Start: s, End: e, X0: x0, X1: x1, N: 1, Red: red, Open: open})
	a.last[r] = len(a.out) - 1
}

// unionBars is barAcc for intervals in any order, of one colour: a key's
// holds end in another order than they start, and its lane draws only
// the union. Bars are kept sorted and apart by a pixel or more; an
// interval merges with every bar whose pixels its own touch, which gives
// the bars barAcc gives for the same intervals in start order (the
// groups of intervals linked by touching).
type unionBars struct {
	sc  scale
	end int64
	out []bar // X0 and X1 only
}

func (u *unionBars) add(s, e int64) {
	if e == checker.Never {
		e = u.end
	}
	x0, x1 := u.sc.clampX(s), u.sc.clampX(e)
	if x1-x0 < minBarPx {
		x1 = x0 + minBarPx
	}
	// First bar that this one does not lie wholly after: the bars before
	// it end more than a pixel before x0.
	i := sort.Search(len(u.out), func(i int) bool { return x0-u.out[i].X1 < 1 })
	j := i
	for j < len(u.out) && u.out[j].X0-x1 < 1 {
		x0, x1 = math.Min(x0, u.out[j].X0), math.Max(x1, u.out[j].X1)
		j++
	}
	if i == j {
		u.out = slices.Insert(u.out, i, bar{X0: x0, X1: x1})
		return
	}
	u.out[i] = bar{X0: x0, X1: x1}
	u.out = slices.Delete(u.out, i+1, j)
}

// series names a latency series: an operation and its outcome.
type series struct {
	F       string
	Outcome history.Type // ok, fail, info (info includes never completed)
}

// latBin is the latencies of one series that fall in one pixel column.
type latBin struct {
	Col      int
	Min, Max int64
	N        int
}

// latAcc bins operation latencies (completion − invoke, at the invoke's
// time) per series and pixel column, keeping min, max and count.
// Operations that never completed count as unknown with the latency up to
// the end of the history. Only the operations in fs are binned. It keeps
// a pending invoke per process and a bin per series and column.
type latAcc struct {
	sc      scale
	cols    int
	fs      map[string]bool
	pending map[int]pendingOp // process -> its invoke
	bins    map[series]map[int]*latBin
	last    int64 // time of the latest event
}

type pendingOp struct {
	f    string
	time int64
}

func newLatAcc(sc scale, cols int, fs map[string]bool) *latAcc {
	return &latAcc{sc: sc, cols: cols, fs: fs, pending: map[int]pendingOp{}, bins: map[series]map[int]*latBin{}}
}

func (a *latAcc) bin(s series, t, d int64) {
	bs := a.bins[s]
	if bs == nil {
		bs = map[int]*latBin{}
		a.bins[s] = bs
	}
	c := a.sc.col(t, a.cols)
	b := bs[c]
	if b == nil {
		bs[c] = &latBin{Col: c, Min: d, Max: d, N: 1}
		return
	}
	b.Min, b.Max = min(b.Min, d), max(b.Max, d)
	b.N++
}

// add takes the next event.
func (a *latAcc) add(op *history.Op) {
	a.last = op.Time
	if op.Process == history.NemesisProcess || !a.fs[op.F] {
		return
	}
	if op.Type == history.Invoke {
		a.pending[op.Process] = pendingOp{op.F, op.Time}
		return
	}
	inv, ok := a.pending[op.Process]
	if !ok {
		return
	}
	delete(a.pending, op.Process)
	a.bin(series{inv.f, op.Type}, inv.time, op.Time-inv.time)
}

// result ends the history and returns each series' bins by column.
func (a *latAcc) result() map[series][]latBin {
	for _, inv := range a.pending {
		a.bin(series{inv.f, history.Info}, inv.time, a.last-inv.time)
	}
	clear(a.pending)
	out := map[series][]latBin{}
	for s, m := range a.bins {
		bs := make([]latBin, 0, len(m))
		for _, b := range m {
			bs = append(bs, *b)
		}
		sort.Slice(bs, func(i, j int) bool { return bs[i].Col < bs[j].Col })
		out[s] = bs
	}
	return out
}

// buckets counts completions per time bucket.
type buckets struct {
	Width int64 // ns
	T0    int64
	// OK, Fail, Unknown count completed client operations by outcome;
	// Grants counts ok acquires.
	OK, Fail, Unknown, Grants []int
}

// newBuckets cuts [0, end] into about n buckets of a nice width.
func newBuckets(end int64, n int) *buckets {
	w := niceStep(max(end, 1), n)
	nb := int(end/w) + 1
	return &buckets{Width: w, OK: make([]int, nb), Fail: make([]int, nb), Unknown: make([]int, nb), Grants: make([]int, nb)}
}

// addSummary counts a summary's failed acquires at its time, which is at
// most a second after they failed (history.SummaryBucket).
func (b *buckets) addSummary(op *history.Op) {
	k := max(0, min(len(b.OK)-1, int(op.Time/b.Width)))
	b.Fail[k] += int(op.Value.Count)
}

// add counts op if it is a client operation's completion.
func (b *buckets) add(op *history.Op) {
	if op.Process == history.NemesisProcess || op.Type == history.Invoke {
		return
	}
	k := max(0, min(len(b.OK)-1, int(op.Time/b.Width)))
	switch op.Type {
	case history.OK:
		b.OK[k]++
		if op.F == history.Acquire {
			b.Grants[k]++
		}
	case history.Fail:
		b.Fail[k]++
	default:
		b.Unknown[k]++
	}
}

// rate is count per second in a bucket of width w.
func rate(count int, w int64) float64 { return float64(count) / (float64(w) / 1e9) }

// widthOf is bucket i's width: the last one ends with the history.
func (b *buckets) widthOf(i int, end int64) int64 {
	if i == len(b.OK)-1 {
		if w := end - int64(i)*b.Width; w > 0 {
			return max(w, b.Width/10)
		}
	}
	return b.Width
}
