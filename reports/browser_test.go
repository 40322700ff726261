package reports_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/lockjepsen/lockjepsen/reports"
	"github.com/lockjepsen/lockjepsen/testkit/browsertest"
)

// The browser helpers, shared with the review's page tests.
var (
	browser = browsertest.Start
	open    = browsertest.Open
)

var shots = os.Getenv("LOCKJEPSEN_SCREENSHOTS") != ""

// screenshot saves the element sel (or the viewport when sel is "") as
// testdata/screenshots/name.png when LOCKJEPSEN_SCREENSHOTS is set.
func screenshot(t *testing.T, ctx context.Context, name, sel string) {
	t.Helper()
	if !shots {
		return
	}
	var buf []byte
	var err error
	if sel == "" {
		buf, err = chromedp.Run(ctx, chromedp.CaptureScreenshot())
	} else {
		buf, err = chromedp.Run(ctx, chromedp.Screenshot(chromedp.CSS(sel)))
	}
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := filepath.Join("testdata", "screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), buf, 0o644); err != nil {
		t.Fatal(err)
	}
}

func count(t *testing.T, ctx context.Context, sel string) int {
	t.Helper()
	nodes, err := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSSAll(sel), chromedp.AtLeast(0)))
	if err != nil {
		t.Fatalf("query %s: %v", sel, err)
	}
	return len(nodes)
}

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

// The reports as a person sees them: real runs open in Chromium without
// a console error, with the verdict in words, the timeline and a witness
// for every violation the checker kept.
func TestBrowserReports(t *testing.T) {
	bctx := browser(t)
	runs := realRuns(t)
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			path, err := reports.WriteRun(r.dir)
			if err != nil {
				t.Fatal(err)
			}
			ctx, pe := open(t, bctx, "file://"+path)
			verdict := text(t, ctx, "#verdict")
			if !strings.Contains(verdict, strings.ToUpper(r.res.Verdict)) {
				t.Errorf("verdict box %q does not say %s", verdict, strings.ToUpper(r.res.Verdict))
			}
			if head := r.res.Summary()[0]; !strings.Contains(strings.ToLower(verdict), strings.ToLower(head[strings.Index(head, ": ")+2:])) {
				t.Errorf("verdict box %q lacks the verdict in words %q", verdict, head)
			}
			if repro := text(t, ctx, ".repro"); !strings.Contains(repro, "lockjepsen test --name "+r.name) {
				t.Errorf("no reproducing command: %q", repro)
			}
			if n := count(t, ctx, "#timeline svg.timeline"); n != 1 {
				t.Errorf("%d timelines", n)
			}
			if n := count(t, ctx, "#timeline svg rect.hold"); n == 0 {
				t.Errorf("the timeline draws no hold")
			}
			// The first FullWitnesses in full, the rest a row each; every
			// one tells its story.
			want := len(r.res.Exclusion.Violations)
			full := min(want, reports.FullWitnesses)
			if n := count(t, ctx, "article.witness"); n != full {
				t.Errorf("%d witnesses in full on the page, want %d of the %d results.json keeps", n, full, want)
			}
			if n := count(t, ctx, "article.witness svg.timeline"); n != full {
				t.Errorf("%d zoomed timelines for %d witnesses in full", n, full)
			}
			if n := count(t, ctx, "table.brief-witnesses tr[id]"); n != want-full {
				t.Errorf("%d witness rows, want %d", n, want-full)
			}
			for i, v := range r.res.Exclusion.Violations {
				story := text(t, ctx, fmt.Sprintf("#violation-%d .story", i+1))
				if story != v.Story {
					t.Errorf("witness %d tells %q, want %q", i+1, story, v.Story)
					break
				}
			}
			if n := count(t, ctx, "#latency svg"); n != 1 {
				t.Errorf("no latency plot")
			}
			if n := count(t, ctx, "#throughput svg"); n != 1 {
				t.Errorf("no throughput plot")
			}
			if errs := pe.List(); len(errs) > 0 {
				t.Errorf("console errors: %v", errs)
			}
			screenshot(t, ctx, r.name+"-top", "")
			screenshot(t, ctx, r.name+"-timeline", "#timeline")
			if want > 0 {
				screenshot(t, ctx, r.name+"-witness", "#violation-1")
			}
			screenshot(t, ctx, r.name+"-latency", "#latency")
			screenshot(t, ctx, r.name+"-throughput", "#throughput")
			switch r.name {
			case "resource":
				screenshot(t, ctx, r.name+"-resource", "#resource")
			case "stuck":
				screenshot(t, ctx, r.name+"-liveness", "#liveness")
			}
		})
	}
	t.Run("matrix", func(t *testing.T) {
		var dirs []string
		for _, r := range runs {
			dirs = append(dirs, r.dir)
		}
		path := filepath.Join(t.TempDir(), "matrix.html")
		if err := reports.WriteMatrix(path, dirs, "lockjepsen: three locks under faults"); err != nil {
			t.Fatal(err)
		}
		ctx, pe := open(t, bctx, "file://"+path)
		if n := count(t, ctx, "table.matrix a.run"); n != len(runs) {
			t.Errorf("%d run links in the grid, want %d", n, len(runs))
		}
		if errs := pe.List(); len(errs) > 0 {
			t.Errorf("console errors: %v", errs)
		}
		screenshot(t, ctx, "matrix", "")
		// Every link leads to a report that loads.
		hrefs, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("table.matrix a.run")].map(a => a.href)`))
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hrefs {
			c, pe := open(t, bctx, h)
			if n := count(t, c, "#verdict"); n != 1 {
				t.Errorf("%s: no verdict", h)
			}
			if errs := pe.List(); len(errs) > 0 {
				t.Errorf("%s: console errors: %v", h, errs)
			}
		}
	})
	t.Run("odd runs", func(t *testing.T) {
		for name, dir := range oddRuns(t, t.TempDir()) {
			path, err := reports.WriteRun(dir)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			ctx, pe := open(t, bctx, "file://"+path)
			if n := count(t, ctx, ".banner"); n == 0 {
				t.Errorf("%s: no banner says what is odd", name)
			}
			if errs := pe.List(); len(errs) > 0 {
				t.Errorf("%s: console errors: %v", name, errs)
			}
			screenshot(t, ctx, "odd-"+name, "")
		}
	})
	t.Run("serve", func(t *testing.T) {
		srv := httptest.NewServer(reports.Handler(realStore()))
		defer srv.Close()
		ctx, pe := open(t, bctx, srv.URL+"/")
		if n := count(t, ctx, "table.runs tr"); n != len(runs)+1 {
			t.Errorf("%d rows in the index, want %d runs + header", n, len(runs))
		}
		if errs := pe.List(); len(errs) > 0 {
			t.Errorf("console errors: %v", errs)
		}
		screenshot(t, ctx, "serve-index", "")
	})
}
