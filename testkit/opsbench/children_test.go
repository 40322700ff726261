package opsbench

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		name      string
		raw       string
		ppid      int
		ticks     int64
		wantError bool
	}{
		{"redis-server", "4242 (redis-server) S 4200 4242 4200 0 -1 4194560 2301 0 0 0 153 97 0 0 20 0 5 0 1234 1 1 1\n", 4200, 250, false},
		{"a name with spaces and parentheses", "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 9 1 1 1\n", 1, 7, false},
		{"no command name", "7 a R 1", 0, 0, true},
		{"cut short", "7 (a) R 1 7 7 0", 0, 0, true},
		{"not a number", "7 (a) R x 7 7 0 -1 0 0 0 0 0 3 4 0", 0, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ppid, ticks, err := parseStat([]byte(tt.raw))
			if (err != nil) != tt.wantError {
				t.Fatalf("error %v, want one: %v", err, tt.wantError)
			}
			if err == nil && (ppid != tt.ppid || ticks != tt.ticks) {
				t.Errorf("parent %d, ticks %d; want %d, %d", ppid, ticks, tt.ppid, tt.ticks)
			}
		})
	}
}

// TestChildrenCPUCountsAChildBothAliveAndWaitedFor runs a child that
// spins on the CPU and reads the children's CPU while it runs and after
// it was waited for: neither reading goes down, and the last one counts
// the child's time.
func TestChildrenCPUCountsAChildBothAliveAndWaitedFor(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	before, err := ChildrenCPU()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(sh, "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	alive, err := ChildrenCPU()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	after, err := ChildrenCPU()
	if err != nil {
		t.Fatal(err)
	}
	used := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	if alive < before || after < alive {
		t.Errorf("readings went down: %v, %v, %v", before, alive, after)
	}
	if after-before < used-10*time.Millisecond {
		t.Errorf("children's CPU grew by %v; the child used %v", after-before, used)
	}
}
