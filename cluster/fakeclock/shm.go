package fakeclock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// ShmDir is where libfaketime keeps its per-process shared memory.
var ShmDir = "/dev/shm"

// ShmFiles are the files libfaketime creates for process pid. A clean exit
// removes them; SIGKILL leaves them behind.
func ShmFiles(pid int) []string {
	return []string{
		filepath.Join(ShmDir, fmt.Sprintf("faketime_shm_%d", pid)),
		filepath.Join(ShmDir, fmt.Sprintf("sem.faketime_sem_%d", pid)),
	}
}

// CleanupShm removes the libfaketime shared-memory files of a process that
// has exited. Call it only after the process has been reaped: pids are
// reused, and a live process with this pid would lose its files.
func CleanupShm(pid int) error {
	if pid <= 0 {
		return fmt.Errorf("fakeclock: cleaning shared memory: bad pid %d", pid)
	}
	var errs []error
	for _, p := range ShmFiles(pid) {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("fakeclock: cleaning shared memory of pid %d: %w", pid, err)
	}
	return nil
}

// RemoveHalfMadeSems removes the semaphores that glibc's sem_open left
// half-made in ShmDir since a process was launched, once it has been
// reaped. libfaketime opens its semaphore as it loads into a process, and
// sem_open makes it under a temporary name (sem. and six letters or
// digits), links it to its own name and removes the temporary one, all
// within microseconds; a process killed in between (a node killed while it
// starts: a run cancelled during a restart) leaves the temporary file,
// whose name no pid tells (1 of 300 processes killed in their first
// milliseconds left one, measured with Debian's libfaketime 0.9.10).
//
// A file is removed only if it is ours (our uid), was written since
// launched, and no process has it open: sem_open keeps the file open
// until it has removed the temporary name, so one still open is another
// process's sem_open at work.
func RemoveHalfMadeSems(launched time.Time) error {
	names, err := filepath.Glob(filepath.Join(ShmDir, "sem.??????"))
	if err != nil {
		return fmt.Errorf("fakeclock: looking for half-made semaphores: %w", err)
	}
	// The file's time is the kernel's coarse clock: it may read a tick
	// before launched.
	since := launched.Add(-time.Second)
	var candidates []string
	for _, n := range names {
		if halfMadeSem(n, since) {
			candidates = append(candidates, n)
		}
	}
	if len(candidates) == 0 {
		return nil
	}
	open := openShmFiles()
	var errs []error
	for _, n := range candidates {
		if open[n] {
			continue
		}
		if err := os.Remove(n); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("fakeclock: removing half-made semaphores: %w", err)
	}
	return nil
}

// halfMadeSem reports whether path has sem_open's temporary name, is a
// regular file of ours and was written since since.
func halfMadeSem(path string, since time.Time) bool {
	suffix := strings.TrimPrefix(filepath.Base(path), "sem.")
	for _, r := range suffix {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			return false
		}
	}
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.ModTime().Before(since) {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Getuid()
}

// openShmFiles are the files in ShmDir that some process has open, among
// the processes whose descriptors we may read: a file of ours is opened
// by our own uid's processes (or root's, which root can read).
func openShmFiles() map[string]bool {
	open := map[string]bool{}
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	dir := filepath.Clean(ShmDir) + string(filepath.Separator)
	for _, fd := range fds {
		if target, err := os.Readlink(fd); err == nil && strings.HasPrefix(target, dir) {
			open[target] = true
		}
	}
	return open
}
