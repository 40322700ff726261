package reports

import (
	"fmt"
	"html/template"
	"math"
	"sort"
	"strings"

	"github.com/lockjepsen/lockjepsen/history"
)

// latencyOps are the operations on the latency plot, in legend order.
var latencyOps = []string{history.Acquire, history.Release, history.Extend}

// throughputBuckets is about how many buckets the throughput plot has.
const throughputBuckets = 150

// shadeFaults shades every applied fault's window on a plot.
func (m *model) shadeFaults(s *svg, sc scale, y0, y1 float64) {
	m.eachFaultShown(sc, func(*faultSpan) bool { return true }, func(f *faultSpan, x0, x1 float64) {
		cls := "shade " + m.faultClass(f.Name)
		if m.hitsClients(f) {
			cls = "shade light " + m.faultClass(f.Name)
		}
		s.rect(x0, y0, max(x1-x0, 1.5), y1-y0, cls, f.describe())
	})
}

// latencyPlot draws operation latency over time on a log scale: one mark
// per operation while there is room, and per pixel column the min and max
// with a line between when there is not.
func (m *model) latencyPlot() (template.HTML, string) {
	sc := scale{t0: 0, t1: m.end, x0: plotX0, w: plotW}
	bins := m.lat
	lo, hi := int64(math.MaxInt64), int64(0)
	total := 0
	for _, bs := range bins {
		for _, b := range bs {
			lo, hi = min(lo, b.Min), max(hi, b.Max)
			total += b.N
		}
	}
	if total == 0 {
		return "", "No acquire or release operations were recorded."
	}
	lo = max(lo, 10_000) // 10µs: below is noise
	hi = max(hi, lo*10)
	dlo, dhi := math.Floor(math.Log10(float64(lo))), math.Ceil(math.Log10(float64(hi)))
	const h, top, bot = 300.0, 12.0, 28.0
	ph := h - top - bot
	y := func(d int64) float64 {
		v := math.Log10(float64(max(d, 1)))
		v = math.Max(dlo, math.Min(dhi, v))
		return top + ph*(1-(v-dlo)/(dhi-dlo))
	}
	s := newSVG(svgW, h, "plot", "latency of acquire and release over time")
	m.shadeFaults(s, sc, top, top+ph)
	s.timeAxis(sc, h-8, top, top+ph, 12)
	for d := dlo; d <= dhi; d++ {
		ns := math.Pow(10, d)
		yy := y(int64(ns))
		s.line(plotX0, yy, plotX0+plotW, yy, "grid")
		s.text(plotX0-6, yy+4, "axis", "end", fmtLat(ns))
	}
	fmt.Fprintf(&s.b, `<text class="axis-title" transform="translate(%s %s) rotate(-90)" text-anchor="middle">latency (log)</text>`, num(plotX0-62), num(top+ph/2))
	s.rect(plotX0, top, plotW, ph, "frame", "")
	colW := plotW / float64(cols)
	var keys []series
	for k := range bins {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		// failures first, so that grants and unknowns are drawn on top.
		oi, oj := outcomeOrder(keys[i].Outcome), outcomeOrder(keys[j].Outcome)
		if oi != oj {
			return oi < oj
		}
		return keys[i].F < keys[j].F
	})
	for _, k := range keys {
		var rng, marks strings.Builder
		for _, b := range bins[k] {
			x := plotX0 + (float64(b.Col)+0.5)*colW
			y0, y1 := y(b.Min), y(b.Max)
			if b.N > 1 && y0-y1 > 1 {
				fmt.Fprintf(&rng, "M%s %sV%s", num(x), num(y0), num(y1))
			}
			mark(&marks, k.Outcome, x, y0)
			if b.N > 1 && y0-y1 > 1.5 {
				mark(&marks, k.Outcome, x, y1)
			}
		}
		cls := "s-" + k.F + " o-" + string(k.Outcome)
		s.path(rng.String(), "range "+cls)
		s.path(marks.String(), "mark "+cls)
	}
	note := fmt.Sprintf("%s operations; x: when the operation was invoked; each pixel column shows the fastest and slowest of its operations (a line joins them when there are several).", thousands(total))
	return s.html(), note
}

func outcomeOrder(t history.Type) int {
	switch t {
	case history.Fail:
		return 0 // the most numerous: drawn first, under the others
	case history.OK:
		return 1
	}
	return 2
}

