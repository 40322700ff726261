package harness

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/lockjepsen/lockjepsen/runfile"
)

// OwnerFile records the PID of the harness process that owns a run, so
// that a later run can tell a run in progress from one whose harness was
// killed.
const OwnerFile = "owner.pid"

func writeOwner(dir string) error {
	return os.WriteFile(filepath.Join(dir, OwnerFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644)
}

// reapOrphans stops the servers of runs in store whose harness died without
// stopping them (SIGKILL leaves no chance to clean up; Pdeathsig usually
// takes the servers down too, but not if the harness was stopped in some
// other way, or a server was started by an older version). A process is
// only killed when all of these hold: it is listed in the run's nodes.json,
// the run never finished (no run.json), the run's owner is gone, and the
// process's working directory lies inside the run directory — so a PID
// reused by an unrelated process is never touched. It returns what it did,
// for the user.
func reapOrphans(store string) []string {
	lists, _ := filepath.Glob(filepath.Join(store, "*", "*", runfile.NodesFile))
	var reaped []string
	for _, list := range lists {
		dir := filepath.Dir(list)
		if _, err := os.Stat(filepath.Join(dir, RunInfoFile)); err == nil {
			continue
		}
		if pid := readOwner(dir); pid > 0 && alive(pid) {
			continue // a run in progress
		}
		b, err := os.ReadFile(list)
		if err != nil {
			continue
		}
		var nodes []struct {
			Name string `json:"name"`
			PID  int    `json:"pid"`
		}
		if json.Unmarshal(b, &nodes) != nil {
			continue
		}
		absDir, err := filepath.Abs(dir)
		if err != nil {
			continue
		}
		for _, n := range nodes {
			if n.PID <= 0 || !alive(n.PID) {
				continue
			}
			cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", n.PID))
			if err != nil || !strings.HasPrefix(cwd, absDir+string(filepath.Separator)) {
				continue
			}
			if syscall.Kill(n.PID, syscall.SIGKILL) == nil {
				reaped = append(reaped, fmt.Sprintf("stopped %s (pid %d), left running by the killed run %s", n.Name, n.PID, dir))
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

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }
