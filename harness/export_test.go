package harness

import (
	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/history"
)

// ReplayFirstStop feeds a stored history to the decider of
// --stop-on-first-violation, without grace, and returns the index of the
// event it would stop the run at (-1: it would not), what stopped it and
// why: a recorded run replayed must stop where it stopped.
func ReplayFirstStop(ops []history.Op) (index int64, by, why string) {
	fs := newFirstStop(false, checker.Options{})
	for _, op := range ops {
		if act, b, w := fs.observe(op); act == stopNow {
			return op.Index, b, w
		}
	}
	return -1, "", ""
}