// mark draws an outcome's mark at x, y: a dot for ok, a cross for fail, a
// triangle for unknown.
func mark(b *strings.Builder, o history.Type, x, y float64) {
	switch o {
	case history.OK:
		fmt.Fprintf(b, "M%s %sh0", num(x), num(y))
	case history.Fail:
		fmt.Fprintf(b, "M%s %sl4 4m0 -4l-4 4", num(x-2), num(y-2))
	default:
		fmt.Fprintf(b, "M%s %sl2.5 4h-5z", num(x), num(y-2.5))
	}
}

func fmtLat(ns float64) string {
	switch {
	case ns >= 1e9:
		return fmt.Sprintf("%gs", ns/1e9)
	case ns >= 1e6:
		return fmt.Sprintf("%gms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%gµs", ns/1e3)
	}
	return fmt.Sprintf("%gns", ns)
}

// throughputPlot draws completed operations per second by outcome, and the
// locks granted per second, over time.
func (m *model) throughputPlot() (template.HTML, string) {
	b := m.thr
	any := false
	for i := range b.OK {
		if b.OK[i]+b.Fail[i]+b.Unknown[i] > 0 {
			any = true
			break
		}
	}
	if !any {
		return "", "No operation completed."
	}
	const h, top, gap, bot = 330.0, 12.0, 30.0, 28.0
	ph := (h - top - gap - bot) / 2
	sc := scale{t0: 0, t1: m.end, x0: plotX0, w: plotW}
	s := newSVG(svgW, h, "plot", "throughput over time")
	panel := func(y0 float64, title string, lines []struct {
		vals []int
		cls  string
	}) {
		peak := 0.0
		for _, l := range lines {
			for i, v := range l.vals {
				peak = math.Max(peak, rate(v, b.widthOf(i, m.end)))
			}
		}
		if peak == 0 {
			peak = 1
		}
		ymax := float64(niceStep(int64(math.Ceil(peak)), 1))
		for ymax < peak {
			ymax *= 2
		}
		m.shadeFaults(s, sc, y0, y0+ph)
		for _, tk := range timeTicks(sc.t0, sc.t1, 12) {
			s.line(sc.x(tk.T), y0, sc.x(tk.T), y0+ph, "grid")
		}
		for i := 0; i <= 4; i++ {
			v := ymax * float64(i) / 4
			yy := y0 + ph - ph*float64(i)/4
			s.line(plotX0, yy, plotX0+plotW, yy, "grid")
			s.text(plotX0-6, yy+4, "axis", "end", shortNum(v))
		}
		fmt.Fprintf(&s.b, `<text class="axis-title" transform="translate(%s %s) rotate(-90)" text-anchor="middle">%s</text>`, num(plotX0-62), num(y0+ph/2), esc(title))
		s.rect(plotX0, y0, plotW, ph, "frame", "")
		for _, l := range lines {
			var d strings.Builder
			for i, v := range l.vals {
				x0, x1 := sc.clampX(int64(i)*b.Width), sc.clampX(int64(i+1)*b.Width)
				yy := y0 + ph - ph*rate(v, b.widthOf(i, m.end))/ymax
				if i == 0 {
					fmt.Fprintf(&d, "M%s %s", num(x0), num(yy))
				} else {
					fmt.Fprintf(&d, "V%s", num(yy))
				}
				fmt.Fprintf(&d, "H%s", num(x1))
			}
			s.path(d.String(), "tline "+l.cls)
		}
	}
	type ln = struct {
		vals []int
		cls  string
	}
	panel(top, "operations/s", []ln{{b.OK, "t-ok"}, {b.Fail, "t-fail"}, {b.Unknown, "t-unknown"}})
	panel(top+ph+gap, "locks granted/s", []ln{{b.Grants, "t-grant"}})
	s.timeAxis(sc, h-8, top+ph+gap, top+ph+gap, 12)
	for _, tk := range timeTicks(sc.t0, sc.t1, 12) {
		s.text(sc.x(tk.T), top+ph+14, "axis", "middle", tk.Label)
	}
	note := fmt.Sprintf("Completions per %s bucket, as a rate per second.", fmtD(b.Width))
	return s.html(), note
}

func shortNum(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%gM", math.Round(v/1e5)/10)
	case v >= 1e4:
		return fmt.Sprintf("%gk", math.Round(v/100)/10)
	}
	return fmt.Sprintf("%g", math.Round(v*10)/10)
}
