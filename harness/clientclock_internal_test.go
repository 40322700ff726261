package harness

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster/fakeclock"
	"github.com/lockjepsen/lockjepsen/nemesis"
)

// A client replaced after a crash runs for its worker (process mod
// clients) and reads that worker's offset file, so a client clock fault
// on the worker reaches the replacement; the fault's events name the
// worker's latest process.
func TestClientClocksFollowTheWorker(t *testing.T) {
	if _, err := fakeclock.ClientLib(); err != nil {
		t.Skip(err)
	}
	r := &runner{dir: t.TempDir(), cfg: DefaultConfig()}
	r.cfg.Client, r.cfg.Clients = []string{"/usr/bin/python3", "x.py"}, 4
	r.cfg.Nemesis = []string{nemesis.ClientClockJump, nemesis.ClientCrash}
	cc, err := r.newClientClocks()
	if err != nil || cc == nil {
		t.Fatalf("newClientClocks = %v, %v", cc, err)
	}
	first, replaced := cc.env(3), cc.env(7) // worker 3's first client, and its replacement
	if !slices.Equal(first, replaced) {
		t.Fatalf("the replacement's environment %v differs from the first client's %v", replaced, first)
	}
	if cc.ClientProcess(3) != 7 {
		t.Errorf("worker 3's process is %d, want its replacement 7", cc.ClientProcess(3))
	}
	if err := cc.SetClientClock(3, 750*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	var file string
	for _, kv := range replaced {
		if f, ok := strings.CutPrefix(kv, "FAKETIME_TIMESTAMP_FILE="); ok {
			file = f
		}
	}
	b, err := os.ReadFile(file)
	if err != nil || !strings.HasPrefix(string(b), "+0.750000 ") || filepath.Base(file) != "w3.clock" {
		t.Fatalf("the replacement's file %s reads %q (%v), want worker 3's +0.75 s", file, b, err)
	}
	r.cfg.Client = nil
	if cc, err := r.newClientClocks(); cc != nil || err != nil {
		t.Errorf("a Go lock got client clocks %v, %v", cc, err)
	}
}
