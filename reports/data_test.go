package reports

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/history"
)

func TestNiceStepAndTicks(t *testing.T) {
	cases := []struct {
		t0, t1 int64
		n      int
		step   int64
		labels []string
	}{
		{0, 9e9, 10, 1e9, []string{"0s", "1s", "2s", "3s", "4s", "5s", "6s", "7s", "8s", "9s"}},
		{0, 30e9, 12, 5e9, []string{"0s", "5s", "10s", "15s", "20s", "25s", "30s"}},
		{0, 1e9, 4, 500e6, []string{"0.0s", "0.5s", "1.0s"}},
		{3_264_000_000, 3_287_000_000, 12, 2e6, nil},
		{0, 200e9, 10, 20e9, nil},
		{5, 5, 10, 1, []string{"0s"}},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%d-%d", tc.t0, tc.t1), func(t *testing.T) {
			if tc.t1 > tc.t0 {
				if got := niceStep(tc.t1-tc.t0, tc.n); got != tc.step {
					t.Errorf("niceStep = %d, want %d", got, tc.step)
				}
			}
			ticks := timeTicks(tc.t0, tc.t1, tc.n)
			if len(ticks) == 0 || len(ticks) > 2*tc.n+1 {
				t.Fatalf("%d ticks for n=%d", len(ticks), tc.n)
			}
			for i, tk := range ticks {
				if tc.t1 > tc.t0 && (tk.T < tc.t0 || tk.T > tc.t1) {
					t.Errorf("tick %d at %d is outside [%d, %d]", i, tk.T, tc.t0, tc.t1)
				}
				if i > 0 && tk.Label == ticks[i-1].Label {
					t.Errorf("ticks %d and %d both read %q: not enough decimals", i-1, i, tk.Label)
				}
			}
			if tc.labels != nil {
				var got []string
				for _, tk := range ticks {
					got = append(got, tk.Label)
				}
				if !reflect.DeepEqual(got, tc.labels) {
					t.Errorf("labels %v, want %v", got, tc.labels)
				}
			}
		})
	}
	// A zoom of a few ms labels to the ms.
	ticks := timeTicks(3_264_000_000, 3_287_000_000, 12)
	if ticks[0].Label != "3.264s" {
		t.Errorf("zoomed first tick %q, want 3.264s", ticks[0].Label)
	}
}

func hold(p int, start, end int64) checker.Hold {
	return checker.Hold{Key: "lock-0", Process: p, Invoke: start - 10, Start: start, End: end, EndReason: checker.EndRelease, EndIndex: -1}
}

func TestOverlapsFindsEveryViolation(t *testing.T) {
	cases := []struct {
		name  string
		holds []checker.Hold
		red   []bool
		spans [][2]int64
	}{
		{"disjoint", []checker.Hold{hold(0, 0, 10), hold(1, 10, 20), hold(2, 25, 30)}, []bool{false, false, false}, nil},
		{"pair", []checker.Hold{hold(0, 0, 10), hold(1, 5, 20)}, []bool{true, true}, [][2]int64{{5, 10}}},
		// A long stale hold overlaps a short one that is not the furthest:
		// all three are red, not only the one the sweep compares with.
		{"nested", []checker.Hold{hold(0, 0, 100), hold(1, 10, 20), hold(2, 15, 30)}, []bool{true, true, true}, [][2]int64{{10, 30}}},
		{"never ends", []checker.Hold{hold(0, 0, checker.Never), hold(1, 50, 60), hold(2, 70, 80)}, []bool{true, true, true}, [][2]int64{{50, 60}, {70, 80}}},
		{"empty holds never overlap", []checker.Hold{hold(0, 0, 10), hold(1, 5, 5)}, []bool{false, false}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			red, spans := overlaps(tc.holds, 1000)
			if !reflect.DeepEqual(red, tc.red) {
				t.Errorf("red %v, want %v", red, tc.red)
			}
			var got [][2]int64
			for _, s := range spans {
				got = append(got, [2]int64{s.Start, s.End})
			}
			if !reflect.DeepEqual(got, tc.spans) {
				t.Errorf("spans %v, want %v", got, tc.spans)
			}
		})
	}
}

