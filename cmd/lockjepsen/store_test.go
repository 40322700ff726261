package main

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

// smallFS mounts a tmpfs of size bytes for the test; readOnly remounts it
// read-only once fill has put files in it. Mounting needs root, which CI
// has; elsewhere the test is skipped.
func smallFS(t *testing.T, size string, fill func(dir string), readOnly bool) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small file system needs root")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Fatalf("mount a %s tmpfs on %s: %v", size, dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	if fill != nil {
		fill(dir)
	}
	if readOnly {
		if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT|syscall.MS_RDONLY, "size="+size); err != nil {
			t.Fatalf("remount %s read-only: %v", dir, err)
		}
	}
	return dir
}

// fillDisk writes a file of zeros into dir until its file system is full.
func fillDisk(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatalf("fill the disk: %v", err)
	}
	defer f.Close()
	zeros := make([]byte, 64<<10)
	for {
		if _, err := f.Write(zeros); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill the disk: %v", err)
			}
			return
		}
	}
}

// tmpFiles lists the temporary files left anywhere under dir.
func tmpFiles(dir string) []string {
	var found []string
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".tmp") {
			found = append(found, path)
		}
		return nil
	})
	return found
}

// A run whose store fills up stops at the first failed write of its
// history, exits 3 saying so, leaves no temporary file, and what it had
// recorded can be checked once there is room.
func TestFullDiskFailsTheRunFast(t *testing.T) {
	redistest.RequireBinary(t)
	store := smallFS(t, "3m", nil, false)
	cmd, out := startCLI(t, nil, "test", "--time-limit", "10m", "--store", store)
	// The disk is filled once the clients run, whatever the machine's
	// speed (a compressed history alone took over a minute to fill 3 MB
	// on a loaded machine): a run that ignored it would last its ten
	// minutes.
	waitFor(t, "operations in the history", func() string {
		dir := runDir(t, store)
		if dir == "" {
			return "the run directory; output:\n" + out.String()
		}
		if b, _ := readHistory(dir); !bytes.Contains(b, []byte(`"type":"ok"`)) {
			return "a completed operation flushed to the history; output:\n" + out.String()
		}
		return ""
	})
	fillDisk(t, store)
	waitExit(t, cmd, out)
	if code := cmd.ProcessState.ExitCode(); code != exitHarness || !strings.Contains(out.String(), "no space left on device") {
		t.Fatalf("exit %d, want %d and the disk named:\n%s", code, exitHarness, out)
	}
	if left := tmpFiles(store); len(left) > 0 {
		t.Fatalf("temporary files left on the full disk: %v", left)
	}
	dir := runDir(t, store)
	if dir == "" {
		t.Fatalf("no run directory with a history in %s", store)
	}
	requireServersGone(t, nodePIDs(t, dir))
	copyDir := filepath.Join(t.TempDir(), "run")
	if err := os.CopyFS(copyDir, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	res, err := harness.Check(copyDir)
	if err != nil {
		t.Fatalf("the history recorded before the disk filled cannot be checked: %v", err)
	}
	if res.Ops == 0 {
		t.Fatal("the check of the full disk's history saw no operation")
	}
}

// check on a read-only run prints the verdict; results.json goes where
// --out says, or nowhere, and the user is told which.
func TestCheckAReadOnlyRun(t *testing.T) {
	redistest.RequireBinary(t)
	var runPath string
	ro := smallFS(t, "64m", func(mnt string) {
		shortRun(t, mnt)
		runPath = runDir(t, mnt)
	}, true)
	if runPath == "" || !strings.HasPrefix(runPath, ro) {
		t.Fatalf("no run in the read-only store %s", ro)
	}
	code, stdout, stderr := runCLI(t, "check", runPath)
	if code != exitMet || !strings.Contains(stdout, "SAFE") || !strings.Contains(stderr, "could not write") || !strings.Contains(stderr, "--out") {
		t.Fatalf("check of a read-only run: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	out := t.TempDir()
	code, stdout, stderr = runCLI(t, "check", "--out", out, runPath)
	if code != exitMet || strings.Contains(stderr, "could not write") {
		t.Fatalf("check --out: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, harness.ResultsFile)); err != nil {
		t.Fatalf("check --out wrote no results: %v", err)
	}
}

// store/latest moves to a run only once it has finished, atomically.
func TestLatestPointsAtAFinishedRun(t *testing.T) {
	redistest.RequireBinary(t)
	store := t.TempDir()
	cmd, out := startCLI(t, []string{harness.HoldEnv + "=" + harness.PhaseStartup}, "test", "--time-limit", "1s", "--store", store)
	waitFor(t, "the run starting", func() string {
		if !strings.Contains(out.String(), "holding in phase") {
			return "the harness holding in start-up"
		}
		return ""
	})
	if _, err := os.Lstat(filepath.Join(store, "latest")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("store/latest exists while the first run has not finished (%v)", err)
	}
	cmd.Process.Signal(os.Interrupt)
	waitExit(t, cmd, out)
	shortRun(t, store)
	if code, stdout, stderr := runCLI(t, "check", filepath.Join(store, "latest")); code != exitMet {
		t.Fatalf("check store/latest: exit %d\n%s\n%s", code, stdout, stderr)
	}
}
