// Package testutil holds what tests across packages need to drive the
// real CLI as a child process: a buffer it can write while the test reads
// it, a bounded build of the CLI, and bounded commands.
package testutil

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// CLIBuildTimeout bounds `go build ./cmd/lockjepsen`: the program and its
// dependencies compile from a cold build cache in a minute or two on an
// idle 2-core machine; beside a clean CI run's other packages (docker
// image builds among them) one took over five minutes. A failure
// deadline, not an expectation.
const CLIBuildTimeout = 15 * time.Minute

// SyncBuffer is a bytes.Buffer that a child process writes while the test
// reads it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *SyncBuffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}

// ModuleRoot is the project's root: the directory of go.work, which ties
// the core, contrib and CLI modules together, or of go.mod outside the
// workspace.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	for _, v := range []string{"GOWORK", "GOMOD"} {
		out, err := exec.Command("go", "env", v).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", v, err)
		}
		if path := strings.TrimSpace(string(out)); path != "" && path != "off" && path != os.DevNull {
			return filepath.Dir(path)
		}
	}
	t.Fatal("go env: neither GOWORK nor GOMOD names a file")
	return ""
}

// CLIEnv names a lockjepsen binary built before the tests (scripts/test
// does, with -race, reusing vet's build of the dependencies): building it
// inside a test compiled the whole dependency graph once more beside the
// other packages' tests, and a loaded clean-cache CI run spent over six
// minutes of a package's ten there.
const CLIEnv = "LOCKJEPSEN_CLI"

// BuildCLI is the binary CLIEnv names, or else builds cmd/lockjepsen into
// the test's temporary directory.
func BuildCLI(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv(CLIEnv); bin != "" {
		if st, err := os.Stat(bin); err != nil || st.Mode()&0o111 == 0 {
			t.Fatalf("%s=%s is not an executable lockjepsen: %v", CLIEnv, bin, err)
		}
		return bin
	}
	bin := filepath.Join(t.TempDir(), "lockjepsen")
	start := time.Now()
	if err := RunBounded(CLIBuildTimeout, "go build ./cmd/lockjepsen", ModuleRoot(t), "go", "build", "-o", bin, "./cmd/lockjepsen"); err != nil {
		t.Fatal(err)
	}
	t.Logf("built the CLI in %v", time.Since(start).Round(time.Millisecond))
	return bin
}

// RunBounded runs a command in dir and gives up after timeout, saying so
// with the output so far. The command gets SIGTERM first, to clean up.
func RunBounded(timeout time.Duration, what, dir, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	out, err := cmd.CombinedOutput()
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("%s did not finish within %s; its output so far:\n%s", what, timeout, out)
	case err != nil:
		return fmt.Errorf("%s: %v (after %s)\n%s", what, err, time.Since(start).Round(time.Millisecond), out)
	}
	return nil
}

// WaitFor polls until ready says "" (else what is still missing), for at
// most timeout, and fails the test naming what was missing.
func WaitFor(t testing.TB, what string, timeout time.Duration, ready func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		missing := ready()
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still missing after %s: %s", what, timeout, missing)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
