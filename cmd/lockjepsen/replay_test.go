package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockjepsen/lockjepsen/internal/redistest"
)

// shrink refuses a safe run with exit 2 and keeps nothing; replay and
// shrink refuse what is not a run directory.
func TestShrinkAndReplayRefuse(t *testing.T) {
	redistest.RequireBinary(t)
	store := t.TempDir()
	if code, out, stderr := runCLI(t, "test", "--time-limit", "1s", "--recovery", "0s", "--store", store, "--quiet"); code != exitMet {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	latest := filepath.Join(store, "latest")
	code, _, stderr := runCLI(t, "shrink", latest)
	if code != exitUsage || !strings.Contains(stderr, "nothing to shrink: the run was safe") {
		t.Errorf("shrink of a safe run: exit %d, %q", code, stderr)
	}
	entries, _ := os.ReadDir(store)
	if len(entries) != 2 { // the test's directory and latest
		t.Errorf("shrink of a safe run left entries in the store: %v", entries)
	}
	for _, cmd := range []string{"shrink", "replay"} {
		if code, _, stderr := runCLI(t, cmd, t.TempDir()); code != exitUsage || !strings.Contains(stderr, "not a run directory") {
			t.Errorf("%s of an empty directory: exit %d, %q", cmd, code, stderr)
		}
	}
	if code, _, stderr := runCLI(t, "shrink", latest, "--tries", "3/2"); code != exitUsage || !strings.Contains(stderr, "--tries") {
		t.Errorf("shrink --tries 3/2: exit %d, %q", code, stderr)
	}
}
