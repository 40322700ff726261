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
