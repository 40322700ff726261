// Command lockjepsen tests Redis locks under faults. The CLI only turns flags
// into a harness.Config, runs it and maps the outcome to an exit code:
// 0 the run met its expectation, 1 it did not, 2 bad usage, 3 the harness
// failed.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lockjepsen/lockjepsen/contrib/liblocks"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/nemesis"
	"github.com/lockjepsen/lockjepsen/reports"
	"github.com/lockjepsen/lockjepsen/runfile"
	"github.com/lockjepsen/lockjepsen/workloads"
)

// Exit codes.
const (
	exitMet     = 0
	exitNotMet  = 1
	exitUsage   = 2
	exitHarness = 3
)

func main() {
	// go-redis logs every failed dial to stderr; under faults that is noise,
	// and every outcome is in the history anyway.
	locks.SilenceRedisLogs()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// exitError carries an exit code through cobra, with the message already
// printed on stderr and the error it came from, for --json.
type exitError struct {
	code  int
	msg   string
	cause error
}

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

func run(args []string, stdout, stderr io.Writer) int {
	// The library locks and their scenarios must be known before the help
	// lists them and before a flag names one.
	if err := liblocks.Register(); err != nil {
		fmt.Fprintf(stderr, "lockjepsen: harness failure: cannot register the library locks: %v\n", err)
		return exitHarness
	}
	root := newRoot(args, stdout, stderr)
	root.SetArgs(args)
	ctx, interrupted, stop := interruptContext(stderr)
	defer stop()
	cmd, err := root.ExecuteContextC(ctx)
	code := exitCode(err, stderr)
	if interrupted() && code != exitUsage && (cmd == nil || cmd.Annotations[interruptStops] == "") {
		// Whatever was found before it, an interrupted command did not
		// do all it was asked: a CI gate must not pass on it.
		return exitNotMet
	}
	return code
}

func exitCode(err error, stderr io.Writer) int {
	var ee exitError
	switch {
	case err == nil:
		return exitMet
	case errors.As(err, &ee):
		return ee.code
	default:
		// Cobra's own errors: unknown flags, bad values, missing arguments.
		fmt.Fprintf(stderr, "lockjepsen: %v\nRun 'lockjepsen --help' for usage.\n", err)
		return exitUsage
	}
}

// interruptStops marks a command for which an interrupt is the normal way
// to stop (serve), not a cut-short run.
const interruptStops = "interrupt-stops"

// interruptContext is cancelled by the first SIGINT or SIGTERM, so that
// the command stops what it is doing and keeps what it has; the second
// one exits at once.
func interruptContext(stderr io.Writer) (ctx context.Context, interrupted func() bool, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	var got atomic.Bool
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for n := 1; ; n++ {
			select {
			case <-done:
				return
			case sig := <-sigs:
				got.Store(true)
				if n == 1 {
					fmt.Fprintf(stderr, "lockjepsen: %s: stopping and keeping what was recorded (press Ctrl-C again to exit at once)\n", sig)
					cancel()
					continue
				}
				fmt.Fprintf(stderr, "lockjepsen: %s again: exiting at once; the run's files so far stay in its directory\n", sig)
				os.Exit(exitNotMet)
			}
		}
	}()
	return ctx, got.Load, func() {
		signal.Stop(sigs)
		close(done)
		<-finished
		cancel()
	}
}

