package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/runfile"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
	"github.com/lockjepsen/lockjepsen/testkit/testutil"
)

// startCLI runs the CLI as a child process (the test binary doubles as it).
func startCLI(t *testing.T, env []string, args ...string) (*exec.Cmd, *testutil.SyncBuffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), "LOCKJEPSEN_BE_CLI=1"), env...)
	out := &testutil.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd, out
}

// waitFor polls within a deadline sized for a cold, loaded machine.
func waitFor(t *testing.T, what string, ready func() string) {
	t.Helper()
	testutil.WaitFor(t, what, 60*time.Second, ready)
}

func runDir(t *testing.T, store string) string {
	dirs, _ := filepath.Glob(filepath.Join(store, "*", "*", runfile.CompressedHistoryFile))
	if len(dirs) != 1 {
		return ""
	}
	return filepath.Dir(dirs[0])
}

// shortRun runs a quiet one-second test into store, the run that tests of
// stored runs start from, and fails the test unless it met its
// expectation.
func shortRun(t *testing.T, store string) {
	t.Helper()
	if code, stdout, stderr := runCLI(t, "test", "--time-limit", "1s", "--recovery", "0s", "--quiet", "--store", store); code != exitMet {
		t.Fatalf("a one-second run: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

// The first SIGINT stops what is running in every phase, keeps what was
// recorded, marks the run interrupted and exits 1; nothing is left
// running. Each case reaches its phase deterministically: a phase that
// lasts a minute, or LOCKJEPSEN_TEST_HOLD, which makes the harness wait at
// the start of a phase until it is interrupted.
func TestSignalInEveryPhase(t *testing.T) {
	redistest.RequireBinary(t)
	cases := []struct {
		phase string
		args  []string
		hold  bool
		// ready says what the child has not done yet before the signal.
		ready func(out, dir string) string
	}{
		{phase: harness.PhaseStartup, hold: true,
			args: []string{"test", "--system", "sentinel", "--time-limit", "60s"}},
		// A restart delayed by ten minutes must not hold up the interrupt.
		{phase: harness.PhaseFaults,
			args: []string{"test", "--nemesis", "kill", "--restart-delay", "10m", "--nemesis-interval", "100ms", "--time-limit", "60s"},
			ready: func(out, dir string) string {
				b, _ := readHistory(dir)
				if !bytes.Contains(b, []byte(`"f":"kill"`)) {
					return "a kill in the history"
				}
				return ""
			}},
		{phase: harness.PhaseRecovery,
			args: []string{"test", "--nemesis", "pause", "--nemesis-interval", "100ms", "--fault-duration", "100ms", "--time-limit", "1s", "--recovery", "60s"},
			ready: func(out, dir string) string {
				if !strings.Contains(out, "recovery phase") {
					return `the "recovery phase" line`
				}
				return ""
			}},
		{phase: harness.PhaseFinishing, hold: true,
			args: []string{"test", "--time-limit", "1s", "--recovery", "0s"}},
		// After the check, while the report is drawn (issue 34, item 9):
		// the run was checked whole, but it is interrupted all the same.
		{phase: harness.PhaseReport, hold: true,
			args: []string{"test", "--time-limit", "1s", "--recovery", "0s"}},
	}
	for _, c := range cases {
		t.Run(c.phase, func(t *testing.T) {
			store := t.TempDir()
			var env []string
			if c.hold {
				env = append(env, harness.HoldEnv+"="+c.phase)
			}
			cmd, out := startCLI(t, env, append(c.args, "--store", store)...)
			waitFor(t, "the run reaching its "+c.phase+" phase", func() string {
				dir := runDir(t, store)
				switch {
				case dir == "":
					return "a run directory"
				case c.hold && !strings.Contains(out.String(), "holding in phase "+c.phase):
					return "the harness holding in phase " + c.phase
				case c.ready != nil:
					return c.ready(out.String(), dir)
				}
				return ""
			})
			dir := runDir(t, store)
			nodes := nodePIDs(t, dir)
			cmd.Process.Signal(os.Interrupt)
			waitExit(t, cmd, out)
			if code := cmd.ProcessState.ExitCode(); code != exitNotMet {
				t.Fatalf("exit %d after SIGINT, want %d:\n%s", code, exitNotMet, out)
			}
			if strings.Contains(out.String(), "Expected safe: met.") {
				t.Fatalf("an interrupted run claims its expectation met:\n%s", out)
			}
			var stored harness.Results
			if err := runfile.ReadJSON(filepath.Join(dir, harness.ResultsFile), &stored); err == nil && (!stored.Interrupted || stored.MetExpectation) {
				t.Fatalf("results.json: interrupted %v, met %v; want interrupted, not met\n%s", stored.Interrupted, stored.MetExpectation, out)
			}
			var info harness.RunInfo
			if err := runfile.ReadJSON(filepath.Join(dir, harness.RunInfoFile), &info); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if !info.Interrupted || info.InterruptedIn != c.phase {
				t.Fatalf("run.json: interrupted %v in %q, want the %s phase\n%s", info.Interrupted, info.InterruptedIn, c.phase, out)
			}
			res, err := harness.CheckContext(t.Context(), dir, t.TempDir())
			if err != nil {
				t.Fatalf("the interrupted run's history cannot be checked: %v", err)
			}
			if !res.Interrupted || res.MetExpectation {
				t.Fatalf("a check of the interrupted run: interrupted %v, met %v", res.Interrupted, res.MetExpectation)
			}
			requireServersGone(t, nodes)
		})
	}
}

// SIGINT during `check` stops it with exit 1 and writes nothing.
func TestSignalDuringCheck(t *testing.T) {
	redistest.RequireBinary(t)
	store := t.TempDir()
	shortRun(t, store)
	dir := runDir(t, store)
	results := filepath.Join(dir, harness.ResultsFile)
	before, err := os.ReadFile(results)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(results)
	cmd, out := startCLI(t, []string{harness.HoldEnv + "=" + harness.PhaseCheck}, "check", dir)
	waitFor(t, "check starting", func() string {
		if !strings.Contains(out.String(), "checking ") {
			return `the "checking" line`
		}
		return ""
	})
	cmd.Process.Signal(os.Interrupt)
	waitExit(t, cmd, out)
	if code := cmd.ProcessState.ExitCode(); code != exitNotMet || !strings.Contains(out.String(), "interrupted") {
		t.Fatalf("exit %d, want %d, and a word on the interrupt:\n%s", code, exitNotMet, out)
	}
	if _, err := os.Stat(results); !os.IsNotExist(err) {
		t.Fatalf("an interrupted check wrote %s (%v)", results, err)
	}
	if len(before) == 0 {
		t.Fatal("the run wrote an empty results.json")
	}
}

func waitExit(t *testing.T, cmd *exec.Cmd, out *testutil.SyncBuffer) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		// Reaped here, not by startCLI's clean-up: two Waits race.
		cmd.Process.Kill()
		<-done
		t.Fatalf("no exit within 60s:\n%s", out)
	}
}

func nodePIDs(t *testing.T, dir string) []int {
	t.Helper()
	nodes, err := runfile.ReadNodes(dir)
	if err != nil {
		t.Fatalf("the run lists no servers: %v", err)
	}
	var pids []int
	for _, n := range nodes {
		if n.PID > 0 {
			pids = append(pids, n.PID)
		}
	}
	if len(pids) == 0 {
		t.Fatal("nodes.json lists no PID")
	}
	return pids
}

// requireServersGone fails the test if a server of an exited run still
// runs.
func requireServersGone(t *testing.T, pids []int) {
	t.Helper()
	for _, pid := range pids {
		if syscall.Kill(pid, 0) == nil {
			t.Fatalf("server pid %d still running after the run exited", pid)
		}
	}
}

// readHistory is a running harness's history so far: what it has flushed.
func readHistory(dir string) ([]byte, error) {
	f, err := history.Open(runfile.HistoryPath(dir))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

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

// The first SIGINT ends start-up while a client is still being asked for
// its handshake: a client that never answers used to hold Ctrl-C for the
// whole start timeout, twice (87 s in test, 110 s in review). Nothing was
// run, so nothing becomes the store's latest run.
func TestInterruptDuringClientProbe(t *testing.T) {
	store := t.TempDir()
	cmd, out := startCLI(t, nil, "test", "--client", "sleep 1000", "--store", store, "--time-limit", "1s")
	waitFor(t, "the client probe", func() string {
		if probing(cmd.Process.Pid) {
			return ""
		}
		return "no sleep 1000 started yet"
	})
	start := time.Now()
	cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	code := cmd.ProcessState.ExitCode()
	if err == nil || code != exitNotMet || !strings.Contains(out.String(), "nothing was run") {
		t.Fatalf("exit %d after SIGINT, want %d with 'nothing was run':\n%s", code, exitNotMet, out)
	}
	// Not a timing claim about a loaded machine: without the fix the
	// interrupt waits out the 30 s start timeout.
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("the interrupt took %v", took)
	}
	if _, err := os.Lstat(filepath.Join(store, runfile.LatestLink)); err == nil {
		t.Errorf("an interrupted start-up pointed %s/latest at a run", store)
	}
}

// probing reports whether a child of pid runs "sleep 1000".
func probing(pid int) bool {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if f := strings.Fields(string(stat)); len(f) > 3 && f[3] == fmt.Sprint(pid) && strings.Contains(string(cmdline), "sleep\x001000") {
			return true
		}
	}
	return false
}
