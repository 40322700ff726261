package main

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestLessGCHoldsWhileRunsGo: GOGC is runGCPercent while any run goes,
// the earlier value once the last one ends, and the user's own GOGC is
// left alone.
func TestLessGCHoldsWhileRunsGo(t *testing.T) {
	tests := []struct {
		name   string
		gogc   string // "" for unset
		runs   int
		during int
	}{
		{"one run", "", 1, runGCPercent},
		{"three runs at once", "", 3, runGCPercent},
		{"the user's GOGC", "50", 2, 77},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.gogc != "" {
				t.Setenv("GOGC", tt.gogc)
			} else if old, set := os.LookupEnv("GOGC"); set {
				t.Setenv("GOGC", old) // restored after
				os.Unsetenv("GOGC")
			}
			defer debug.SetGCPercent(debug.SetGCPercent(77))
			var restores []func()
			for range tt.runs {
				restores = append(restores, lessGC())
				if got := gcPercent(); got != tt.during {
					t.Fatalf("GOGC %d during the runs, want %d", got, tt.during)
				}
			}
			for i, r := range restores {
				r()
				want := tt.during
				if i == len(restores)-1 {
					want = 77
				}
				if got := gcPercent(); got != want {
					t.Fatalf("GOGC %d after %d of %d runs ended, want %d", got, i+1, tt.runs, want)
				}
			}
		})
	}
}

func gcPercent() int {
	p := debug.SetGCPercent(0)
	debug.SetGCPercent(p)
	return p
}
