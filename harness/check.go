package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/nemesis"
	"github.com/lockjepsen/lockjepsen/runfile"
)

// Results is results.json; runfile owns its format.
type Results = runfile.Results

// Check runs the checkers on the stored run in dir and (re)writes its
// results.json. A malformed history or configuration is a *UsageError
// naming the problem; a truncated history is checked on its readable prefix
// and says so.
func Check(dir string) (*Results, error) { return CheckContext(context.Background(), dir, "") }

// CheckContext is Check that gives up with ctx's error when ctx is done,
// and writes results.json and porcupine's pictures to out ("" is dir).
// Where out cannot be written (a read-only copy of a run), the results are
// returned all the same, and NotWritten says what was not stored.
func CheckContext(ctx context.Context, dir, out string) (*Results, error) {
	return checkRun(ctx, dir, out, nil)
}

// checkRun is CheckContext that takes, when live is not nil, the
// checkers' results computed alongside the run on exactly the events
// stored: the history is then not read back.
func checkRun(ctx context.Context, dir, out string, live *checker.Results) (*Results, error) {
	histPath, err := runfile.FindHistory(dir)
	if st, serr := os.Stat(histPath); err != nil || serr != nil || !st.Mode().IsRegular() {
		hint := ""
		if _, err := os.Stat(filepath.Join(dir, "latest")); err == nil {
			hint = fmt.Sprintf(" (it looks like a store: try %s)", filepath.Join(dir, "latest"))
		}
		return nil, usage("%s is not a lockjepsen run directory: it has no history (%s or %s)%s", dir, runfile.CompressedHistoryFile, HistoryFile, hint)
	}
	cfg := DefaultConfig()
	if err := readJSON(filepath.Join(dir, ConfigFile), &cfg); err != nil {
		return nil, usage("read the run's configuration: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, usage("the run's %s is invalid: %v", ConfigFile, err)
	}
	var info RunInfo
	finished := true
	if err := readJSON(filepath.Join(dir, RunInfoFile), &info); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			return nil, usage("read the run's record: %v", err)
		}
		finished = false
	}
	if out == "" {
		out = dir
	}
	if os.Getenv(HoldEnv) == PhaseCheck {
		<-ctx.Done() // a test delivers its signal here
	}
	if st, err := os.Stat(filepath.Join(out, ResultsFile)); err == nil && !st.Mode().IsRegular() {
		// Found before the check, not when its results could not replace
		// it (exit 3 after the work).
		return nil, usage("%s is not a file: move it away, or give another directory with --out", filepath.Join(out, ResultsFile))
	}
	notWritten := ""
	if err := probeWritable(out); err != nil {
		notWritten = fmt.Sprintf("could not write %s or porcupine's pictures into %s (%v); give another directory with --out", ResultsFile, out, err)
	}
	opts := checkOptions(cfg, out)
	if notWritten != "" {
		opts.OutDir = ""
	}
	stage := ""
	if live == nil && opts.OutDir != "" {
		if stage, err = stagePictures(out); err != nil {
			return nil, err
		}
		defer os.RemoveAll(stage)
		opts.OutDir = stage
	}
	res, read := live, &history.ReadResult{}
	if live == nil {
		if res, read, err = checkHistory(ctx, histPath, opts); err != nil {
			return nil, err
		}
	}
	results := &Results{
		Results:      res,
		Test:         cfg.TestName(),
		Expect:       cfg.Expect,
		Interrupted:  info.Interrupted,
		Errors:       append([]string(nil), info.Errors...),
		ClientPanics: info.ClientPanics,
		StoppedEarly: info.StoppedEarly,
		StoppedBy:    info.StoppedBy,
		NotWritten:   notWritten,

		CheckedAlongsideRun: live != nil,
	}
	if results.ServerRecord, err = readServerRecord(dir); err != nil {
		return nil, err
	}
	if err := finishResults(results, cfg, info, finished, read, filepath.Join(out, ResultsFile)); err != nil {
		return nil, err
	}
	if stage != "" && results.NotWritten == "" {
		if err := placePictures(stage, out); err != nil {
			return nil, err
		}
	}
	return results, nil
}

// stagePictures makes the directory a re-check draws porcupine's pictures
// in: the earlier check's stay in out until its results.json is replaced,
// so that a reading refused as worse (keepBetterReading) leaves both
// untouched.
func stagePictures(out string) (string, error) {
	stage, err := os.MkdirTemp(out, ".check-")
	if err != nil {
		return "", fmt.Errorf("make a directory for the check's pictures in %s: %w", out, err)
	}
	return stage, nil
}

