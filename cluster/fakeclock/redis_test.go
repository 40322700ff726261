package fakeclock

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Each scenario runs its own redis-server; they run in parallel so the
// package stays fast.
func TestRedisUnderFakeClock(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, n *node)
	}{
		{"starts at +0, answers and reports memory", startsAndAnswers},
		{"forward jump expires a key early", forwardJumpExpiresEarly},
		{"backward jump lengthens a key's life", backwardJumpLengthensLife},
		{"rate x2 makes PTTL fall twice as fast", rateDoublesDecay},
		{"rate change without compensation jumps by uptime", uncompensatedRateJumps},
		{"SIGKILL leaves shared memory that CleanupShm removes", killLeavesShm},
		{"SIGTERM after a backward jump shuts down promptly", termAfterBackwardJump},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, startRedis(t))
		})
	}
}

var bg = context.Background()

func startsAndAnswers(t *testing.T, n *node) {
	n.checkOffset(t, "the clock at +0", 200*time.Millisecond, offsetIs(0))
	// Enough traffic to grow, shrink and reallocate strings and hashes
	// through the shim (sdsResize consults nallocx).
	big := strings.Repeat("x", 4096)
	pipe := n.client.Pipeline()
	for i := range 2000 {
		k := "k" + strconv.Itoa(i)
		pipe.Set(bg, k, big[:i%4096], 0)
		pipe.Append(bg, k, big)
		pipe.HSet(bg, "h", k, big[:i%512])
	}
	if _, err := pipe.Exec(bg); err != nil {
		t.Fatalf("load: %v", err)
	}
	if got := n.client.DBSize(bg).Val(); got != 2001 {
		t.Errorf("DBSIZE = %d, want 2001", got)
	}
	if err := n.client.Do(bg, "EVAL", "local t={} for i=1,20000 do t[i]=tostring(i) end return #t", 0).Err(); err != nil {
		t.Errorf("EVAL: %v", err)
	}

	info, err := n.client.Info(bg, "memory").Result()
	if err != nil {
		t.Fatalf("INFO memory: %v", err)
	}
	for _, field := range []string{"used_memory", "allocator_allocated", "allocator_resident"} {
		v, ok := infoField(info, field)
		if n, err := strconv.ParseInt(v, 10, 64); !ok || err != nil || n <= 0 {
			t.Errorf("INFO memory %s = %q, want a positive number", field, v)
		}
	}
	for _, cmd := range [][]any{
		{"MEMORY", "STATS"},
		{"MEMORY", "USAGE", "k1999"},
		{"MEMORY", "DOCTOR"},
		{"MEMORY", "PURGE"},
	} {
		if err := n.client.Do(bg, cmd...).Err(); err != nil {
			t.Errorf("%v: %v", cmd, err)
		}
	}
	stats, err := n.client.Do(bg, "MEMORY", "MALLOC-STATS").Text()
	if err != nil || !strings.Contains(stats, "glibc heap") {
		t.Errorf("MEMORY MALLOC-STATS = %q, %v; want the shim's report", stats, err)
	}
}

func infoField(info, name string) (string, bool) {
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return v, true
		}
	}
	return "", false
}

