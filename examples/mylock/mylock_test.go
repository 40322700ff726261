package mylock_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/examples/mylock"
	"github.com/lockjepsen/lockjepsen/lockjepsentest"
	"github.com/lockjepsen/lockjepsen/locks"
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