// placePictures puts the pictures drawn in stage in place of those in
// out, once the results that list them have been written.
func placePictures(stage, out string) error {
	if err := checker.RemoveVisualizations(out); err != nil {
		return fmt.Errorf("replace the earlier check's pictures: %w", err)
	}
	entries, err := os.ReadDir(stage)
	if err != nil {
		return fmt.Errorf("read the check's pictures: %w", err)
	}
	for _, e := range entries {
		if err := os.Rename(filepath.Join(stage, e.Name()), filepath.Join(out, e.Name())); err != nil {
			return fmt.Errorf("put the check's pictures in place: %w", err)
		}
	}
	return nil
}

// checkOptions are the checkers' options for a run of cfg whose
// porcupine pictures go to out.
func checkOptions(cfg Config, out string) checker.Options {
	opts := checker.Options{TTL: cfg.TTL, OutDir: out, ClockFaults: nemesis.ClockFaults(),
		KeyLossFaults:   nemesis.KeyLossFaults(),
		ReplyLossFaults: nemesis.ReplyLossFaults(), InOpFaults: nemesis.InOpFaults(),
		ClientClockFaults:  nemesis.ClientClockFaults(),
		DisruptFaults:      nemesis.DisruptFaults(),
		Faults:             faultMeanings(),
		ServerRenewsLeases: cfg.system().ServerRenewsLeases}
	// A primary answers before its replicas have the write, so a primary
	// cut off from them keeps what it grants to itself, and a replica
	// promoted meanwhile never had it: the checkers then take two
	// primaries' grants as the failover's. Not raft: there a cut-off
	// member grants nothing, and a grant it is said to have made is the
	// lock's.
	if cfg.system().FailsOver() {
		opts.CutOffFaults = nemesis.CutOffFaults()
	}
	if cfg.system().Majority {
		opts.MajorityOf = cfg.NodeCount()
	}
	return opts
}

// faultMeanings are what every fault means to the checkers, as its
// descriptor says.
func faultMeanings() checker.FaultMeanings {
	fm := checker.FaultMeanings{}
	for _, d := range nemesis.All() {
		fm[d.Name] = checker.FaultMeaning{Kind: string(d.Kind), Instant: d.Instant, Crashes: d.Crashes, FailsOver: d.FailsOver}
	}
	return fm
}

// checkHistory streams the history through the checkers, so that memory
// does not grow with the run's length, and says whether it was truncated.
func checkHistory(ctx context.Context, path string, opts checker.Options) (*checker.Results, *history.ReadResult, error) {
	sc, err := history.OpenScanner(path)
	if err != nil {
		return nil, nil, err
	}
	defer sc.Close()
	st := checker.NewStreamContext(ctx, opts)
	for op, ok := sc.Next(); ok; op, ok = sc.Next() {
		if sc.Events()%4096 == 0 && ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		st.Add(op)
	}
	if err := sc.Err(); err != nil {
		var fe *history.FormatError
		if errors.As(err, &fe) {
			return nil, nil, &UsageError{fmt.Errorf("malformed history: %w", err)}
		}
		if errors.Is(err, history.ErrCorrupt) {
			return nil, nil, &UsageError{fmt.Errorf("corrupt history: %w", err)}
		}
		return nil, nil, err
	}
	res, err := st.Finish(ctx)
	if err != nil {
		return nil, nil, err
	}
	return res, sc.Result(), nil
}

// finish judges the expectation on the checkers' results and stores them.
func finishResults(out *Results, cfg Config, info RunInfo, finished bool, read *history.ReadResult, path string) error {
	if out.Disagreement != "" {
		out.Errors = append(out.Errors, out.Disagreement)
	}
	var incomplete []string
	if info.Interrupted {
		incomplete = append(incomplete, interruptedIn(info.InterruptedIn))
	}
	if !finished {
		incomplete = append(incomplete, "the run never finished (no "+RunInfoFile+"): the harness was killed, or is still running")
	}
	switch {
	case read.Corrupt:
		out.Truncated, out.Corrupt = read.TruncatedAt, true
		incomplete = append(incomplete, "the history is corrupt: "+read.TruncatedAt)
	case read.Truncated:
		out.Truncated = read.TruncatedAt
		incomplete = append(incomplete, "the history is truncated: "+read.TruncatedAt)
	}
	out.Incomplete = strings.Join(incomplete, "; ")
	judgeExpectation(out, cfg)
	if out.NotWritten != "" {
		return nil
	}
	if !out.CheckedAlongsideRun {
		if err := keepBetterReading(path, out); err != nil {
			return err
		}
	}
	if err := writeJSON(path, out); err != nil {
		if runfile.IsReadOnly(err) {
			out.NotWritten = fmt.Sprintf("could not write %s (%v); give another directory with --out", path, err)
			return nil
		}
		return err
	}
	return nil
}

