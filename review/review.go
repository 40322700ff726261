package review

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/nemesis"
	"github.com/lockjepsen/lockjepsen/runfile"
)

// Review is a finished review: review.json, and what review.html shows.
type Review struct {
	System      string        `json:"system"`
	Lock        string        `json:"lock"`
	Client      []string      `json:"client,omitempty"`
	TTL         time.Duration `json:"ttl_ns"`
	Workload    string        `json:"workload"`
	Persistence string        `json:"persistence"`
	Seeds       int           `json:"seeds"`
	Budget      time.Duration `json:"budget_ns"`
	Started     time.Time     `json:"started"`
	Ended       time.Time     `json:"ended"`
	Interrupted bool          `json:"interrupted,omitempty"`
	// Columns are the mitigations of the table, in the order first tried.
	Columns []Column `json:"columns"`
	Rows    []Row    `json:"rows"`
	// Verdict is the review's answer in one paragraph.
	Verdict string `json:"verdict"`
	// Caveat says what an absence of violations does and does not prove.
	Caveat string `json:"caveat"`
	// NotTried are the mitigations a threat lists that cannot be tried
	// on this system, and why ("redlock against server crash": ...).
	NotTried map[string]string `json:"not_tried,omitempty"`
	// ElseCouldServe are the harness's other locks a threat lists, which
	// would replace the client under review rather than mitigate it.
	ElseCouldServe []string `json:"else_could_serve,omitempty"`

	// The answers for CI gates: the lock's verdict (broken, held or
	// not-exercised) and its own broken mechanisms, the threats under
	// which the deployment lost a key, those under which the use was
	// unsafe, and those that gave no evidence.
	LockVerdict  string            `json:"lock_verdict"`
	Mechanisms   []ReviewMechanism `json:"mechanisms"`
	Deployment   []DeploymentLoss  `json:"deployment"`
	UseUnsafe    []string          `json:"use_unsafe,omitempty"`
	NotExercised []string          `json:"not_exercised,omitempty"`
}

// Column is a mitigation of the table.
type Column struct {
	Name       string `json:"name"`
	Title      string `json:"title"`
	OnResource bool   `json:"on_resource,omitempty"`
}

// Row is one threat: as deployed, then with each mitigation tried.
type Row struct {
	Threat     string `json:"threat"`
	Title      string `json:"title"`
	Configured Cell   `json:"configured"`
	Tried      []Cell `json:"tried,omitempty"`
	// Measured sizes the mitigations; Timings say in words what the
	// threat's runs measured (a failover's length, a crashed node's
	// downtime, the pause that broke the lock).
	Measured Measured `json:"measured"`
	Timings  []string `json:"timings,omitempty"`
}

func newReview(p *Plan) *Review {
	o := p.Options
	base := p.base(1)
	r := &Review{System: o.System, Lock: o.Lock, Client: o.Client, TTL: base.TTLOrDefault(), Workload: base.Workload,
		Persistence: base.Persistence, Seeds: p.Seeds, Budget: o.Budget, Started: time.Now(), NotTried: p.NotTried,
		ElseCouldServe: p.ElseCouldServe}
	for _, t := range p.Threats {
		r.Rows = append(r.Rows, Row{Threat: t.Name, Title: t.Title})
		for _, m := range p.Tries[t.Name] {
			if !slices.ContainsFunc(r.Columns, func(c Column) bool { return c.Name == m.Name }) {
				r.Columns = append(r.Columns, Column{Name: m.Name, Title: m.Title, OnResource: m.OnResource})
			}
		}
	}
	return r
}

// Cell is the row's cell under a column; ok is false for a mitigation the
// threat does not try.
func (row Row) Cell(column string) (Cell, bool) {
	i := slices.IndexFunc(row.Tried, func(c Cell) bool { return c.Mitigation == column })
	if i < 0 {
		return Cell{}, false
	}
	return row.Tried[i], true
}

// measure reads what the threat's runs measured from their files.
func (row *Row) measure() {
	var failovers, downtimes, pauses []time.Duration
	for _, run := range row.Configured.Runs {
		if info := readRunInfo(run.Dir); info != nil {
			for _, f := range info.Failovers {
				if f.Duration > 0 {
					failovers = append(failovers, time.Duration(f.Duration))
				}
			}
		}
		faults := faultsOf(run.Dir)
		for _, f := range faults {
			if downUntilRestart(f.Name) && f.End != checker.Never && f.End > f.Start {
				downtimes = append(downtimes, time.Duration(f.End-f.Start))
			}
		}
		if d := breakingPause(run.Dir, faults); d > 0 {
			pauses = append(pauses, d)
		}
	}
	ttl := row.Configured.TTL
	if len(failovers) > 0 {
		row.Measured.Failover = slices.Max(failovers)
		row.Timings = append(row.Timings, "Sentinel failover, from the last fault before it to the new primary: "+span(failovers)+against(failovers, ttl))
	}
	if len(downtimes) > 0 {
		row.Timings = append(row.Timings, "a crashed node was down for "+span(downtimes)+against(downtimes, ttl))
	}
	if len(pauses) > 0 {
		row.Timings = append(row.Timings, "the client pause behind each first violation lasted "+span(pauses)+against(pauses, ttl))
	}
}

