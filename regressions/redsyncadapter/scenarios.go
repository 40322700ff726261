package redsyncadapter

import (
	"time"

	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/lockjepsentest"
)

// The track record's scenarios, declared once for every pinned version and
// the current one: "the current version is safe under the same scenario"
// then holds by construction, not by keeping copies in step.

// UnlockAfterExpiry makes every hold outlast the TTL, so that every release
// comes after the key expired: a correct Unlock reports each as a failure.
func UnlockAfterExpiry(lock string, newLock harness.LockerFactory, expect string) lockjepsentest.Options {
	return lockjepsentest.Options{
		Locker: newLock, LockName: lock, System: "redlock", Expect: expect,
		TimeLimit: 3 * time.Second, Recovery: 500 * time.Millisecond,
		Configure: func(c *harness.Config) { c.LongHoldRate = 1 },
	}
}

// PausedNodeRenewals pauses one node of five for the whole run while the
// holders renew: every extension's touch on that node waits out its
// timeout, which a correct Extend subtracts from the validity and does not
// take for a lost lock.
func PausedNodeRenewals(lock string, newLock harness.LockerFactory, expect string) lockjepsentest.Options {
	return lockjepsentest.Options{
		Locker: newLock, LockName: lock, System: "redlock", Expect: expect,
		Workload: "renew", Nemesis: []string{"pause"},
		TimeLimit: 4 * time.Second, Recovery: 500 * time.Millisecond,
		Configure: func(c *harness.Config) {
			c.NemesisInterval, c.FaultDuration = 100*time.Millisecond, 2*time.Minute
			c.RenewFor = "2..3"
		},
	}
}