func newRoot(args []string, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "lockjepsen",
		Short: "Jepsen-style fault-injection tests for Redis locks",
		Long: `lockjepsen runs concurrent clients that take and release a Redis lock while
a nemesis injects faults, records every operation, and checks the history for
mutual-exclusion violations, resource damage and stuck locks.

Exit codes: 0 the run met its expectation, 1 it did not, 2 bad usage or
input, 3 the harness itself failed.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newTestCmd(args, stdout, stderr), newSoakCmd(args, stdout, stderr), newScenarioCmd(args, stdout, stderr), newMatrixCmd(args, stdout, stderr), newCheckCmd(stdout, stderr),
		newReportCmd(stdout, stderr), newServeCmd(stdout, stderr), newReviewCmd(stdout, stderr), newHistoryCmd(stdout, stderr),
		newReplayCmd(args, stdout, stderr), newShrinkCmd(stdout, stderr), newReferenceCmd(stdout))
	return root
}

func newTestCmd(args []string, stdout, stderr io.Writer) *cobra.Command {
	cfg := harness.DefaultConfig()
	var nem, configFile, replayDir string
	var o output
	var be backendFlags
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "test",
		Short: "Run one test against a Redis (or etcd) system and check it",
		Example: `  lockjepsen test --lock token --nemesis none --time-limit 10s
  lockjepsen test --lock setnx-del --nemesis client-pause --expect unsafe
  lockjepsen test --lock setnx-nottl --nemesis client-crash --expect stuck
  lockjepsen test --workload counter --lock fenced --nemesis client-pause
  lockjepsen test --client 'python3 examples/python/redispy_lock.py' --nemesis client-pause --expect unsafe`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.check(stderr); err != nil {
				return err
			}
			if configFile != "" {
				if err := applyConfigFile(configFile, cmd.Flags()); err != nil {
					return usageErr(stderr, err)
				}
			}
			if cmd.Flags().Changed("replay") {
				return testReplay(cmd, replayDir, cfg.Store, args, o, stdout, stderr)
			}
			list, err := nemesis.ParseList(nem)
			if err != nil {
				return flagErr(stderr, fmt.Errorf("--nemesis: %w", err), cmd.Flags())
			}
			cfg.Nemesis = list
			if err := cf.apply(&cfg); err != nil {
				return flagErr(stderr, err, cmd.Flags())
			}
			if (cmd.Flags().Changed("renew") || cmd.Flags().Changed("renew-for")) && !cmd.Flags().Changed("workload") {
				cfg.Workload = workloads.Renew // --renew alone asks for the renewal workload
			}
			cfg.Command = append([]string{"lockjepsen"}, args...)
			if cfg.Backend, err = be.backend(cmd.Context(), stdout); err != nil {
				return failure(stderr, err)
			}
			if be.dryRun {
				return be.printDryRun(cmd.Context(), cfg, stdout, stderr)
			}
			return runAndReport(cmd.Context(), cfg, cmd.Flags(), stdout, stderr, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&configFile, "config", "", "read flags from a YAML or JSON file (keys are flag names: \"ttl: 500ms\"); flags on the command line override it")
	f.StringVar(&replayDir, "replay", "", "rerun the stored run RUN_DIR with its settings and the same fault schedule, as lockjepsen replay does (only --store, --quiet and --json go with it)")
	o.flags(f)
	be.flags(f)
	cf.flags(f)
	systemFlags(f, &cfg)
	faultFlags(f, &cfg, &nem)
	runFlags(f, &cfg)
	return cmd
}

// testReplay is `test --replay RUN_DIR`: the replay command's path, with
// the test's flags that would change the run refused.
func testReplay(cmd *cobra.Command, dir, store string, args []string, o output, stdout, stderr io.Writer) error {
	if strings.TrimSpace(dir) == "" {
		return usageErr(stderr, errors.New("--replay needs a stored run directory (store/latest, or store/NAME/TIME)"))
	}
	if err := replayConflicts(cmd.Flags()); err != nil {
		return usageErr(stderr, err)
	}
	if !cmd.Flags().Changed("store") {
		store = "" // the original's store, as lockjepsen replay
	}
	return replay(cmd, dir, store, 1, args, o, stdout, stderr)
}

func newCheckCmd(stdout, stderr io.Writer) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "check RUN_DIR",
		Short: "Re-run the checkers on a stored run and rewrite its results.json",
		Long: `check reads RUN_DIR's history (history.jsonl.zst, or history.jsonl as earlier
versions wrote it) and RUN_DIR/config.json, runs every checker
again and rewrites RUN_DIR/results.json (or writes it to --out). A history
whose last line is incomplete (a harness that died mid-write) is checked on
its readable prefix, and the results say so; any other malformed line is an
error (exit 2). A read-only RUN_DIR is checked all the same: the verdict is
printed, and results.json is written only where --out says.`,
		Example: "  lockjepsen check store/latest\n  lockjepsen check --out /tmp/recheck /mnt/archive/run",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			if st, err := os.Stat(out); out != "" && err == nil && !st.IsDir() {
				return usageErr(stderr, fmt.Errorf("--out %s is a file; give a directory for results.json and porcupine's pictures", out))
			}
			if p, err := runfile.FindHistory(dir); err == nil {
				if st, err := os.Stat(p); err == nil {
					fmt.Fprintf(stderr, "checking %s (%.1f MB of history)\n", p, float64(st.Size())/1e6)
				}
			}
			res, err := harness.CheckContext(cmd.Context(), dir, out)
			if err != nil && cmd.Context().Err() != nil && !harness.IsUsage(err) {
				fmt.Fprintf(stderr, "lockjepsen: interrupted: the check of %s stopped before its verdict; nothing was written\n", dir)
				return exitError{code: exitNotMet}
			}
			if err != nil {
				return failure(stderr, err)
			}
			if res.Corrupt {
				fmt.Fprintf(stderr, "warning: the history is corrupt: %s\n", res.Truncated)
			} else if res.Truncated != "" {
				fmt.Fprintf(stderr, "warning: the history is truncated: %s\n", res.Truncated)
			}
			if res.NotWritten != "" {
				fmt.Fprintf(stderr, "warning: %s\n", res.NotWritten)
			}
			printSummary(stdout, dir, res)
			if out != "" && res.NotWritten != "" {
				// --out asked for the results there: the verdict printed
				// is all the user gets, which a script must not take for
				// success.
				return usageErr(stderr, fmt.Errorf("--out %s: nothing was written", out))
			}
			return verdictExit(res)
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "write results.json and porcupine's pictures to this directory instead of RUN_DIR")
	return cmd
}

func newReportCmd(stdout, stderr io.Writer) *cobra.Command {
	var matrix, title, out, junit string
	var merge bool
	var o output
	cmd := &cobra.Command{
		Use:   "report RUN_DIR...",
		Short: "Render report.html of stored runs, or one matrix page of several",
		Long: `report renders RUN_DIR/report.html from the run's stored files alone (it does not
