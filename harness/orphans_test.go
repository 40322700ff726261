package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/fakeclock"
	"github.com/lockjepsen/lockjepsen/cluster/local"
	"github.com/lockjepsen/lockjepsen/internal/procstate"
	"github.com/lockjepsen/lockjepsen/testkit/testutil"
)

// localReapers clean up after killed runs of the local backend.
var localReapers = []cluster.RunReaper{local.Backend{}}

// requireClockFaults skips (or, with LOCKJEPSEN_REQUIRE_REDIS, fails) a
// test that needs redis-server with a fake clock.
func requireClockFaults(t *testing.T) {
	t.Helper()
	_, err := local.FindRedisServer()
	if err == nil {
		_, err = fakeclock.Prepare(context.Background(), filepath.Join(t.TempDir(), "cache"))
	}
	if err != nil {
		if os.Getenv("LOCKJEPSEN_REQUIRE_REDIS") != "" {
			t.Fatalf("redis-server with clock faults is required: %v", err)
		}
		t.Skipf("skipping: %v", err)
	}
}

// TestOrphanFaketimeFilesRemoved: the harness (the real CLI, a child
// process) is SIGKILLed during a clock fault; its redis-server ran under
// libfaketime, and its shared-memory files outlive it. The next run's
// reapOrphans removes them and says so.
func TestOrphanFaketimeFilesRemoved(t *testing.T) {
	requireClockFaults(t)
	tmp := t.TempDir()
	store := filepath.Join(tmp, "store")
	bin := testutil.BuildCLI(t)
	start := time.Now()

	var output testutil.SyncBuffer
	child := exec.Command(bin, "test", "--system", "single", "--lock", "token",
		"--nemesis", "clock-jump", "--nemesis-interval", "200ms", "--fault-duration", "10s",
		"--time-limit", "60s", "--store", store, "--quiet")
	child.Stdout, child.Stderr = &output, &output
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	killChild := func() {
		_ = child.Process.Kill() // by PID
		<-exited
	}
	var serverPIDs []int
	var shm []string
	// Whatever happens, leave no server and no shm file behind: the
	// orphaned server dies with its harness (Pdeathsig), but only if
	// nothing goes wrong; these are the PIDs of this test's run only.
	t.Cleanup(func() {
		for _, pid := range serverPIDs {
			if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err == nil && strings.HasPrefix(cwd, tmp) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		procstate.WaitGone(serverPIDs, 10*time.Second)
		for _, pid := range serverPIDs {
			if !procstate.Running(pid) {
				fakeclock.CleanupShm(pid)
			}
		}
	})

	// Wait for the run's server, its libfaketime files, and a clock fault
	// in progress: a cold build cache and a loaded machine make each slow.
	var runDir, missing string
	deadline := time.Now().Add(90 * time.Second)
	for {
		missing = ""
		lists, _ := filepath.Glob(filepath.Join(store, "*", "*", "nodes.json"))
		switch {
		case len(lists) == 0:
			missing = "the run's nodes.json"
		default:
			runDir = filepath.Dir(lists[0])
			serverPIDs = recordedPIDs(t, lists[0])
			shm = nil
			for _, pid := range serverPIDs {
				for _, f := range fakeclock.ShmFiles(pid) {
					if _, err := os.Stat(f); err == nil {
						shm = append(shm, f)
					}
				}
			}
			offset, _ := os.ReadFile(filepath.Join(runDir, "nodes", "n1", "faketime"))
			switch {
			case len(shm) != 2:
				missing = fmt.Sprintf("the libfaketime files of the server (pids %v; found %v)", serverPIDs, shm)
			case len(offset) == 0 || bytes.HasPrefix(offset, []byte("+0.000000 ")):
				missing = fmt.Sprintf("a clock fault in progress (n1's offset file: %q)", offset)
			}
		}
		if missing == "" {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("the harness exited (%v) before %s appeared:\n%s", err, missing, output.String())
		default:
		}
		if time.Now().After(deadline) {
			killChild()
			t.Fatalf("no %s after %v:\n%s", missing, time.Since(start).Round(time.Second), output.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("server pids %v, files %v, fault in progress after %v", serverPIDs, shm, time.Since(start).Round(time.Millisecond))

	killChild()
	lines := reapOrphans(store, localReapers)
	t.Logf("reapOrphans: %q", lines)
	for _, f := range shm {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("%s is still there: %v", f, err)
		}
		want := fmt.Sprintf("removed %s left by the killed run %s", f, runDir)
		found := false
		for _, l := range lines {
			found = found || l == want
		}
		if !found {
			t.Errorf("no line %q in %q", want, lines)
		}
	}
	for _, pid := range serverPIDs {
		if procstate.Running(pid) {
			t.Errorf("server pid %d still running after reapOrphans", pid)
		}
	}
	if again := reapOrphans(store, localReapers); len(again) != 0 {
		t.Errorf("a second reapOrphans did something: %q", again)
	}
}

func recordedPIDs(t *testing.T, nodesJSON string) []int {
	b, err := os.ReadFile(nodesJSON)
	if err != nil {
		return nil // being written
	}
	var nodes []struct {
		PID int `json:"pid"`
	}
	if json.Unmarshal(b, &nodes) != nil {
		return nil
	}
	var out []int
	for _, n := range nodes {
		if n.PID > 0 {
			out = append(out, n.PID)
		}
	}
	return out
}

// TestOrphanFilesOfLiveProcessesKept: the files of a killed run are
// removed only for PIDs that are gone; a listed PID that now belongs to a
// live process (this test's, whose working directory is not the run's)
// keeps its files and is not killed. With every listed process gone, an
// etcd member's preallocated write-ahead log is given back.
func TestOrphanFilesOfLiveProcessesKept(t *testing.T) {
	if _, err := os.Stat(fakeclock.ShmDir); err != nil {
		t.Skipf("no %s: %v", fakeclock.ShmDir, err)
	}
	store := t.TempDir()
	run := filepath.Join(store, "test", "20260101T000000.000Z")
	wal := filepath.Join(run, "nodes", "n2", "data", "member", "wal")
	if err := os.MkdirAll(wal, 0o755); err != nil {
		t.Fatal(err)
	}
	// A PID that is gone: a process that has exited and been reaped.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	dead, live := gone.Process.Pid, os.Getpid()
	nodes := fmt.Sprintf(`[{"name":"n1","pid":%d},{"name":"n2","pid":%d}]`, live, dead)
	if err := os.WriteFile(filepath.Join(run, "nodes.json"), []byte(nodes), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(run, OwnerFile), []byte(fmt.Sprintf("%d\n", dead)), 0o644); err != nil {
		t.Fatal(err)
	}
	// Stand-ins for libfaketime's files, made only where none exist (and
	// for the dead PID only while no process has it), removed at the end
	// whatever happens.
	liveFiles := fakeclock.ShmFiles(live)
	deadFiles := fakeclock.ShmFiles(dead)
	t.Cleanup(func() {
		for _, f := range append(liveFiles, deadFiles...) {
			os.Remove(f)
		}
	})
	for _, f := range append(append([]string{}, liveFiles...), deadFiles...) {
		if _, err := os.Stat(f); err == nil {
			t.Skipf("%s exists already: not this test's to touch", f)
		}
	}
	if procstate.Alive(dead) {
		t.Skipf("pid %d was reused already", dead)
	}
	for _, f := range append(append([]string{}, liveFiles...), deadFiles...) {
		if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	spare, err := os.Create(filepath.Join(wal, "0.tmp"))
	if err != nil {
		t.Fatal(err)
	}
	fallocErr := syscall.Fallocate(int(spare.Fd()), 0, 0, 4<<20)
	spare.Close()

	lines := reapOrphans(store, localReapers)
	t.Logf("reapOrphans: %q", lines)
	for _, f := range liveFiles {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("the live process's %s was removed: %v", f, err)
		}
	}
	for _, f := range deadFiles {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("%s of the dead pid is still there: %v", f, err)
		}
	}
	want := []string{
		fmt.Sprintf("removed %s left by the killed run %s", deadFiles[0], run),
		fmt.Sprintf("removed %s left by the killed run %s", deadFiles[1], run),
	}
	if len(lines) != 2 || lines[0] != want[0] || lines[1] != want[1] {
		t.Errorf("lines %q, want %q", lines, want)
	}
	// The live PID keeps its files; so the run is not done, and its etcd
	// data waits for a later clean-up.
	if _, err := os.Stat(filepath.Join(wal, "0.tmp")); err != nil {
		t.Errorf("etcd data trimmed while a listed PID runs: %v", err)
	}

	// Once the listed PID is another that is gone too, the data is trimmed.
	nodes = fmt.Sprintf(`[{"name":"n2","pid":%d}]`, dead)
	if err := os.WriteFile(filepath.Join(run, "nodes.json"), []byte(nodes), 0o644); err != nil {
		t.Fatal(err)
	}
	lines = reapOrphans(store, localReapers)
	if fallocErr != nil {
		t.Logf("no fallocate here (%v): the trim is not checked", fallocErr)
		return
	}
	if _, err := os.Stat(filepath.Join(wal, "0.tmp")); !os.IsNotExist(err) {
		t.Errorf("the spare WAL segment of a killed etcd run is still there: %v", err)
	}
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "freed 4 MB of disk preallocated for the etcd write-ahead logs of the killed run "+run) {
		t.Errorf("lines %q, want one saying 4 MB were freed", lines)
	}
}
