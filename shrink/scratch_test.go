package shrink

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/lockjepsen/lockjepsen/harness"
)

// A scratch store whose shrink is gone (killed) is removed by the next
// shrink in the same store; one whose shrink still runs, and one without
// an owner file, are kept (issue 53, item 17: a killed shrink left its
// .shrink-* store for ever).
func TestRemoveDeadScratch(t *testing.T) {
	store := t.TempDir()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	mk := func(name string, pid int) string {
		d := filepath.Join(store, scratchPrefix+name)
		os.MkdirAll(filepath.Join(d, "run"), 0o755)
		if pid > 0 {
			os.WriteFile(filepath.Join(d, harness.OwnerFile), []byte(strconv.Itoa(pid)+"\n"), 0o644)
		}
		return d
	}
	gone, alive, unowned := mk("gone", dead.Process.Pid), mk("alive", os.Getpid()), mk("unowned", 0)
	other := filepath.Join(store, "single-token-mutex-none")
	os.MkdirAll(other, 0o755)
	removeDeadScratch(store)
	if _, err := os.Stat(gone); err == nil {
		t.Error("the scratch store of a shrink that is gone was kept")
	}
	for _, d := range []string{alive, unowned, other} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s was removed: %v", d, err)
		}
	}
}
