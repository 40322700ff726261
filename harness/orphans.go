package harness

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster/local"
	"github.com/lockjepsen/lockjepsen/cluster/local/fakeclock"
	"github.com/lockjepsen/lockjepsen/runfile"
)

// OwnerFile records the PID of the harness process that owns a run, so
// that a later run can tell a run in progress from one whose harness was
// killed.
const OwnerFile = "owner.pid"

func writeOwner(dir string) error {
	return os.WriteFile(filepath.Join(dir, OwnerFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644)
}

// reapWait bounds how long reapOrphans waits for a process it killed to be
// gone before it removes the files that process left.
const reapWait = 5 * time.Second

// reapOrphans cleans up after runs in store whose harness died without
// doing so itself (SIGKILL leaves it no chance; Pdeathsig usually takes
// the servers down too, but not if the harness was stopped in some other
// way, or a server was started by an older version). A run is such a run
// when it never finished (no run.json) and its owner is gone. For each:
//
//   - A process listed in its nodes.json that still runs is killed, if its
//     working directory lies inside the run directory, so that a PID
//     reused by an unrelated process is never touched.
//   - For each listed PID whose process is gone (or has been killed above
//     and is now gone), libfaketime's shared-memory files named for that
//     PID (/dev/shm/faketime_shm_<pid>, /dev/shm/sem.faketime_sem_<pid>),
//     which a clock-faulted server killed by SIGKILL leaves behind, are
//     removed. A PID that belongs to a live process keeps its files: they
//     may be that process's.
//   - Once no listed process runs, the disk etcd members preallocated for
//     their write-ahead logs and never wrote is given back
//     (local.TrimEtcdRun; Close does it for a run that ends normally).
//
// It returns what it did, for the user.
func reapOrphans(store string) []string {
	lists, _ := filepath.Glob(filepath.Join(store, "*", "*", runfile.NodesFile))
	var reaped []string
	for _, list := range lists {
		dir := filepath.Dir(list)
		if _, err := os.Stat(filepath.Join(dir, RunInfoFile)); err == nil {
			continue
		}
		if pid := readOwner(dir); pid > 0 && running(pid) {
			continue // a run in progress
		}
		nodes, err := runfile.ReadNodes(dir)
		if err != nil {
			continue
		}
		absDir, err := filepath.Abs(dir)
		if err != nil {
			continue
		}
		var killed []int
		for _, n := range nodes {
			if n.PID <= 0 || !running(n.PID) {
				continue
			}
			cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", n.PID))
			if err != nil || !strings.HasPrefix(cwd, absDir+string(filepath.Separator)) {
				continue
			}
			if syscall.Kill(n.PID, syscall.SIGKILL) == nil {
				killed = append(killed, n.PID)
				reaped = append(reaped, fmt.Sprintf("stopped %s (pid %d), left running by the killed run %s", n.Name, n.PID, dir))
			}
		}
		waitGone(killed, reapWait)
		anyRunning := false
		for _, n := range nodes {
			if n.PID <= 0 {
				continue
			}
			if running(n.PID) {
				// Not gone in time, or the PID now belongs to another
				// process: its files may be in use.
				anyRunning = true
				continue
			}
			for _, f := range fakeclock.ShmFiles(n.PID) {
				if os.Remove(f) == nil {
					reaped = append(reaped, fmt.Sprintf("removed %s left by the killed run %s", f, dir))
				}
			}
		}
		if !anyRunning {
			if freed, _ := local.TrimEtcdRun(dir); freed > 0 {
				reaped = append(reaped, fmt.Sprintf("freed %.0f MB of disk preallocated for the etcd write-ahead logs of the killed run %s", float64(freed)/1e6, dir))
			}
		}
	}
	return reaped
}

func readOwner(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, OwnerFile))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// alive reports whether a process with this PID exists (one of another
// user's, which may not be signalled, too).
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}

// running reports whether pid is a process that has not exited: alive, and
// not a zombie (an exited process whose parent has not reaped it yet; the
// orphans of a killed harness wait for init to reap them, which can take
// seconds). A zombie's PID cannot be reused until it is reaped, so files
// named for it are its own.
func running(pid int) bool {
	if !alive(pid) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !os.IsNotExist(err)
	}
	// pid (comm) state ...: comm may hold spaces and parentheses, so the
	// state follows the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return true
	}
	return b[i+2] != 'Z' && b[i+2] != 'X'
}

// waitGone polls until none of pids runs, or d passes.
func waitGone(pids []int, d time.Duration) {
	deadline := time.Now().Add(d)
	for _, pid := range pids {
		for running(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
}
