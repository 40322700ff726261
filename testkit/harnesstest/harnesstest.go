// Package harnesstest holds what the tests of whole runs share, in this
// module and in contrib: short configurations, running a case (or a table
// of them) once with its expectation, reading what a run stored, and
// checking that a run left no process or file behind.
package harnesstest

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/checker"
	_ "github.com/lockjepsen/lockjepsen/cluster/local" // the default backend of the runs it configures
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/nemesis"
	"github.com/lockjepsen/lockjepsen/runfile"
)

// Main runs a package's tests of whole runs without go-redis's log of
// every failed dial, which under faults is noise in the test output.
func Main(m *testing.M) {
	locks.SilenceRedisLogs()
	os.Exit(m.Run())
}

// Long runs the scenarios for 30s each instead of a few seconds.
var Long = flag.Bool("long", false, "run the scenarios for 30s each instead of a few seconds")

// ShortConfig is the default configuration with a run of a few seconds, in
// a store of the test's own.
func ShortConfig(t *testing.T) harness.Config {
	cfg := harness.DefaultConfig()
	cfg.Store = t.TempDir()
	cfg.TimeLimit, cfg.Recovery = 3*time.Second, 1500*time.Millisecond
	cfg.NemesisInterval = 400 * time.Millisecond
	// A failed acquire waits up to 25 ms, not the default 2 ms: ten clients
	// still try the key about 800 times a second, so a lease that ends is
	// taken over within a few milliseconds, far inside every window the
	// tests aim at (hundreds of milliseconds: a pause, a TTL, a delayed
	// release). The contention costs CPU, which on two cores is wall time
	// and headroom for the runs that must be on time: harness
	// TestScenarios spent 48-59 s of CPU at 2 ms, 31-34 s at 10 ms
	// (2026-12-04), and 9 s at 25 ms against 14.5 s at 10 ms (2026-12-05).
	cfg.RetryBackoff = 25 * time.Millisecond
	if *Long {
		cfg.TimeLimit, cfg.Recovery = 30*time.Second, 3*time.Second
	}
	return cfg
}

// UnsafeTimeLimit is the fault phase of a case that expects a violation
// and stops at the first one (UntilViolation). Each such case is built so
// that a violation follows from its mechanism, which every case names in a
// comment; this limit only leaves a loaded machine room to be slow. A
// working harness stops within seconds, and a broken one fails the test
// after at most this long.
const UnsafeTimeLimit = 60 * time.Second

// UntilViolation makes a run that expects a violation end at its first one
// (harness.Config.StopOnFirstViolation), with UnsafeTimeLimit to find it.
func UntilViolation(c *harness.Config) {
	c.StopOnFirstViolation = true
	c.TimeLimit = UnsafeTimeLimit
}

// DelayedReleases makes a run that finds a release that compares in the
// client and then deletes (GET, then DEL): latency on every client link
// delays each reply by 50 ms, and every hold lasts 400-450 ms of a 500 ms
// TTL, so a holder's GET runs before its key expires and its DEL after,
// when the next holder has the key. It expects that violation and stops
// at the first.
func DelayedReleases(c *harness.Config) {
	c.Nemesis = []string{nemesis.Latency}
	c.NemesisInterval, c.FaultDuration = 100*time.Millisecond, 10*time.Minute
	c.Latency, c.Jitter = 50*time.Millisecond, 0
	c.Hold = "400ms..450ms"
	c.Expect = harness.ExpectUnsafe
	UntilViolation(c)
}

// Run runs cfg once. Nothing is retried: a case that expects a violation
// (or a stuck lock) gets it from its mechanism, and a case that expects
// safety fails at its first violation. A run that expected a violation and
// found none fails here, saying that it ran its whole time limit.
func Run(t *testing.T, cfg harness.Config) *harness.Outcome {
	t.Helper()
	start := time.Now()
	out, err := harness.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := out.Results
	took := time.Since(start).Round(100 * time.Millisecond)
	switch {
	case cfg.Expect == harness.ExpectUnsafe && r.Verdict != checker.VerdictUnsafe:
		t.Fatalf("verdict %s after %s, want unsafe: no violation in the whole %s fault phase, although this case's mechanism makes one certain: the harness is broken\n%s\n%s",
			r.Verdict, took, cfg.TimeLimit, strings.Join(r.Summary(), "\n"), ErrorDigest(out.Dir))
	case cfg.Expect == harness.ExpectStuck && r.Verdict != checker.VerdictStuck:
		t.Fatalf("verdict %s after %s, want stuck: the lock was not stuck at the end of the run, although this case's mechanism makes it so: the harness is broken\n%s\n%s",
			r.Verdict, took, strings.Join(r.Summary(), "\n"), ErrorDigest(out.Dir))
	}
	if cfg.StopOnFirstViolation && r.Verdict == checker.VerdictUnsafe {
		// The watcher that stops the run and the exclusion checker must
		// agree: a violation the checker finds stops the run.
		if r.StoppedEarly == "" && r.Violations > 0 {
			t.Errorf("the checkers found %d violations but the run did not stop at the first", r.Violations)
		}
		if r.StoppedEarly == "" && r.Resource != nil && r.Resource.Duplicates > 0 {
			t.Errorf("the resource checker found %d repeated writes but the run did not stop at the first", r.Resource.Duplicates)
		}
		t.Logf("stopped after %s: %s", took, r.StoppedEarly)
	}
	return out
}

