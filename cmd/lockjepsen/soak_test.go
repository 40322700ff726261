package main

import (
	"bytes"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/runfile"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

// A soak killed before its end (SIGKILL: no chance to clean up) leaves a
// checkpoint with the violations it had seen and a history whose flushed
// prefix check judges, as a soak that dies at minute 50 must. The lock
// releases with a plain DEL and clients stall past their lease
// (client-pause): a stalled holder's DEL deletes the next holder's key,
// so violations follow from the mechanism; the 10-minute soak is killed
// as soon as the checkpoint shows one, however long that takes.
func TestKilledSoakLeavesCheckpointAndCheckableHistory(t *testing.T) {
	redistest.RequireBinary(t)
	store := t.TempDir()
	cmd, out := startCLI(t, nil, "soak", "--duration", "10m", "--checkpoint-every", "200ms",
		"--lock", "setnx-del", "--nemesis", "client-pause", "--store", store)
	var cp runfile.Checkpoint
	var dir string
	waitFor(t, "a checkpoint with a violation", func() string {
		if dir = runDir(t, store); dir == "" {
			return "the run directory; output:\n" + out.String()
		}
		if err := runfile.ReadJSON(filepath.Join(dir, runfile.CheckpointFile), &cp); err != nil {
			return "checkpoint.json: " + err.Error()
		}
		if cp.Violations == 0 || cp.FirstViolation == nil {
			return "a violation in checkpoint.json (events so far: " + strconv.FormatInt(cp.Events, 10) + ")"
		}
		return ""
	})
	if cp.Final || cp.Phase != harness.PhaseFaults || cp.Events == 0 {
		t.Errorf("a checkpoint of a running soak: %+v", cp)
	}
	pids := nodePIDs(t, dir)
	// The kill must come once the history holds what the checkpoint saw:
	// the recorder flushes every 200 ms, the checkpoint may be newer.
	waitFor(t, "the checkpoint's events flushed to the history", func() string {
		b, err := readHistory(dir)
		if n := int64(bytes.Count(b, []byte("\n"))); err != nil || n < cp.Events {
			return "events in the history: " + strconv.FormatInt(n, 10) + " of " + strconv.FormatInt(cp.Events, 10)
		}
		return ""
	})
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()

	code, stdout, stderr := runCLI(t, "check", dir)
	if code != exitNotMet || !strings.Contains(stdout+stderr, "UNSAFE") {
		t.Fatalf("check of the killed soak: exit %d, want %d and UNSAFE:\n%s\n%s", code, exitNotMet, stdout, stderr)
	}
	var res harness.Results
	if err := runfile.ReadJSON(filepath.Join(dir, harness.ResultsFile), &res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Incomplete, "never finished") || res.Violations == 0 {
		t.Errorf("results of the prefix: incomplete %q, %d violations (the checkpoint had %d)", res.Incomplete, res.Violations, cp.Violations)
	}
	waitFor(t, "the killed soak's servers gone", func() string {
		for _, pid := range pids {
			if syscall.Kill(pid, 0) == nil {
				return "server " + strconv.Itoa(pid) + " still running"
			}
		}
		return ""
	})
}
