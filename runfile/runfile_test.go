package runfile

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

func TestCleanupFailures(t *testing.T) {
	a, b, c := errors.New("a left"), errors.New("b left"), errors.New("c left")
	for _, tc := range []struct {
		name string
		err  error
		want []string
	}{
		{name: "none", err: nil, want: nil},
		{name: "one", err: a, want: []string{"a left"}},
		{name: "joined", err: errors.Join(a, b), want: []string{"a left", "b left"}},
		{name: "nested, with nils", err: errors.Join(nil, a, errors.Join(b, nil, c)), want: []string{"a left", "b left", "c left"}},
		{name: "wrapped stays one line", err: fmt.Errorf("sweep: %w", errors.Join(a, b)), want: []string{"sweep: a left\nb left"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CleanupFailures(tc.err); !slices.Equal(got, tc.want) {
				t.Fatalf("CleanupFailures: %q; want %q", got, tc.want)
			}
		})
	}
}
