package reports_test

import (
	"encoding/json"
	"fmt"
	"html"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/history"
)

// A checked run's page lists every dangerous moment with its count, the
// ones that never happened too; a run checked before moments were counted
// has no such section rather than a table of zeros it never measured.
func TestWriteRunShowsExercised(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "exercised", "20261129T090000.000Z")
	ops := []history.Op{
		{Time: 1_000_000, Type: history.Invoke, F: history.Acquire, Key: "lock-0", Value: &history.Value{TTL: 5e8}},
		{Time: 1_300_000, Type: history.OK, F: history.Acquire, Key: "lock-0", Value: &history.Value{Token: "p0.1", ValidUntil: history.I64(4e8)}},
		// A pause on the one node while the lease is live.
		{Time: 10_000_000, Process: history.NemesisProcess, Type: history.Info, F: "pause", Value: &history.Value{Phase: "start", Targets: []string{"n1"}}},
		{Time: 20_000_000, Type: history.Invoke, F: history.Release, Key: "lock-0", Value: &history.Value{Token: "p0.1"}},
		{Time: 20_200_000, Type: history.OK, F: history.Release, Key: "lock-0"},
		{Time: 30_000_000, Process: history.NemesisProcess, Type: history.Info, F: "pause", Value: &history.Value{Phase: "stop", Targets: []string{"n1"}}},
	}
	writeRunFiles(t, dir, fixtureConfig("exercised"), fixtureInfo(), ops)
	if _, err := harness.Check(dir); err != nil {
		t.Fatal(err)
	}
	// The page's text, unescaped: the words are checker's, whatever the
	// template escapes in them.
	want := []string{`id="exercised"`, `href="#exercised"`, "a server fault hit a node holding a live lease's key once"}
	for _, m := range checker.ExercisedMoments() {
		n := 0
		if m.Name == checker.MomentNodeFaults {
			n = 1
		}
		want = append(want, fmt.Sprintf(`<td><code>%s</code></td><td class="count">%d</td><td>%s</td>`, m.Name, n, m.Means))
	}
	page := html.UnescapeString(writePage(t, dir, nil))
	for _, w := range want {
		if !strings.Contains(page, w) {
			t.Errorf("the page lacks %q", w)
		}
	}

	// The same run as stored before moments were counted.
	path := filepath.Join(dir, harness.ResultsFile)
	var res map[string]any
	if err := json.Unmarshal([]byte(readFile(t, path)), &res); err != nil {
		t.Fatal(err)
	}
	if _, ok := res["exercised"]; !ok {
		t.Fatalf("results.json has no exercised counts")
	}
	delete(res, "exercised")
	writeJSON(t, path, res)
	if page := writePage(t, dir, nil); strings.Contains(page, `id="exercised"`) || strings.Contains(page, "exercised:") {
		t.Errorf("a run without counts shows an exercised section or line")
	}
}