// libfaketime reads the offset file on every clock read
// (FAKETIME_NO_CACHE), and Redis reads its clock when a command starts: the
// first command after the file is replaced runs at the new time. The key
// lives an hour, so nothing but the jump can expire it.
func forwardJumpExpiresEarly(t *testing.T, n *node) {
	if err := n.client.Set(bg, "k", "v", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	n.setClock(t, 2*time.Hour, 1)
	_, err := n.client.Get(bg, "k").Result()
	if err == nil {
		t.Fatal("a key with a 1h TTL is still there on the first command after a +2h jump")
	}
	if !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
}

// A backward jump moves a key's expiry away by the jump: its PTTL grows by
// the jump (less the real time between the two reads), and it outlives its
// TTL in real time. The bounds come from real times taken around each
// command, so they hold however slow the machine is.
func backwardJumpLengthensLife(t *testing.T, n *node) {
	const ttl, jump = 2 * time.Second, time.Minute
	setBefore := time.Now()
	if err := n.client.Set(bg, "k", "v", ttl).Err(); err != nil {
		t.Fatal(err)
	}
	setAfter := time.Now()
	b1 := time.Now()
	before, err := n.client.PTTL(bg, "k").Result()
	if err != nil {
		t.Fatal(err)
	}
	n.setClock(t, -jump, 1)
	after, err := n.client.PTTL(bg, "k").Result()
	a2 := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	// PTTL is in whole milliseconds: 2 ms cover the rounding of two.
	if grew := after - before; grew > jump+2*time.Millisecond || grew < jump-a2.Sub(b1)-2*time.Millisecond {
		t.Errorf("PTTL %v before the -%v jump, %v after: it grew by %v, want %v less at most the %v between the reads", before, jump, after, grew, jump, a2.Sub(b1))
	}
	// Past the TTL in real time (waiting for real time to pass, not for
	// an event): the key is still there.
	time.Sleep(time.Until(setAfter.Add(ttl + 100*time.Millisecond)))
	b := time.Now()
	left, err := n.client.PTTL(bg, "k").Result()
	a := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	if a.Sub(setBefore) >= ttl+jump {
		t.Fatalf("the machine stalled %v: past the key's lengthened life, nothing to tell", a.Sub(setBefore))
	}
	// It expires at (real) set time + ttl + jump.
	lo := setBefore.Add(ttl+jump).Sub(a) - 2*time.Millisecond
	hi := setAfter.Add(ttl+jump).Sub(b) + 2*time.Millisecond
	if left < lo || left > hi {
		t.Fatalf("PTTL %v %v after the SET (TTL %v, then a -%v jump), want in [%v, %v]", left, b.Sub(setAfter).Round(time.Millisecond), ttl, jump, lo, hi)
	}
}

// With rate 2 a key's PTTL falls twice as fast as real time. The real time
// between the two server-side reads is bounded by the times taken around
// them; a reading whose bounds are too loose to tell (a long round trip on
// a loaded machine) is taken again.
func rateDoublesDecay(t *testing.T, n *node) {
	if err := n.client.Set(bg, "k", "v", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	w0 := time.Now()
	n.setClock(t, CompensateRate(0, 2, w0.Sub(n.started)), 2)
	// Compensated, the clock does not jump: from the change on, it gains
	// on real time only as the rate makes it. libfaketime loaded between
	// started and ready, which the compensation could not know exactly.
	n.checkOffset(t, "the clock after a compensated change to x2", 150*time.Millisecond, func(before, after time.Time) (time.Duration, time.Duration) {
		return before.Sub(w0) - n.ready.Sub(n.started), after.Sub(w0)
	})
	const lo, hi = 1.7, 2.3
	deadline := time.Now().Add(waitDeadline)
	for {
		b1 := time.Now()
		p1, err := n.client.PTTL(bg, "k").Result()
		a1 := time.Now()
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // real time to measure over, not a wait for an event
		b2 := time.Now()
		p2, err := n.client.PTTL(bg, "k").Result()
		a2 := time.Now()
		if err != nil {
			t.Fatal(err)
		}
		fell := p1 - p2
		// The real time between the reads is in [b2-a1, a2-b1]; PTTL's
		// rounding is within 2 ms.
		rlo := float64(fell-2*time.Millisecond) / float64(a2.Sub(b1))
		rhi := float64(fell+2*time.Millisecond) / float64(b2.Sub(a1))
		t.Logf("PTTL fell %v in %v to %v real: x%.2f to x%.2f", fell, b2.Sub(a1), a2.Sub(b1), rlo, rhi)
		switch {
		case rlo >= lo && rhi <= hi:
			return
		case rhi < lo || rlo > hi:
			t.Fatalf("PTTL fell %v in %v to %v of real time: x%.2f to x%.2f, want about x2", fell, b2.Sub(a1), a2.Sub(b1), rlo, rhi)
		case time.Now().After(deadline):
			t.Fatalf("no measurement within %v with round trips short enough to tell x%.1f to x%.1f (the last: x%.2f to x%.2f)", waitDeadline, lo, hi, rlo, rhi)
		}
	}
}

// libfaketime applies a rate to the whole time since it loaded, and keeps
// the last rate when a line has none; both are why Offset always writes the
// rate and why CompensateRate exists.
func uncompensatedRateJumps(t *testing.T, n *node) {
	time.Sleep(time.Second) // uptime for the rate to multiply, not a wait for an event
	n.setClock(t, 0, 2)
	// The clock now reads real time plus the whole time since libfaketime
	// loaded, which was between started and ready.
	n.checkOffset(t, "the clock after x2 without compensation", 100*time.Millisecond, func(before, after time.Time) (time.Duration, time.Duration) {
		return before.Sub(n.ready), after.Sub(n.started)
	})
	n.setClock(t, 0, 1)
	n.checkOffset(t, "the clock back at +0 x1", 150*time.Millisecond, offsetIs(0))
}

func killLeavesShm(t *testing.T, n *node) {
	for _, p := range ShmFiles(n.pid) {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("libfaketime's %s missing while running: %v", p, err)
		}
	}
	if err := n.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-n.exited
	for _, p := range ShmFiles(n.pid) {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s not left by SIGKILL (%v): the cleanup this package offers is untested", p, err)
		}
	}
	if err := CleanupShm(n.pid); err != nil {
		t.Fatal(err)
	}
	for _, p := range ShmFiles(n.pid) {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s survived CleanupShm", p)
		}
	}
}

// Redis's timers run on the monotonic clock, which libfaketime leaves
// alone: a backward jump of the wall clock must not hold up the shutdown by
// the jump (ten minutes here, far beyond the deadline).
func termAfterBackwardJump(t *testing.T, n *node) {
	const jump = 10 * time.Minute
	before := lruClock(t, n)
	n.setClock(t, -jump, 1)
	if err := n.client.Set(bg, "k", "v", time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	// serverCron caches the LRU clock (wall-clock seconds, 24 bits): once
	// INFO shows it stepped back, the cron has run on the stepped clock.
	deadline := time.Now().Add(waitDeadline)
	for {
		now := lruClock(t, n)
		if back := (before - now) & (1<<24 - 1); back > 0 && back < 1<<23 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("INFO's lru_clock still %d (%d before the -%v jump) after %v: serverCron has not run on the stepped clock", now, before, jump, waitDeadline)
		}
		time.Sleep(20 * time.Millisecond)
	}
	sent := time.Now()
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-n.exited:
		t.Logf("exited %v after SIGTERM", time.Since(sent))
	case <-time.After(waitDeadline):
		t.Fatalf("redis-server still running %v after SIGTERM following a -%v jump", waitDeadline, jump)
	}
	// A clean exit removes libfaketime's files by itself.
	for _, p := range ShmFiles(n.pid) {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s left after a clean exit", p)
		}
	}
}

// lruClock is INFO server's lru_clock.
func lruClock(t *testing.T, n *node) uint32 {
	t.Helper()
	info, err := n.client.Info(bg, "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	v, ok := infoField(info, "lru_clock")
	c, err := strconv.ParseUint(v, 10, 32)
	if !ok || err != nil {
		t.Fatalf("INFO server lru_clock = %q", v)
	}
	return uint32(c)
}
