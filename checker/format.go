package checker

import (
	"fmt"
	"time"
)

// fmtT renders an instant on the history's clock as seconds since the run
// started, to the millisecond, which is what a reader compares.
func fmtT(ns int64) string {
	if ns == Never {
		return "never"
	}
	return fmt.Sprintf("%.3fs", float64(ns)/1e9)
}

// fmtD renders a duration rounded to the millisecond, or exactly when it is
// shorter than that (an overlap of 40µs is still an overlap).
func fmtD(ns int64) string {
	d := time.Duration(ns)
	if d < time.Millisecond {
		return d.String()
	}
	return d.Round(time.Millisecond).String()
}
