package reports

import (
	"container/heap"
	"fmt"
	"math"
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

// clientLanes gives one lane per client process that holds a lock, is hit
// by a client fault, or is one of the configured clients; a crashed
// client's replacement (process + clients) is labelled with the worker it
// replaces. Processes that only read the resource at the end (the counter
// workload's final reads) get no lane.
func clientLanes(clients int, holds []checker.Hold, faults []faultSpan) []lane {
	seen := map[int]bool{}
	for p := 0; p < clients; p++ {
		seen[p] = true
	}
	for i := range holds {
		seen[holds[i].Process] = true
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

// faultSpans pairs the nemesis start and stop events (same fault, same
// targets, same clients), as the checkers do; every event is kept.
func faultSpans(ops []history.Op) []faultSpan {
	var out []faultSpan
	open := map[string]int{}
	for i := range ops {
		op := &ops[i]
		if op.Process != history.NemesisProcess {
			continue
		}
		var v history.Value
		if op.Value != nil {
			v = *op.Value
		}
		id := fmt.Sprintf("%s|%v|%v", op.F, v.Targets, v.Clients)
		switch v.Phase {
		case "start", "":
			f := faultSpan{Name: op.F, Start: op.Time, End: op.Time, Targets: v.Targets, Clients: v.Clients, Detail: v.Detail}
			if op.F != "client-crash" && v.Phase == "start" {
				f.End, f.Open = checker.Never, true
				open[id] = len(out)
			}
			out = append(out, f)
		case "stop":
			if j, ok := open[id]; ok {
				out[j].End, out[j].Open = op.Time, false
				if v.Detail != "" && out[j].Detail == "" {
					out[j].Detail = v.Detail
				}
				delete(open, id)
			}
		default:
			out = append(out, faultSpan{Name: op.F, Start: op.Time, End: op.Time, Targets: v.Targets,
				Clients: v.Clients, Detail: v.Detail, Phase: v.Phase})
		}
	}
	return out
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

// isClientFault: the fault hits client processes, not nodes.
func (f *faultSpan) isClientFault() bool {
	return strings.HasPrefix(f.Name, "client-") || (len(f.Clients) > 0 && len(f.Targets) > 0 && strings.HasPrefix(f.Targets[0], "client"))
}

// overlaps finds, per key, every believed hold that overlaps another and
// the spans where two or more holds were believed at once. It is the
// exclusion checker's sweep, repeated for display because results.json
// keeps only the first violations in detail: the timeline must show them
// all.
func overlaps(holds []checker.Hold, end int64) (red []bool, spans []span) {
	red = make([]bool, len(holds))
	active := map[string]*endHeap{}
	for i := range holds {
		h := &holds[i]
		if h.Empty() {
			continue
		}
		a := active[h.Key]
		if a == nil {
			a = &endHeap{holds: holds}
			active[h.Key] = a
		}
		for a.Len() > 0 && holds[a.idx[0]].End <= h.Start {
			heap.Pop(a)
		}
		if a.Len() > 0 {
			red[i] = true
			// The overlap lasts while h and at least one other are believed.
			until := h.Start
			for _, j := range a.idx {
				red[j] = true
				until = max(until, min(holds[j].End, h.End))
			}
			spans = append(spans, span{Key: h.Key, Start: h.Start, End: max(h.Start, min(until, end))})
		}
		heap.Push(a, i)
	}
	return red, mergeSpans(spans)
}

type span struct {
	Key        string
	Start, End int64
}

// mergeSpans merges overlapping spans of the same key, sorted by start.
func mergeSpans(in []span) []span {
	sort.SliceStable(in, func(i, j int) bool {
		if in[i].Key != in[j].Key {
			return in[i].Key < in[j].Key
		}
		return in[i].Start < in[j].Start
	})
	var out []span
	for _, s := range in {
		if n := len(out); n > 0 && out[n-1].Key == s.Key && s.Start <= out[n-1].End {
			out[n-1].End = max(out[n-1].End, s.End)
			continue
		}
		out = append(out, s)
	}
	return out
}

// endHeap is a min-heap of hold indices by End.
type endHeap struct {
	idx   []int
	holds []checker.Hold
}

func (h endHeap) Len() int { return len(h.idx) }
func (h endHeap) Less(i, j int) bool {
	return h.holds[h.idx[i]].End < h.holds[h.idx[j]].End
}
func (h endHeap) Swap(i, j int) { h.idx[i], h.idx[j] = h.idx[j], h.idx[i] }
func (h *endHeap) Push(x any)   { h.idx = append(h.idx, x.(int)) }
func (h *endHeap) Pop() any {
	n := len(h.idx)
	x := h.idx[n-1]
	h.idx = h.idx[:n-1]
	return x
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

// mergeBars turns one lane's intervals (in start order) into bars. Two
// intervals of the same colour merge when the gap between their pixels
// is under a pixel; red never merges with normal, so every violation
// stays red and visible, and a bar is at least minBarPx wide.
func mergeBars(sc scale, starts, ends []int64, red []bool, end int64) []bar {
	var out []bar
	last := map[bool]int{false: -1, true: -1}
	for i := range starts {
		s, e := starts[i], ends[i]
		open := e == checker.Never
		if open {
			e = end
		}
		x0, x1 := sc.clampX(s), sc.clampX(e)
		if x1-x0 < minBarPx {
			x1 = x0 + minBarPx
		}
		r := red != nil && red[i]
		if j := last[r]; j >= 0 && x0-out[j].X1 < 1 {
			b := &out[j]
			b.End = max(b.End, e)
			b.X1 = math.Max(b.X1, x1)
			b.N++
			b.Open = b.Open || open
			continue
		}
		out = append(out, bar{Start: s, End: e, X0: x0, X1: x1, N: 1, Red: r, Open: open})
		last[r] = len(out) - 1
	}
	return out
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

// latencyBins bins operation latencies (completion − invoke, at the
// invoke's time) per series and pixel column, keeping min, max and count.
// Operations that never completed count as unknown with the latency up to
// the end of the history. Only the operations in fs are binned.
func latencyBins(ops []history.Op, sc scale, cols int, fs map[string]bool) map[series][]latBin {
	type acc struct{ bins map[int]*latBin }
	accs := map[series]*acc{}
	add := func(s series, t, d int64) {
		a := accs[s]
		if a == nil {
			a = &acc{bins: map[int]*latBin{}}
			accs[s] = a
		}
		c := sc.col(t, cols)
		b := a.bins[c]
		if b == nil {
			a.bins[c] = &latBin{Col: c, Min: d, Max: d, N: 1}
			return
		}
		b.Min, b.Max = min(b.Min, d), max(b.Max, d)
		b.N++
	}
	pending := map[int]int{} // process -> index of its invoke
	for i := range ops {
		op := &ops[i]
		if op.Process == history.NemesisProcess || !fs[op.F] {
			continue
		}
		if op.Type == history.Invoke {
			pending[op.Process] = i
			continue
		}
		j, ok := pending[op.Process]
		if !ok {
			continue
		}
		delete(pending, op.Process)
		inv := &ops[j]
		add(series{inv.F, op.Type}, inv.Time, op.Time-inv.Time)
	}
	end := history.EndTime(ops)
	for _, j := range pending {
		inv := &ops[j]
		add(series{inv.F, history.Info}, inv.Time, end-inv.Time)
	}
	out := map[series][]latBin{}
	for s, a := range accs {
		bs := make([]latBin, 0, len(a.bins))
		for _, b := range a.bins {
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

// throughput buckets completions over [0, end] into about n buckets of a
// nice width.
func throughput(ops []history.Op, end int64, n int) *buckets {
	w := niceStep(max(end, 1), n)
	nb := int(end/w) + 1
	b := &buckets{Width: w, OK: make([]int, nb), Fail: make([]int, nb), Unknown: make([]int, nb), Grants: make([]int, nb)}
	for i := range ops {
		op := &ops[i]
		if op.Process == history.NemesisProcess || op.Type == history.Invoke {
			continue
		}
		k := max(0, min(nb-1, int(op.Time/w)))
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
	return b
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
