package fakeclock

import (
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The only shape libfaketime must ever see: signed plain seconds and an
// explicit rate. Anything with a unit letter would be misread ("m" is
// minutes), anything unsigned would be taken as an absolute date.
var offsetShape = regexp.MustCompile(`^[+-][0-9]+\.[0-9]{6} x[0-9]+\.[0-9]{6}$`)

func TestOffsetFormat(t *testing.T) {
	for _, tc := range []struct {
		name   string
		offset time.Duration
		rate   float64
		want   string
	}{
		{"zero", 0, 1, "+0.000000 x1.000000"},
		{"fractional forward", 750 * time.Millisecond, 1, "+0.750000 x1.000000"},
		{"fractional backward", -1500 * time.Millisecond, 1, "-1.500000 x1.000000"},
		{"milliseconds stay seconds", 700 * time.Millisecond, 1, "+0.700000 x1.000000"},
		{"rate alone", 0, 1.05, "+0.000000 x1.050000"},
		{"offset and rate", -2 * time.Second, 2, "-2.000000 x2.000000"},
		{"hours", -3 * time.Hour, 1, "-10800.000000 x1.000000"},
		{"rounds to microseconds", 1500 * time.Nanosecond, 1, "+0.000002 x1.000000"},
		{"tiny negative is not -0", -400 * time.Nanosecond, 1, "+0.000000 x1.000000"},
		{"slow clock", time.Second, 0.5, "+1.000000 x0.500000"},
		{"ten years", MaxOffset, 1, "+315360000.000000 x1.000000"},
		{"minus ten years", -MaxOffset, 1, "-315360000.000000 x1.000000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Offset(tc.offset, tc.rate)
			if got != tc.want {
				t.Errorf("Offset(%v, %v) = %q, want %q", tc.offset, tc.rate, got, tc.want)
			}
			if !offsetShape.MatchString(got) {
				t.Errorf("Offset(%v, %v) = %q: not signed seconds with a rate", tc.offset, tc.rate, got)
			}
			if strings.Contains(got, "ms") || strings.ContainsAny(got, "mhdy") {
				t.Errorf("Offset(%v, %v) = %q carries a unit suffix", tc.offset, tc.rate, got)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		offset time.Duration
		rate   float64
		ok     bool
	}{
		{"normal", time.Second, 1, true},
		{"limits", -MaxOffset, MaxRate, true},
		{"fast", 0, 2, true},
		{"zero rate", 0, 0, false},
		{"negative rate", 0, -1, false},
		{"rate below written precision", 0, 1e-7, false},
		{"NaN rate", 0, math.NaN(), false},
		{"infinite rate", 0, math.Inf(1), false},
		{"offset too far forward", MaxOffset + time.Second, 1, false},
		{"offset too far back", -MaxOffset - time.Second, 1, false},
		{"min duration", math.MinInt64, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "offset")
			err := Set(path, tc.offset, tc.rate)
			if (err == nil) != tc.ok {
				t.Fatalf("Set(%v, %v) = %v, want ok=%v", tc.offset, tc.rate, err, tc.ok)
			}
			_, statErr := os.Stat(path)
			if tc.ok != (statErr == nil) {
				t.Errorf("offset file exists=%v after Set ok=%v", statErr == nil, tc.ok)
			}
		})
	}
}

func TestSetReplacesFileAtomically(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "offset")
	for _, d := range []time.Duration{0, 3 * time.Second, -2 * time.Second} {
		if err := Set(path, d, 1); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := string(b), Offset(d, 1)+"\n"; got != want {
			t.Errorf("file holds %q, want %q", got, want)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("offset file mode: %v %v", fi.Mode(), err)
	}
}

func TestCompensateRate(t *testing.T) {
	// 10 s into the process, x2 would jump +10 s; compensation cancels it.
	if got := CompensateRate(0, 2, 10*time.Second); got != -10*time.Second {
		t.Errorf("CompensateRate(0, 2, 10s) = %v, want -10s", got)
	}
	if got := CompensateRate(time.Second, 1, time.Hour); got != time.Second {
		t.Errorf("CompensateRate(1s, 1, 1h) = %v, want 1s", got)
	}
}
