// Package reports renders lockjepsen's HTML reports from the files a run
// stores: report.html for one run (WriteRun), one page summarizing several
// runs (WriteMatrix), and a browser over a whole store (Handler). Pages are
// self-contained: the style is embedded, the drawings are inline SVG, and
// nothing is fetched from the network, so a report opens from disk, from
// a CI artifact or printed to PDF.
package reports

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/internal/atomicfile"
	"github.com/lockjepsen/lockjepsen/runfile"
)

//go:embed assets/*
var assets embed.FS

var tmpl = template.Must(template.New("").Funcs(template.FuncMap{
	"css": func() template.CSS {
		b, _ := assets.ReadFile("assets/report.css")
		return template.CSS(b)
	},
	"thousands": thousands,
	"pct":       func(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) },
	"t":         fmtT,
	"d":         fmtD,
	"add":       func(a, b int) int { return a + b },
}).ParseFS(assets, "assets/*.tmpl"))

// WriteRun renders RUN_DIR/report.html from the stored files alone
// (config.json, run.json, results.json, history.jsonl, nodes.json); it
// does not re-run the checkers. Missing or damaged files are said so on
// the page rather than failing: an error means the directory is not a run
// or the page could not be written.
func WriteRun(dir string) (path string, err error) {
	var buf bytes.Buffer
	if err := RenderRun(&buf, dir); err != nil {
		return "", err
	}
	path = filepath.Join(dir, ReportFile)
	if err := atomicfile.WriteBytes(path, buf.Bytes()); err != nil {
		return "", fmt.Errorf("write report: %w", err)
	}
	return path, nil
}

// RenderRun writes the report of the run in dir to w.
func RenderRun(w io.Writer, dir string) (err error) {
	if st, serr := os.Stat(dir); serr != nil || !st.IsDir() {
		return fmt.Errorf("%s is not a run directory", dir)
	}
	if !isRunDir(dir) {
		hint := ""
		if _, err := os.Stat(filepath.Join(dir, "latest")); err == nil {
			hint = fmt.Sprintf(" (it looks like a store: try %s)", filepath.Join(dir, "latest"))
		}
		return fmt.Errorf("%s is not a lockjepsen run directory: it has no history (%s or %s) and no %s%s", dir, runfile.CompressedHistoryFile, runfile.HistoryFile, runfile.ConfigFile, hint)
	}
	defer func() {
		// A report must never take the harness down with it.
		if p := recover(); p != nil {
			err = fmt.Errorf("render report of %s: %v", dir, p)
		}
	}()
	pg := buildPage(loadMeta(dir))
	return tmpl.ExecuteTemplate(w, "report.html.tmpl", pg)
}

func isRunDir(dir string) bool {
	for _, f := range runMarkers {
		if st, err := os.Stat(filepath.Join(dir, f)); err == nil && st.Mode().IsRegular() {
			return true
		}
	}
	return false
}

// page is the report's template data.
type page struct {
	Title       string
	Test        string
	Dir         string
	Started     string
	Generated   string
	Verdict     string // safe, unsafe, stuck, unknown, not checked
	VerdictWord string
	Headline    string
	Details     []string
	Why         []string
	Expect      string
	ExpectMet   string // "met", "not met", ""
	ExpectWhy   string
	Command     string
	Tested      string
	Config      [][2]string
	Banners     []banner
	Timeline    template.HTML
	Legend      bool
	HasHistory  bool
	Holds       int
	HoldsShown  int
	Keys        []string
	Violations  int
	Witnesses   []witness
	// FullWitnesses is the package constant, for the template.
	FullWitnesses int
	MoreViol      int
	Latency       template.HTML
	LatencyNote   string
	Through       template.HTML
	ThroughNote   string
	Live          *checker.LivenessResult
	Res           *checker.ResourceResult
	Lease         *checker.LeaseResult
	NeverFrees    *checker.NeverFreesResult
	Lin           *checker.LinearizabilityResult
	Stats         *checker.Stats
	StatRows      [][]string
	Faults        []faultRow
	Files         []fileLink
	NoResults     bool
	// Exercised lists every dangerous moment with its count, zeros
	// included; nil for a run checked before moments were counted.
	Exercised []exercisedRow
	// Lineage: the run replays another, or was shrunk from one.
	Lineage *lineage
}

