package review

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/reports"
	"github.com/lockjepsen/lockjepsen/runfile"
	"github.com/lockjepsen/lockjepsen/scenario"
)

// Cell states. A cell is a threat as deployed, or a threat with one
// mitigation, run on the plan's seeds.
const (
	StateUnsafe        = "unsafe"         // some seed broke the lock (or, for a resource mitigation, the resource)
	StateStuck         = "stuck"          // some seed left the lock stuck
	StateNotFound      = "not-found"      // no seed found a violation: not a proof of safety
	StateUnknown       = "unknown"        // every seed was inconclusive (nothing granted)
	StateError         = "error"          // the harness failed
	StateNotApplicable = "not-applicable" // the mitigation cannot be tried here
	StateNotNeeded     = "not-needed"     // the threat was not found, so nothing was tried against it
	StateSkipped       = "skipped"        // the budget ran out or the review was interrupted
)

// RunRef is one seed's run of a cell.
type RunRef struct {
	Seed    int64  `json:"seed"`
	Dir     string `json:"dir,omitempty"`
	Report  string `json:"report,omitempty"`
	Verdict string `json:"verdict"`
	// ResourceSafe: the run wrote a protected resource and it stayed
	// consistent.
	ResourceSafe bool    `json:"resource_safe,omitempty"`
	Violations   int     `json:"violations"`
	Duration     float64 `json:"duration_s"`
	Error        string  `json:"error,omitempty"`
}

// Cell is one threat, as deployed or with one mitigation.
type Cell struct {
	Threat     string `json:"threat"`
	Mitigation string `json:"mitigation,omitempty"`
	State      string `json:"state"`
	// Seeds and TimeLimit are what a not-found means: no violation in
	// Seeds runs of TimeLimit each.
	Seeds     int           `json:"seeds"`
	TimeLimit time.Duration `json:"time_limit_ns"`
	// TTL is the lease the cell ran with (a failover threat raises it).
	TTL time.Duration `json:"ttl_ns"`
	// Note says what exactly was run, or why nothing was.
	Note string `json:"note,omitempty"`
	// Story is the first violation's witness, in words.
	Story string `json:"story,omitempty"`
	// Command reproduces the deciding run: the first unsafe seed, else
	// the first.
	Command []string `json:"command,omitempty"`
	Runs    []RunRef `json:"runs,omitempty"`
}

// Run plans and runs a review and writes its page; a budget too small is
// a *BudgetError before anything runs.
func Run(ctx context.Context, o Options) (*Review, error) {
	p, err := NewPlan(o)
	if err != nil {
		return nil, err
	}
	return p.Run(ctx)
}

// Run runs the plan: each threat as deployed, then the mitigations of
// each threat found unsafe or stuck, and writes review.html and
// review.json into Options.Out. An interrupted review writes what ran.
func (p *Plan) Run(ctx context.Context) (*Review, error) {
	r := newReview(p)
	deadline := r.Started.Add(p.Options.Budget)
	for i, t := range p.Threats {
		r.Rows[i].Configured = p.runCell(ctx, deadline, t, nil, Measured{})
		r.Rows[i].measure()
	}
	for i, t := range p.Threats {
		row := &r.Rows[i]
		for _, mit := range p.Tries[t.Name] {
			if found(row.Configured.State) {
				row.Tried = append(row.Tried, p.runCell(ctx, deadline, t, &mit, row.Measured))
			} else {
				row.Tried = append(row.Tried, Cell{Threat: t.Name, Mitigation: mit.Name, State: StateNotNeeded,
					Note: "the threat was not found as deployed"})
			}
		}
	}
	r.finish(ctx.Err() != nil)
	if p.Options.Out == "" {
		p.Options.Out = filepath.Join(p.base(1).Store, runfile.ReviewDir, r.Started.UTC().Format("20060102T150405Z"))
	}
	if err := r.Write(p.Options.Out); err != nil {
		return r, fmt.Errorf("write the review: %w", err)
	}
	return r, nil
}

// found reports whether a cell's state is a finding to mitigate.
func found(state string) bool { return state == StateUnsafe || state == StateStuck }

// runCell runs a cell's seeds; mit nil is the threat as deployed.
func (p *Plan) runCell(ctx context.Context, deadline time.Time, t Threat, mit *Mitigation, m Measured) Cell {
	cell := Cell{Threat: t.Name, Seeds: p.Seeds}
	label := t.Name
	if mit != nil {
		cell.Mitigation, label = mit.Name, t.Name+" + "+mit.Name
	}
	for seed := int64(1); seed <= int64(p.Seeds); seed++ {
		cfg, note, err := p.cellConfig(t, mit, seed, m)
		var na *NotApplicable
		if errors.As(err, &na) {
			cell.State, cell.Note = StateNotApplicable, na.Why
			return cell
		} else if err != nil {
			cell.State, cell.Note = StateError, err.Error()
			return cell
		}
		cell.Note, cell.TimeLimit, cell.TTL = note, cfg.TimeLimit, cfg.TTL
		if skip := p.skipReason(ctx, deadline, cfg); skip != "" {
			cell.State, cell.Note = StateSkipped, skip
			return cell
		}
		p.say("review: %s, seed %d of %d...", label, seed, p.Seeds)
		ref := p.runOne(ctx, cfg, mit != nil && mit.OnResource)
		cell.Runs = append(cell.Runs, ref.RunRef)
		p.say("review: %s, seed %d: %s", label, seed, ref.summary())
		if cell.Story == "" {
			cell.Story = ref.story
		}
		if cell.Command == nil || (ref.unsafe && !cellHasUnsafeBefore(cell)) {
			cell.Command = cfg.Command
		}
	}
	cell.State = judge(cell.Runs, mit != nil && mit.OnResource)
	return cell
}

