package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/reports"
	"github.com/lockjepsen/lockjepsen/runfile"
)

// output is how a command reports: the full summary with progress (the
// default), one verdict line (--quiet) or one JSON object (--json).
type output struct {
	quiet bool
	json  bool
}

func (o *output) flags(f *pflag.FlagSet) {
	f.BoolVarP(&o.quiet, "quiet", "q", false, "print only the final verdict line; the exit code says the rest")
	f.BoolVar(&o.json, "json", false, "print the final results as one JSON object on stdout (progress still goes to stderr)")
}

func (o *output) check(stderr io.Writer) error {
	if o.quiet && o.json {
		return usageErr(stderr, fmt.Errorf("--quiet and --json exclude each other"))
	}
	return nil
}

// runAndReport runs one test with progress, prints its outcome and
// returns the command's error: the verdict's exit code, or a harness
// failure.
// A configuration is validated before anything starts, so that a value
// refused there names where it came from (fs's flags: a line of --config,
// or a flag that set it).
func runAndReport(ctx context.Context, cfg harness.Config, fs *pflag.FlagSet, stdout, stderr io.Writer, o output) error {
	err := validateUnlessInterrupted(ctx, cfg)
	var out *harness.Outcome
	if err == nil {
		out, err = runWithProgress(ctx, cfg, stderr, o, "")
	}
	if err != nil {
		err = failure(stderr, explainOrigin(err, fs))
		o.reportFailure(stdout, err)
		return err
	}
	o.report(stdout, stderr, out)
	return verdictExit(out.Results)
}

// failureJSON is the --json object of a run that gave no results: the
// error (as on stderr), the exit code, and the run's files if any.
type failureJSON struct {
	Dir      string `json:"dir,omitempty"`
	Error    string `json:"error"`
	ExitCode int    `json:"exit_code"`
}

// reportFailure prints, with --json, the object of a run that failed
// before its results: a script reading stdout must get JSON either way.
func (o output) reportFailure(stdout io.Writer, err error) {
	if !o.json {
		return
	}
	f := failureJSON{Error: "failed", ExitCode: exitHarness}
	var ee exitError
	if errors.As(err, &ee) {
		f.ExitCode, f.Error = ee.code, ee.msg
	}
	var he *harness.HarnessError
	if errors.As(ee.cause, &he) && he.Dir != "" {
		f.Dir = absDir(he.Dir)
	}
	json.NewEncoder(stdout).Encode(f)
}

// runWithProgress runs one test, showing progress on stderr unless quiet:
// a redrawn line on a terminal, a plain line every few seconds elsewhere.
func runWithProgress(ctx context.Context, cfg harness.Config, stderr io.Writer, o output, prefix string) (*harness.Outcome, error) {
	defer lessGC()()
	if o.quiet {
		cfg.Progress = nil
		out, err := harness.Run(ctx, cfg)
		return drawReport(ctx, out, err, stderr)
	}
	p := newProgress(stderr, cfg, prefix)
	cfg.Progress = &harnessLines{p: p}
	cfg.Observer = p.observe
	cfg.LiveViolations = p.liveViolations
	p.start()
	out, err := harness.Run(ctx, cfg)
	p.finish()
	if err == nil && ctx.Err() == nil {
		fmt.Fprintf(stderr, "%swriting the report\n", prefix)
	}
	return drawReport(ctx, out, err, stderr)
}

// drawReport renders a finished run's report.html. The report is for
// people: a failure to draw it must not lose the verdict, which is stored
// already; and after Ctrl-C it is left for `lockjepsen report`. An
// interrupt that came after the run's check (while the report was drawn)
// is recorded in the run as any other: its verdict and history are kept,
// but it did not finish, and a report drawn before the record is removed,
// since it would claim the opposite.
func drawReport(ctx context.Context, out *harness.Outcome, err error, stderr io.Writer) (*harness.Outcome, error) {
	if err != nil {
		return out, err
	}
	if os.Getenv(harness.HoldEnv) == harness.PhaseReport {
		// A test delivers its signal here.
		fmt.Fprintf(stderr, "holding in phase %s until interrupted (%s is set)\n", harness.PhaseReport, harness.HoldEnv)
		<-ctx.Done()
	}
	if ctx.Err() == nil {
		out.Report, out.ReportError = reports.WriteRun(out.Dir)
	}
	if ctx.Err() == nil {
		return out, nil
	}
	if !out.Results.Interrupted {
		if err := harness.RecordInterrupt(out, harness.PhaseReport); err != nil {
			return out, err
		}
	}
	if out.Report != "" {
		os.Remove(out.Report)
		out.Report = ""
	}
	out.ReportError = fmt.Errorf("interrupted before the report was drawn: lockjepsen report %s draws it", out.Dir)
	return out, nil
}

// runJSON is the --json object of one run: results.json plus where the
// run's files are.
type runJSON struct {
	Dir    string `json:"dir"`
	Report string `json:"report,omitempty"`
	*harness.Results
}

// verdictLine is the one line of --quiet: the verdict in words and whether
// it met the expectation.
func verdictLine(res *harness.Results) string {
	head := "NOT CHECKED"
	if lines := res.Summary(); len(lines) > 0 {
		head = lines[0]
	}
	met := "met"
	if !res.MetExpectation {
		met = "NOT met"
	}
	s := fmt.Sprintf("%s (expected %s: %s)", head, res.Expect, met)
	if res.HarnessFailed() {
		s += "; HARNESS ERROR: " + strings.Join(res.Errors, "; ")
	}
	return s
}

// report prints a finished run as o asks.
func (o output) report(stdout, stderr io.Writer, out *harness.Outcome) {
	switch {
	case o.json:
		enc := json.NewEncoder(stdout)
		enc.Encode(runJSON{Dir: absDir(out.Dir), Report: out.Report, Results: out.Results})
	case o.quiet:
		fmt.Fprintln(stdout, verdictLine(out.Results))
	default:
		printSummary(stdout, out.Dir, out.Results)
		if out.ReportError != nil {
			fmt.Fprintf(stderr, "warning: no report: %v\n", out.ReportError)
		} else {
			fmt.Fprintf(stdout, "Report: %s\n", out.Report)
		}
	}
}

// outputFailure is a failure to write where the user said: a path that
// does not exist, is not a directory, or cannot be written is bad input
// (exit 2); anything else (a full disk) is the harness's failure.
func outputFailure(stderr io.Writer, what string, err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR) || runfile.IsReadOnly(err) {
		return usageErr(stderr, fmt.Errorf("%s: %v", what, err))
	}
	return failure(stderr, fmt.Errorf("%s: %w", what, err))
}

// errInterruptedAtStart is an interrupt that came while the configuration
// was still being validated: nothing ran, nothing was recorded.
var errInterruptedAtStart = errors.New("interrupted while the configuration was checked (a client was still being asked for its handshake): nothing was run")

// validateUnlessInterrupted validates cfg, or gives up when ctx ends
// first. Validation starts an external client once to read its handshake,
// which a client that never answers makes last its whole start timeout
// (30 s); the first Ctrl-C must end start-up, not wait for it. A client
// still starting is killed when lockjepsen exits (it dies with its
// parent).
func validateUnlessInterrupted(ctx context.Context, cfg harness.Config) error {
	done := make(chan error, 1)
	go func() { done <- cfg.Validate() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return errInterruptedAtStart
	}
}
