package workloads

import (
	"math/rand"
	"testing"
	"time"
)

func TestParseDist(t *testing.T) {
	cases := []struct {
		in       string
		ok       bool
		min, max time.Duration
	}{
		{"10ms", true, 10 * time.Millisecond, 10 * time.Millisecond},
		{"0", true, 0, 0},
		{"5ms..50ms", true, 5 * time.Millisecond, 50 * time.Millisecond},
		{"exp:20ms", true, 0, time.Hour},
		{"50ms..5ms", false, 0, 0},
		{"-1s", false, 0, 0},
		{"exp:-1s", false, 0, 0},
		{"soon", false, 0, 0},
		{"1s..", false, 0, 0},
	}
	r := rand.New(rand.NewSource(1))
	for _, tc := range cases {
		d, err := ParseDist(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("%q: err %v, want ok=%v", tc.in, err, tc.ok)
			continue
		}
		if !tc.ok {
			continue
		}
		for i := 0; i < 1000; i++ {
			if v := d.Sample(r); v < tc.min || v > tc.max {
				t.Fatalf("%q: sample %v outside [%v, %v]", tc.in, v, tc.min, tc.max)
			}
		}
		if again, err := ParseDist(d.String()); err != nil || again != d {
			t.Errorf("%q does not round-trip through %q", tc.in, d.String())
		}
	}
}
