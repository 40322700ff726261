package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/nemesis"
	"github.com/lockjepsen/lockjepsen/reports"
	"github.com/lockjepsen/lockjepsen/runfile"
	"github.com/lockjepsen/lockjepsen/scenario"
)

// Run states of a matrix entry besides a verdict.
const (
	stateSkipped = "skipped" // not started: the budget ran out or the matrix was interrupted
	stateError   = "error"   // the harness failed (exit 3)
)

// matrixRun is one run of a matrix in its results.json.
type matrixRun struct {
	Scenario string `json:"scenario"`
	// Index is the run's place in the whole matrix, shards or not.
	Index int `json:"index"`
	// Dir is the run's directory (absent when it never started); RelDir
	// is the same relative to the matrix directory, for a merge on
	// another machine.
	Dir      string `json:"dir,omitempty"`
	RelDir   string `json:"rel_dir,omitempty"`
	System   string `json:"system"`
	Lock     string `json:"lock"`
	Workload string `json:"workload"`
	Faults   string `json:"faults"`
	Expected string `json:"expected"`
	// Verdict is safe, unsafe, stuck or unknown; "skipped" for a run that
	// did not start, "error" for a harness failure.
	Verdict    string  `json:"verdict"`
	Met        bool    `json:"met"`
	Violations int     `json:"violations"`
	Ops        int     `json:"ops"`
	Duration   float64 `json:"duration_s"`
	Summary    string  `json:"summary,omitempty"`
	Story      string  `json:"story,omitempty"`
	Why        string  `json:"why,omitempty"`
	// Vacuous: a safe expectation met with none of its faults' dangerous
	// moments: no evidence (harness.ThreatMoments).
	Vacuous string `json:"vacuous,omitempty"`
	// Shrink is the command that shrinks an unsafe run (offered, not run).
	Shrink      string `json:"shrink,omitempty"`
	Interrupted bool   `json:"interrupted,omitempty"`
	Error       string `json:"error,omitempty"`

	cfg     harness.Config
	details []string // every summary line, for JUnit
}

// matrixResults is the matrix's results.json.
type matrixResults struct {
	Title   string    `json:"title"`
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended"`
	Budget  string    `json:"budget"`
	// Shard is the share of the matrix this run computed (--shard i/n);
	// absent for the whole matrix.
	Shard       shard       `json:"shard"`
	Interrupted bool        `json:"interrupted"`
	Met         bool        `json:"met"` // every run ran and met its expectation
	Counts      matrixCount `json:"counts"`
	Report      string      `json:"report,omitempty"`
	JUnit       string      `json:"junit,omitempty"`
	Runs        []matrixRun `json:"runs"`
}

type matrixCount struct {
	Runs    int `json:"runs"`
	Met     int `json:"met"`
	NotMet  int `json:"not_met"`
	Errors  int `json:"errors"`
	Skipped int `json:"skipped"`
}

// gridFaults are the fault sets of the default grid; its locks are each
// system's own (fittingLocks).
var gridFaults = strings.Join([]string{nemesis.None, nemesis.ClientPause, nemesis.Kill, nemesis.Partition, nemesis.ClockJump}, ",")

// matrixFlags are the matrix command's flags.
type matrixFlags struct {
	names, systems, lockList, faults, workload string
	all, stopOnFirst                           bool
	budget, timeLimit, recovery                time.Duration
	seed                                       int64
	store, outDir, junit, title, configFile    string
	shard                                      string
	sharded                                    shard // --shard, with the matrix it cuts (runs)
	o                                          output
	client                                     clientFlags
}

