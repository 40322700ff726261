// Package lockjepsentest tests your own Redis lock from `go test`.
//
// Implement locks.Locker (TryAcquire returning a locks.Lease with Token,
// ValidUntil, Fence, Extend and Release), then:
//
//	func TestMyLockUnderPauses(t *testing.T) {
//		lockjepsentest.Run(t, lockjepsentest.Options{
//			Locker: func(nodes []locks.Conn, process int) (locks.Locker, error) {
//				return mylock.New(nodes[0].Client, fmt.Sprintf("p%d", process)), nil
//			},
//			Nemesis: []string{nemesis.ClientPause},
//		})
//	}
//
// Run starts real redis-server processes on 127.0.0.1 (redis-server must be
// installed; the test is skipped without it unless LOCKJEPSEN_REQUIRE_REDIS
// is set), runs concurrent clients with your lock while the nemesis injects
// faults, checks the history, and fails the test with the verdict and the
// story of the first violations. The run's files (history, results, report)
// are kept when the test fails, and their path is logged.
//
// Use the clients in nodes (locks.Conn.Client): they stamp when each
// operation's first request went out, and the lease model counts the TTL
// from there. A lock that dials Redis itself (from locks.Conn.Addr) must
// stamp that instant on its leases (locks.Started), or on a loaded machine
// an honest lease can be flagged as over-claiming; examples/mylock's Dial
// does.
package lockjepsentest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster/local"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/reports"
	"github.com/lockjepsen/lockjepsen/scenario"
)

// Options is one test of a lock. Only Locker (or Client) is required; the zero value of
// every other field is a short, busy test of a single Redis without faults,
// expected to be safe.
type Options struct {
	// Locker builds the lock under test for one client process, given one
	// connection per node (a single Redis and Sentinel: one; Redlock: five).
	// Required.
	Locker harness.LockerFactory
	// Client, instead of Locker, is a lock client of another language: a
	// program and its arguments, one process per client, driven over the
	// client protocol (docs/client-protocol.md).
	Client []string
	// LockName names your lock in the test's name, config.json, the
	// report and the matrix (default "custom"); LockFences and
	// LockRenews declare whether it hands out fencing tokens and renews
	// its lease in the background, for the report.
	LockName               string
	LockFences, LockRenews bool

	// Scenario starts from a named scenario's system, faults and timings
	// (see `lockjepsen scenario --list`), with your lock in place of the
	// scenario's; Expect still defaults to safe, since your lock is meant
	// to be. The fields below override it.
	Scenario string

	// System is single (the default), sentinel or redlock.
	System string
	// Workload is mutex (the default) or counter.
	Workload string
	// Nemesis lists the faults (see `lockjepsen test --help`); none by
	// default.
	Nemesis []string
	// Targets is the nodes a server fault hits (one, minority, majority,
	// all, holder, primary).
	Targets string
	// TimeLimit is the fault phase (default 3s) and Recovery the fault-free
	// phase after it (default 1.5s).
	TimeLimit, Recovery time.Duration
	// Clients (default 10) and TTL (default: the system's, 500ms, and 1s
	// on etcd).
	Clients int
	TTL     time.Duration
	// Hold is how long a client holds the lock: "10ms", "5ms..50ms",
	// "exp:20ms" (default "0..20ms").
	Hold string
	// Seed of the clients and the fault schedule (default 1).
	Seed int64
	// Expect is the verdict the test requires: safe (the default), unsafe,
	// stuck or any.
	Expect string
	// StopOnFirstViolation ends the run at the first overlap of two
	// believed holds, or at the first damage to the protected resource (a
	// lost update, or a stale fence refused) when none came first. With Expect "unsafe" and a generous TimeLimit, the
	// test costs little when the lock breaks early, and does not depend
	// on a short run happening to hit the fault.
	StopOnFirstViolation bool
	// Store is where the run's files go. Default: $LOCKJEPSEN_STORE if set,
	// else a fresh temporary directory that is removed when the test passes
	// and kept when it fails.
	Store string
	// Configure, if set, edits the final configuration: the last word on
	// every option of harness.Config.
	Configure func(*harness.Config)
	// MaxWitnesses is how many violation stories the failure message tells
	// (default 3).
	MaxWitnesses int
	// Shrink, when the test fails with a violation, searches for the
	// smallest run that still breaks the lock the same way (package
	// shrink), within ShrinkBudget (default 5m), and adds it and the
	// way to replay it to the failure message.
	Shrink       bool
	ShrinkBudget time.Duration
}

