package opsbench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// userHZ is the unit of /proc/<pid>/stat's times: USER_HZ, 100 on every
// Linux architecture Go runs on.
const userHZ = 100

// ChildrenCPU is the user plus system time of this process's child
// processes (the redis-server a benchmark or the harness starts): of
// those still running, from /proc/<pid>/stat; of those that ended and
// were waited for, from getrusage(RUSAGE_CHILDREN). The difference of two
// readings is the children's CPU between them, whether a server stopped
// in between or not. /proc's times have 10 ms steps.
func ChildrenCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		return 0, fmt.Errorf("getrusage of the children: %w", err)
	}
	live, err := liveChildrenCPU(os.Getpid())
	if err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano()+ru.Stime.Nano()) + live, nil
}

// liveChildrenCPU sums utime and stime of the running processes whose
// parent is ppid.
func liveChildrenCPU(ppid int) (time.Duration, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("list the children: %w", err)
	}
	var ticks int64
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue // not a process
		}
		raw, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // it ended meanwhile
		}
		parent, t, err := parseStat(raw)
		if err != nil {
			return 0, fmt.Errorf("read /proc/%d/stat: %w", pid, err)
		}
		if parent == ppid {
			ticks += t
		}
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// parseStat reads a /proc/<pid>/stat line's parent (field 4) and its user
// plus system time in ticks (fields 14 and 15). The command name (field
// 2) is in parentheses and may hold spaces, so the fields are counted
// from the last ')'.
func parseStat(raw []byte) (ppid int, ticks int64, err error) {
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("no command name in %q", raw)
	}
	f := bytes.Fields(raw[i+1:]) // f[0] is field 3, the state
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("%d fields after the command name, want at least 13", len(f))
	}
	ppid, err = strconv.Atoi(string(f[1]))
	if err != nil {
		return 0, 0, fmt.Errorf("parent: %w", err)
	}
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(string(s), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("cpu time: %w", err)
		}
		ticks += n
	}
	return ppid, ticks, nil
}