func newMatrixCmd(args []string, stdout, stderr io.Writer) *cobra.Command {
	var mf matrixFlags
	cmd := &cobra.Command{
		Use:   "matrix",
		Short: "Run many tests in a row and write a matrix report, results.json and JUnit XML",
		Long: `matrix runs a set of tests one after another (never in parallel: each needs the
machine's cores) within --budget, then writes a matrix page (matrix.html), a
results.json for the whole matrix, and with --junit a JUnit XML file in which
each run is a test case that fails when its verdict differs from its
expectation.

Choose the runs with --scenarios (names, or tag:NAME for a group: tag:quick,
tag:single, tag:sentinel, tag:redlock, tag:clock, tag:library), --all (every
named scenario), or a grid with --systems × --locks × --faults. A grid cell
that matches a named scenario runs with that scenario's tuned parameters and
expected verdict; any other cell expects "any" (only a harness failure fails
it).

A run that would not finish within the budget is skipped (and fails the
matrix). Ctrl-C stops the current run, keeps every finished one and writes
the matrix files for them.

Exit codes: 0 every run met its expectation, 1 some did not (or were skipped),
2 bad usage, 3 the harness failed in some run.`,
		Example: `  lockjepsen matrix --scenarios baseline,del-release,gc-pause --junit junit.xml
  lockjepsen matrix --scenarios tag:quick --budget 5m
  lockjepsen matrix --all --junit junit.xml
  lockjepsen matrix --systems single,sentinel,redlock --faults none,client-pause,kill,partition,clock-jump`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := mf.o.check(stderr); err != nil {
				return err
			}
			runs, err := mf.runs(cmd.Flags())
			if err != nil {
				return flagErr(stderr, err, cmd.Flags())
			}
			if mf.outDir == "" {
				mf.outDir = filepath.Join(mf.store, runfile.MatrixDir, time.Now().UTC().Format("20060102T150405Z"))
			}
			m := &matrixRunner{runs: runs, budget: mf.budget, outDir: mf.outDir, junit: mf.junit, title: mf.title,
				stdout: stdout, stderr: stderr, o: mf.o, shard: mf.sharded}
			return m.run(cmd.Context())
		},
	}
	mf.flags(cmd.Flags())
	return cmd
}

func (mf *matrixFlags) flags(f *pflag.FlagSet) {
	f.StringVar(&mf.names, "scenarios", "", "comma list of scenario names and tags (tag:quick, tag:redlock, ...)")
	f.BoolVar(&mf.all, "all", false, "run every named scenario")
	f.StringVar(&mf.systems, "systems", "single,sentinel,redlock", "grid: systems")
	f.StringVar(&mf.lockList, "locks", "", gridLocksHelp())
	f.StringVar(&mf.faults, "faults", gridFaults, "grid: fault sets, comma separated; none for no faults, a+b for two faults together")
	f.StringVar(&mf.workload, "workload", "mutex", "grid: workload")
	f.DurationVar(&mf.budget, "budget", 15*time.Minute, "time for the whole matrix; runs that would not fit are skipped")
	f.DurationVar(&mf.timeLimit, "time-limit", 0, "fault phase of every run (default: each scenario's own; grid cells 4s)")
	f.DurationVar(&mf.recovery, "recovery", 0, "recovery phase of every run (default: each scenario's own; grid cells 1.5s)")
	f.Int64Var(&mf.seed, "seed", 1, "seed of every run (default: each scenario's own)")
	f.StringVar(&mf.store, "store", "store", "directory where runs are stored")
	f.BoolVar(&mf.stopOnFirst, "stop-on-first-violation", false, stopOnFirstHelp)
	f.StringVar(&mf.outDir, "out", "", "directory for matrix.html and results.json (default STORE/matrix/TIMESTAMP)")
	f.StringVar(&mf.junit, "junit", "", "also write JUnit XML to this file")
	f.StringVar(&mf.title, "title", "lockjepsen matrix", "title of the matrix page and the JUnit suite")
	f.StringVar(&mf.configFile, "config", "", "read these flags from a YAML or JSON file; flags on the command line override it")
	f.StringVar(&mf.shard, "shard", "", "run only share i of n (i/n, as 2/3) of the matrix, for several CI jobs; merge their outputs with report --merge")
	mf.o.flags(f)
	mf.client.flags(f)
}

// runs are the runs the flags choose, with the overrides applied and each
// validated, so that a bad one is refused before any run starts.
func (mf *matrixFlags) runs(fl *pflag.FlagSet) ([]matrixRun, error) {
	if mf.configFile != "" {
		if err := applyConfigFile(mf.configFile, fl); err != nil {
			return nil, err
		}
	}
	grid, err := mf.mode(fl)
	if err != nil {
		return nil, err
	}
	if mf.budget <= 0 {
		return nil, errors.New("--budget must be positive")
	}
	runs, err := mf.choose(grid, fl.Changed("locks"))
	if err != nil {
		return nil, err
	}
	if runs, err = mf.withClient(runs); err != nil {
		return nil, err
	}
	sh, err := parseShard(mf.shard)
	if err != nil {
		return nil, err
	}
	if runs = sh.take(runs); len(runs) == 0 {
		return nil, fmt.Errorf("--shard %s: the matrix has fewer runs than shards; this shard has none", sh)
	}
	mf.sharded = sh
	overridden := fl.Changed("time-limit") || fl.Changed("recovery") || fl.Changed("seed")
	ov := overrides{timeLimit: mf.timeLimit, recovery: mf.recovery, seed: mf.seed, store: mf.store, stopOnFirst: mf.stopOnFirst}
	for i := range runs {
		c := &runs[i].cfg
		ov.apply(fl, c)
		// Validated first: it completes the configuration (the system's
		// TTL), which the command line then says.
		if err := c.Validate(); err != nil {
			return nil, fmt.Errorf("%s: %v", runs[i].Scenario, err)
		}
		// What reproduces this one run, not the whole matrix.
		c.Command = runCommand(runs[i], overridden)
	}
	return runs, nil
}

