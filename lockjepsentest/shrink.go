package lockjepsentest

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/reports"
	"github.com/lockjepsen/lockjepsen/shrink"
)

// shrinkFailure shrinks a failed run that found a violation and says
// what it shrank to and how to replay it, for the failure message.
func shrinkFailure(ctx context.Context, o Options, out *harness.Outcome) string {
	if out.Results.Verdict != checker.VerdictUnsafe {
		return "shrink: nothing to shrink, the run found no violation"
	}
	budget := o.ShrinkBudget
	if budget <= 0 {
		budget = 5 * time.Minute
	}
	got, err := shrink.Run(ctx, shrink.Request{Dir: out.Dir, Store: filepath.Dir(filepath.Dir(out.Dir)),
		Options: shrink.Options{K: 2, N: 3, Budget: budget}, FinalTries: 3, Locker: o.Locker})
	switch {
	case errors.Is(err, shrink.ErrNotReproduced):
		return "shrink: " + err.Error() + "; nothing was kept"
	case err != nil:
		return "shrink failed: " + err.Error()
	}
	reports.WriteRun(got.Dir)
	s := got.Shrunk
	msg := fmt.Sprintf("shrunk: minimal reproduction: %d faults, %d clients, %.1f s; reproduced %d of %d, in %s",
		s.Faults, s.Clients, s.FaultPhase.Seconds(), s.Reproduced, s.Tries, absDir(got.Dir))
	if len(o.Client) > 0 || o.Locker == nil {
		return msg + "\nreplay it: " + s.Replay
	}
	return msg + "\nreplay it from Go: lockjepsentest.Replay(t, opts, " + strconv.Quote(got.Dir) + ")"
}

// Replay reruns the stored run in dir (one that Run or shrinking made)
// with its settings and fault schedule, and your lock from o (Locker or
// Client); the test fails when the verdict does not meet the stored
// run's expectation, as with Run.
func Replay(tb testing.TB, o Options, dir string) *harness.Outcome {
	tb.Helper()
	cfg, err := harness.ReplayConfig(dir)
	if err != nil {
		tb.Fatalf("lockjepsentest: %v", err)
		return nil
	}
	cfg.Locker = o.Locker
	if len(o.Client) > 0 {
		cfg.Client = o.Client
	}
	cfg.Name = cfg.TestName() + "-replay"
	cfg.Command = []string{"(go test) " + tb.Name() + " replay"}
	out, err := harness.Run(context.Background(), cfg)
	if err != nil {
		tb.Fatalf("lockjepsentest: the harness failed: %v", err)
		return nil
	}
	out.Report, out.ReportError = reports.WriteRun(out.Dir)
	tb.Logf("lockjepsen: replay of %s: %s; files in %s", dir, verdictWord(out.Results), absDir(out.Dir))
	if msg := Failure(out, 0); msg != "" {
		tb.Error(msg)
	}
	return out
}
