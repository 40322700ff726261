package reports

import (
	"io"
	"sort"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/runfile"
)

// RenderRunBothWays renders the page of the run in dir twice, without
// the time it was generated: from the one-pass model, and from the old
// model that held the whole history (oracle_test.go), so that an
// external test can compare the two on the fixtures it makes.
func RenderRunBothWays(onePass, whole io.Writer, dir string) error {
	rf := loadMeta(dir)
	for _, r := range []struct {
		w io.Writer
		m *model
	}{{onePass, newModel(rf)}, {whole, wholeHistoryModel(rf)}} {
		pg := pageOf(rf, r.m)
		pg.Generated = ""
		if err := tmpl.ExecuteTemplate(r.w, "report.html.tmpl", pg); err != nil {
			return err
		}
	}
	return nil
}

// wholeHistoryModel is the page's model as the report built it before
// the one-pass model: from every event at once.
func wholeHistoryModel(rf *runFiles) *model {
	m := &model{rf: rf, full: map[int]*laneData{}, keyBars: map[string][]bar{}}
	hr, err := history.ReadLenient(runfile.HistoryPath(rf.dir))
	m.histErr = err
	var ops []history.Op
	if hr != nil {
		ops = hr.Ops
		m.hr = &histRead{events: len(ops), bad: hr.Bad, firstBad: hr.FirstBad, truncated: hr.Truncated}
		m.events = len(ops)
	}
	m.end = history.EndTime(ops)
	if rf.cfg != nil {
		m.clients = rf.cfg.Clients
		if m.end == 0 {
			m.end = int64(rf.cfg.TimeLimit + rf.cfg.Recovery)
		}
	}
	m.end = max(m.end, 100_000_000)
	var res *checker.Results
	if rf.res != nil {
		res = rf.res.Results
	}
	o := newOracle(ops, m.end, res)
	m.holds, m.ovl, m.faults, m.keys, m.endOps = len(o.holds), o.ovl, faultSpans(ops), o.keys, o.endOps
	m.lanes = clientLanes(m.clients, o.holds, m.faults)
	for p, bars := range o.full {
		m.full[p] = &laneData{bars: &barAcc{out: bars}}
	}
	m.keyBars = o.keyBars
	for _, z := range o.zooms {
		lanes := map[int]*laneData{}
		for p, l := range z {
			lanes[p] = &laneData{bars: &barAcc{out: l.bars}, leases: l.leases, ops: &opStream{bin: opBin{out: l.strips}}}
		}
		m.zooms = append(m.zooms, lanes)
	}
	fs := map[string]bool{}
	for _, f := range latencyOps {
		fs[f] = true
	}
	m.lat = oldLatencyBins(ops, scale{t0: 0, t1: m.end, x0: plotX0, w: plotW}, cols, fs)
	m.thr = oldThroughput(ops, m.end, 150)
	m.keysAndNodes()
	return m
}

// oldLatencyBins is how the latency plot was binned: over the whole
// history.
func oldLatencyBins(ops []history.Op, sc scale, cols int, fs map[string]bool) map[series][]latBin {
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

// oldThroughput is how the throughput plot was counted: over the whole
// history.
func oldThroughput(ops []history.Op, end int64, n int) *buckets {
	b := newBuckets(end, n)
	for i := range ops {
		b.add(&ops[i])
	}
	return b
}
