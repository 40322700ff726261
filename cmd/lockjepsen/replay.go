package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/reports"
	"github.com/lockjepsen/lockjepsen/review"
	"github.com/lockjepsen/lockjepsen/runfile"
	"github.com/lockjepsen/lockjepsen/shrink"
)

// runDirArg resolves a stored run directory given on the command line
// (store/latest too) and the store it lives in.
func runDirArg(arg string) (dir, store string, err error) {
	dir, err = filepath.EvalSymlinks(arg)
	if err != nil {
		return "", "", fmt.Errorf("%s: no such run directory", arg)
	}
	if !runfile.HasHistory(dir) {
		return "", "", fmt.Errorf("%s is not a run directory (no history)", arg)
	}
	return dir, filepath.Dir(filepath.Dir(dir)), nil
}

func newReplayCmd(args []string, stdout, stderr io.Writer) *cobra.Command {
	var times int
	var store string
	var o output
	cmd := &cobra.Command{
		Use:   "replay RUN_DIR",
		Short: "Rerun a stored run with its settings and the same fault schedule",
		Long: `replay reruns a stored run with the same settings and the faults it executed
(schedule.json): each at its recorded offset from the start of the fault phase,
on the same node or client; a fault that was aimed right after a grant is aimed
at a grant again. run.json's replay_of names the original and the report links
it. See docs/replay.md for how closely the offsets are kept.

--times N runs the replay N times, each stopping at its first violation, and
says how often the original's violation (the same kind and mechanism: an
overlap by a foreign release, a lost key by a failover, ...) came back. The
exit code is 0 when every replay showed it, 1 otherwise.`,
		Example: `  lockjepsen replay store/latest
  lockjepsen replay store/del-release-shrunk/20261204T101010.000Z --times 5`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, a []string) error {
			if err := o.check(stderr); err != nil {
				return err
			}
			if times < 1 || times > 1000 {
				return usageErr(stderr, fmt.Errorf("--times must be between 1 and 1000, got %d", times))
			}
			return replay(cmd, a[0], store, times, args, o, stdout, stderr)
		},
	}
	f := cmd.Flags()
	f.IntVar(&times, "times", 1, "replay this many times and report how often the original's violation came back")
	f.StringVar(&store, "store", "", "store the replays here (default: the original's store)")
	o.flags(f)
	return cmd
}

// replay reruns the stored run arg (store "": the original's store)
// times times: `lockjepsen replay` and `lockjepsen test --replay`.
func replay(cmd *cobra.Command, arg, store string, times int, args []string, o output, stdout, stderr io.Writer) error {
	dir, defStore, err := runDirArg(arg)
	if err != nil {
		return usageErr(stderr, err)
	}
	if store == "" {
		store = defStore
	}
	cfg, err := replayConfig(dir, store, args)
	if err != nil {
		return failure(stderr, err)
	}
	if times == 1 {
		return runAndReport(cmd.Context(), cfg, cmd.Flags(), stdout, stderr, o)
	}
	return replayTimes(cmd.Context(), dir, cfg, times, stdout, stderr)
}

// replayTakes are the test command's flags that go with --replay: where
// the run is stored and how it is reported. Every other flag would
// change the stored run's settings or its fault schedule.
var replayTakes = []string{"replay", "store", "quiet", "json"}

// replayConflicts refuses, for `test --replay`, the flags set beside it
// that the replay would have to ignore.
func replayConflicts(fs *pflag.FlagSet) error {
	var bad []string
	fs.Visit(func(f *pflag.Flag) {
		if !slices.Contains(replayTakes, f.Name) {
			bad = append(bad, "--"+f.Name)
		}
	})
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("--replay reruns the stored run with its own settings and fault schedule, and %s would change them; only --store, --quiet and --json go with --replay (lockjepsen replay RUN --times N repeats it)", strings.Join(bad, ", "))
}

// replayConfig is the configuration replaying dir, named after it.
func replayConfig(dir, store string, args []string) (harness.Config, error) {
	cfg, err := harness.ReplayConfig(dir)
	if err != nil {
		return cfg, err
	}
	if cfg.CustomLock && len(cfg.Client) == 0 {
		return cfg, &harness.UsageError{Err: fmt.Errorf("replay %s: the run tested a Go lock of its own (harness.Config.Locker), which only its program can give; replay it from Go with harness.ReplayConfig", dir)}
	}
	cfg.Store = store
	cfg.Name = strings.TrimSuffix(filepath.Base(filepath.Dir(dir)), "-replay") + "-replay"
	cfg.Command = append([]string{"lockjepsen"}, args...)
	return cfg, nil
}

