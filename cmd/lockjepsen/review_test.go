package main

import (
	"os"
	"strings"
	"testing"

	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

// A review that cannot be run is refused before anything starts, with
// exit code 2 and what to change.
func TestReviewUsageErrors(t *testing.T) {
	store := t.TempDir()
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"--budget", "30s"}, []string{"cannot fit", "it would skip", "server-restart", "give --budget"}},
		{[]string{"--threats", "meteor"}, []string{"unknown threat", "client-pause"}},
		{[]string{"--threats", "failover"}, []string{"does not apply to single"}},
		{[]string{"--mitigations", "prayer"}, []string{"unknown mitigation", "etcd"}},
		{[]string{"--system", "redlock", "--lock", "setnx-nottl"}, []string{"setnx-nottl"}},
		{[]string{"--client-name", "x"}, []string{"--client"}},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, stdout, stderr := runCLI(t, append([]string{"review", "--store", store}, c.args...)...)
			if code != exitUsage {
				t.Fatalf("exit %d, want %d\n%s%s", code, exitUsage, stdout, stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
		})
	}
}

func TestReviewRenderNeedsAReview(t *testing.T) {
	code, _, stderr := runCLI(t, "review", "--render", t.TempDir())
	if code != exitUsage || !strings.Contains(stderr, "not a review directory") {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
}

// An interrupted review says so, and claims nothing from the cell it cut
// short (issue 34 item 13: it said no mitigation could be tried here). The
// interrupt comes while the first cell's run draws its report, after the
// run was checked: whatever that run found, nothing after it ran.
func TestInterruptedReviewSaysSo(t *testing.T) {
	redistest.RequireBinary(t)
	store := t.TempDir()
	cmd, out := startCLI(t, []string{harness.HoldEnv + "=" + harness.PhaseReport}, "review", "--lock", "token", "--threats", "client-pause",
		"--seeds", "1", "--budget", "3m", "--store", store)
	waitFor(t, "the review's first run drawing its report", func() string {
		if !strings.Contains(out.String(), "holding in phase "+harness.PhaseReport) {
			return "the holding line"
		}
		return ""
	})
	cmd.Process.Signal(os.Interrupt)
	waitExit(t, cmd, out)
	if code := cmd.ProcessState.ExitCode(); code != exitNotMet {
		t.Fatalf("exit %d after SIGINT, want %d:\n%s", code, exitNotMet, out)
	}
	text := out.String()
	if !strings.Contains(text, "interrupted") || strings.Contains(text, "not found again") || strings.Contains(text, "could be tried here") {
		t.Fatalf("the interrupted review's verdict:\n%s", text)
	}
	if strings.Count(text, "seed 1 of 1...") != 1 {
		t.Fatalf("a cell ran after the interrupt:\n%s", text)
	}
}