// interruptedIn says in words that the run was interrupted in phase.
func interruptedIn(phase string) string {
	if phase == "" {
		return "the run was interrupted"
	}
	return "the run was interrupted during its " + phase + " phase"
}

// judgeExpectation decides whether the results meet the run's
// expectation: the verdict must be the one expected, and a safe one must
// rest on a whole run.
func judgeExpectation(out *Results, cfg Config) {
	out.MetExpectation, out.Why, out.Vacuous = met(cfg.Expect, out.Verdict), "", ""
	if out.HarnessFailed() {
		// A run the harness failed cannot be trusted, whatever its
		// verdict: it exits 3, and must not also say "met" (a CI gate that
		// reads results.json would pass it).
		out.MetExpectation = false
		out.Why = "the harness failed during the run (" + strings.Join(out.Errors, "; ") + "): no expectation is met by a run that cannot be trusted"
		return
	}
	if out.MetExpectation && cfg.Expect == ExpectSafe && out.Incomplete != "" {
		out.MetExpectation = false
		out.Why = "safe on what was recorded, but the evidence is incomplete (" + out.Incomplete + "): a safe expectation needs a whole run"
	}
	if out.MetExpectation && cfg.Expect == ExpectSafe {
		out.Vacuous = vacuous(cfg, out.Exercised)
	}
}

// keepBetterReading refuses, as a usage error naming both readings, to
// replace the results.json at path with out when out is a worse reading
// of the same run: fewer completed operations, or a damaged history where
// the stored results had a whole one. A history emptied or damaged after
// the run (a bad copy, a full disk) must not erase the verdict that was
// reached on it whole; the user can check into another directory instead.
// A results.json that is missing or unreadable holds nothing to keep.
func keepBetterReading(path string, out *Results) error {
	var old Results
	if err := readJSON(path, &old); err != nil || old.Results == nil {
		return nil
	}
	worse := out.Ops < old.Ops || old.Truncated == "" && out.Truncated != ""
	if !worse {
		return nil
	}
	return usage("refusing to overwrite %s: it holds %s, and the history now reads as %s, a worse reading (was the history damaged after the run?); check into another directory with --out to keep both",
		path, describeReading(&old), describeReading(out))
}

// describeReading is a results' verdict, operation count and damage, for
// a message that sets two readings side by side.
func describeReading(r *Results) string {
	s := fmt.Sprintf("%s with %d ops", r.Verdict, r.Ops)
	switch {
	case r.Corrupt:
		s += " of a corrupt history (" + r.Truncated + ")"
	case r.Truncated != "":
		s += " of a truncated history (" + r.Truncated + ")"
	}
	return s
}

// probeWritable reports whether files can be created in dir.
func probeWritable(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}

// ThreatMoments are the dangerous moments the run's faults are there to
// produce, from their descriptors; a script's steps are server faults.
// None for a run without faults: it has no threat to exercise.
func ThreatMoments(cfg Config) []string {
	var out []string
	add := func(ms []string) {
		for _, m := range ms {
			if !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	for _, name := range cfg.Nemesis {
		if d, err := nemesis.Lookup(name); err == nil {
			add(d.Exercises)
		}
	}
	if cfg.ScriptName != "" {
		add([]string{checker.MomentNodeFaults, checker.MomentFailovers})
	}
	return out
}

// vacuous says why a safe verdict is no evidence: the run's faults never
// produced their dangerous moment; "" when they did, or there were none.
func vacuous(cfg Config, e *checker.Exercised) string {
	moments := ThreatMoments(cfg)
	if len(moments) == 0 || e == nil {
		return ""
	}
	for _, m := range moments {
		if e.Count(m) > 0 {
			return ""
		}
	}
	return fmt.Sprintf("vacuous: safe, but none of the faults' dangerous moments happened (%s: 0), so the run gives no evidence against them", strings.Join(moments, ", "))
}

func met(expect, verdict string) bool {
	switch expect {
	case ExpectAny:
		return true
	case ExpectSafe:
		return verdict == checker.VerdictSafe
	case ExpectUnsafe:
		return verdict == checker.VerdictUnsafe
	case ExpectStuck:
		return verdict == checker.VerdictStuck
	}
	return false
}
