package main

import (
	"strings"
	"testing"
)

// A review that cannot be run is refused before anything starts, with
// exit code 2 and what to change.
func TestReviewUsageErrors(t *testing.T) {
	store := t.TempDir()
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"--budget", "30s"}, []string{"cannot fit", "it would skip", "server-restart", "give --budget"}},
		{[]string{"--threats", "meteor"}, []string{"unknown threat", "client-pause"}},
		{[]string{"--threats", "failover"}, []string{"does not apply to single"}},
		{[]string{"--mitigations", "prayer"}, []string{"unknown mitigation", "etcd"}},
		{[]string{"--system", "redlock", "--lock", "setnx-nottl"}, []string{"setnx-nottl"}},
		{[]string{"--client-name", "x"}, []string{"--client"}},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, stdout, stderr := runCLI(t, append([]string{"review", "--store", store}, c.args...)...)
			if code != exitUsage {
				t.Fatalf("exit %d, want %d\n%s%s", code, exitUsage, stdout, stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
		})
	}
}

func TestReviewRenderNeedsAReview(t *testing.T) {
	code, _, stderr := runCLI(t, "review", "--render", t.TempDir())
	if code != exitUsage || !strings.Contains(stderr, "not a review directory") {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
}