func TestMergeBars(t *testing.T) {
	sc := scale{t0: 0, t1: 1000, x0: 0, w: 100} // 10 ns per pixel
	cases := []struct {
		name   string
		starts []int64
		ends   []int64
		red    []bool
		want   []bar
	}{
		{"far apart stay apart", []int64{0, 500}, []int64{100, 600}, nil,
			[]bar{{Start: 0, End: 100, X0: 0, X1: 10, N: 1}, {Start: 500, End: 600, X0: 50, X1: 60, N: 1}}},
		{"closer than a pixel merge", []int64{0, 102, 105}, []int64{100, 103, 200}, nil,
			[]bar{{Start: 0, End: 200, X0: 0, X1: 20, N: 3}}},
		{"short holds are a pixel wide", []int64{300}, []int64{301}, nil,
			[]bar{{Start: 300, End: 301, X0: 30, X1: 31, N: 1}}},
		{"red never merges into normal", []int64{0, 101, 102}, []int64{100, 102, 150}, []bool{false, true, false},
			[]bar{{Start: 0, End: 150, X0: 0, X1: 15, N: 2}, {Start: 101, End: 102, X0: 10.1, X1: 11.1, N: 1, Red: true}}},
		{"open belief runs to the end", []int64{900}, []int64{checker.Never}, nil,
			[]bar{{Start: 900, End: 1000, X0: 90, X1: 100, N: 1, Open: true}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := mergeBars(sc, tc.starts, tc.ends, tc.red, 1000)
			for i := range got {
				got[i].X0 = round2(got[i].X0)
				got[i].X1 = round2(got[i].X1)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }

// On a big lane, merging bounds the bars by the pixels while every red
// hold stays covered by a red bar.
func TestMergeBarsKeepsEveryViolation(t *testing.T) {
	sc := scale{t0: 0, t1: 1e9, x0: 0, w: 1000}
	var starts, ends []int64
	var red []bool
	for i := int64(0); i < 100_000; i++ {
		starts = append(starts, i*10_000)
		ends = append(ends, i*10_000+5_000)
		red = append(red, i%997 == 0)
	}
	bars := mergeBars(sc, starts, ends, red, 1e9)
	if len(bars) > 2*1000+200 {
		t.Errorf("%d bars for 1000 pixels", len(bars))
	}
	for i := range starts {
		if !red[i] {
			continue
		}
		covered := false
		for _, b := range bars {
			covered = covered || b.Red && b.Start <= starts[i] && b.End >= ends[i]
		}
		if !covered {
			t.Fatalf("red hold %d (%d–%d) is not drawn red", i, starts[i], ends[i])
		}
	}
}

func op(t int64, p int, typ history.Type, f string) history.Op {
	return history.Op{Time: t, Process: p, Type: typ, F: f, Key: "lock-0"}
}

func TestLatencyBins(t *testing.T) {
	sc := scale{t0: 0, t1: 1000, x0: 0, w: 10}
	ops := []history.Op{
		op(0, 0, history.Invoke, "acquire"), op(10, 0, history.OK, "acquire"), // col 0, 10
		op(20, 1, history.Invoke, "acquire"), op(50, 1, history.OK, "acquire"), // col 0, 30
		op(30, 2, history.Invoke, "acquire"), op(35, 2, history.Fail, "acquire"), // col 0 fail, 5
		op(500, 0, history.Invoke, "release"), op(501, 0, history.Info, "release"), // col 5 info
		{Time: 600, Process: history.NemesisProcess, Type: history.Info, F: "pause", Value: &history.Value{Phase: "start"}},
		op(700, 0, history.Invoke, "read"), op(710, 0, history.OK, "read"), // not plotted
		op(900, 1, history.Invoke, "acquire"), // never completes: unknown up to the end
		op(950, 2, history.Invoke, "extend"), op(960, 2, history.OK, "extend"),
	}
	got := latencyBins(ops, sc, 10, map[string]bool{"acquire": true, "release": true, "extend": true})
	want := map[series][]latBin{
		{"acquire", history.OK}:   {{Col: 0, Min: 10, Max: 30, N: 2}},
		{"acquire", history.Fail}: {{Col: 0, Min: 5, Max: 5, N: 1}},
		{"release", history.Info}: {{Col: 5, Min: 1, Max: 1, N: 1}},
		{"acquire", history.Info}: {{Col: 9, Min: 60, Max: 60, N: 1}},
		{"extend", history.OK}:    {{Col: 9, Min: 10, Max: 10, N: 1}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

// A million operations bin into at most a column per pixel per series.
func TestLatencyBinsBounded(t *testing.T) {
	var ops []history.Op
	for i := int64(0); i < 200_000; i++ {
		ops = append(ops, op(i*100, int(i%10), history.Invoke, "acquire"), op(i*100+50+i%7, int(i%10), history.Fail, "acquire"))
	}
	sc := scale{t0: 0, t1: history.EndTime(ops), x0: 0, w: 500}
	bins := latencyBins(ops, sc, 500, map[string]bool{"acquire": true})
	bs := bins[series{"acquire", history.Fail}]
	if len(bs) != 500 {
		t.Fatalf("%d bins, want 500", len(bs))
	}
	total := 0
	for _, b := range bs {
		total += b.N
		if b.Min != 50 || b.Max != 56 {
			t.Fatalf("bin %+v: want min 50 max 56", b)
		}
	}
	if total != 200_000 {
		t.Errorf("bins count %d operations, want 200000", total)
	}
}

func TestThroughputBuckets(t *testing.T) {
	ops := []history.Op{
		op(0, 0, history.Invoke, "acquire"), op(100, 0, history.OK, "acquire"),
		op(150, 1, history.Invoke, "acquire"), op(200, 1, history.Fail, "acquire"),
		op(1500, 0, history.Invoke, "release"), op(1600, 0, history.OK, "release"),
		op(1700, 1, history.Invoke, "acquire"), op(9999, 1, history.Info, "acquire"),
	}
	b := throughput(ops, 9999, 10)
	if b.Width != 1000 {
		t.Fatalf("width %d, want 1000", b.Width)
	}
	if len(b.OK) != 10 {
		t.Fatalf("%d buckets, want 10", len(b.OK))
	}
	check := func(name string, got []int, want map[int]int) {
		for i, v := range got {
			if v != want[i] {
				t.Errorf("%s[%d] = %d, want %d", name, i, v, want[i])
			}
		}
	}
	check("ok", b.OK, map[int]int{0: 1, 1: 1})
	check("fail", b.Fail, map[int]int{0: 1})
	check("unknown", b.Unknown, map[int]int{9: 1})
	check("grants", b.Grants, map[int]int{0: 1})
	if r := rate(5, 500_000_000); r != 10 {
		t.Errorf("rate = %g, want 10/s", r)
	}
}

func TestClientLanes(t *testing.T) {
	cases := []struct {
		name    string
		clients int
		holds   []checker.Hold
		faults  []faultSpan
		want    []int
	}{
		{"every client, even idle", 3, nil, nil, []int{0, 1, 2}},
		{"replacement below its worker", 3, []checker.Hold{hold(4, 0, 1), hold(7, 2, 3)}, nil, []int{0, 1, 4, 7, 2}},
		{"fault target gets a lane", 2, nil, []faultSpan{{Name: "client-crash", Clients: []int{3}}}, []int{0, 1, 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []int
			for _, l := range clientLanes(tc.clients, tc.holds, tc.faults) {
				got = append(got, l.Process)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("lanes %v, want %v", got, tc.want)
			}
		})
	}
}

func TestFaultSpansKeepEveryFault(t *testing.T) {
	nem := func(t int64, f, phase string, targets []string, clients []int) history.Op {
		return history.Op{Time: t, Process: history.NemesisProcess, Type: history.Info, F: f,
			Value: &history.Value{Phase: phase, Targets: targets, Clients: clients}}
	}
	ops := []history.Op{
		nem(10, "pause", "start", []string{"n1"}, nil),
		nem(20, "client-pause", "start", []string{"client 1"}, []int{1}),
		nem(25, "client-pause", "start", []string{"client 2"}, []int{2}),
		nem(30, "client-pause", "stop", []string{"client 1"}, []int{1}),
		nem(40, "pause", "stop", []string{"n1"}, nil),
		nem(50, "client-crash", "start", []string{"client 3"}, []int{3}),
		nem(60, "kill", "error", []string{"n1"}, nil),
		nem(70, "partition", "start", []string{"n1"}, nil),
	}
	got := faultSpans(ops)
	want := []struct {
		name       string
		start, end int64
		applied    bool
	}{
		{"pause", 10, 40, true}, {"client-pause", 20, 30, true}, {"client-pause", 25, checker.Never, true},
		{"client-crash", 50, 50, true}, {"kill", 60, 60, false}, {"partition", 70, checker.Never, true},
	}
	if len(got) != len(want) {
		t.Fatalf("%d faults, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.Name != w.name || g.Start != w.start || g.End != w.end || g.applied() != w.applied {
			t.Errorf("fault %d = %+v, want %+v", i, g, w)
		}
	}
}
