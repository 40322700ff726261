package shrink

import (
	"context"
	"slices"
	"testing"
)

// DDMin finds exactly the faults a failure needs, whatever their
// positions, with a fake runner (the algorithm alone, no lock).
func TestDDMinFindsTheExactPair(t *testing.T) {
	cases := []struct {
		name string
		n    int
		need []int
	}{
		{"adjacent pair", 10, []int{3, 4}},
		{"pair far apart", 10, []int{3, 7}},
		{"first and last of 40", 40, []int{0, 39}},
		{"one fault of 40", 40, []int{17}},
		{"three of 16", 16, []int{1, 8, 15}},
		{"the pair is all", 2, []int{0, 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			calls := 0
			fails := func(subset []int) (bool, error) {
				calls++
				if len(subset) == 0 || len(subset) == c.n {
					t.Errorf("tested the empty or the whole set: %v", subset)
				}
				for _, x := range c.need {
					if !slices.Contains(subset, x) {
						return false, nil
					}
				}
				return true, nil
			}
			got, err := DDMin(context.Background(), c.n, fails)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, c.need) {
				t.Fatalf("DDMin = %v, want %v", got, c.need)
			}
			t.Logf("%d candidates", calls)
		})
	}
}

// A failure that needs nothing but one of two faults, and one that
// never fails with less than the whole set.
func TestDDMinAlternativesAndNothingToRemove(t *testing.T) {
	either := func(subset []int) (bool, error) {
		return slices.Contains(subset, 2) || slices.Contains(subset, 5), nil
	}
	got, _ := DDMin(context.Background(), 8, either)
	if len(got) != 1 || (got[0] != 2 && got[0] != 5) {
		t.Fatalf("DDMin = %v, want [2] or [5]", got)
	}
	all := func(subset []int) (bool, error) { return len(subset) == 6, nil }
	if got, _ := DDMin(context.Background(), 6, all); len(got) != 6 {
		t.Fatalf("DDMin = %v, want all six", got)
	}
}
