package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A client clock fault on a Go lock is bad usage (exit 2), refused
// before the store is made, naming what stands in for it.
func TestClientClockFaultRefusedForAGoLock(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	for _, fault := range []string{"client-clock-jump", "client-clock-offset", "client-clock-strobe", "client-clock-drift"} {
		code, _, errOut := runCLI(t, "test", "--lock", "token", "--nemesis", fault, "--store", store)
		if code != exitUsage || !strings.Contains(errOut, "Go lock") || !strings.Contains(errOut, "clock-offset") {
			t.Errorf("--nemesis %s on the token lock: exit %d, want 2 naming clock-offset; stderr:\n%s", fault, code, errOut)
		}
	}
	if _, err := os.Stat(store); !os.IsNotExist(err) {
		t.Errorf("a refused run made the store %s (%v)", store, err)
	}
}
