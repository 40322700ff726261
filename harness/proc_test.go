package harness_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/harness"
)

// nodesOf lists the PIDs recorded in a run's nodes.json.
func nodesOf(t *testing.T, dir string) []int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "nodes.json"))
	if err != nil {
		t.Fatal(err)
	}
	return pidsIn(string(b))
}

func pidsIn(nodesJSON string) []int {
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

// processAlive is true for a live, non-zombie process.
func processAlive(pid int) bool { return pid > 0 && syscall.Kill(pid, 0) == nil }

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// go-redis logs every failed dial; under faults that is noise in test output.
func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{})
	os.Exit(m.Run())
}

// unsafeTimeLimit is the fault phase of a case that expects a violation
// and stops at the first one (untilViolation). Each such case is built so
// that a violation follows from its mechanism, which every case names in a
// comment; this limit only leaves a loaded machine room to be slow. A
// working harness stops within seconds, and a broken one fails the test
// after at most this long.
const unsafeTimeLimit = 60 * time.Second

// untilViolation makes a run that expects a violation end at its first one
// (harness.Config.StopOnFirstViolation), with unsafeTimeLimit to find it.
func untilViolation(c *harness.Config) {
	c.StopOnFirstViolation = true
	c.TimeLimit = unsafeTimeLimit
}

// run runs cfg once. Nothing is retried: a case that expects a violation
// (or a stuck lock) gets it from its mechanism, and a case that expects
// safety fails at its first violation. A run that expected a violation and
// found none fails here, saying that it ran its whole time limit.
func run(t *testing.T, cfg harness.Config) *harness.Outcome {
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
		t.Fatalf("verdict %s after %s, want unsafe: no violation in the whole %s fault phase, although this case's mechanism makes one certain: the harness is broken\n%s",
			r.Verdict, took, cfg.TimeLimit, strings.Join(r.Summary(), "\n"))
	case cfg.Expect == harness.ExpectStuck && r.Verdict != checker.VerdictStuck:
		t.Fatalf("verdict %s after %s, want stuck: the lock was not stuck at the end of the run, although this case's mechanism makes it so: the harness is broken\n%s",
			r.Verdict, took, strings.Join(r.Summary(), "\n"))
	}
	if cfg.StopOnFirstViolation && r.Verdict == checker.VerdictUnsafe {
		// The watcher that stops the run and the exclusion checker must
		// agree: a violation the checker finds stops the run.
		if r.StoppedEarly == "" && r.Violations > 0 {
			t.Errorf("the checkers found %d violations but the run did not stop at the first", r.Violations)
		}
		t.Logf("stopped after %s: %s", took, r.StoppedEarly)
	}
	return out
}
