package fakeclock

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

func TestCleanupShmWithoutFilesIsANoop(t *testing.T) {
	old := ShmDir
	ShmDir = t.TempDir()
	t.Cleanup(func() { ShmDir = old })
	if err := CleanupShm(4242); err != nil {
		t.Fatal(err)
	}
	for _, p := range ShmFiles(4242) {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := CleanupShm(4242); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(ShmDir)
	if len(entries) != 0 {
		t.Errorf("left behind: %v", entries)
	}
	if err := CleanupShm(0); err == nil {
		t.Error("CleanupShm(0) succeeded")
	}
}

// RemoveHalfMadeSems removes sem_open's temporary files written since the
// launch and open in no process, and nothing else: another process's
// sem_open at work (the file open in a live process), files from before
// the launch, named semaphores and shared memory, other names and other
// users' files stay.
func TestRemoveHalfMadeSemsTakesOnlyOrphans(t *testing.T) {
	old := ShmDir
	ShmDir = t.TempDir()
	t.Cleanup(func() { ShmDir = old })
	launched := time.Now()
	write := func(name string) string {
		p := filepath.Join(ShmDir, name)
		if err := os.WriteFile(p, make([]byte, 32), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name    string
		setup   func(p string)
		removed bool
	}{
		{"sem.Ab12Cd", nil, true},
		{"sem.ZZ9zz0", nil, true},
		{"sem.Old123", func(p string) { os.Chtimes(p, launched.Add(-time.Hour), launched.Add(-time.Hour)) }, false},
		{"sem.faketime_sem_42", nil, false},
		{"faketime_shm_42", nil, false},
		{"sem.ab-cd_", nil, false},
		{"sem.Ab12C", nil, false},
		{"sem.Dir123", func(p string) { os.Remove(p); os.Mkdir(p, 0o700) }, false},
	}
	if os.Getuid() == 0 {
		cases = append(cases, struct {
			name    string
			setup   func(p string)
			removed bool
		}{"sem.Usr123", func(p string) { os.Chown(p, 4242, 4242) }, false})
	}
	for _, c := range cases {
		p := write(c.name)
		if c.setup != nil {
			c.setup(p)
		}
	}
	// Another process holds one open, as sem_open does while it makes it.
	busy := write("sem.Busy42")
	f, err := os.Open(busy)
	if err != nil {
		t.Fatal(err)
	}
	holder := exec.Command("sleep", "60")
	holder.Stdin = f
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })

	if err := RemoveHalfMadeSems(launched); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		_, err := os.Lstat(filepath.Join(ShmDir, c.name))
		if gone := os.IsNotExist(err); gone != c.removed {
			t.Errorf("%s: removed %v, want %v", c.name, gone, c.removed)
		}
	}
	if _, err := os.Stat(busy); err != nil {
		t.Fatalf("the file another process has open was removed: %v", err)
	}
	// Once that process is gone, nobody will ever link or remove it.
	holder.Process.Kill()
	holder.Wait()
	if err := RemoveHalfMadeSems(launched); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(busy); !os.IsNotExist(err) {
		t.Errorf("the file of a process that died was kept: %v", err)
	}
}