// Config is the harness configuration that Run would use for o (with the
// store left at its default).
func Config(o Options) (harness.Config, error) {
	cfg := harness.DefaultConfig()
	cfg.TimeLimit, cfg.Recovery = 3*time.Second, 1500*time.Millisecond
	cfg.NemesisInterval = 400 * time.Millisecond
	if o.Scenario != "" {
		s, ok := scenario.Get(o.Scenario)
		if !ok {
			return cfg, fmt.Errorf("unknown scenario %q; known: %s", o.Scenario, strings.Join(scenario.Names(), ", "))
		}
		cfg = s.Config()
		cfg.Name = ""
		cfg.Expect = harness.ExpectSafe
	}
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&cfg.System, o.System)
	set(&cfg.Workload, o.Workload)
	set(&cfg.Targets, o.Targets)
	set(&cfg.Hold, o.Hold)
	set(&cfg.Expect, o.Expect)
	if o.Nemesis != nil {
		cfg.Nemesis, cfg.ScriptName = o.Nemesis, ""
	}
	if o.TimeLimit > 0 {
		cfg.TimeLimit = o.TimeLimit
	}
	if o.Recovery > 0 {
		cfg.Recovery = o.Recovery
	}
	if o.Clients > 0 {
		cfg.Clients = o.Clients
	}
	if o.TTL > 0 {
		cfg.TTL = o.TTL
	}
	if o.Seed != 0 {
		cfg.Seed = o.Seed
	}
	cfg.Locker, cfg.Client = o.Locker, o.Client
	cfg.CustomLockName, cfg.CustomLockFences, cfg.CustomLockRenews = o.LockName, o.LockFences, o.LockRenews
	cfg.StopOnFirstViolation = cfg.StopOnFirstViolation || o.StopOnFirstViolation
	if o.Configure != nil {
		o.Configure(&cfg)
	}
	if cfg.Locker == nil && len(cfg.Client) == 0 {
		return cfg, fmt.Errorf("Options.Locker (or Options.Client) is required: the lock under test")
	}
	return cfg, nil
}

// Run runs one test of the lock in o and returns its outcome. It fails tb
// (Errorf) when the verdict does not meet the expectation, with the checkers'
// summary, the story of the first violations and the path of the run's
// files; it stops tb (Fatalf) on a bad configuration or a harness failure
// (the outcome is then nil). Without redis-server the test is skipped, or
// failed when LOCKJEPSEN_REQUIRE_REDIS is set.
func Run(tb testing.TB, o Options) *harness.Outcome {
	tb.Helper()
	cfg, err := Config(o)
	if err != nil {
		tb.Fatalf("lockjepsentest: %v", err)
		return nil
	}
	if err := cfg.Validate(); err != nil {
		tb.Fatalf("lockjepsentest: bad options: %v", err)
		return nil
	}
	if _, err := local.FindRedisServer(); err != nil {
		if os.Getenv("LOCKJEPSEN_REQUIRE_REDIS") != "" {
			tb.Fatalf("lockjepsentest: redis-server is required: %v", err)
			return nil
		}
		tb.Skipf("lockjepsentest: skipping: %v", err)
		return nil
	}
	cfg.Store = o.Store
	if cfg.Store == "" {
		cfg.Store = os.Getenv("LOCKJEPSEN_STORE")
	}
	if cfg.Store == "" {
		dir, err := os.MkdirTemp("", "lockjepsen-"+safeName(tb.Name())+"-")
		if err != nil {
			tb.Fatalf("lockjepsentest: %v", err)
			return nil
		}
		cfg.Store = dir
		tb.Cleanup(func() {
			if !tb.Failed() {
				os.RemoveAll(dir)
			}
		})
	}
	cfg.Command = []string{"(go test) " + tb.Name()}
	// The stored config.json cannot hold the Locker: name the run for it
	// ("single-custom-mutex-client-pause") so that a re-check says so too.
	cfg.Name = cfg.TestName()
	ctx := context.Background()
	if d, ok := deadline(tb); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d)
		defer cancel()
	}
	out, err := harness.Run(ctx, cfg)
	if err != nil {
		msg := fmt.Sprintf("lockjepsentest: the harness failed: %v", err)
		var he *harness.HarnessError
		if errors.As(err, &he) && he.Dir != "" {
			msg += "\nthe run's files so far are in " + he.Dir
		}
		tb.Fatal(msg)
		return nil
	}
	out.Report, out.ReportError = reports.WriteRun(out.Dir)
	tb.Logf("lockjepsen: %s; files in %s", verdictWord(out.Results), absDir(out.Dir))
	if msg := Failure(out, o.MaxWitnesses); msg != "" {
		if o.Shrink {
			msg += "\n" + shrinkFailure(ctx, o, out)
		}
		tb.Error(msg)
	}
	return out
}