// exercisedRow is one dangerous moment on the page.
type exercisedRow struct {
	Name, Means string
	Count       int
}

// exercisedRows are the run's moments in the order checker lists them.
// Zero counts stay: a reader must see which dangers the run never reached,
// since a safe verdict says nothing about them.
func exercisedRows(e *checker.Exercised) []exercisedRow {
	if e == nil {
		return nil
	}
	var rows []exercisedRow
	for _, m := range checker.ExercisedMoments() {
		rows = append(rows, exercisedRow{Name: m.Name, Means: m.Means, Count: e.Count(m.Name)})
	}
	return rows
}

type banner struct {
	Class string
	Title string
	Text  string
	Items []string
}

type faultRow struct {
	Name, Targets, Start, End, Duration, Detail, Class, Status string
}

type fileLink struct {
	Href, Name, What string
}

func buildPage(rf *runFiles) *page { return pageOf(rf, newModel(rf)) }

// pageOf is the page of the run whose files are rf and whose history m
// gathered.
func pageOf(rf *runFiles, m *model) *page {
	pg := &page{Dir: rf.dir, Generated: time.Now().UTC().Format("2006-01-02 15:04:05 UTC")}
	cfg, res, info := rf.cfg, rf.res, rf.info
	if cfg != nil {
		pg.Test = testName(cfg)
		pg.Command = shellJoin(cfg.Command)
		pg.Expect = cfg.Expect
	} else {
		pg.Test = filepath.Base(filepath.Dir(rf.dir))
	}
	pg.Title = "lockjepsen: " + pg.Test
	if t := rf.started(); !t.IsZero() {
		pg.Started = t.UTC().Format("2006-01-02 15:04:05 UTC")
	}
	pg.Verdict = rf.verdict()
	pg.VerdictWord = strings.ToUpper(pg.Verdict)
	if res != nil {
		lines := res.Summary()
		if len(lines) > 0 {
			head := lines[0]
			if i := strings.Index(head, ": "); i > 0 && strings.ToUpper(head[:i]) == head[:i] {
				head = head[i+2:]
			}
			pg.Headline = capitalize(head)
			// The lock-against-resource line is in Why, just above.
			lvr := checker.LockVersusResource(res.Exclusion, res.Resource)
			for _, l := range lines[1:] {
				if l != lvr {
					pg.Details = append(pg.Details, l)
				}
			}
		}
		if res.Expect != "" {
			pg.Expect = res.Expect
		}
		pg.ExpectMet = "not met"
		if res.MetExpectation {
			pg.ExpectMet = "met"
		}
		pg.ExpectWhy = res.Why
		if res.Vacuous != "" {
			pg.ExpectWhy = strings.TrimSpace(pg.ExpectWhy + " " + capitalize(res.Vacuous) + ".")
		}
		pg.Why = whyLines(res)
		pg.Live, pg.Res, pg.Lin, pg.Stats, pg.Lease = res.Liveness, res.Resource, res.Linearizability, res.Stats, res.Lease
		pg.NeverFrees = res.NeverFrees
		pg.Exercised = exercisedRows(res.Exercised)
		if res.Exclusion != nil {
			pg.Violations = res.Exclusion.Count
			pg.MoreViol = res.Exclusion.Count - len(res.Exclusion.Violations)
		}
	} else {
		pg.NoResults = true
		pg.Headline = "This run has not been checked: it has no results.json."
		what := "the checker results are missing"
		if rf.resErr != nil && !missing(rf.resErr) {
			what = "results.json could not be read (" + rf.resErr.Error() + ")"
		}
		pg.Banners = append(pg.Banners, banner{Class: "warn", Title: "Not checked",
			Text:  capitalize(what) + ", so there is no verdict; the timeline and plots below are drawn from the history alone. Check the run, then render this page again:",
			Items: []string{"lockjepsen check " + shellJoin([]string{rf.dir}), "lockjepsen report " + shellJoin([]string{rf.dir})}})
	}
	pg.Tested = testedSentence(cfg, info, m)
	pg.Config = configRows(cfg, info)
	pg.Banners = append(pg.Banners, oddities(rf, m)...)
	pg.HasHistory = m.events > 0
	pg.Holds = m.holds
	pg.Keys = m.keys
	if pg.HasHistory {
		pg.Timeline = m.fullTimeline()
		pg.Latency, pg.LatencyNote = m.latencyPlot()
		pg.Through, pg.ThroughNote = m.throughputPlot()
	}
	pg.Witnesses, pg.FullWitnesses = m.witnesses(), FullWitnesses
	pg.StatRows = statRows(pg.Stats)
	pg.Faults = m.faultRows()
	pg.Files = fileLinks(rf, m)
	pg.Lineage = lineageOf(rf.dir, info)
	return pg
}

