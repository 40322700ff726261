package local

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/fakeclock"
	"github.com/lockjepsen/lockjepsen/internal/procstate"
)

func init() { cluster.SetDefaultBackend(Backend{}) }

var _ cluster.RunReaper = Backend{}

// reapWait bounds how long ReapRun waits for a process it killed to be
// gone before it removes the files that process left.
const reapWait = 5 * time.Second

// ReapRun cleans up after a run in dir whose harness was killed (SIGKILL
// leaves it no chance; Pdeathsig usually takes the servers down too, but
// not if the harness was stopped in some other way, or a server was
// started by an older version):
//
//   - A listed process that still runs is killed, if its working directory
//     lies inside dir, so that a PID reused by an unrelated process is
//     never touched.
//   - For each listed PID whose process is gone (or has been killed above
//     and is now gone), libfaketime's shared-memory files named for that
//     PID, which a clock-faulted server killed by SIGKILL leaves behind,
//     are removed. A PID that belongs to a live process keeps its files:
//     they may be that process's.
//   - Once no listed process runs, the disk etcd members preallocated for
//     their write-ahead logs and never wrote is given back (TrimEtcdRun;
//     Close does it for a run that ends normally).
func (Backend) ReapRun(dir string, nodes []cluster.Node) []string {
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return nil
	}
	var reaped []string
	var killed []int
	for _, n := range nodes {
		if n.PID <= 0 || !procstate.Running(n.PID) {
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
	procstate.WaitGone(killed, reapWait)
	anyRunning := false
	for _, n := range nodes {
		if n.PID <= 0 {
			continue
		}
		if procstate.Running(n.PID) {
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
		if freed, _ := TrimEtcdRun(dir); freed > 0 {
			reaped = append(reaped, fmt.Sprintf("freed %.0f MB of disk preallocated for the etcd write-ahead logs of the killed run %s", float64(freed)/1e6, dir))
		}
	}
	return reaped
}
