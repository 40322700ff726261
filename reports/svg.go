package reports

import (
	"fmt"
	"html/template"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/runfile"
)

// svg builds an inline SVG element by hand: the drawings are simple, and a
// library would be a dependency for little.
type svg struct {
	b strings.Builder
}

func newSVG(w, h float64, class, label string) *svg {
	s := &svg{}
	fmt.Fprintf(&s.b, `<svg class="%s" viewBox="0 0 %s %s" role="img" aria-label="%s" preserveAspectRatio="xMinYMin meet">`,
		class, num(w), num(h), esc(label))
	return s
}

func (s *svg) raw(format string, a ...any) { fmt.Fprintf(&s.b, format, a...) }

func (s *svg) html() template.HTML {
	s.b.WriteString("</svg>")
	return template.HTML(s.b.String()) // built from escaped parts only
}

// num formats a coordinate compactly: two decimals at most.
func num(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "0"
	}
	return strconv.FormatFloat(math.Round(f*100)/100, 'f', -1, 64)
}

func esc(s string) string { return template.HTMLEscapeString(s) }

// rect draws a rectangle with an optional tooltip.
func (s *svg) rect(x, y, w, h float64, class, title string) {
	if title == "" {
		fmt.Fprintf(&s.b, `<rect x="%s" y="%s" width="%s" height="%s" class="%s"/>`, num(x), num(y), num(w), num(h), class)
		return
	}
	fmt.Fprintf(&s.b, `<rect x="%s" y="%s" width="%s" height="%s" class="%s"><title>%s</title></rect>`,
		num(x), num(y), num(w), num(h), class, esc(title))
}

func (s *svg) line(x1, y1, x2, y2 float64, class string) {
	fmt.Fprintf(&s.b, `<line x1="%s" y1="%s" x2="%s" y2="%s" class="%s"/>`, num(x1), num(y1), num(x2), num(y2), class)
}

func (s *svg) text(x, y float64, class, anchor, t string) {
	fmt.Fprintf(&s.b, `<text x="%s" y="%s" class="%s" text-anchor="%s">%s</text>`, num(x), num(y), class, anchor, esc(t))
}

func (s *svg) textTitle(x, y float64, class, anchor, t, title string) {
	fmt.Fprintf(&s.b, `<text x="%s" y="%s" class="%s" text-anchor="%s">%s<title>%s</title></text>`, num(x), num(y), class, anchor, esc(t), esc(title))
}

func (s *svg) path(d, class string) {
	if d == "" {
		return
	}
	fmt.Fprintf(&s.b, `<path d="%s" class="%s"/>`, d, class)
}

// timeAxis draws ticks and labels of sc at y, with grid lines from gy0 to
// gy1.
func (s *svg) timeAxis(sc scale, y, gy0, gy1 float64, n int) {
	for _, tk := range timeTicks(sc.t0, sc.t1, n) {
		x := sc.x(tk.T)
		s.line(x, gy0, x, gy1, "grid")
		s.text(x, y, "axis", "middle", tk.Label)
	}
}

// faultClasses are the fault colours report.css has; a run.json naming
// another (a newer harness, or a hand-edited file) gets f-other rather
// than an uncoloured bar or markup of its own in the page.
var faultClasses = []string{"f-client", "f-clock", "f-process", "f-net", "f-other"}

// faultClass is the CSS class of a fault's colour, as the run recorded it.
func (m *model) faultClass(name string) string {
	if c := m.faultDraw(name).Class; slices.Contains(faultClasses, c) {
		return c
	}
	return "f-other"
}

// faultDraw is how the run said to draw the named fault; a run stored
// before runs said so is drawn as reports drew it then.
func (m *model) faultDraw(name string) runfile.FaultDescription {
	if info := m.rf.info; info != nil && info.Described != nil {
		if d, ok := info.Described.Faults[name]; ok && d.Class != "" {
			return d
		}
	}
	return legacyDraw(name)
}

// faultMeaning is what the named fault means, as the run recorded it
// (runfile.RunInfo.FaultMeanings), else by its name.
func (m *model) faultMeaning(name string) checker.FaultMeaning {
	return m.meanings.Of(name)
}

var legacyLabels = map[string]string{"pause": "paused", "kill": "killed", "partition": "cut off", "reject": "rejecting",
	"latency": "slow replies", "slow": "throttled", "client-pause": "paused", "client-crash": "crashed"}

// legacyDraw is how reports drew a fault from its name alone, for old
// stores only: a new fault is drawn from its nemesis.Descriptor.
func legacyDraw(name string) runfile.FaultDescription {
	d := runfile.FaultDescription{Class: "f-other", Label: legacyLabels[name]}
	switch {
	case strings.HasPrefix(name, "client-"):
		d.Class = "f-client"
	case strings.HasPrefix(name, "clock-"):
		d.Class, d.Label, d.LabelDetail = "f-clock", "clock", true
	case name == "pause" || name == "kill":
		d.Class = "f-process"
	case name == "partition" || name == "reject" || name == "latency" || name == "slow":
		d.Class = "f-net"
	}
	return d
}