// replayTimes replays n times, each stopping at its first violation.
func replayTimes(ctx context.Context, dir string, cfg harness.Config, n int, stdout, stderr io.Writer) error {
	var orig runfile.Results
	if err := runfile.ReadJSON(filepath.Join(dir, runfile.ResultsFile), &orig); err != nil || orig.Results == nil {
		return usageErr(stderr, fmt.Errorf("replay %s: no verdict to compare with (%v): lockjepsen check %s first", dir, err, dir))
	}
	want := shrink.Signature(orig.Results)
	cfg.StopOnFirstViolation = true
	k, ran := 0, 0
	for i := range n {
		out, err := runWithProgress(ctx, cfg, stderr, output{quiet: true}, "")
		if err != nil {
			return failure(stderr, err)
		}
		if ctx.Err() != nil {
			break
		}
		ran++
		got := shrink.Signature(out.Results.Results)
		same := shrink.Same(want, got) || (len(want) == 0 && out.Results.Verdict == orig.Verdict)
		if same {
			k++
		}
		verdict := out.Results.Verdict
		if len(got) > 0 {
			verdict += " " + strings.Join(got, ",")
		}
		fmt.Fprintf(stdout, "replay %d of %d: %s (%s); %s\n", i+1, n, verdict, out.Dir, faultsApplied(out.Dir, len(cfg.Script), same))
	}
	what := "the same violation (" + strings.Join(want, " or ") + ")"
	if len(want) == 0 {
		what = "the original's verdict, " + orig.Verdict
	}
	fmt.Fprintf(stdout, "reproduced %d of %d: %s came back in %d of %d replays of %s\n", k, ran, what, k, ran, dir)
	if k < n {
		return exitError{code: exitNotMet}
	}
	return nil
}

// faultsApplied says how many of the recorded faults (recorded) the
// replay stored in dir applied. A replay that did not show the violation
// may not have had the faults that caused it: one aimed right after a
// grant waits for a grant like the one it hit, and a loaded machine may
// not grant such a lease again before the fault phase ends.
func faultsApplied(dir string, recorded int, same bool) string {
	s, err := runfile.ReadSchedule(dir)
	if err != nil {
		return fmt.Sprintf("its faults are unknown (%v)", err)
	}
	applied := 0
	for _, f := range s.Faults {
		if f.Error == "" {
			applied++
		}
	}
	msg := fmt.Sprintf("%d of %d recorded faults applied", applied, recorded)
	if applied < recorded && !same {
		msg += ": the rest were still waiting when the run ended (a fault aimed right after a grant waits for a grant like the one it hit) or failed"
	}
	return msg
}

func newShrinkCmd(stdout, stderr io.Writer) *cobra.Command {
	var tries string
	var budget time.Duration
	var final int
	var store string
	cmd := &cobra.Command{
		Use:   "shrink RUN_DIR",
		Short: "Search for the smallest run that still breaks the lock the way a stored run did",
		Long: `shrink reduces a stored unsafe run to a smaller one that shows the same
violation (the same kind and mechanism). It tries, in turn: fewer faults (delta
debugging over the executed schedule), fewer clients, one key, a fault phase
cut at the first violation and tightened, then shorter holds and faults. Each
candidate is a real run that stops at its first violation, kept when it
reproduces in k of n tries (--tries 2/3).

The result is stored as <test>-shrunk with shrunk.json (each step, what it
removed, the final reproduction rate over --final-tries replays) and its report
opens with "minimal reproduction: ...". Ctrl-C or --budget keeps the smallest
run found so far (nothing, and says so, if they come before the original's
tries are done). A safe run, or one whose violation does not come back in n
tries, is refused (exit 2) and nothing is kept. See docs/replay.md.`,
		Example: `  lockjepsen shrink store/latest
  lockjepsen shrink store/del-release/20261204T101010.000Z --budget 10m --tries 3/5`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, a []string) error {
			k, n, err := parseTries(tries)
			if err != nil || k < 1 || n < k || n > 100 {
				return usageErr(stderr, fmt.Errorf("--tries %q: want k/n with 1 ≤ k ≤ n ≤ 100, such as 2/3", tries))
			}
			if budget < 0 || final < 0 || final > 100 {
				return usageErr(stderr, fmt.Errorf("--budget must not be negative and --final-tries must be in 0..100"))
			}
			dir, defStore, err := runDirArg(a[0])
			if err != nil {
				return usageErr(stderr, err)
			}
			if store == "" {
				store = defStore
			}
			return runShrink(cmd.Context(), shrink.Request{Dir: dir, Store: store, FinalTries: final,
				Options: shrink.Options{K: k, N: n, Budget: budget, Progress: stderr}}, stdout, stderr)
		},
	}
	f := cmd.Flags()
	f.StringVar(&tries, "tries", "2/3", "keep a candidate when it reproduces in k of n tries (k/n)")
	f.DurationVar(&budget, "budget", 20*time.Minute, "stop the search after this long and keep the smallest run found (0: no bound)")
	f.IntVar(&final, "final-tries", 5, "replay the shrunk run this many times to measure its reproduction rate")
	f.StringVar(&store, "store", "", "store the shrunk run here (default: the original's store)")
	return cmd
}

