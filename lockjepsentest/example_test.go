package lockjepsentest_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/lockjepsentest"
	"github.com/lockjepsen/lockjepsen/locks"
)

// The few lines a test needs: the lock under test, built per client from
// the connections the harness gives it, and the faults.
func ExampleRun() {
	// In a _test.go file:
	_ = func(t *testing.T) {
		lockjepsentest.Run(t, lockjepsentest.Options{
			Locker: func(nodes []locks.Conn, process int) (locks.Locker, error) {
				// Your lock here; this one is lockjepsen's token lock.
				return locks.NewRedisLock(nodes[0].Client, locks.Token, fmt.Sprintf("p%d", process))
			},
			Nemesis:   []string{"client-pause", "kill"},
			TimeLimit: 10 * time.Second,
		})
	}
}

// A named scenario's system, faults and timings with your own lock: here
// five independent nodes, a node of the holder's majority restarting with
// its restart delayed past the TTL.
func ExampleRun_scenario() {
	_ = func(t *testing.T) {
		out := lockjepsentest.Run(t, lockjepsentest.Options{
			Scenario: "redlock-delayed-restart",
			Locker: func(nodes []locks.Conn, process int) (locks.Locker, error) {
				// len(nodes) == 5: one connection per Redlock node.
				return locks.New(locks.RedlockName, nodes, locks.Options{TokenPrefix: fmt.Sprintf("p%d", process)})
			},
		})
		if out != nil {
			t.Logf("%d operations checked", out.Results.Ops)
		}
	}
}

// Config shows what a test will run without running it.
func ExampleConfig() {
	cfg, err := lockjepsentest.Config(lockjepsentest.Options{
		Locker:   func([]locks.Conn, int) (locks.Locker, error) { return nil, nil },
		Scenario: "crash-no-fsync",
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(cfg.System, cfg.Nemesis, cfg.TimeLimit, "expect", cfg.Expect)
	// Output: single [kill] 3s expect safe
}

// Configure is the last word on any harness option.
func ExampleOptions_configure() {
	cfg, _ := lockjepsentest.Config(lockjepsentest.Options{
		Locker: func([]locks.Conn, int) (locks.Locker, error) { return nil, nil },
		Configure: func(c *harness.Config) {
			c.Workload = "counter"
			c.Persistence = "always"
		},
	})
	fmt.Println(cfg.Workload, cfg.Persistence)
	// Output: counter always
}
