// Package shrink searches for a smaller run that still breaks a lock the
// same way as a stored unsafe run: fewer faults (delta debugging over the
// executed schedule), fewer clients and keys, a shorter fault phase, and
// shorter holds and faults. Each candidate is a real run (Runner); it is
// kept when it reproduces the original's violation k times in n tries.
package shrink

import (
	"context"
	"fmt"
)

// DDMin is Zeller's delta debugging: the smallest subset it can find of
// the items 0..n-1 for which test still holds (1-minimal: removing any
// one item of the result makes test fail, as far as test tells). test is
// never called with the empty set nor the whole set: the caller knows
// the whole set holds. It stops early, with the smallest set found so
// far, when ctx is done or test returns an error.
func DDMin(ctx context.Context, n int, test func(subset []int) (bool, error)) ([]int, error) {
	test = remember(test)
	cur := make([]int, n)
	for i := range cur {
		cur[i] = i
	}
	parts := 2
	for len(cur) >= 2 {
		if ctx.Err() != nil {
			return cur, ctx.Err()
		}
		chunks := split(cur, parts)
		reduced := false
		// Try each chunk alone, then each complement.
		for _, c := range chunks {
			ok, err := test(c)
			if err != nil {
				return cur, err
			}
			if ok {
				cur, parts, reduced = c, 2, true
				break
			}
		}
		if !reduced && parts > 2 {
			for i := range chunks {
				comp := complement(chunks, i)
				ok, err := test(comp)
				if err != nil {
					return cur, err
				}
				if ok {
					cur, parts, reduced = comp, max(parts-1, 2), true
					break
				}
			}
		}
		if reduced {
			continue
		}
		if parts >= len(cur) {
			break
		}
		parts = min(2*parts, len(cur))
	}
	return cur, nil
}

// split cuts items into n chunks of near equal size, in order.
func split(items []int, n int) [][]int {
	var out [][]int
	start := 0
	for i := range n {
		end := start + (len(items)-start)/(n-i)
		if end > start {
			out = append(out, items[start:end:end])
		}
		start = end
	}
	return out
}

// complement is every chunk but the i-th, in order.
func complement(chunks [][]int, i int) []int {
	var out []int
	for j, c := range chunks {
		if j != i {
			out = append(out, c...)
		}
	}
	return out
}

// remember answers a subset tested before from memory: each test is a
// real run or several, and ddmin comes back to the same subsets.
func remember(test func([]int) (bool, error)) func([]int) (bool, error) {
	seen := map[string]bool{}
	return func(subset []int) (bool, error) {
		key := fmt.Sprint(subset)
		if ok, done := seen[key]; done {
			return ok, nil
		}
		ok, err := test(subset)
		if err == nil {
			seen[key] = ok
		}
		return ok, err
	}
}