// mode checks that exactly one of --scenarios, --all and the grid flags
// chooses the runs, and reports whether it is the grid.
func (mf *matrixFlags) mode(fl *pflag.FlagSet) (grid bool, err error) {
	grid = fl.Changed("systems") || fl.Changed("locks") || fl.Changed("faults") || fl.Changed("workload")
	modes := 0
	for _, b := range []bool{mf.names != "", mf.all, grid} {
		if b {
			modes++
		}
	}
	if modes != 1 {
		return false, errors.New("choose the runs with one of --scenarios, --all, or --systems/--locks/--faults")
	}
	return grid, nil
}

// choose lists the runs of the chosen mode.
func (mf *matrixFlags) choose(grid, locksGiven bool) ([]matrixRun, error) {
	if grid {
		return gridRuns(mf.systems, mf.lockList, mf.faults, mf.workload, locksGiven)
	}
	list := scenario.All()
	if !mf.all {
		var err error
		if list, err = scenario.Select(mf.names); err != nil {
			return nil, fmt.Errorf("--scenarios: %v", err)
		}
	}
	var runs []matrixRun
	for _, s := range list {
		runs = append(runs, scenarioRun(s))
	}
	return runs, nil
}

// runCommand is the command line that reruns one run of a matrix: the
// named scenario, or `lockjepsen test` with a grid cell's parameters. With
// overridden timings, the scenario's command carries them too.
func runCommand(r matrixRun, overridden bool) []string {
	c, def := r.cfg, harness.DefaultConfig()
	if _, ok := scenario.Get(r.Scenario); ok {
		cmd := []string{"lockjepsen", "scenario", r.Scenario}
		if overridden {
			cmd = append(cmd, "--time-limit", c.TimeLimit.String(), "--recovery", c.Recovery.String(), "--seed", strconv.FormatInt(c.Seed, 10))
		}
		return cmd
	}
	// --system and --lock always, so that the line says what it tests.
	def.System, def.Lock = "", ""
	return append([]string{"lockjepsen", "test"}, c.Settings.Flags(def.Settings)...)
}

func scenarioRun(s scenario.Scenario) matrixRun {
	cfg := s.Config()
	return newMatrixRun(s.Name, cfg)
}

func newMatrixRun(name string, cfg harness.Config) matrixRun {
	return matrixRun{Scenario: name, System: cfg.System, Lock: cfg.Lock, Workload: cfg.Workload, Faults: faultsLabel(cfg, "+"),
		Expected: cfg.Expect, cfg: cfg}
}

// faultsLabel names a run's faults: its named script, else its faults
// joined by sep, else "none". The matrix joins with "+" as --faults
// spells a set, the scenario list with ",".
func faultsLabel(cfg harness.Config, sep string) string {
	switch {
	case cfg.ScriptName != "":
		return "script " + cfg.ScriptName
	case len(cfg.Nemesis) > 0:
		return strings.Join(cfg.Nemesis, sep)
	}
	return "none"
}

