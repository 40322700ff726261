package reports_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/lockjepsen/lockjepsen/reports"
)

// A reader sees the page the report drew when it held the whole history:
// byte for byte, on runs with violations, server and client faults,
// zoomed witnesses and damaged histories. Where they differ, the test
// says which drawings do (red holds, overlaps, witnesses, operation
// strips...).
func TestPageIsTheSameAsFromTheWholeHistory(t *testing.T) {
	gen := filepath.Join(t.TempDir(), "generated", "20261129T100000.000Z")
	genLarge(t, gen, 20_000, 50)
	t.Run("generated", func(t *testing.T) {
		page := samePage(t, gen)
		for _, want := range []string{`class="hold red"`, `class="overlap"`, `class="vmark"`, `<article class="witness"`, `class="op op-acquire op-fail"`, `class="lease"`, `class="shade `} {
			if !strings.Contains(page, want) {
				t.Errorf("the generated run's page has no %s: the comparison tests less than it should", want)
			}
		}
	})
	for name, dir := range oddRuns(t, t.TempDir()) {
		t.Run(name, func(t *testing.T) { samePage(t, dir) })
	}
	t.Run("real", func(t *testing.T) {
		for _, r := range realRuns(t) {
			t.Run(r.name, func(t *testing.T) { samePage(t, r.dir) })
		}
	})
}

// samePage renders dir both ways, fails the test where they differ, and
// returns the page.
func samePage(t *testing.T, dir string) string {
	t.Helper()
	var onePass, whole bytes.Buffer
	if err := reports.RenderRunBothWays(&onePass, &whole, dir); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(onePass.Bytes(), whole.Bytes()) {
		return onePass.String()
	}
	got, want := drawings(onePass.String()), drawings(whole.String())
	var diffs []string
	for k := range want {
		if got[k] != want[k] {
			diffs = append(diffs, fmt.Sprintf("%s: %d, was %d", k, got[k], want[k]))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: %d, was 0", k, got[k]))
		}
	}
	sort.Strings(diffs)
	i := 0
	for i < min(onePass.Len(), whole.Len()) && onePass.Bytes()[i] == whole.Bytes()[i] {
		i++
	}
	t.Errorf("the page differs from the whole-history page from byte %d:\n  now: %.200s\n  was: %.200s\ndrawings that differ: %v",
		i, onePass.String()[max(0, i-40):], whole.String()[max(0, i-40):], diffs)
	return onePass.String()
}

var classRE = regexp.MustCompile(`<(rect|path|article|tr)[^>]* class="([^"]*)"`)

// drawings counts a page's drawn elements by kind and class.
func drawings(page string) map[string]int {
	out := map[string]int{}
	for _, m := range classRE.FindAllStringSubmatch(page, -1) {
		out[m[1]+"."+m[2]]++
	}
	return out
}
