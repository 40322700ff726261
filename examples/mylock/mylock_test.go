package mylock_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/examples/mylock"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/lockjepsentest"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/runfile"
)

// factory builds one client's lock from the connection lockjepsen gives it.
// MYLOCK_PLAIN_DEL=1 swaps in the broken release, to see the test fail and
// tell the story:
//
//	MYLOCK_PLAIN_DEL=1 go test ./examples/mylock
func factory(nodes []locks.Conn, process int) (locks.Locker, error) {
	opts := mylock.Options{PlainDEL: plainDEL()}
	return mylock.New(nodes[0].Client, fmt.Sprintf("p%d", process), opts), nil
}

func plainDEL() bool { return os.Getenv("MYLOCK_PLAIN_DEL") == "1" }

// A client stalls inside its critical section past its lease (a GC pause):
// with compare-and-delete its late release deletes nothing of anyone else's.
func TestMyLockUnderClientPauses(t *testing.T) {
	o := lockjepsentest.Options{
		Locker:  factory,
		Nemesis: []string{"client-pause"},
	}
	if plainDEL() {
		// The broken release must fail the test, not just usually: each
		// pause outlasts the staller's lease, and its plain DEL then
		// deletes whoever holds the lock. Stop at the first violation,
		// within seconds, and give it a minute to come.
		o.StopOnFirstViolation, o.TimeLimit = true, time.Minute
	}
	lockjepsentest.Run(t, o)
}

// The server crashes and restarts after a TTL, with no persistence: every
// lease it forgot had expired anyway. A named scenario gives the faults and
// timings; the lock is ours.
func TestMyLockUnderDelayedRestarts(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	lockjepsentest.Run(t, lockjepsentest.Options{
		Locker:   factory,
		Scenario: "crash-delayed-restart",
	})
}

// A lock that dials Redis itself, from the node's address, gets no stamp
// from lockjepsen's clients: its leases stamp their own start
// (locks.Started). Every grant and extend of a run with renewals must
// carry that stamp, between its invocation and its answer, so that the
// lease model counts the TTL from the lock's request rather than from
// the invocation, which a loaded machine makes earlier.
func TestMyLockDialingItsOwnClient(t *testing.T) {
	out := lockjepsentest.Run(t, lockjepsentest.Options{
		Locker: func(nodes []locks.Conn, process int) (locks.Locker, error) {
			return mylock.Dial(nodes[0].Addr, fmt.Sprintf("p%d", process), mylock.Options{}), nil
		},
		TimeLimit: 2 * time.Second,
		Configure: func(c *harness.Config) { c.Workload = "renew" },
	})
	res, err := history.ReadFile(runfile.HistoryPath(out.Dir))
	if err != nil {
		t.Fatal(err)
	}
	invoked := map[int]int64{}
	stamped := map[string]int{}
	for _, op := range res.Ops {
		switch {
		case op.Type == history.Invoke:
			invoked[op.Process] = op.Time
		case op.Type == history.OK && (op.F == history.Acquire || op.F == history.Extend):
			v := op.Value
			if v == nil || v.Started == nil || *v.Started < invoked[op.Process] || *v.Started > op.Time {
				t.Fatalf("event %s has no started stamp between its invoke and its answer: %+v", op, v)
			}
			stamped[op.F]++
		}
	}
	if stamped[history.Acquire] == 0 || stamped[history.Extend] == 0 {
		t.Fatalf("stamped %v: the run granted or extended nothing", stamped)
	}
	t.Logf("stamped %v", stamped)
}