// gridRuns is systems × locks × faults, each system with the locks that
// run on it: all of them by default, else those of lockList. A cell with a
// named scenario runs that scenario; others run with generic parameters and
// expect "any".
func gridRuns(systems, lockList, faults, workload string, locksGiven bool) ([]matrixRun, error) {
	faultSets, err := parseFaultSets(faults)
	if err != nil {
		return nil, err
	}
	sysList := splitList(systems)
	for _, sys := range sysList {
		if !slices.Contains(cluster.Systems, sys) {
			return nil, fmt.Errorf("--systems: unknown system %q; want %s", sys, orList(cluster.Systems))
		}
	}
	candidates := locks.All()
	if locksGiven {
		if candidates, err = lookupLocks(lockList); err != nil {
			return nil, err
		}
	}
	var runs []matrixRun
	for _, sys := range sysList {
		for _, d := range candidates {
			if !d.Fits(sys, lockNodes(sys)) {
				continue
			}
			for _, fs := range faultSets {
				if !faultsFit(fs, sys) {
					continue // e.g. clock faults on etcd, whose leases run on monotonic timers
				}
				runs = append(runs, gridRun(sys, d.Name, workload, fs))
			}
		}
	}
	if len(runs) == 0 {
		return nil, errors.New("the grid is empty: no lock given runs on the systems given")
	}
	return runs, nil
}

// gridRun is one cell: its named scenario if it has one.
func gridRun(sys, lock, workload string, faults []string) matrixRun {
	if s, ok := scenario.Find(sys, lock, workload, faults); ok {
		return scenarioRun(s)
	}
	return newMatrixRun(gridName(sys, lock, workload, faults), gridConfig(sys, lock, workload, faults))
}

// parseFaultSets reads --faults: fault sets separated by commas, the
// faults of a set joined by "+".
func parseFaultSets(faults string) ([][]string, error) {
	var sets [][]string
	for _, fs := range strings.Split(faults, ",") {
		list, err := nemesis.ParseList(strings.ReplaceAll(strings.TrimSpace(fs), "+", ","))
		if err != nil {
			return nil, fmt.Errorf("--faults: %v", err)
		}
		sets = append(sets, list)
	}
	return sets, nil
}

// lookupLocks reads --locks, in the order given.
func lookupLocks(lockList string) ([]locks.Descriptor, error) {
	var ds []locks.Descriptor
	for _, name := range splitList(lockList) {
		d, err := locks.Lookup(name)
		if err != nil {
			return nil, fmt.Errorf("--locks: %v", err)
		}
		ds = append(ds, d)
	}
	return ds, nil
}

// splitList splits a comma list and trims its items.
func splitList(list string) []string {
	items := strings.Split(list, ",")
	for i := range items {
		items[i] = strings.TrimSpace(items[i])
	}
	return items
}

func gridName(sys, lock, workload string, faults []string) string {
	f := "none"
	if len(faults) > 0 {
		f = strings.Join(faults, "+")
	}
	return strings.Join([]string{sys, lock, workload, f}, "-")
}

// gridConfig is a grid cell with no named scenario: short, busy, faults
// that land on holders.
func gridConfig(sys, lock, workload string, faults []string) harness.Config {
	cfg := harness.DefaultConfig()
	cfg.System, cfg.Lock, cfg.Workload, cfg.Nemesis = sys, lock, workload, faults
	cfg.Targets = harness.FaultTarget(sys) // the TTL: the system's default, which Validate fills in
	cfg.TimeLimit, cfg.Recovery = 4*time.Second, 1500*time.Millisecond
	cfg.NemesisInterval = 400 * time.Millisecond
	cfg.Hold, cfg.FaultDuration = "100ms..300ms", 300*time.Millisecond
	if preset, err := scenario.PresetFor(sys); err == nil {
		preset.Grid(&cfg)
	}
	cfg.Expect = harness.ExpectAny
	cfg.Name = gridName(sys, lock, workload, faults)
	return cfg
}

type matrixRunner struct {
	runs           []matrixRun
	budget         time.Duration
	outDir, junit  string
	title          string
	stdout, stderr io.Writer
	o              output
	shard          shard
}

func (m *matrixRunner) say(format string, a ...any) {
	if !m.o.quiet {
		fmt.Fprintf(m.stderr, format+"\n", a...)
	}
}

