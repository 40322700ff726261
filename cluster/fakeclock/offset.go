package fakeclock

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"
)

// MaxOffset bounds offsets: far beyond any plausible clock fault, and well
// inside what libfaketime and time.Duration can represent.
const MaxOffset = 10 * 365 * 24 * time.Hour

// Rates are written with 6 decimals, so smaller ones would read as 0, which
// stops the clock; larger ones are not a clock fault but a different test.
const (
	MinRate = 1e-6
	MaxRate = 1e6
)

// Offset formats the offset file's content: signed seconds with 6 decimals,
// then the rate. Seconds only, because libfaketime reads unit suffixes ("m"
// is minutes, so "700ms" would be 700 minutes), and a sign always, because
// an unsigned value is taken as an absolute date.
//
// The rate is always written, even at 1: libfaketime keeps the last rate it
// read when a line has none, so "+0" after "+0 x2" still runs at 2x. The rate
// scales the time since libfaketime loaded into the process, not since the
// change; see CompensateRate.
func Offset(offset time.Duration, rate float64) string {
	neg := offset < 0
	u := uint64(offset)
	if neg {
		u = -u // also right for math.MinInt64
	}
	micros := u/1000 + (u%1000+500)/1000
	sign := "+"
	if neg && micros != 0 {
		sign = "-"
	}
	return fmt.Sprintf("%s%d.%06d x%.6f", sign, micros/1e6, micros%1e6, rate)
}

// CompensateRate returns the offset to write together with rate so that the
// clock reads offset (relative to real time) at the moment of writing and
// then runs at rate, for a process that loaded libfaketime uptime ago.
// libfaketime multiplies the whole uptime by the rate, so an uncompensated
// rate change is also a jump of (rate-1)*uptime.
func CompensateRate(offset time.Duration, rate float64, uptime time.Duration) time.Duration {
	return offset - time.Duration((rate-1)*float64(uptime))
}

// Validate reports whether an offset and rate may be written.
func Validate(offset time.Duration, rate float64) error {
	if offset > MaxOffset || offset < -MaxOffset {
		return fmt.Errorf("fakeclock: offset %v outside ±%v", offset, MaxOffset)
	}
	if math.IsNaN(rate) || rate < MinRate || rate > MaxRate {
		return fmt.Errorf("fakeclock: rate %v outside [%g, %g]", rate, MinRate, MaxRate)
	}
	return nil
}

// Set atomically replaces the offset file, so a node never reads a partial
// line (which libfaketime would treat as garbage and exit on).
func Set(path string, offset time.Duration, rate float64) error {
	if err := Validate(offset, rate); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return fmt.Errorf("fakeclock: setting clock offset: %w", err)
	}
	tmp := f.Name()
	_, werr := f.WriteString(Offset(offset, rate) + "\n")
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("fakeclock: writing clock offset: %w", err)
	}
	// CreateTemp makes the file 0600; the node may run as another user.
	if err := os.Chmod(tmp, 0o644); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("fakeclock: clock offset permissions: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("fakeclock: installing clock offset: %w", err)
	}
	return nil
}

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
