package reports

import (
	"bufio"
	"container/heap"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/runfile"
)

// The report once drew from the whole history in memory: checker.Holds,
// then a sweep over every hold for the overlaps, then per lane the holds
// in start order, and per zoom the operations around the witness. The
// one-pass model must draw the same. oracle is that old model, kept here
// as the reference, on the history as a slice.
type oracle struct {
	holds   []checker.Hold
	keys    []string
	ovl     []span
	full    map[int][]bar // client lane bars
	keyBars map[string][]bar
	zooms   []map[int]oracleLane
	endOps  map[int64]history.Op
}

type oracleLane struct {
	bars   []bar
	leases [][2]int64
	strips []strip
}

func newOracle(ops []history.Op, end int64, res *checker.Results) *oracle {
	o := &oracle{holds: checker.Holds(ops), full: map[int][]bar{}, keyBars: map[string][]bar{}, endOps: map[int64]history.Op{}}
	red, ovl := oldOverlaps(o.holds, end)
	o.ovl = ovl
	full := scale{t0: 0, t1: end, x0: plotX0, w: plotW}
	keys := map[string]bool{}
	for _, h := range o.holds {
		keys[h.Key] = true
	}
	for k := range keys {
		o.keys = append(o.keys, k)
		var starts, ends []int64
		for _, h := range o.holds {
			if h.Key == k && !h.Empty() {
				starts, ends = append(starts, h.Start), append(ends, h.End)
			}
		}
		o.keyBars[k] = oldMergeBars(full, starts, ends, nil, end)
	}
	sort.Strings(o.keys)
	for _, p := range procsOf(o.holds) {
		o.full[p] = o.lane(p, full, red, end, false).bars
	}
	if res == nil || res.Exclusion == nil {
		return o
	}
	for i, v := range res.Exclusion.Violations {
		if i >= FullWitnesses {
			break
		}
		a, b, procs := zoomWindow(v, end)
		sc := scale{t0: a, t1: b, x0: plotX0, w: plotW}
		z := map[int]oracleLane{}
		for _, p := range procs {
			l := o.lane(p, sc, red, end, true)
			l.strips = oldOps(ops, sc, p, end)
			z[p] = l
		}
		o.zooms = append(o.zooms, z)
		for _, h := range []checker.Hold{v.First, v.Second} {
			if h.End != checker.Never && h.EndIndex >= 0 && h.EndIndex < int64(len(ops)) && ops[h.EndIndex].Index == h.EndIndex {
				o.endOps[h.EndIndex] = ops[h.EndIndex]
			}
		}
	}
	return o
}

func procsOf(holds []checker.Hold) []int {
	seen := map[int]bool{}
	var ps []int
	for _, h := range holds {
		if !seen[h.Process] && !h.Empty() {
			seen[h.Process] = true
			ps = append(ps, h.Process)
		}
	}
	return ps
}

// lane is the old client lane: process p's holds that show in sc.
func (o *oracle) lane(p int, sc scale, red []bool, end int64, leases bool) oracleLane {
	var l oracleLane
	var starts, ends []int64
	var reds []bool
	for i, hd := range o.holds {
		if hd.Process != p || hd.Empty() {
			continue
		}
		vu := hd.End
		if hd.ValidUntil != nil {
			vu = *hd.ValidUntil
		}
		if max(hd.End, vu) < sc.t0 || hd.Invoke > sc.t1 {
			continue
		}
		starts, ends, reds = append(starts, hd.Start), append(ends, hd.End), append(reds, red[i])
		if leases {
			le := int64(checker.Never)
			if hd.ValidUntil != nil {
				le = *hd.ValidUntil
			}
			l.leases = append(l.leases, [2]int64{hd.Invoke, le})
		}
	}
	l.bars = oldMergeBars(sc, starts, ends, reds, end)
	return l
}