// against compares measured times with the TTL.
func against(ds []time.Duration, ttl time.Duration) string {
	if ttl <= 0 {
		return ""
	}
	lo, hi := slices.Min(ds), slices.Max(ds)
	switch {
	case lo > ttl:
		return ", longer than the TTL of " + fmtD(ttl)
	case hi < ttl:
		return ", shorter than the TTL of " + fmtD(ttl)
	}
	return ", around the TTL of " + fmtD(ttl)
}

// span is "1.2s" or "1.2s to 2.5s in 3 runs".
func span(ds []time.Duration) string {
	lo, hi := slices.Min(ds), slices.Max(ds)
	if len(ds) == 1 || hi-lo < time.Millisecond {
		return fmtD(hi)
	}
	return fmt.Sprintf("%s to %s (%d times)", fmtD(lo), fmtD(hi), len(ds))
}

func fmtD(d time.Duration) string {
	if d >= time.Second {
		return d.Round(10 * time.Millisecond).String()
	}
	return d.Round(time.Millisecond).String()
}

// faultsOf reads a run's faults from its history; nil when it has none.
func faultsOf(dir string) []checker.Fault {
	if dir == "" {
		return nil
	}
	read, err := history.ReadFile(runfile.HistoryPath(dir))
	if err != nil {
		return nil
	}
	return readRunInfo(dir).FaultMeanings().Faults(read.Ops)
}

// downUntilRestart reports whether the named fault keeps its nodes down
// until a restart (nemesis.Descriptor.DownUntilRestart): how long they
// were down is what a delayed restart is measured against.
func downUntilRestart(name string) bool {
	d, err := nemesis.Lookup(name)
	return err == nil && d.DownUntilRestart
}

// freezesClient reports whether the named fault stalls a client
// (nemesis.Descriptor.FreezesClient): a pause, whose length is measured
// against the TTL.
func freezesClient(name string) bool {
	d, err := nemesis.Lookup(name)
	return err == nil && d.FreezesClient
}

// breakingPause is the length of the client pause behind a run's first
// violation: the one active in the witness, or the last pause of the stale
// writer that ended before its damaging write.
func breakingPause(dir string, faults []checker.Fault) time.Duration {
	var res runfile.Results
	if dir == "" || runfile.ReadJSON(filepath.Join(dir, runfile.ResultsFile), &res) != nil || res.Results == nil {
		return 0
	}
	if ex := res.Exclusion; ex != nil && len(ex.Violations) > 0 {
		for _, f := range ex.Violations[0].Faults {
			if freezesClient(f.Name) && f.End != checker.Never {
				return time.Duration(f.End - f.Start)
			}
		}
	}
	if rs := res.Resource; rs != nil && len(rs.Interleaved) > 0 {
		w := rs.Interleaved[0]
		var best *checker.Fault
		for i, f := range faults {
			if !freezesClient(f.Name) || f.End == checker.Never {
				continue
			}
			for _, wr := range []checker.Write{w.First, w.Second} {
				if slices.Contains(f.Clients, wr.Process) && f.End <= wr.Invoke && (best == nil || f.End > best.End) {
					best = &faults[i]
				}
			}
		}
		if best != nil {
			return time.Duration(best.End - best.Start)
		}
	}
	return 0
}

// finish writes the verdict paragraph once every cell has run.
func (r *Review) finish(interrupted bool) {
	r.Ended, r.Interrupted = time.Now(), interrupted
	r.Compose()
}