func (m *matrixRunner) run(ctx context.Context) error {
	res := &matrixResults{Title: m.title, Started: time.Now(), Budget: m.budget.String(), Shard: m.shard}
	var total time.Duration
	for _, r := range m.runs {
		total += scenario.Estimate(r.cfg)
	}
	of := ""
	if m.shard.Of > 0 {
		of = fmt.Sprintf(" (shard %s)", m.shard)
	}
	m.say("matrix: %d runs%s, about %s (budget %s); files in %s", len(m.runs), of, total.Round(time.Second), m.budget, m.outDir)
	if err := os.MkdirAll(m.outDir, 0o755); err != nil {
		return usageErr(m.stderr, fmt.Errorf("--out %s: %v", m.outDir, err))
	}
	deadline := res.Started.Add(m.budget)
	harnessFailed := false
	for i := range m.runs {
		if m.runOne(ctx, i, deadline) {
			harnessFailed = true
		}
		m.runs[i].RelDir = relTo(m.outDir, m.runs[i].Dir)
	}
	res.Ended = time.Now()
	res.Interrupted = ctx.Err() != nil
	res.Runs = m.runs
	res.tally()
	if err := m.writeFiles(res); err != nil {
		// The runs are stored: only the matrix's own files are missing.
		return outputFailure(m.stderr, "write the matrix files", err)
	}
	m.print(res)
	switch {
	case harnessFailed:
		return exitError{code: exitHarness}
	case !res.Met:
		return exitError{code: exitNotMet}
	}
	return nil
}

// runOne runs the i-th run unless the matrix was interrupted or the run
// would end past the deadline, and reports whether the harness failed.
func (m *matrixRunner) runOne(ctx context.Context, i int, deadline time.Time) (harnessFailed bool) {
	r := &m.runs[i]
	if ctx.Err() != nil {
		r.Verdict, r.Why = stateSkipped, "the matrix was interrupted before this run"
		return false
	}
	if time.Now().Add(scenario.Estimate(r.cfg)).After(deadline) {
		r.Verdict, r.Why = stateSkipped, fmt.Sprintf("the budget of %s would run out before this run finished", m.budget)
		m.say("[%d/%d %s] skipped: %s", i+1, len(m.runs), r.Scenario, r.Why)
		return false
	}
	prefix := fmt.Sprintf("[%d/%d %s] ", i+1, len(m.runs), r.Scenario)
	m.say("%sstarting (%s/%s/%s, faults %s, expect %s)", prefix, r.System, r.Lock, r.Workload, r.Faults, r.Expected)
	start := time.Now()
	out, err := runWithProgress(ctx, r.cfg, m.stderr, output{quiet: m.o.quiet}, prefix)
	r.Duration = time.Since(start).Round(10 * time.Millisecond).Seconds()
	if err != nil && ctx.Err() != nil && !harness.IsUsage(err) {
		// Ctrl-C while the run was being checked: an interruption,
		// not a failure of the harness.
		r.Verdict, r.Why, r.Interrupted = stateSkipped, "the matrix was interrupted while this run was being checked", true
		m.say("%sinterrupted while checking", prefix)
		return false
	}
	if err != nil {
		r.Verdict, r.Error = stateError, err.Error()
		var he *harness.HarnessError
		if errors.As(err, &he) && he.Dir != "" {
			r.Dir = absDir(he.Dir)
		}
		m.say("%sHARNESS FAILURE: %v", prefix, err)
		return true
	}
	r.fill(out)
	met := "met"
	if !r.Met {
		met = "NOT met"
	}
	m.say("%s%s (expected %s: %s) in %.1fs", prefix, r.Summary, r.Expected, met, r.Duration)
	return len(out.Results.Errors) > 0
}

// tally counts the runs by outcome; the matrix is met when every run ran
// and met its expectation.
func (res *matrixResults) tally() {
	res.Met = true
	for _, r := range res.Runs {
		res.Counts.Runs++
		switch {
		case r.Verdict == stateSkipped:
			res.Counts.Skipped++
		case r.Verdict == stateError || r.Error != "":
			res.Counts.Errors++
		case r.Met:
			res.Counts.Met++
		default:
			res.Counts.NotMet++
		}
		if !r.Met {
			res.Met = false
		}
	}
}

// fill records a finished run.
func (r *matrixRun) fill(out *harness.Outcome) {
	res := out.Results
	r.Dir = absDir(out.Dir)
	r.Verdict, r.Met, r.Violations, r.Ops = res.Verdict, res.MetExpectation && !res.HarnessFailed(), res.Violations, res.Ops
	r.Interrupted, r.Why, r.Vacuous = res.Interrupted, res.Why, res.Vacuous
	r.details = res.Summary()
	if r.Vacuous != "" {
		r.details = append(r.details, r.Vacuous)
	}
	if len(r.details) > 0 {
		r.Summary = r.details[0]
	}
	if res.Exclusion != nil && len(res.Exclusion.Violations) > 0 {
		r.Story = res.Exclusion.Violations[0].Story
	}
	if res.Incomplete != "" {
		r.details = append(r.details, "Incomplete: "+res.Incomplete)
	}
	r.Shrink = shrinkOffer(r.Dir, res)
	if len(res.Errors) > 0 {
		r.Error = strings.Join(res.Errors, "; ")
	}
}