// oldOverlaps is the old sweep over every hold.
func oldOverlaps(holds []checker.Hold, end int64) (red []bool, spans []span) {
	red = make([]bool, len(holds))
	active := map[string]*oldEndHeap{}
	for i := range holds {
		h := &holds[i]
		if h.Empty() {
			continue
		}
		a := active[h.Key]
		if a == nil {
			a = &oldEndHeap{holds: holds}
			active[h.Key] = a
		}
		for a.Len() > 0 && holds[a.idx[0]].End <= h.Start {
			heap.Pop(a)
		}
		if a.Len() > 0 {
			red[i] = true
			until := h.Start
			for _, j := range a.idx {
				red[j] = true
				until = max(until, min(holds[j].End, h.End))
			}
			spans = append(spans, span{Key: h.Key, Start: h.Start, End: max(h.Start, min(until, end))})
		}
		heap.Push(a, i)
	}
	sort.SliceStable(spans, func(i, j int) bool {
		if spans[i].Key != spans[j].Key {
			return spans[i].Key < spans[j].Key
		}
		return spans[i].Start < spans[j].Start
	})
	var out []span
	for _, s := range spans {
		if n := len(out); n > 0 && out[n-1].Key == s.Key && s.Start <= out[n-1].End {
			out[n-1].End = max(out[n-1].End, s.End)
			continue
		}
		out = append(out, s)
	}
	return red, out
}

type oldEndHeap struct {
	idx   []int
	holds []checker.Hold
}

func (h oldEndHeap) Len() int           { return len(h.idx) }
func (h oldEndHeap) Less(i, j int) bool { return h.holds[h.idx[i]].End < h.holds[h.idx[j]].End }
func (h oldEndHeap) Swap(i, j int)      { h.idx[i], h.idx[j] = h.idx[j], h.idx[i] }
func (h *oldEndHeap) Push(x any)        { h.idx = append(h.idx, x.(int)) }
func (h *oldEndHeap) Pop() any {
	n := len(h.idx)
	x := h.idx[n-1]
	h.idx = h.idx[:n-1]
	return x
}