func cellHasUnsafeBefore(c Cell) bool {
	for _, r := range c.Runs[:len(c.Runs)-1] {
		if r.Verdict == checker.VerdictUnsafe {
			return true
		}
	}
	return false
}

func (p *Plan) cellConfig(t Threat, mit *Mitigation, seed int64, m Measured) (harness.Config, string, error) {
	if mit == nil {
		cfg, err := p.threatConfig(t, seed)
		return cfg, "", err
	}
	return p.mitigationConfig(t, *mit, seed, m)
}

func (p *Plan) skipReason(ctx context.Context, deadline time.Time, cfg harness.Config) string {
	if ctx.Err() != nil {
		return "the review was interrupted before this cell"
	}
	if time.Now().Add(estimateOf(cfg)).After(deadline) {
		return fmt.Sprintf("the budget of %s ran out before this cell", p.Options.Budget)
	}
	return ""
}

func (p *Plan) say(format string, a ...any) {
	if p.Options.Say != nil {
		p.Options.Say(format, a...)
	}
}

// ranRun is a run's reference and what the cell needs of it.
type ranRun struct {
	RunRef
	unsafe bool
	story  string
	out    *harness.Outcome
}

func (r ranRun) summary() string {
	if r.Error != "" {
		return "harness failure: " + r.Error
	}
	return fmt.Sprintf("%s (%d violations) in %.1fs", r.Verdict, r.Violations, r.Duration)
}

// runOne runs one seed and reads what the cell needs of it.
func (p *Plan) runOne(ctx context.Context, cfg harness.Config, onResource bool) ranRun {
	run := p.Options.Run
	if run == nil {
		run = runAndReport
	}
	start := time.Now()
	out, err := run(ctx, cfg)
	ref := ranRun{RunRef: RunRef{Seed: cfg.Seed, Duration: time.Since(start).Round(10 * time.Millisecond).Seconds()}}
	if err != nil {
		ref.Verdict, ref.Error = StateError, err.Error()
		var he *harness.HarnessError
		if errors.As(err, &he) {
			ref.Dir = he.Dir
		}
		return ref
	}
	res := out.Results
	ref.out, ref.Dir, ref.Verdict, ref.Violations = out, out.Dir, res.Verdict, res.Violations
	if out.Report != "" {
		ref.Report = out.Report
	}
	if res.HarnessFailed() {
		ref.Error = fmt.Sprint(res.Errors)
	}
	ref.ResourceSafe = res.Resource != nil && res.Resource.Checked && res.Resource.Valid
	ref.unsafe = res.Verdict == checker.VerdictUnsafe
	if onResource {
		ref.unsafe = res.Resource != nil && res.Resource.Checked && !res.Resource.Valid
	}
	ref.story = storyOf(res)
	return ref
}

func storyOf(res *harness.Results) string {
	switch {
	case res.Exclusion != nil && len(res.Exclusion.Violations) > 0:
		return res.Exclusion.Violations[0].Story
	case res.Resource != nil && len(res.Resource.Interleaved) > 0:
		return res.Resource.Interleaved[0].Story
	case res.Resource != nil && res.Resource.Checked && !res.Resource.Valid:
		return res.Resource.Explanation
	}
	return ""
}

// judge decides a cell from its seeds. A resource mitigation is judged by
// the resource: the lock may still let two clients believe.
func judge(runs []RunRef, onResource bool) string {
	unknown := 0
	state := StateNotFound
	for _, r := range runs {
		switch {
		case r.Error != "":
			return StateError
		case onResource && r.Verdict != checker.VerdictUnknown && !r.ResourceSafe:
			state = StateUnsafe
		case !onResource && r.Verdict == checker.VerdictUnsafe:
			state = StateUnsafe
		case r.Verdict == checker.VerdictStuck && state != StateUnsafe:
			state = StateStuck
		case r.Verdict == checker.VerdictUnknown:
			unknown++
		}
	}
	if state == StateNotFound && unknown == len(runs) {
		return StateUnknown
	}
	return state
}

// runAndReport is a run as the CLI does it: the harness, then the report.
func runAndReport(ctx context.Context, cfg harness.Config) (*harness.Outcome, error) {
	out, err := harness.Run(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if path, err := reports.WriteRun(out.Dir); err == nil {
		out.Report = path
	} else {
		out.ReportError = err
	}
	return out, nil
}

// estimateOf is a run's expected length for the budget.
func estimateOf(cfg harness.Config) time.Duration { return scenario.Estimate(cfg) }

// readRunInfo reads a run's run.json; nil when it has none.
func readRunInfo(dir string) *runfile.RunInfo {
	var info runfile.RunInfo
	if dir == "" || runfile.ReadJSON(filepath.Join(dir, runfile.RunInfoFile), &info) != nil {
		return nil
	}
	return &info
}
