// Package browsertest starts one headless Chromium for a test and opens
// pages in it: the report and review pages are checked as a person's
// browser renders them.
package browsertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Find returns Chromium's path; the browser tests skip without it
// unless LOCKJEPSEN_REQUIRE_BROWSER is set.
func Find(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("LOCKJEPSEN_REQUIRE_BROWSER") != "" {
		t.Fatal("a Chromium browser is required (apt-get install chromium)")
	}
	t.Skip("skipping: no chromium (apt-get install chromium, or set LOCKJEPSEN_REQUIRE_BROWSER=1 to fail instead)")
	return ""
}

// Start starts one headless Chromium for the test; chromedp stops the
// process it started at cleanup. Its profile and its TMPDIR are under the
// test's temporary directory: Chromium makes its singleton directory
// (org.chromium.Chromium.*, the SingletonSocket and SingletonCookie) in
// $TMPDIR, not in the profile, and leaves it behind.
func Start(t *testing.T) context.Context {
	t.Helper()
	bin := Find(t)
	dir := t.TempDir()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.NoSandbox,
		chromedp.WindowSize(1400, 1000),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(filepath.Join(dir, "chromium")),
		chromedp.Env("TMPDIR="+dir),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// PageErrors collects console errors, uncaught exceptions and browser log
// errors (a failed load) of a tab.
type PageErrors struct {
	mu   sync.Mutex
	errs []string
}

func (p *PageErrors) add(s string) {
	p.mu.Lock()
	p.errs = append(p.errs, s)
	p.mu.Unlock()
}

func (p *PageErrors) List() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.errs...)
}

// Open loads url in a new tab and returns the tab and its errors.
func Open(t *testing.T, bctx context.Context, url string) (context.Context, *PageErrors) {
	t.Helper()
	ctx, cancel := chromedp.NewContext(bctx)
	t.Cleanup(cancel)
	ctx, cancelT := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(cancelT)
	pe := &PageErrors{}
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				pe.add(fmt.Sprintf("%s: %s (%s:%d)", m.Type, m.Text, m.URL, m.Line+1))
			}
		}
	}()
	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitReady(chromedp.CSS("body"))); err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	return ctx, pe
}