// oldMergeBars is the old merge of a lane's holds, in start order.
func oldMergeBars(sc scale, starts, ends []int64, red []bool, end int64) []bar {
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

// oldOps is the old drawOps: process p's operations in the window, from
// the whole history.
func oldOps(ops []history.Op, sc scale, p int, end int64) []strip {
	from := sort.Search(len(ops), func(i int) bool { return ops[i].Time >= sc.t0-int64(2e9) })
	pending := -1
	n := 0
	var bin opBin
	for i := from; i < len(ops) && ops[i].Time <= sc.t1 && n < maxZoomOps; i++ {
		op := &ops[i]
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
		inv := &ops[pending]
		pending = -1
		if op.Time < sc.t0 {
			continue
		}
		bin.add(opStrip(sc, inv, op, end))
		n++
	}
	if pending >= 0 && n < maxZoomOps {
		bin.add(opStrip(sc, &ops[pending], nil, end))
	}
	bin.flush()
	return bin.out
}

// randomHistory is a validated history of a few clients on two keys with
// everything the hold rules distinguish: leases that run out unnoticed,
// extensions (some too late), releases of someone else's token, unknown
// outcomes, no-TTL holds, crashes and pauses, and events at one instant.
func randomHistory(rng *rand.Rand, n int) []history.Op {
	const procs = 5
	// On a coarse clock, events share instants with each other and with
	// the ends of leases: the ties the hold rules must break as the
	// checker does.
	grain := int64(1)
	if rng.Intn(2) == 0 {
		grain = 1_000_000
	}
	var ops []history.Op
	tm := int64(1000)
	pending := map[int]*history.Op{}
	token := map[int]string{}
	keyOf := map[int]string{}
	emit := func(op history.Op) {
		op.Index = int64(len(ops))
		op.Time = tm
		ops = append(ops, op)
	}
	for len(ops) < n {
		if rng.Intn(4) > 0 {
			tm += rng.Int63n(3_000_000/grain) * grain
		}
		if rng.Intn(60) == 0 {
			nemesis(rng, emit, procs)
			continue
		}
		p := rng.Intn(procs)
		if rng.Intn(200) == 0 && pending[p] == nil {
			// A client retrying a refused acquire every few µs: more
			// operations than a zoomed lane draws.
			for range 450 {
				emit(history.Op{Process: p, Type: history.Invoke, F: history.Acquire, Key: keyOf[p], Value: &history.Value{TTL: 20_000_000}})
				tm += 3000
				emit(history.Op{Process: p, Type: history.Fail, F: history.Acquire, Key: keyOf[p], Error: "not acquired"})
			}
			continue
		}
		if inv := pending[p]; inv != nil {
			emit(complete(rng, inv, tm, grain, token))
			delete(pending, p)
			continue
		}
		inv := invoke(rng, p, keyOf, token)
		emit(inv)
		pending[p] = &inv
	}
	return ops
}

func invoke(rng *rand.Rand, p int, keyOf map[int]string, token map[int]string) history.Op {
	key := keyOf[p]
	if key == "" || rng.Intn(5) == 0 {
		key = fmt.Sprintf("lock-%d", rng.Intn(2))
		keyOf[p] = key
	}
	op := history.Op{Process: p, Type: history.Invoke, Key: key}
	switch r := rng.Intn(10); {
	case r < 5:
		op.F, op.Value = history.Acquire, &history.Value{TTL: 20_000_000}
	case r < 7:
		op.F, op.Value = history.Release, &history.Value{Token: token[p]}
		if rng.Intn(6) == 0 {
			op.Value.Token = token[(p+1)%5] // someone else's
		}
	case r < 9:
		op.F, op.Value = history.Extend, &history.Value{TTL: 20_000_000, Token: token[p]}
	default:
		op.F = history.Read
	}
	return op
}

func complete(rng *rand.Rand, inv *history.Op, tm, grain int64, token map[int]string) history.Op {
	op := history.Op{Process: inv.Process, F: inv.F, Key: inv.Key}
	switch r := rng.Intn(10); {
	case r < 6:
		op.Type = history.OK
	case r < 8:
		op.Type, op.Error = history.Fail, "not held"
	default:
		op.Type, op.Error = history.Info, "i/o timeout"
	}
	if op.Type != history.OK {
		return op
	}
	vu := history.I64(tm + (rng.Int63n(30_000_000/grain)-2_000_000/grain)*grain) // some already past
	if rng.Intn(8) == 0 {
		vu = nil // no TTL
	}
	switch inv.F {
	case history.Acquire:
		t := fmt.Sprintf("p%d.%d", inv.Process, rng.Intn(1e6))
		token[inv.Process] = t
		op.Value = &history.Value{Token: t, ValidUntil: vu}
	case history.Extend:
		if vu != nil {
			op.Value = &history.Value{ValidUntil: vu}
		}
	case history.Read:
		op.Value = &history.Value{N: history.I64(1)}
	}
	return op
}

func nemesis(rng *rand.Rand, emit func(history.Op), procs int) {
	c := rng.Intn(procs)
	v := &history.Value{Phase: "start"}
	f := "pause"
	switch rng.Intn(4) {
	case 0:
		f, v.Clients, v.Targets = "client-crash", []int{c}, []string{fmt.Sprintf("client %d", c)}
	case 1:
		f, v.Clients, v.Targets = "client-pause", []int{c}, []string{fmt.Sprintf("client %d", c)}
	case 2:
		f, v.Phase, v.Clients, v.Targets = "client-pause", "stop", []int{c}, []string{fmt.Sprintf("client %d", c)}
	default:
		v.Targets = []string{"n1"}
		if rng.Intn(2) == 0 {
			v.Phase = "stop"
		}
	}
	emit(history.Op{Process: history.NemesisProcess, Type: history.Info, F: f, Value: v})
}

// writeRandomRun stores ops as a run checked by the exclusion checker.
func writeRandomRun(t *testing.T, ops []history.Op) *runFiles {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, runfile.HistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	for i := range ops {
		w.Write(append(history.AppendJSON(nil, &ops[i]), '\n'))
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// A budget too small to start porcupine: the page draws the rest.
	r := checker.Check(ops, checker.Options{TTL: 20 * time.Millisecond, LinearizabilityBudget: time.Nanosecond})
	res := &checker.Results{Exclusion: r.Exclusion, Stats: r.Stats}
	cfg := &runConfig{}
	cfg.Clients, cfg.Keys = 5, 2
	return &runFiles{dir: dir, cfg: cfg, res: &runResults{Results: res}}
}

// On random histories the one-pass model draws what the old whole-history
// model drew: the same holds, overlaps, red and merged bars in every lane
// and on every key, and, in every zoom, the same bars, leases and
// operation strips, and the same events named by the witnesses.
func TestOnePassDrawsWhatTheWholeHistoryDrew(t *testing.T) {
	violations, full := 0, 0
	for seed := int64(0); seed < 150; seed++ {
		rng := rand.New(rand.NewSource(seed))
		ops := randomHistory(rng, 200+rng.Intn(2000))
		rf := writeRandomRun(t, ops)
		m := newModel(rf)
		if m.histErr != nil {
			t.Fatal(m.histErr)
		}
		o := newOracle(ops, m.end, rf.res.Results)
		violations += rf.res.Exclusion.Count
		for _, z := range o.zooms {
			for _, l := range z {
				n := 0
				for _, st := range l.strips {
					n += st.n
				}
				if n >= maxZoomOps {
					full++
				}
			}
		}
		if msg := compareModel(m, o); msg != "" {
			t.Fatalf("seed %d (%d events): %s", seed, len(ops), msg)
		}
	}
	if violations < 100 || full == 0 {
		t.Fatalf("%d violations, %d zoomed lanes with all the operations they draw, in all the histories: the test tests little", violations, full)
	}
}

func compareModel(m *model, o *oracle) string {
	if m.holds != len(o.holds) {
		return fmt.Sprintf("%d holds, want %d", m.holds, len(o.holds))
	}
	if len(o.keys) == 0 {
		o.keys = []string{"lock-0", "lock-1"} // the configured keys, without holds
	}
	if !reflect.DeepEqual(m.keys, o.keys) {
		return fmt.Sprintf("keys %v, want %v", m.keys, o.keys)
	}
	if !reflect.DeepEqual(m.ovl, o.ovl) {
		return fmt.Sprintf("overlaps\n%v\nwant\n%v", m.ovl, o.ovl)
	}
	for p, want := range o.full {
		if got := m.full[p]; got == nil || !reflect.DeepEqual(got.bars.out, want) {
			return fmt.Sprintf("process %d's bars differ:\n%+v\nwant\n%+v", p, got, want)
		}
	}
	if len(m.full) != len(o.full) {
		return fmt.Sprintf("%d lanes with holds, want %d", len(m.full), len(o.full))
	}
	for k, want := range o.keyBars {
		var got [][2]float64
		for _, b := range m.keyBars[k] {
			got = append(got, [2]float64{b.X0, b.X1})
		}
		var w [][2]float64
		for _, b := range want {
			w = append(w, [2]float64{b.X0, b.X1})
		}
		if !reflect.DeepEqual(got, w) {
			return fmt.Sprintf("key %s's bars differ:\n%v\nwant\n%v", k, got, w)
		}
	}
	if len(m.zooms) != len(o.zooms) {
		return fmt.Sprintf("%d zooms, want %d", len(m.zooms), len(o.zooms))
	}
	for i, z := range o.zooms {
		for p, want := range z {
			got := m.zooms[i][p]
			if got == nil {
				return fmt.Sprintf("zoom %d has no lane %d", i, p)
			}
			if !reflect.DeepEqual(got.bars.out, want.bars) || !reflect.DeepEqual(got.leases, want.leases) {
				return fmt.Sprintf("zoom %d lane %d: bars %+v leases %v\nwant bars %+v leases %v", i, p, got.bars.out, got.leases, want.bars, want.leases)
			}
			if !reflect.DeepEqual(got.ops.bin.out, want.strips) {
				return fmt.Sprintf("zoom %d lane %d: strips\n%+v\nwant\n%+v", i, p, got.ops.bin.out, want.strips)
			}
		}
	}
	if !reflect.DeepEqual(m.endOps, o.endOps) {
		return fmt.Sprintf("events named by the witnesses %v, want %v", m.endOps, o.endOps)
	}
	return ""
}

// A key's union of bars, fed in any order, is the bars of its holds
// merged in start order.
func TestUnionBarsInAnyOrder(t *testing.T) {
	sc := scale{t0: 0, t1: 100_000, x0: 150, w: 1034}
	for seed := int64(0); seed < 300; seed++ {
		rng := rand.New(rand.NewSource(seed))
		n := 1 + rng.Intn(60)
		starts, ends := make([]int64, n), make([]int64, n)
		for i := range starts {
			starts[i] = rng.Int63n(100_000)
			ends[i] = starts[i] + rng.Int63n(400)
			if rng.Intn(30) == 0 {
				ends[i] = checker.Never
			}
		}
		u := unionBars{sc: sc, end: 100_000}
		for _, i := range rng.Perm(n) {
			u.add(starts[i], ends[i])
		}
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		sort.Slice(idx, func(a, b int) bool { return starts[idx[a]] < starts[idx[b]] })
		var ss, es []int64
		for _, i := range idx {
			ss, es = append(ss, starts[i]), append(es, ends[i])
		}
		want := oldMergeBars(sc, ss, es, nil, 100_000)
		if len(u.out) != len(want) {
			t.Fatalf("seed %d: %d bars, want %d", seed, len(u.out), len(want))
		}
		for i := range want {
			if u.out[i].X0 != want[i].X0 || u.out[i].X1 != want[i].X1 {
				t.Fatalf("seed %d: bar %d is %v–%v, want %v–%v", seed, i, u.out[i].X0, u.out[i].X1, want[i].X0, want[i].X1)
			}
		}
	}
}

// A key with more overlaps than maxSpans keeps them merged where they are
// closer than a pixel: every overlap is still covered, and the spans are
// bounded by the pixels.
func TestOverlapSpansMergeOnScreenWhenMany(t *testing.T) {
	const n = 3 * maxSpans
	sc := scale{t0: 0, t1: n * 300_000, x0: plotX0, w: plotW}
	k := &keySweep{key: "lock-0", sc: sc}
	var want [][2]int64
	for i := range int64(n) {
		a := &shold{Hold: checker.Hold{Key: "lock-0", Start: i * 300_000, End: i*300_000 + 100_000}}
		b := &shold{Hold: checker.Hold{Key: "lock-0", Start: a.Start + 50_000, End: a.End + 20_000}}
		k.grant(a)
		k.grant(b)
		k.end(a)
		k.end(b)
		want = append(want, [2]int64{b.Start, a.End})
	}
	spans := k.result()
	if len(spans) > int(plotW)+1 {
		t.Fatalf("%d spans for %d pixels", len(spans), int(plotW))
	}
	for i, s := range spans[1:] {
		if sc.x(s.Start)-sc.x(spans[i].End) < 1 {
			t.Fatalf("spans %d and %d are closer than a pixel", i, i+1)
		}
	}
	total := 0
	j := 0
	for _, w := range want {
		for j < len(spans) && spans[j].End < w[1] {
			j++
		}
		if j == len(spans) || spans[j].Start > w[0] {
			t.Fatalf("overlap %v is not covered", w)
		}
	}
	for _, s := range spans {
		total += max(s.N, 1)
	}
	if total != n {
		t.Errorf("the spans count %d overlaps, want %d", total, n)
	}
}
