package workloads

import (
	"fmt"
	"math/rand"
	"strings"
	"time"
)

// Dist is a distribution of durations: a fixed value ("10ms"), uniform over
// a range ("5ms..50ms") or exponential with a mean ("exp:20ms").
type Dist struct {
	Kind     string // "fixed", "uniform", "exp"
	Min, Max time.Duration
	Mean     time.Duration
}

// ParseDist reads the syntax above.
func ParseDist(s string) (Dist, error) {
	s = strings.TrimSpace(s)
	bad := func(err error) (Dist, error) {
		return Dist{}, fmt.Errorf("%q is not a duration distribution (want e.g. 10ms, 5ms..50ms or exp:20ms): %v", s, err)
	}
	switch {
	case strings.HasPrefix(s, "exp:"):
		m, err := time.ParseDuration(strings.TrimPrefix(s, "exp:"))
		if err != nil {
			return bad(err)
		}
		if m < 0 {
			return bad(fmt.Errorf("negative mean"))
		}
		return Dist{Kind: "exp", Mean: m}, nil
	case strings.Contains(s, ".."):
		lo, hi, _ := strings.Cut(s, "..")
		a, err := time.ParseDuration(lo)
		if err != nil {
			return bad(err)
		}
		b, err := time.ParseDuration(hi)
		if err != nil {
			return bad(err)
		}
		if a < 0 || b < a {
			return bad(fmt.Errorf("range must be 0 <= min <= max"))
		}
		return Dist{Kind: "uniform", Min: a, Max: b}, nil
	default:
		d, err := time.ParseDuration(s)
		if err != nil {
			return bad(err)
		}
		if d < 0 {
			return bad(fmt.Errorf("negative duration"))
		}
		return Dist{Kind: "fixed", Min: d, Max: d}, nil
	}
}

// Sample draws one duration.
func (d Dist) Sample(r *rand.Rand) time.Duration {
	switch d.Kind {
	case "exp":
		return time.Duration(r.ExpFloat64() * float64(d.Mean))
	case "uniform":
		if d.Max == d.Min {
			return d.Min
		}
		return d.Min + time.Duration(r.Int63n(int64(d.Max-d.Min)+1))
	}
	return d.Min
}

func (d Dist) String() string {
	switch d.Kind {
	case "exp":
		return "exp:" + d.Mean.String()
	case "uniform":
		return d.Min.String() + ".." + d.Max.String()
	}
	return d.Min.String()
}