// Failure is the message Run fails a test with, or "" when the outcome met
// its expectation and the harness did not fail: the verdict against the
// expectation, the checkers' summary, up to max violation stories (0: 3)
// and where the files are.
func Failure(out *harness.Outcome, max int) string {
	r := out.Results
	if r.MetExpectation && !r.HarnessFailed() {
		return ""
	}
	if max <= 0 {
		max = 3
	}
	var b strings.Builder
	fmt.Fprintf(&b, "lockjepsen: the lock's verdict is %s, expected %s (test %s)\n", r.Verdict, r.Expect, r.Test)
	for _, line := range r.Summary() {
		b.WriteString("  " + line + "\n")
	}
	if r.Why != "" {
		b.WriteString("  " + r.Why + "\n")
	}
	for _, e := range r.Errors {
		b.WriteString("  HARNESS ERROR (the run cannot be trusted): " + e + "\n")
	}
	for _, p := range r.ClientPanics {
		b.WriteString("  lock panic: " + p + "\n")
	}
	if r.Exclusion != nil {
		vs := r.Exclusion.Violations
		for i, v := range vs {
			if i == max {
				fmt.Fprintf(&b, "  … %d more witnesses in results.json\n", len(vs)-max)
				break
			}
			fmt.Fprintf(&b, "  witness %d: %s\n", i+1, v.Story)
		}
	}
	if res := r.Resource; res != nil && res.Checked && !res.Valid && res.Explanation != "" {
		b.WriteString("  resource: " + res.Explanation + "\n")
	}
	fmt.Fprintf(&b, "  files: %s (history.jsonl.zst, results.json)\n", absDir(out.Dir))
	if out.Report != "" {
		fmt.Fprintf(&b, "  report: %s\n", absDir(out.Report))
	}
	return strings.TrimRight(b.String(), "\n")
}

func verdictWord(r *harness.Results) string {
	met := "met"
	if !r.MetExpectation {
		met = "NOT met"
	}
	return fmt.Sprintf("verdict %s (expected %s: %s)", r.Verdict, r.Expect, met)
}

// deadline is the test binary's -timeout, less a margin, when tb has one.
func deadline(tb testing.TB) (time.Time, bool) {
	t, ok := tb.(interface{ Deadline() (time.Time, bool) })
	if !ok {
		return time.Time{}, false
	}
	d, ok := t.Deadline()
	if !ok {
		return d, false
	}
	return d.Add(-10 * time.Second), true
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func safeName(s string) string {
	s = unsafeChars.ReplaceAllString(s, "_")
	if len(s) > 60 {
		s = s[:60]
	}
	return s
}

func absDir(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return dir
	}
	return abs
}
