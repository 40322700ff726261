package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/internal/redistest"
	"github.com/lockjepsen/lockjepsen/internal/testutil"
)

// processesWith lists the processes whose command line contains marker.
func processesWith(marker string) []string {
	entries, _ := os.ReadDir("/proc")
	var found []string
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), marker) {
			found = append(found, e.Name()+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	return found
}

// A harness killed with SIGKILL, which gives it no chance to clean up,
// leaves no client process running: each is started with a parent-death
// signal.
func TestKilledHarnessLeavesNoClient(t *testing.T) {
	redistest.RequireBinary(t)
	if _, err := exec.Command("/usr/bin/python3", "-c", "import redis").CombinedOutput(); err != nil {
		t.Skip("python3-redis is missing: run bash scripts/deps")
	}
	// The test binary is the CLI (startCLI): no build of its own, which a
	// cold cache on a loaded machine stretched past five minutes.
	root := testutil.ModuleRoot(t)
	marker := fmt.Sprintf("lockjepsen-test-client-%d", os.Getpid())
	cmd, out := startCLI(t, nil, "test", "--client", "/usr/bin/python3 "+filepath.Join(root, "examples/python/token_lock.py"),
		"--client-arg", marker, "--time-limit", "5m", "--store", t.TempDir())
	testutil.WaitFor(t, "the clients running", 120*time.Second, func() string {
		if n := len(processesWith(marker)); n < 10 || !strings.Contains(out.String(), "running 10 clients") {
			return fmt.Sprintf("%d of 10 client processes, output:\n%s", n, out.String())
		}
		return ""
	})
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	testutil.WaitFor(t, "the client processes gone after the harness was killed", 30*time.Second, func() string {
		if left := processesWith(marker); len(left) > 0 {
			return strings.Join(left, "\n")
		}
		return ""
	})
}