func testName(c *runConfig) string {
	if c.Name != "" {
		return c.Name
	}
	n := strings.ReplaceAll(c.nemesisLabel(), ",", "+")
	return fmt.Sprintf("%s-%s-%s-%s", c.System, c.Lock, c.Workload, n)
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// whyLines explain the verdict: the first witness's story, the resource's
// explanation, the stuck key.
func whyLines(r *runResults) []string {
	var out []string
	if ex := r.Exclusion; ex != nil && len(ex.Violations) > 0 {
		longest := ex.Violations[0]
		for _, v := range ex.Violations {
			if v.Overlap > longest.Overlap {
				longest = v
			}
		}
		out = append(out, "First violation: "+ex.Violations[0].Story)
		if longest.Overlap > ex.Violations[0].Overlap {
			out = append(out, fmt.Sprintf("Longest overlap among the %d witnesses kept: %s (processes %d and %d at %s).",
				len(ex.Violations), fmtD(longest.Overlap), longest.First.Process, longest.Second.Process, fmtT(longest.OverlapStart)))
		}
	}
	if line := checker.LockVersusResource(r.Exclusion, r.Resource); line != "" {
		out = append(out, line)
	}
	if res := r.Resource; res != nil && res.Checked && !res.Valid {
		out = append(out, "Resource: "+res.Explanation+".")
		if len(res.Interleaved) > 0 {
			out = append(out, "For example: "+res.Interleaved[0].Story)
		}
	}
	if nf := r.NeverFrees; nf != nil && len(nf.Witnesses) > 0 {
		out = append(out, "The lock never frees: "+nf.Witnesses[0].Story+".")
	}
	if l := r.Liveness; l != nil && l.Stuck {
		out = append(out, fmt.Sprintf("Stuck: from %s to the end of the run, clients kept trying to acquire %s and none succeeded.", fmtT(l.StuckSince), l.StuckKey))
	}
	return out
}

// lockLabel names the run's lock; a lock of the user's own is not called
// by the built-in name its configuration happens to carry.
func lockLabel(c *runConfig, info *runInfo) string {
	if described(info).CustomLock {
		return "custom"
	}
	return c.Lock
}

// described is run.json's words for the run; a run stored before the
// harness wrote them gets "(not described)" rather than guesses.
func described(info *runInfo) runfile.Description {
	if info == nil || info.Described == nil {
		return runfile.Description{Lock: "not described in run.json", Workload: "not described in run.json"}
	}
	return *info.Described
}

func testedSentence(c *runConfig, info *runInfo, m *model) string {
	if c == nil {
		return "The run's configuration (config.json) is missing or unreadable."
	}
	sys := c.System
	switch {
	case info != nil && info.RedisVersion != "":
		sys += " (Redis " + info.RedisVersion + ")"
	case info != nil && info.EtcdVersion != "":
		sys += " " + info.EtcdVersion
	}
	phases := fmt.Sprintf("The run lasted %s with no faults, then %s more.", fmtDur(c.TimeLimit), fmtDur(c.Recovery))
	if n := c.nemesisLabel(); n != "none" {
		phases = fmt.Sprintf("The run injected faults (%s) for %s, then healed them and ran %s fault-free so that recovery could be judged.", n, fmtDur(c.TimeLimit), fmtDur(c.Recovery))
	}
	article := "a"
	if strings.ContainsRune("aeiou", rune(strings.ToLower(sys + " ")[0])) {
		article = "an"
	}
	return fmt.Sprintf("%d clients competed for %s on %s %s system using the %s lock (%s). Workload %s: %s. %s Lease TTL %s.",
		c.Clients, strings.Join(m.keys, ", "), article, sys, lockLabel(c, info), described(info).Lock, c.Workload, described(info).Workload,
		phases, fmtDur(c.TTL))
}

func configRows(c *runConfig, info *runInfo) [][2]string {
	var rows [][2]string
	add := func(k, v string) { rows = append(rows, [2]string{k, v}) }
	if c != nil {
		add("system", c.System)
		add("lock", lockLabel(c, info))
		add("workload", c.Workload)
		nem := c.nemesisLabel()
		d := described(info)
		for _, n := range c.Nemesis {
			if fd, ok := d.Faults[n]; ok {
				nem += "\n" + n + ": " + fd.Description
			}
		}
		if d.Script != "" {
			nem += "\n" + d.Script
		}
		add("nemesis", nem)
		if len(c.Nemesis) > 0 {
			add("fault schedule", fmt.Sprintf("every ~%s, lasting ~%s, targets %s", fmtDur(c.NemesisInterval), fmtDur(c.FaultDuration), c.Targets))
		}
		add("TTL", fmtDur(c.TTL))
		add("clients", fmt.Sprint(c.Clients))
		add("keys", fmt.Sprint(c.Keys))
		add("time limit", fmtDur(c.TimeLimit)+" of faults + "+fmtDur(c.Recovery)+" recovery")
		add("hold", c.Hold)
		if c.LongHoldRate > 0 {
			add("long-hold rate", fmt.Sprint(c.LongHoldRate))
		}
		add("op timeout", fmtDur(c.OpTimeout))
		add("persistence", c.Persistence)
		add("seed", fmt.Sprint(c.Seed))
		add("expect", c.Expect)
	}
	if info != nil {
		if info.RedisVersion != "" {
			add("Redis version", info.RedisVersion)
		}
		if info.EtcdVersion != "" {
			add("etcd version", info.EtcdVersion)
		}
		if info.Backend != "" {
			add("backend", info.Backend)
		}
		var ns []string
		for _, n := range info.Nodes {
			ns = append(ns, fmt.Sprintf("%s (%s, %s)", n.Name, n.Role, n.Addr))
		}
		if len(ns) > 0 {
			add("nodes", strings.Join(ns, "; "))
		}
		if t := cluster.Topology(configSystem(c), info.Nodes); t != "" {
			add("topology", t)
		}
		if len(info.Failovers) > 0 {
			add("failovers", failoverLines(info.Failovers))
		}
		if !info.Started.IsZero() {
			add("started", info.Started.UTC().Format(time.RFC3339))
		}
		if !info.Ended.IsZero() {
			add("wall time", info.Ended.Sub(info.Started).Round(time.Millisecond).String())
		}
	}
	return rows
}

// oddities are the banners of runs that are not whole: interrupted,
// unfinished, truncated, harness errors, panics, unreadable files.
func oddities(rf *runFiles, m *model) []banner {
	var out []banner
	res := rf.res
	if res != nil && res.Incomplete != "" {
		out = append(out, banner{Class: "warn", Title: "Incomplete run", Text: capitalize(res.Incomplete) + ". The verdict covers only what was recorded."})
	} else if rf.info == nil && missing(rf.infoErr) {
		out = append(out, banner{Class: "warn", Title: "Unfinished run", Text: "There is no run.json: the harness was killed, or the run is still going. The page shows what was recorded so far."})
	} else if rf.info != nil && rf.info.Interrupted {
		out = append(out, banner{Class: "warn", Title: "Interrupted run", Text: "The run was interrupted (Ctrl-C or SIGTERM): the verdict covers only what was recorded."})
	}
	if rf.info != nil && rf.info.StoppedEarly != "" {
		out = append(out, banner{Class: "info", Title: "Stopped early", Text: capitalize(rf.info.StoppedEarly) + ". The run's time limit was not used up."})
	}
	errs, panics := rf.troubles()
	if len(errs) > 0 {
		out = append(out, banner{Class: "error", Title: "Harness errors", Text: "The harness itself failed (exit code 3): the results below cannot be fully trusted.", Items: errs})
	}
	if len(panics) > 0 {
		out = append(out, banner{Class: "warn", Title: "The lock under test panicked", Text: "Each panic was recorded as an operation with an unknown outcome.", Items: panics})
	}
	if res != nil && res.Disagreement != "" {
		out = append(out, banner{Class: "error", Title: "Checkers disagree", Text: res.Disagreement})
	}
	if m.histErr != nil {
		out = append(out, banner{Class: "error", Title: "No history", Text: "The history could not be read: " + m.histErr.Error()})
	} else if m.hr != nil {
		if m.hr.corrupt != "" {
			out = append(out, banner{Class: "error", Title: "Corrupt history", Text: "Reading stopped where " + m.hr.corrupt + "; the page shows only the events before the damage, and those after it are lost."})
		} else if m.hr.truncated {
			out = append(out, banner{Class: "warn", Title: "Truncated history", Text: "The history ends mid-event (the harness died mid-write); the page shows the readable prefix."})
		}
		if m.hr.bad > 0 {
			out = append(out, banner{Class: "warn", Title: "Unreadable history lines", Text: fmt.Sprintf("%d lines of the history are not events and were skipped; the first: %s", m.hr.bad, m.hr.firstBad)})
		}
		if m.events == 0 {
			out = append(out, banner{Class: "warn", Title: "Empty history", Text: "No event was recorded: the run stopped before any client operation."})
		} else if m.holds == 0 {
			out = append(out, banner{Class: "warn", Title: "No lock was ever granted", Text: "No acquire succeeded, so mutual exclusion was not tested at all."})
		}
	}
	if rf.cfg == nil && rf.cfgErr != nil {
		out = append(out, banner{Class: "warn", Title: "No configuration", Text: "config.json: " + rf.cfgErr.Error()})
	}
	return out
}

func statRows(s *checker.Stats) [][]string {
	if s == nil {
		return nil
	}
	var rows [][]string
	for _, f := range []string{"acquire", "release", "extend", "read", "write"} {
		c := s.Counts[f]
		l := s.Latency[f]
		if c == nil && l == nil {
			continue
		}
		row := []string{f, thousands(c["ok"]), thousands(c["fail"]), thousands(c["info"]), thousands(c["pending"])}
		if l != nil {
			row = append(row, fmtD(l.P50), fmtD(l.P90), fmtD(l.P99), fmtD(l.Max))
		} else {
			row = append(row, "", "", "", "")
		}
		rows = append(rows, row)
	}
	return rows
}

func (m *model) faultRows() []faultRow {
	out := make([]faultRow, 0, len(m.faults))
	for i := range m.faults {
		f := &m.faults[i]
		r := faultRow{Name: f.Name, Start: fmtT(f.Start), Detail: f.Detail, Class: m.faultClass(f.Name)}
		switch {
		case len(f.Targets) > 0:
			r.Targets = strings.Join(f.Targets, ", ")
		case len(f.Clients) > 0:
			r.Targets = fmt.Sprint(f.Clients)
		}
		switch {
		case !f.applied():
			r.Status = f.Phase + " (not applied)"
		case f.End == f.Start:
			r.End, r.Status = "instant", "applied"
		case f.Open:
			r.End, r.Status = "never stopped", "applied"
		default:
			r.End, r.Duration, r.Status = fmtT(f.End), fmtD(f.End-f.Start), "applied"
		}
		out = append(out, r)
	}
	return out
}

func fileLinks(rf *runFiles, m *model) []fileLink {
	var out []fileLink
	add := func(rel, what string) {
		if _, err := os.Stat(filepath.Join(rf.dir, rel)); err == nil {
			out = append(out, fileLink{Href: rel, Name: rel, What: what})
		}
	}
	add(runfile.CompressedHistoryFile, "every event of the run, JSON Lines compressed with zstd (lockjepsen history cat RUN_DIR prints it; serve shows it as history.jsonl)")
	add(runfile.HistoryFile, "every event of the run, one JSON object per line")
	add(runfile.ResultsFile, "the verdict and every checker's findings")
	add(runfile.ConfigFile, "the configuration, with the command line")
	add(runfile.RunInfoFile, "start, end, server version, nodes, harness errors")
	add(runfile.NodesFile, "the node processes")
	add(runfile.ScheduleFile, "the faults the nemesis executed, with their offsets: what lockjepsen replay plays again")
	add(runfile.ShrunkFile, "how lockjepsen shrink reduced the original run to this one")
	names := map[string]bool{}
	for _, n := range m.nodes {
		names[n.Name] = true
	}
	if ents, err := os.ReadDir(filepath.Join(rf.dir, "nodes")); err == nil {
		for _, e := range ents {
			names[e.Name()] = true
		}
	}
	var sorted []string
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	for _, n := range sorted {
		add("nodes/"+n+"/redis.log", "node "+n+"'s redis-server log")
	}
	if rf.res != nil && rf.res.Linearizability != nil {
		for _, f := range rf.res.Linearizability.Files {
			add(f, "porcupine's visualization of a linearizability segment")
		}
	}
	return out
}

// fmtT is an instant on the history's clock, in seconds since the start.
func fmtT(ns int64) string {
	if ns == checker.Never {
		return "never"
	}
	return fmt.Sprintf("%.3fs", float64(ns)/1e9)
}

// fmtTP is an instant to the microsecond, for witnesses, where events a
// few µs apart must read in order.
func fmtTP(ns int64) string {
	if ns == checker.Never {
		return "never"
	}
	return fmt.Sprintf("%.6fs", float64(ns)/1e9)
}

// fmtD is a duration rounded to the millisecond, or exact under one.
func fmtD(ns int64) string {
	d := time.Duration(ns)
	if d < time.Millisecond && d > -time.Millisecond {
		return d.String()
	}
	return d.Round(time.Millisecond).String()
}

func fmtDur(d time.Duration) string { return fmtD(int64(d)) }

func thousands(n int) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// shellJoin quotes a command line for a POSIX shell.
func shellJoin(args []string) string {
	var parts []string
	for _, a := range args {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,+@%") == "" {
			parts = append(parts, a)
			continue
		}
		parts = append(parts, "'"+strings.ReplaceAll(a, "'", `'\''`)+"'")
	}
	return strings.Join(parts, " ")
}

// failoverLines says when the primary changed, and how long after which
// fault.
func failoverLines(fs []runfile.Failover) string {
	var lines []string
	for _, f := range fs {
		l := fmt.Sprintf("%s → %s at %s", f.From, f.To, fmtDur(time.Duration(f.At)))
		if f.AfterFault != "" {
			l += fmt.Sprintf(", %s after %s started", fmtDur(time.Duration(f.Duration)), f.AfterFault)
		}
		lines = append(lines, l)
	}
	return strings.Join(lines, "\n")
}

// configSystem is the run's system, or "" when its settings are unknown.
func configSystem(c *runConfig) string {
	if c == nil {
		return ""
	}
	return c.System
}