// NodePIDs are the process ids of a run's nodes, from its nodes.json.
func NodePIDs(t *testing.T, dir string) []int {
	t.Helper()
	nodes, err := runfile.ReadNodes(dir)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, n := range nodes {
		pids = append(pids, n.PID)
	}
	return pids
}

// PIDsIn reads the process ids of a nodes.json.
func PIDsIn(nodesJSON string) []int {
	var nodes []struct {
		PID int `json:"pid"`
	}
	json.Unmarshal([]byte(nodesJSON), &nodes)
	var out []int
	for _, n := range nodes {
		out = append(out, n.PID)
	}
	return out
}

// ProcessAlive is true for a live, non-zombie process.
func ProcessAlive(pid int) bool { return pid > 0 && syscall.Kill(pid, 0) == nil }

// RequireNoServers fails the test if a node of the run in dir still runs.
func RequireNoServers(t *testing.T, dir string) {
	t.Helper()
	for _, pid := range NodePIDs(t, dir) {
		if ProcessAlive(pid) {
			t.Fatalf("server pid %d still running after the run", pid)
		}
	}
}

// RequireNoShm fails the test if a node of the run in dir left libfaketime
// files in /dev/shm.
func RequireNoShm(t *testing.T, dir string) {
	t.Helper()
	for _, n := range NodePIDs(t, dir) {
		if m, _ := filepath.Glob(fmt.Sprintf("/dev/shm/*faketime*_%d", n)); len(m) > 0 {
			t.Fatalf("libfaketime files left: %v", m)
		}
	}
}

// ErrorDigest lists the errors of the run's failed and unknown operations,
// the most frequent first, with the faults applied: what a test that
// failed on a CI machine, whose files are gone, can still tell (a run
// whose every acquire was unknown for a minute once said no more than
// that).
func ErrorDigest(dir string) string {
	sc, err := history.OpenScanner(runfile.HistoryPath(dir))
	if err != nil {
		return "no history to digest: " + err.Error()
	}
	defer sc.Close()
	count := map[string]int{}
	first := map[string]int64{}
	faults := map[string]int{}
	for op, ok := sc.Next(); ok; op, ok = sc.Next() {
		switch {
		case op.Process == history.NemesisProcess:
			if op.Value != nil && op.Value.Phase != "" {
				faults[op.F+" "+op.Value.Phase+" "+strings.Join(op.Value.Targets, ",")]++
			}
		case op.Type != history.Invoke && op.Error != "":
			k := op.F + " " + string(op.Type) + ": " + op.Error
			if count[k] == 0 {
				first[k] = op.Time
			}
			count[k]++
		}
	}
	keys := make([]string, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return count[keys[i]] > count[keys[j]] })
	var b strings.Builder
	b.WriteString("errors of the operations, most frequent first:\n")
	for i, k := range keys {
		if i == 8 {
			fmt.Fprintf(&b, "  (%d more kinds)\n", len(keys)-i)
			break
		}
		fmt.Fprintf(&b, "  %d× from %s: %s\n", count[k], time.Duration(first[k]).Round(time.Millisecond), k)
	}
	fmt.Fprintf(&b, "fault events: %v", faults)
	return b.String()
}

// ReadHistory is the history of the run in dir, read whole.
func ReadHistory(t *testing.T, dir string) *history.ReadResult {
	t.Helper()
	res, err := history.ReadFile(runfile.HistoryPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// ReadRunInfo is what the run in dir stored in its run.json.
func ReadRunInfo(t *testing.T, dir string) harness.RunInfo {
	t.Helper()
	var info harness.RunInfo
	if err := runfile.ReadJSON(filepath.Join(dir, harness.RunInfoFile), &info); err != nil {
		t.Fatalf("run.json: %v", err)
	}
	return info
}

// RequireTwoPrimaries asks the witness of the first violation to name two
// holders on two primaries: the failover happened, and the lock was
// granted on both sides of it.
func RequireTwoPrimaries(t testing.TB, r *harness.Results) {
	t.Helper()
	v := r.Exclusion.Violations[0]
	if len(v.First.Nodes) != 1 || len(v.Second.Nodes) != 1 || v.First.Nodes[0] == v.Second.Nodes[0] {
		t.Fatalf("the witness does not show two primaries: %s", v.Story)
	}
}

// KillAfterAcquireSteps are the steps of the named script
// sentinel-kill-after-acquire for c, with the killed primary kept down for
// down instead of the script's 5 s.
func KillAfterAcquireSteps(c *harness.Config, down time.Duration) []nemesis.Step {
	p := nemesis.ScriptParams{Nodes: []string{"n1", "n2", "n3"}, Sentinels: []string{"s1", "s2", "s3"},
		Clients: c.Clients, TTL: c.TTLOrDefault(), TimeLimit: c.TimeLimit, Interval: c.NemesisInterval, Duration: c.FaultDuration}
	steps := nemesis.Scripts["sentinel-kill-after-acquire"].Build(p)
	for i := range steps {
		if steps[i].Action.Fault == nemesis.Kill {
			steps[i].Action.For = down
		}
	}
	return steps
}
