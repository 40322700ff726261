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
	if d := n.clockError(t); d < -200*time.Millisecond || d > 200*time.Millisecond {
		t.Errorf("clock at +0 is off by %v", d)
	}
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

func forwardJumpExpiresEarly(t *testing.T, n *node) {
	if err := n.client.Set(bg, "k", "v", 2*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	jumped := time.Now()
	n.setClock(t, 3*time.Second, 1)
	for {
		_, err := n.client.Get(bg, "k").Result()
		if errors.Is(err, redis.Nil) {
			t.Logf("key gone %v after the jump", time.Since(jumped))
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Since(jumped) > 50*time.Millisecond {
			t.Fatalf("key with 2s TTL still there %v after a +3s jump", time.Since(jumped))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func backwardJumpLengthensLife(t *testing.T, n *node) {
	if err := n.client.Set(bg, "k", "v", 500*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	before := n.client.PTTL(bg, "k").Val()
	n.setClock(t, -2*time.Second, 1)
	after := n.client.PTTL(bg, "k").Val()
	if after < before+1500*time.Millisecond {
		t.Errorf("PTTL %v before the -2s jump, %v after: want it ~2s longer", before, after)
	}
	time.Sleep(800 * time.Millisecond)
	if got := n.client.Exists(bg, "k").Val(); got != 1 {
		t.Fatalf("key with 500ms TTL gone 800ms after a -2s jump")
	}
	if left := n.client.PTTL(bg, "k").Val(); left < 1*time.Second || left > 1800*time.Millisecond {
		t.Errorf("PTTL %v 800ms after the jump, want about 1.7s", left)
	}
}

func rateDoublesDecay(t *testing.T, n *node) {
	if err := n.client.Set(bg, "k", "v", 10*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	n.setClock(t, CompensateRate(0, 2, time.Since(n.started)), 2)
	if d := n.clockError(t); d < -150*time.Millisecond || d > 150*time.Millisecond {
		t.Errorf("compensated rate change moved the clock by %v", d)
	}
	p1 := n.client.PTTL(bg, "k").Val()
	t1 := time.Now()
	time.Sleep(500 * time.Millisecond)
	p2 := n.client.PTTL(bg, "k").Val()
	real := time.Since(t1)
	ratio := float64(p1-p2) / float64(real)
	t.Logf("PTTL fell %v in %v real (x%.2f)", p1-p2, real, ratio)
	if ratio < 1.7 || ratio > 2.3 {
		t.Errorf("PTTL fell %v in %v: x%.2f, want about x2", p1-p2, real, ratio)
	}
}

// libfaketime applies a rate to the whole time since it loaded, and keeps
// the last rate when a line has none; both are why Offset always writes the
// rate and why CompensateRate exists.
func uncompensatedRateJumps(t *testing.T, n *node) {
	time.Sleep(time.Second)
	n.setClock(t, 0, 2)
	uptime := time.Since(n.started)
	d := n.clockError(t)
	if d < uptime-300*time.Millisecond || d > uptime+100*time.Millisecond {
		t.Errorf("x2 after %v of uptime moved the clock by %v, want about the uptime", uptime, d)
	}
	n.setClock(t, 0, 1)
	if d := n.clockError(t); d < -150*time.Millisecond || d > 150*time.Millisecond {
		t.Errorf("back to +0 x1, the clock is off by %v", d)
	}
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

func termAfterBackwardJump(t *testing.T, n *node) {
	n.setClock(t, -5*time.Second, 1)
	if err := n.client.Set(bg, "k", "v", time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // let serverCron run on the stepped clock
	sent := time.Now()
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-n.exited:
		t.Logf("exited %v after SIGTERM", time.Since(sent))
	case <-time.After(2 * time.Second):
		t.Fatalf("redis-server still running 2s after SIGTERM following a -5s jump")
	}
	// A clean exit removes libfaketime's files by itself.
	for _, p := range ShmFiles(n.pid) {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s left after a clean exit", p)
		}
	}
}