re-run the checkers: use check for that). With --matrix FILE, it writes one page
summarizing every RUN_DIR given, each cell linking to its run's report.

With --merge, the arguments are the matrix directories of the shards of one
matrix (matrix --shard i/n, each on its own machine or CI job, copied here with
their store): report writes one matrix page, results.json and, with --junit,
JUnit XML for the whole matrix, as one unsharded run would. Exit codes as
matrix's: 1 when some run did not meet its expectation.`,
		Example: "  lockjepsen report store/latest\n  lockjepsen report --matrix review.html store/*/*/\n  lockjepsen report --merge --out merged --junit junit.xml shard-*/store/matrix/*/",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if merge {
				if out == "" {
					return usageErr(stderr, errors.New("--merge needs --out DIR for the merged matrix"))
				}
				return writeMerged(args, out, junit, o, stdout, stderr)
			}
			if out != "" || junit != "" {
				return usageErr(stderr, errors.New("--out and --junit go with --merge"))
			}
			for _, dir := range args {
				if _, err := runfile.FindHistory(dir); err != nil {
					return usageErr(stderr, fmt.Errorf("%s is not a lockjepsen run directory: %w", dir, err))
				}
			}
			if matrix != "" {
				if err := reports.WriteMatrix(matrix, args, title); err != nil {
					return outputFailure(stderr, "--matrix "+matrix, err)
				}
				fmt.Fprintf(stdout, "Matrix: %s\n", matrix)
				return nil
			}
			for _, dir := range args {
				path, err := reports.WriteRun(dir)
				if err != nil {
					return outputFailure(stderr, "the report of "+dir, err)
				}
				fmt.Fprintf(stdout, "Report: %s\n", path)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&matrix, "matrix", "", "write one matrix page of all the runs to this file")
	cmd.Flags().StringVar(&title, "title", "lockjepsen matrix", "title of the matrix page")
	cmd.Flags().BoolVar(&merge, "merge", false, "the arguments are shards' matrix directories: merge them into one matrix")
	cmd.Flags().StringVar(&out, "out", "", "with --merge: directory for the merged matrix.html and results.json")
	cmd.Flags().StringVar(&junit, "junit", "", "with --merge: also write JUnit XML to this file")
	o.flags(cmd.Flags())
	return cmd
}