func (m *matrixRunner) writeFiles(res *matrixResults) error {
	var dirs []string
	for _, r := range res.Runs {
		if r.Dir != "" {
			if runfile.HasHistory(r.Dir) {
				dirs = append(dirs, r.Dir)
			}
		}
	}
	var errs []error
	if len(dirs) > 0 {
		report := filepath.Join(m.outDir, "matrix.html")
		if err := reports.WriteMatrix(report, dirs, m.title); err != nil {
			errs = append(errs, fmt.Errorf("matrix report: %w", err))
		} else {
			res.Report = absDir(report)
		}
	}
	if m.junit != "" {
		if err := writeJUnit(m.junit, res); err != nil {
			errs = append(errs, fmt.Errorf("JUnit XML: %w", err))
		} else {
			res.JUnit = absDir(m.junit)
		}
	}
	if err := runfile.WriteJSON(filepath.Join(m.outDir, runfile.ResultsFile), res); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (m *matrixRunner) print(res *matrixResults) {
	if m.o.json {
		enc := json.NewEncoder(m.stdout)
		enc.Encode(res)
		return
	}
	c := res.Counts
	line := fmt.Sprintf("matrix: %d runs, %d met, %d not met, %d harness errors, %d skipped", c.Runs, c.Met, c.NotMet, c.Errors, c.Skipped)
	if res.Interrupted {
		line += " (interrupted)"
	}
	if m.o.quiet {
		fmt.Fprintln(m.stdout, line)
		return
	}
	w := m.stdout
	fmt.Fprintln(w)
	width := 0
	for _, r := range res.Runs {
		width = max(width, len(r.Scenario))
	}
	for _, r := range res.Runs {
		mark := "ok  "
		switch {
		case r.Verdict == stateSkipped:
			mark = "skip"
		case r.Verdict == stateError || r.Error != "":
			mark = "ERR "
		case !r.Met:
			mark = "FAIL"
		}
		fmt.Fprintf(w, "%s %-*s expected %-6s got %-7s %5.1fs  %s\n", mark, width, r.Scenario, r.Expected, r.Verdict, r.Duration, firstNonEmpty(r.Error, r.Summary, r.Why))
	}
	fmt.Fprintln(w, line)
	for _, r := range res.Runs {
		if r.Vacuous != "" {
			fmt.Fprintf(w, "VACUOUS %s: %s\n", r.Scenario, strings.TrimPrefix(r.Vacuous, "vacuous: "))
		}
	}
	for _, r := range res.Runs {
		if r.Shrink != "" {
			fmt.Fprintf(w, "shrink %s: %s\n", r.Scenario, r.Shrink)
		}
	}
	if res.Report != "" {
		fmt.Fprintf(w, "Matrix: %s\n", res.Report)
	}
	fmt.Fprintf(w, "Results: %s\n", absDir(filepath.Join(m.outDir, "results.json")))
	if res.JUnit != "" {
		fmt.Fprintf(w, "JUnit: %s\n", res.JUnit)
	}
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// withClient puts --client in place of each run's lock, keeping the runs
// on systems that can take an external client.
func (mf *matrixFlags) withClient(runs []matrixRun) ([]matrixRun, error) {
	if mf.client.command == "" {
		return runs, mf.client.apply(&harness.Config{})
	}
	kept := runs[:0]
	for _, r := range runs {
		if ok, _ := harness.ClientRunsOn(append(strings.Fields(mf.client.command), mf.client.args...), r.cfg.System); ok {
			if err := mf.client.useIn(&r.cfg); err != nil {
				return nil, err
			}
			r.Lock, r.Expected = r.cfg.LockLabel(), r.cfg.Expect
			kept = append(kept, r)
		}
	}
	if len(kept) == 0 {
		return nil, errors.New("--client runs on none of the chosen runs' systems (it names its systems in its handshake)")
	}
	return kept, nil
}

// faultsFit reports whether every fault of fs runs on the system.
func faultsFit(fs []string, system string) bool {
	for _, f := range fs {
		if d, err := nemesis.Lookup(f); err == nil && !d.Fits(system) {
			return false
		}
	}
	return true
}