// Compose writes the verdict paragraph and the caveat from the cells: a
// stored review drawn again (lockjepsen review --render) gets the words of
// the version that draws it. It leads with the lock itself, then what the
// deployment loses and what the use needs, then what gave no evidence.
func (r *Review) Compose() {
	r.summarize()
	parts := []string{r.lockSentence()}
	var depThreats, useThreats, stuck, other []string
	var closers []string
	for _, row := range r.Rows {
		c := row.Configured
		name := short(row.Threat)
		if c.DeploymentState == StateUnsafe {
			depThreats = append(depThreats, name)
		}
		if c.UseState == StateUnsafe {
			useThreats = append(useThreats, name)
		}
		switch c.State {
		case StateStuck:
			stuck = append(stuck, name)
		case StateUnsafe, StateNotFound:
		default:
			other = append(other, fmt.Sprintf("%s (%s)", name, c.State))
		}
		if c.DeploymentState == StateUnsafe || c.UseState == StateUnsafe || c.State == StateStuck {
			closers = append(closers, r.closes(row))
		}
	}
	if len(depThreats) > 0 {
		parts = append(parts, fmt.Sprintf("The deployment lost the key under %s: %s. Any lock on this deployment breaks the same way; the fixes are the deployment's.",
			andList(depThreats), r.lossesSay()))
	}
	if len(useThreats) > 0 {
		parts = append(parts, fmt.Sprintf("Its use is unsafe under %s: the resource lost updates although the lock kept its promise, because a holder acted after its lease (Kleppmann); only fencing at the resource closes it.", andList(useThreats)))
	}
	if len(stuck) > 0 {
		parts = append(parts, "Stuck (no client could acquire) under "+andList(stuck)+".")
	}
	parts = append(parts, closers...)
	if len(r.NotExercised) > 0 {
		parts = append(parts, fmt.Sprintf("No evidence from %s: no violation, but the threat's dangerous moment never happened in %s (not exercised).", andList(shorts(r.NotExercised)), r.effort()))
	}
	if len(other) > 0 {
		parts = append(parts, "Not decided: "+strings.Join(other, ", ")+".")
	}
	if len(r.ElseCouldServe) > 0 {
		parts = append(parts, "What else could serve (other locks, not tried as fixes of this one): "+andList(r.ElseCouldServe)+".")
	}
	r.Verdict = strings.Join(parts, " ")
	r.Caveat = fmt.Sprintf("“Not found” means no violation in %s although the threat's dangerous moment happened (the cell counts how often): evidence, not proof, of safety; a longer time limit or more seeds (--time-limit, --seeds) gives more. “Not exercised” means the moment never happened: no evidence at all. “Unsafe” is proof: the linked report holds the history and the witness.", r.effort())
}

// lossesSay names each distinct way the deployment lost a key once.
func (r *Review) lossesSay() string {
	var says []string
	for _, d := range r.Deployment {
		s := d.Says
		if d.Control != "" {
			s += " (" + d.Control + ")"
		}
		if !slices.Contains(says, s) {
			says = append(says, s)
		}
	}
	return strings.Join(says, "; ")
}

// effort is "2 seeds × 3s".
func (r *Review) effort() string {
	limit := time.Duration(0)
	for _, row := range r.Rows {
		limit = max(limit, row.Configured.TimeLimit)
	}
	return fmt.Sprintf("%d %s × %s each", r.Seeds, plural(r.Seeds, "seed", "seeds"), fmtD(limit))
}

// closes says which mitigations closed a threat, and which were tried in
// vain. A mitigation of the deployment is judged by the deployment's
// answer, one of the resource (fencing) by the resource.
func (r *Review) closes(row Row) string {
	var closed, failed, vacuous []string
	for _, c := range row.Tried {
		title := r.title(c.Mitigation)
		state := c.DeploymentState
		if r.onResource(c.Mitigation) || row.Configured.State == StateStuck {
			state = c.State
		}
		switch {
		case c.State == StateNotNeeded || c.State == StateSkipped || c.State == StateNotApplicable || c.State == "":
		case state == StateNotExercised:
			vacuous = append(vacuous, title)
		case state == StateNotFound && r.onResource(c.Mitigation):
			closed = append(closed, title+" (on the resource)")
		case state == StateNotFound:
			closed = append(closed, title)
		case found(state):
			failed = append(failed, title)
		}
	}
	// "Not found again", not "closed": a mitigation's cell is as much
	// evidence as the threat's, no more.
	name := capitalize(short(row.Threat))
	still := ""
	if len(failed) > 0 {
		still = "; still unsafe with " + andList(failed)
	}
	if len(vacuous) > 0 {
		still += "; no evidence with " + andList(vacuous) + " (not exercised)"
	}
	if len(closed) == 0 {
		if len(failed) == 0 && len(vacuous) == 0 && r.Interrupted && slices.ContainsFunc(row.Tried, func(c Cell) bool { return c.State == StateSkipped }) {
			return name + ": the review was interrupted before any mitigation was tried to its end."
		}
		if len(failed) == 0 && len(vacuous) == 0 {
			return name + ": no mitigation was tried" + r.whyNoMitigation(row) + "."
		}
		return name + ": nothing tried closes it" + still + "."
	}
	return fmt.Sprintf("%s: not found again with %s%s.", name, andList(closed), still)
}

// whyNoMitigation says why a threat found unsafe has no mitigation cell.
func (r *Review) whyNoMitigation(row Row) string {
	for _, c := range row.Tried {
		if c.State == StateSkipped {
			return " (" + c.Note + ")"
		}
	}
	if len(row.Tried) == 0 {
		return " (none applies here)"
	}
	return ""
}

func (r *Review) title(mitigation string) string {
	for _, c := range r.Columns {
		if c.Name == mitigation {
			return c.Title
		}
	}
	return mitigation
}

func (r *Review) onResource(mitigation string) bool {
	for _, c := range r.Columns {
		if c.Name == mitigation {
			return c.OnResource
		}
	}
	return false
}

func short(threat string) string { return strings.ReplaceAll(threat, "-", " ") }

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func andList(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