func newServeCmd(stdout, stderr io.Writer) *cobra.Command {
	store := "store"
	port := 8080
	cmd := &cobra.Command{
		Use:         "serve",
		Short:       "Browse a store of runs in a web browser (on 127.0.0.1)",
		Args:        cobra.NoArgs,
		Annotations: map[string]string{interruptStops: "yes"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if st, err := os.Stat(store); err != nil || !st.IsDir() {
				return usageErr(stderr, fmt.Errorf("--store %s is not a directory", store))
			}
			if port < 0 || port > 65535 {
				return usageErr(stderr, fmt.Errorf("--port %d is not a port", port))
			}
			ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			if err != nil {
				return usageErr(stderr, fmt.Errorf("--port %d: %v", port, err))
			}
			srv := &http.Server{Handler: reports.Handler(store), ReadHeaderTimeout: 10 * time.Second}
			fmt.Fprintf(stdout, "Serving %s on http://%s/ (Ctrl-C to stop)\n", store, ln.Addr())
			go func() {
				<-cmd.Context().Done()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				srv.Shutdown(ctx)
			}()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return failure(stderr, err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&store, "store", store, "the store directory to browse")
	cmd.Flags().IntVar(&port, "port", port, "port on 127.0.0.1 (0: any free port)")
	return cmd
}

// redlockAlgorithm names the locks that implement the Redlock algorithm,
// the ones --drift-factor and --lock-tries are for.
const redlockAlgorithm = locks.RedlockName + ", " + liblocks.RedsyncName

// systemFlags are the test's system and lock.
func systemFlags(f *pflag.FlagSet, cfg *harness.Config) {
	f.StringVar(&cfg.System, "system", cfg.System, "system under test: "+harness.SystemHelp())
	f.IntVar(&cfg.Sentinels, "sentinels", 0, "sentinel: number of sentinels (0: 3)")
	f.DurationVar(&cfg.DownAfter, "down-after", 0, "sentinel: down-after-milliseconds (0: 1s)")
	f.DurationVar(&cfg.FailoverTimeout, "failover-timeout", 0, "sentinel: failover-timeout (0: 3s)")
	f.IntVar(&cfg.MinReplicasToWrite, "min-replicas-to-write", 0, "sentinel, cluster: the nodes' min-replicas-to-write")
	f.DurationVar(&cfg.MinReplicasMaxLag, "min-replicas-max-lag", 0, "sentinel, cluster: the nodes' min-replicas-max-lag, whole seconds (0: Redis's 10s)")
	f.IntVar(&cfg.WaitReplicas, "wait-replicas", 0, locks.WaitName+" lock: replicas that must acknowledge a grant (0: 1)")
	f.DurationVar(&cfg.WaitTimeout, "wait-timeout", 0, locks.WaitName+" lock: WAIT timeout (0: 100ms)")
	f.StringVar(&cfg.Lock, "lock", cfg.Lock, lockHelp())
	f.Float64Var(&cfg.DriftFactor, "drift-factor", 0, redlockAlgorithm+": clock drift factor in the validity (0: the lock's default, 0.01)")
	f.DurationVar(&cfg.NodeTimeout, "node-timeout", 0, redlockAlgorithm+": how long each node may take to answer during an acquisition (0: the lock's default, min(TTL/10, 50ms))")
	f.IntVar(&cfg.LockTries, "lock-tries", 0, redlockAlgorithm+": the lock's own tries per acquire (0: 1; the workload retries anyway)")
	f.IntVar(&cfg.Nodes, "nodes", 0, "nodes of the system (0: single 1, sentinel 3, redlock 5)")
	f.StringVar(&cfg.Persistence, "persistence", cfg.Persistence, "Redis persistence: none, everysec or always (AOF)")
}

// faultFlags are the test's faults and their parameters.
func faultFlags(f *pflag.FlagSet, cfg *harness.Config, nem *string) {
	f.BoolVar(&cfg.AfterAcquire, "after-acquire", false, "start each server fault right after a lease is granted (with --targets primary: kill the primary before replication catches up)")
	f.StringVar(nem, "nemesis", "none", "faults, a comma list: none, "+strings.Join(nemesis.KnownNames(), ", "))
	f.DurationVar(&cfg.NemesisInterval, "nemesis-interval", cfg.NemesisInterval, "mean time between fault injections")
	f.StringVar(&cfg.ScriptName, "script", "", "a named fault script instead of --nemesis: "+strings.Join(nemesis.ScriptNames(), ", "))
	f.StringVar(&cfg.Targets, "targets", cfg.Targets, "nodes a server fault hits: one, minority, majority, all, holder (a node that granted the latest lease) or primary (sentinel: the node the sentinels name primary; cluster: the primary of lock-0's slot)")
	f.DurationVar(&cfg.FaultDuration, "fault-duration", cfg.FaultDuration, "mean time a fault lasts before it is healed")
	f.DurationVar(&cfg.RestartDelay, "restart-delay", cfg.RestartDelay, "kill: how long a killed node stays down before its restart")
	f.BoolVar(&cfg.LoseUnsynced, "lose-unsynced", cfg.LoseUnsynced, "kill: also drop the last second of the node's append-only file, as a crash before fsync would")
	f.StringVar(&cfg.ClockJump, "clock-jump", cfg.ClockJump, "clock-jump/clock-strobe: how far a node's wall clock moves: a duration (750ms, -2s) or a multiple of the TTL (1.5ttl)")
	f.Float64Var(&cfg.ClockRate, "clock-rate", cfg.ClockRate, "clock-drift: speed of a node's wall clock relative to real time")
	f.DurationVar(&cfg.Latency, "latency", cfg.Latency, "latency: delay added to replies")
	f.DurationVar(&cfg.Jitter, "jitter", cfg.Jitter, "latency: random variation of the delay")
	f.Int64Var(&cfg.Bandwidth, "bandwidth", cfg.Bandwidth, "slow: bandwidth limit in KB/s")
}

// runFlags are the test's workload, timings, store and expectation.
func runFlags(f *pflag.FlagSet, cfg *harness.Config) {
	f.StringVar(&cfg.Workload, "workload", cfg.Workload, "what clients do: mutex (acquire, hold, release), counter (read-modify-write a protected resource under the lock), renew (hold for several TTLs, renewing) or renew-counter (renew, with a fenced write at every step)")
	f.StringVar(&cfg.Renew, "renew", "", "renew workloads: explicit (the holder extends before each step; default) or watchdog (a background renewer extends every TTL/3, as Redisson's watchdog; the holder has no deadline)")
	f.StringVar(&cfg.RenewFor, "renew-for", "", "renew workloads: how long a hold lasts, in TTLs: 3 or 1..5 (default 1..5)")
	f.DurationVar(&cfg.RenewBefore, "renew-before", 0, "renew workloads, explicit: extend this long before the validity ends, instead of every TTL/3 (0 < it < --ttl; 0: every TTL/3)")
	f.IntVar(&cfg.Clients, "clients", cfg.Clients, "concurrent clients")
	f.IntVar(&cfg.Keys, "keys", cfg.Keys, "number of lock keys clients spread over")
	f.DurationVar(&cfg.TTL, "ttl", 0, "lock TTL (lease duration; "+harness.TTLHelp()+")")
	f.DurationVar(&cfg.TimeLimit, "time-limit", cfg.TimeLimit, "duration of the fault phase")
	f.DurationVar(&cfg.Recovery, "recovery", cfg.Recovery, "fault-free phase after healing, to judge liveness")
	f.StringVar(&cfg.Hold, "hold", cfg.Hold, "how long a client holds the lock: 10ms (fixed), 5ms..50ms (uniform) or exp:20ms")
	f.Float64Var(&cfg.LongHoldRate, "long-hold-rate", cfg.LongHoldRate, "fraction of holds that outlast the TTL (0..1)")
	f.DurationVar(&cfg.RetryBackoff, "retry-backoff", cfg.RetryBackoff, "longest random wait after a failed acquire")
	f.DurationVar(&cfg.OpTimeout, "op-timeout", cfg.OpTimeout, "timeout of each Redis operation; past it the outcome is unknown")
	f.Int64Var(&cfg.Seed, "seed", cfg.Seed, "random seed of clients and nemesis")
	f.StringVar(&cfg.Store, "store", cfg.Store, "directory where runs are stored")
	f.StringVar(&cfg.Name, "name", "", "test name in the store (default system-lock-workload-nemesis)")
	f.StringVar(&cfg.Expect, "expect", cfg.Expect, "expected verdict, decides the exit code: safe, unsafe, stuck or any")
	f.BoolVar(&cfg.StopOnFirstViolation, "stop-on-first-violation", false, stopOnFirstHelp)
	f.StringVar(&cfg.RecordFailedAcquires, "record-failed-acquires", harness.RecordAll, "all: record every acquire; summary: count failed acquires per client, key and second instead, for long runs where most attempts fail (liveness still counts them; porcupine and the timeline do not see them)")
	f.BoolVar(&cfg.ServerRecord, "server-record", cfg.ServerRecord, "record what each Redis node did to the keys (set with its token, TTL changed, deleted, expired, evicted, and the record's gaps) in server-record.jsonl.zst, from the node's own keyspace notifications (docs/server-record.md)")
	f.DurationVar(&cfg.CheckpointEvery, "checkpoint-every", cfg.CheckpointEvery, "rewrite checkpoint.json this often while the run goes (events and violations so far), so that a long run killed before its end says what it had found; 0: none")
	f.DurationVar(&cfg.StopGrace, "stop-grace", 0, "with --stop-on-first-violation: go on after the first violation until the earlier holder's hold ends, but at most this long, so that what it did while it still believed (a stale write a fenced resource refused) is recorded")
}

const stopOnFirstHelp = "end the run at the first overlap of two believed holds, or at the first damage to the protected resource (a lost update, or a stale fence refused) (faults healed, no recovery phase); the history is checked as usual. Give a generous --time-limit: it costs nothing when the lock breaks early"

func usageErr(stderr io.Writer, err error) error {
	fmt.Fprintf(stderr, "lockjepsen: %v\n", err)
	return exitError{code: exitUsage, msg: err.Error(), cause: err}
}

// flagErr refuses a flag's value, naming the configuration file's line
// when the value came from --config (explainOrigin).
func flagErr(stderr io.Writer, err error, fs *pflag.FlagSet) error {
	if !harness.IsUsage(err) {
		err = &harness.UsageError{Err: err}
	}
	return usageErr(stderr, explainOrigin(err, fs))
}

func failure(stderr io.Writer, err error) error {
	if harness.IsUsage(err) {
		return usageErr(stderr, err)
	}
	var ie *harness.InterruptedError
	if errors.As(err, &ie) || errors.Is(err, errInterruptedAtStart) {
		fmt.Fprintf(stderr, "lockjepsen: %v\n", err)
		return exitError{code: exitNotMet, msg: err.Error(), cause: err}
	}
	fmt.Fprintf(stderr, "lockjepsen: harness failure: %v\n", err)
	var he *harness.HarnessError
	if errors.As(err, &he) && he.Dir != "" {
		fmt.Fprintf(stderr, "the run's files so far are in %s\n", he.Dir)
	}
	return exitError{code: exitHarness, msg: "harness failure: " + err.Error(), cause: err}
}

func verdictExit(res *harness.Results) error {
	if res.HarnessFailed() {
		return exitError{code: exitHarness}
	}
	if res.MetExpectation {
		return nil
	}
	return exitError{code: exitNotMet}
}

func printSummary(w io.Writer, dir string, res *harness.Results) {
	fmt.Fprintln(w)
	for _, line := range res.Summary() {
		fmt.Fprintln(w, line)
	}
	if res.Incomplete != "" {
		fmt.Fprintf(w, "Incomplete: %s; what was recorded was checked.\n", res.Incomplete)
	}
	if res.StoppedEarly != "" {
		fmt.Fprintf(w, "Stopped early: %s.\n", res.StoppedEarly)
	}
	for _, p := range res.ClientPanics {
		fmt.Fprintf(w, "lock panic: %s\n", p)
	}
	for _, e := range res.Errors {
		fmt.Fprintf(w, "HARNESS ERROR (the run cannot be trusted): %s\n", e)
	}
	expect := "met"
	if !res.MetExpectation {
		expect = "NOT met"
	}
	fmt.Fprintf(w, "Expected %s: %s.\n", res.Expect, expect)
	if res.Why != "" {
		fmt.Fprintln(w, res.Why)
	}
	if res.Vacuous != "" {
		fmt.Fprintln(w, "VACUOUS: "+strings.TrimPrefix(res.Vacuous, "vacuous: "))
	}
	fmt.Fprintf(w, "Files: %s (history.jsonl.zst, results.json, config.json, nodes/)\n", absDir(dir))
}

// absDir is dir as an absolute path without symlinks, for messages.
func absDir(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	return abs
}