func runShrink(ctx context.Context, req shrink.Request, stdout, stderr io.Writer) error {
	out, err := shrink.Run(ctx, req)
	switch {
	case errors.Is(err, shrink.ErrSafe):
		return usageErr(stderr, fmt.Errorf("%v (%s found no violation)", err, req.Dir))
	case errors.Is(err, shrink.ErrNotReproduced):
		return usageErr(stderr, fmt.Errorf("cannot shrink %s: %v; nothing was kept (replay it with lockjepsen replay --times to measure how rare it is)", req.Dir, err))
	case errors.Is(err, shrink.ErrStoppedFirst) && ctx.Err() != nil:
		fmt.Fprintf(stderr, "lockjepsen: shrink %s: %v\n", req.Dir, err)
		return exitError{code: exitNotMet, msg: err.Error(), cause: err}
	case errors.Is(err, shrink.ErrStoppedFirst):
		return usageErr(stderr, fmt.Errorf("cannot shrink %s: %v; a larger --budget leaves time for the original's --tries", req.Dir, err))
	case err != nil:
		return failure(stderr, err)
	}
	if _, rerr := reports.WriteRun(out.Dir); rerr != nil {
		fmt.Fprintf(stderr, "warning: no report: %v\n", rerr)
	}
	s := out.Shrunk
	fmt.Fprintln(stdout, shrunkLine(s))
	if s.Stopped != "" {
		fmt.Fprintf(stdout, "The search stopped early (%s); this is the smallest run found so far.\n", s.Stopped)
	}
	fmt.Fprintf(stdout, "Files: %s\nRerun it: %s\n", absDir(out.Dir), s.Replay)
	return nil
}

// shrunkLine is the heading of a shrunk run, as its report opens.
func shrunkLine(s *runfile.Shrunk) string {
	return fmt.Sprintf("minimal reproduction: %d faults, %d clients, %.1f s; reproduced %d of %d (from %d faults, %d clients, %.0f s)",
		s.Faults, s.Clients, s.FaultPhase.Seconds(), s.Reproduced, s.Tries, s.OriginalFaults, s.OriginalClients, s.OriginalFaultPhase.Seconds())
}

// shrinkOffer is the command that shrinks an unsafe run, offered beside
// each unsafe cell of `matrix` and `review` (the command, not a run).
func shrinkOffer(dir string, res *harness.Results) string {
	if res == nil || res.Results == nil || res.Verdict != checker.VerdictUnsafe || dir == "" {
		return ""
	}
	return "lockjepsen shrink " + dir
}

// printShrinkOffers prints, for each cell of a review that broke, the
// command that shrinks its first unsafe run.
func printShrinkOffers(w io.Writer, r *review.Review) {
	for _, row := range r.Rows {
		for _, c := range append([]review.Cell{row.Configured}, row.Tried...) {
			for _, ref := range c.Runs {
				if ref.Verdict == checker.VerdictUnsafe && ref.Dir != "" {
					fmt.Fprintf(w, "shrink %s %s: lockjepsen shrink %s\n", c.Threat, firstNonEmpty(c.Mitigation, "as deployed"), ref.Dir)
					break
				}
			}
		}
	}
}

// parseTries reads --tries k/n exactly: Sscanf took "2/3/4" for 2/3.
func parseTries(s string) (k, n int, err error) {
	ks, ns, ok := strings.Cut(s, "/")
	if !ok {
		return 0, 0, fmt.Errorf("no /")
	}
	if k, err = strconv.Atoi(ks); err != nil {
		return 0, 0, err
	}
	n, err = strconv.Atoi(ns)
	return k, n, err
}
