package reports

import (
	"sort"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/history"
)

// The whole-slice forms of the report's one-pass accumulators, for tests
// that give them a few events or holds at once.

// overlaps runs finished holds through a key's sweep: each starts at its
// Start and ends at its End, ends first at any instant (a belief that
// ends when another starts does not overlap it). It returns which holds
// are red and the spans where two or more were believed.
func overlaps(holds []checker.Hold, end int64) (red []bool, spans []span) {
	type point struct {
		t     int64
		start bool
		i     int
	}
	var pts []point
	sh := make([]*shold, len(holds))
	for i, h := range holds {
		sh[i] = &shold{Hold: h}
		if !h.Empty() {
			pts = append(pts, point{h.Start, true, i}, point{h.End, false, i})
		}
	}
	sort.SliceStable(pts, func(a, b int) bool {
		if pts[a].t != pts[b].t {
			return pts[a].t < pts[b].t
		}
		return !pts[a].start && pts[b].start
	})
	keys := map[string]*keySweep{}
	sc := scale{t0: 0, t1: end, x0: 0, w: 1e9}
	for _, p := range pts {
		h := sh[p.i]
		ks := keys[h.Key]
		if ks == nil {
			ks = &keySweep{key: h.Key, sc: sc}
			keys[h.Key] = ks
		}
		if p.start {
			ks.grant(h)
		} else {
			ks.end(h)
		}
	}
	red = make([]bool, len(holds))
	for i, h := range sh {
		red[i] = h.X.red
	}
	for _, ks := range keys {
		spans = append(spans, ks.spans...)
	}
	sort.SliceStable(spans, func(i, j int) bool {
		if spans[i].Key != spans[j].Key {
			return spans[i].Key < spans[j].Key
		}
		return spans[i].Start < spans[j].Start
	})
	return red, spans
}

// mergeBars turns one lane's intervals, in start order, into bars.
func mergeBars(sc scale, starts, ends []int64, red []bool, end int64) []bar {
	a := newBarAcc(sc, end)
	for i := range starts {
		a.add(starts[i], ends[i], red != nil && red[i])
	}
	return a.out
}

// latencyBins bins the latencies of ops.
func latencyBins(ops []history.Op, sc scale, cols int, fs map[string]bool) map[series][]latBin {
	a := newLatAcc(sc, cols, fs)
	for i := range ops {
		a.add(&ops[i])
	}
	return a.result()
}

// throughput buckets the completions of ops over [0, end].
func throughput(ops []history.Op, end int64, n int) *buckets {
	b := newBuckets(end, n)
	for i := range ops {
		b.add(&ops[i])
	}
	return b
}

// clientLanes gives the lanes of a run with these holds and faults.
func clientLanes(clients int, holds []checker.Hold, faults []faultSpan) []lane {
	holders := map[int]bool{}
	for _, h := range holds {
		holders[h.Process] = true
	}
	return clientLanesOf(clients, holders, faults)
}

// faultSpans pairs the nemesis events of ops.
func faultSpans(ops []history.Op) []faultSpan {
	var a faultAcc
	for i := range ops {
		if ops[i].Process == history.NemesisProcess {
			a.add(&ops[i])
		}
	}
	return a.out
}
