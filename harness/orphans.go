package harness

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/internal/procstate"
	"github.com/lockjepsen/lockjepsen/runfile"
)

// OwnerFile records the PID of the harness process that owns a run, so
// that a later run can tell a run in progress from one whose harness was
// killed.
const OwnerFile = "owner.pid"

func writeOwner(dir string) error {
	return os.WriteFile(filepath.Join(dir, OwnerFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644)
}

// reapOrphans cleans up after runs in store whose harness died without
// doing so itself. A run is such a run when it never finished (no
// run.json) and its owner is gone; each reaper (the backends that ran
// processes of their own here) is given the processes it listed in its
// nodes.json. It returns what it did, for the user.
func reapOrphans(store string, reapers []cluster.RunReaper) []string {
	lists, _ := filepath.Glob(filepath.Join(store, "*", "*", runfile.NodesFile))
	var reaped []string
	for _, list := range lists {
		dir := filepath.Dir(list)
		if _, err := os.Stat(filepath.Join(dir, RunInfoFile)); err == nil {
			continue
		}
		if pid := readOwner(dir); pid > 0 && procstate.Running(pid) {
			continue // a run in progress
		}
		nodes, err := runfile.ReadNodes(dir)
		if err != nil {
			continue
		}
		for _, r := range reapers {
			reaped = append(reaped, r.ReapRun(dir, nodes)...)
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
