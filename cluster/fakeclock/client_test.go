package fakeclock

import (
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestClientEnvMovesOnlyTheWallClock starts interpreters the way
// protocol clients are started for client clock faults (ClientEnv, the
// plain libfaketime, no allocator shim) and checks that their wall clock
// reads the offset while their monotonic clock stays the real one. Each
// interpreter prints its wall clock and CLOCK_MONOTONIC in ns.
func TestClientEnvMovesOnlyTheWallClock(t *testing.T) {
	lib, err := ClientLib()
	if err != nil {
		unavailable(t, "%v", err)
	}
	programs := []struct {
		name string
		argv []string
	}{
		{"python3", []string{"/usr/bin/python3", "-c", "import time; print(time.time_ns(), time.monotonic_ns())"}},
		{"php", []string{"php", "-r", "echo intval(microtime(true)*1e9), ' ', hrtime(true), PHP_EOL;"}},
		{"node", []string{"node", "-e", "console.log(String(BigInt(Date.now())*1000000n), String(process.hrtime.bigint()))"}},
	}
	const offset = 90 * time.Second
	file := filepath.Join(t.TempDir(), "clock")
	if err := Set(file, offset, 1); err != nil {
		t.Fatal(err)
	}
	for _, p := range programs {
		t.Run(p.name, func(t *testing.T) {
			if _, err := exec.LookPath(p.argv[0]); err != nil {
				t.Skipf("%s not installed", p.name)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, p.argv[0], p.argv[1:]...)
			cmd.Env = append(cmd.Environ(), ClientEnv(lib, file)...)
			before := monoNow(t)
			out, err := cmd.Output()
			after := monoNow(t)
			// php leaves libfaketime's files even on a clean exit.
			if cmd.Process != nil {
				if err := CleanupShm(cmd.Process.Pid); err != nil {
					t.Error(err)
				}
			}
			if err != nil {
				t.Fatalf("%s under libfaketime: %v", p.name, err)
			}
			wall, mono := parsePair(t, string(out))
			if d := time.Duration(wall - time.Now().UnixNano()); d < offset-10*time.Second || d > offset+time.Second {
				t.Errorf("%s's wall clock is %v from ours, want about %v", p.name, d, offset)
			}
			if mono < before || mono > after {
				t.Errorf("%s's monotonic clock %d is outside [%d, %d]: it was faked", p.name, mono, before, after)
			}
		})
	}
}

func monoNow(t *testing.T) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return ts.Nano()
}

func parsePair(t *testing.T, out string) (int64, int64) {
	f := strings.Fields(out)
	if len(f) != 2 {
		t.Fatalf("output %q, want two numbers", out)
	}
	a, err1 := strconv.ParseInt(f[0], 10, 64)
	b, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("output %q: %v %v", out, err1, err2)
	}
	return a, b
}
