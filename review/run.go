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
	// StateNotExercised: no violation, and none of the threat's dangerous
	// moments happened either: the cell gives no evidence.
	StateNotExercised = "not-exercised"
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
	// Answers are the run's three answers; Exercised its non-zero
	// dangerous moments, by name.
	Answers   *checker.Answers `json:"answers,omitempty"`
	Exercised map[string]int   `json:"exercised,omitempty"`
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
	// The three answers over the cell's seeds: the lock's own promise,
	// the deployment's keeping of the key, and the resource's safety in
	// use; each unsafe, not-found or not-exercised.
	LockState       string `json:"lock_state,omitempty"`
	DeploymentState string `json:"deployment_state,omitempty"`
	UseState        string `json:"use_state,omitempty"`
	// Exercised sums the runs' dangerous moments, by name; the threat's
	// own (Moments) decide whether the cell was exercised.
	Exercised map[string]int `json:"exercised,omitempty"`
	Moments   []string       `json:"moments,omitempty"`
	hit       bool           // an answer broke: the threat hit, moments or not
	// Mechanisms, Losses and Damage merge the runs' findings: the lock's,
	// the deployment's and the use's.
	Mechanisms []checker.Mechanism `json:"mechanisms,omitempty"`
	Losses     []checker.Mechanism `json:"losses,omitempty"`
	Damage     []checker.Mechanism `json:"damage,omitempty"`
	// Control is the harness's correct lock run on the cell's first
	// seed, where the deployment lost a key under a lock of the user's.
	Control *Control `json:"control,omitempty"`
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
		if c := &r.Rows[i].Configured; c.unclear(t) {
			p.runControl(ctx, t, c)
		}
		r.Rows[i].measure()
	}
	for i, t := range p.Threats {
		row := &r.Rows[i]
		for _, mit := range p.Tries[t.Name] {
			if why := row.Configured.needless(mit); why != "" {
				row.Tried = append(row.Tried, Cell{Threat: t.Name, Mitigation: mit.Name, State: StateNotNeeded, Note: why})
				continue
			}
			row.Tried = append(row.Tried, p.runCell(ctx, deadline, t, &mit, row.Measured))
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

// needless says why a mitigation need not run against a cell as
// deployed, or "" when it must: a mitigation of the deployment runs where
// the deployment lost a key, one of the resource (fencing) also where the
// use was unsafe. A lock that broke by itself is fixed in the lock.
func (c *Cell) needless(m Mitigation) string {
	switch {
	case c.State == StateStuck, c.DeploymentState == StateUnsafe:
		return ""
	case m.OnResource && c.UseState == StateUnsafe:
		return ""
	case c.LockState == StateUnsafe:
		return "the lock itself broke: that is fixed in the lock, not by this"
	}
	return "the threat was not found as deployed"
}

// runCell runs a cell's seeds; mit nil is the threat as deployed.
func (p *Plan) runCell(ctx context.Context, deadline time.Time, t Threat, mit *Mitigation, m Measured) Cell {
	cell := Cell{Threat: t.Name, Seeds: p.Seeds}
	label := t.Name
	if mit != nil {
		cell.Mitigation, label = mit.Name, t.Name+" + "+mit.Name
	}
	system := p.Options.System
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
		cell.Note, cell.TimeLimit, cell.TTL, system = note, cfg.TimeLimit, cfg.TTL, cfg.System
		if skip := p.skipReason(ctx, deadline, cfg); skip != "" {
			cell.State, cell.Note = StateSkipped, skip
			return cell
		}
		p.say("review: %s, seed %d of %d...", label, seed, p.Seeds)
		ref := p.runOne(ctx, cfg, mit != nil && mit.OnResource)
		cell.Runs = append(cell.Runs, ref.RunRef)
		if ctx.Err() != nil && !ref.unsafe {
			p.say("review: %s, seed %d: interrupted, no evidence (%s)", label, seed, ref.summary())
			// A run cut short found nothing: no evidence that the
			// threat is absent, nor that a mitigation closes it.
			cell.State, cell.Note = StateSkipped, "the review was interrupted during this cell; its runs are kept but are no evidence"
			return cell
		}
		p.say("review: %s, seed %d: %s", label, seed, ref.summary())
		if cell.Story == "" {
			cell.Story = ref.story
		}
		if cell.Command == nil || (ref.unsafe && !cellHasUnsafeBefore(cell)) {
			cell.Command = cfg.Command
		}
	}
	cell.State = judge(cell.Runs, mit != nil && mit.OnResource)
	cell.Moments = t.momentsOn(system, mit)
	cell.answer()
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
	ref.Answers = res.Answers
	ref.Exercised = exercisedOf(res.Exercised)
	return ref
}

// exercisedOf keeps a run's non-zero moments, by name.
func exercisedOf(e *checker.Exercised) map[string]int {
	if e == nil {
		return nil
	}
	out := map[string]int{}
	for _, m := range checker.ExercisedMoments() {
		if n := e.Count(m.Name); n > 0 {
			out[m.Name] = n
		}
	}
	return out
}

// storyOf is a run's first finding in words, whatever its kind: an
// overlap's witness, an over-claim, a dishonest release or extend, a lost
// update. A finding never leaves a cell without a story.
func storyOf(res *harness.Results) string {
	if a := res.Answers; a != nil {
		for _, ms := range [][]checker.Mechanism{a.Mechanisms, a.Losses, a.Damage} {
			for _, m := range ms {
				if m.Example != "" {
					return m.Example
				}
			}
		}
	}
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
