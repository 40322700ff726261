package locks_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

// Without enough replicas to acknowledge, the wait lock grants nothing and
// leaves no key behind; the replicated case is tested on Sentinel in the
// harness.
func TestWaitLockWithoutReplicasGrantsNothing(t *testing.T) {
	_, c := redistest.Start(t)
	ctx := context.Background()
	l, err := locks.NewWaitLock(c, "w", 1, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = l.TryAcquire(ctx, "k", time.Second)
	if !errors.Is(err, locks.ErrNotAcquired) {
		t.Fatalf("got %v, want ErrNotAcquired (0 of 1 replicas)", err)
	}
	if time.Since(start) < 50*time.Millisecond {
		t.Fatal("WAIT did not wait for its timeout")
	}
	if c.Exists(ctx, "k").Val() != 0 {
		t.Fatal("the unacknowledged key was left behind")
	}
	if _, err := locks.NewWaitLock(c, "w", 0, time.Second); err == nil {
		t.Fatal("0 replicas accepted")
	}
	if _, err := locks.New(locks.WaitName, []locks.Conn{{Name: "n1", Client: c}}, locks.Options{TokenPrefix: "w"}); err != nil {
		t.Fatal(err)
	}
}
