package review_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/review"
	"github.com/lockjepsen/lockjepsen/testkit/browsertest"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

// A review of the token lock on a single Redis, narrowed to two threats
// and three mitigations, one seed each: the cells are the CI-tested
// scenarios gc-pause, gc-pause-fenced, crash-no-fsync, crash-fsync-always
// and crash-delayed-restart, whose verdicts do not depend on timing (a
// pause between the lease check and the write loses an update; a restart
// without fsync forgets every key, and the runs stop at the first
// overlap). Chromium then reads the verdict and the table off the page.
func TestReviewOfTheTokenLock(t *testing.T) {
	redistest.RequireBinary(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "review")
	r, err := review.Run(context.Background(), review.Options{
		System: cluster.Single, Lock: locks.Token, Seeds: 1, Budget: 5 * time.Minute,
		Threats:     []string{"client-pause", "server-restart"},
		Mitigations: []string{"fencing", "fsync-always", "delayed-restart"},
		Store:       filepath.Join(dir, "store"), Out: out,
		Say: func(format string, a ...any) { t.Logf(format, a...) },
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"client-pause": review.StateUnsafe, "client-pause+fencing": review.StateNotFound,
		"server-restart": review.StateUnsafe, "server-restart+fsync-always": review.StateNotFound,
		"server-restart+delayed-restart": review.StateNotFound, "server-restart+fencing": "",
	}
	for _, row := range r.Rows {
		for _, c := range append([]review.Cell{row.Configured}, row.Tried...) {
			key := c.Threat
			if c.Mitigation != "" {
				key += "+" + c.Mitigation
			}
			if w, ok := want[key]; ok && w != "" && c.State != w {
				t.Errorf("%s: %s, want %s (%s)", key, c.State, w, c.Note)
			}
			for _, run := range c.Runs {
				if _, err := os.Stat(run.Report); err != nil {
					t.Errorf("%s: its report: %v", key, err)
				}
			}
			if c.State != review.StateNotNeeded && len(c.Command) < 3 {
				t.Errorf("%s: no command: %v", key, c.Command)
			}
		}
	}
	// The three answers: the token lock kept its promise; the restart is
	// the deployment's loss and the pause the use's.
	if r.LockVerdict != review.LockHeld || len(r.Mechanisms) != 0 {
		t.Errorf("lock verdict %s, mechanisms %+v; want held, none", r.LockVerdict, r.Mechanisms)
	}
	for _, row := range r.Rows {
		c := row.Configured
		want := map[string][3]string{
			"client-pause":   {review.StateNotFound, review.StateNotFound, review.StateUnsafe},
			"server-restart": {review.StateNotFound, review.StateUnsafe, review.StateNotFound},
		}[row.Threat]
		if got := [3]string{c.LockState, c.DeploymentState, c.UseState}; got != want {
			t.Errorf("%s: lock, deployment, use %v, want %v", row.Threat, got, want)
		}
	}
	readPage(t, filepath.Join(out, review.PageFile))
}

// readPage opens the review in Chromium and reads it as a person would.
func readPage(t *testing.T, path string) {
	bctx := browsertest.Start(t)
	ctx, pe := browsertest.Open(t, bctx, "file://"+path)
	verdict, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#verdict")))
	if err != nil {
		t.Fatal(err)
	}
	// Each line's mitigations are checked one by one: the fencing cell of
	// the restart row is not pinned (its tokens come from the server that
	// forgot them, and whether a stale write lands in 3 s depends on the
	// machine), and it would join the list of what closed the threat.
	for _, want := range [][]string{
		{"The lock held under every threat tried"},
		{"The deployment lost the key under server restart"},
		{"Its use is unsafe under client pause"},
		{"Client pause: not found again with", "fencing tokens checked at the resource (on the resource)"},
		{"Server restart: not found again with", "appendfsync always", "a crashed node restarted only after a TTL"},
	} {
		if sentence := sentenceFrom(verdict, want[0]); sentence == "" || !containsAll(sentence, want[1:]) {
			t.Errorf("the verdict lacks %q:\n%s", want, verdict)
		}
	}
	cells, err := chromedp.Run(ctx, chromedp.Evaluate[[][]string](
		`[...document.querySelectorAll("#cells tbody tr")].map(tr => [...tr.cells].map(td => td.querySelector(".state") ? td.querySelector(".state").innerText : td.innerText))`))
	if err != nil {
		t.Fatal(err)
	}
	if len(cells) != 2 {
		t.Fatalf("table rows: %q", cells)
	}
	// Columns: threat, as deployed, fencing, fsync-always, delayed-restart.
	for i, want := range [][]string{
		{"client pause", "use unsafe", "resource not found in 1 × 3s", "—", "—"},
		{"immediate restart", "deployment lost the key", "", "not found in 1 × 3s", "not found in 1 × 3s"},
	} {
		row := cells[i]
		if len(row) != len(want) {
			t.Fatalf("row %d: %q", i, row)
		}
		for j, w := range want {
			if w != "" && !strings.Contains(row[j], w) {
				t.Errorf("row %d column %d: %q, want %q", i, j, row[j], w)
			}
		}
	}
	hrefs, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#cells .state a")].map(a => a.href)`))
	if err != nil || len(hrefs) < 4 {
		t.Fatalf("cell links %q: %v", hrefs, err)
	}
	for _, h := range hrefs {
		if _, err := os.Stat(strings.TrimPrefix(h, "file://")); err != nil {
			t.Errorf("a cell links to %s: %v", h, err)
		}
	}
	if errs := pe.List(); len(errs) > 0 {
		t.Errorf("page errors: %v", errs)
	}
}

func TestMain(m *testing.M) {
	locks.SilenceRedisLogs()
	os.Exit(m.Run())
}

// sentenceFrom is the sentence of text that starts at prefix, or "".
func sentenceFrom(text, prefix string) string {
	i := strings.Index(text, prefix)
	if i < 0 {
		return ""
	}
	s := text[i:]
	if end := strings.Index(s, "."); end >= 0 {
		s = s[:end]
	}
	return s
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
