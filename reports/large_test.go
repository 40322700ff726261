package reports_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/reports"
)

var large = flag.Bool("large", false, "also render a generated 1,000,000-operation run (about 10 s)")

const (
	largeOps      = 1_000_000
	largeMaxBytes = 5 << 20
	largeMaxTime  = 10 * time.Second
)

// A million-operation run renders in seconds into at most 5 MB, and no
// violation or fault is lost on the way. Run with -large (CI does not by
// default: generating the history takes as long as rendering it).
func TestWriteRunLarge(t *testing.T) {
	if !*large && os.Getenv("LOCKJEPSEN_LARGE") == "" {
		t.Skip("pass -large (or set LOCKJEPSEN_LARGE=1) to render a 1,000,000-operation run")
	}
	dir := filepath.Join(t.TempDir(), "large", "20261129T100000.000Z")
	violations := genLarge(t, dir, largeOps, 100)
	start := time.Now()
	path, err := reports.WriteRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("1,000,000 operations (%d violations): report in %s, %.1f MB", violations, took.Round(time.Millisecond), float64(st.Size())/(1<<20))
	if took > largeMaxTime {
		t.Errorf("rendering took %s, want under %s", took, largeMaxTime)
	}
	if st.Size() > largeMaxBytes {
		t.Errorf("report is %d bytes, want at most %d", st.Size(), largeMaxBytes)
	}
	b, _ := os.ReadFile(path)
	page := string(b)
	// Every stored witness is on the page; every overlap is drawn.
	checkWitnesses(t, page, min(violations, 100))
	if n := strings.Count(page, `class="overlap"`); n < 1 {
		t.Errorf("no overlap drawn")
	}
	if n := strings.Count(page, `class="hold red"`); n < violations/2 {
		t.Errorf("%d red bars for %d violations: some were merged away", n, violations)
	}
}

// BenchmarkWriteRun1M renders a generated 1,000,000-operation run; it
// reports the page's size.
func BenchmarkWriteRun1M(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "large", "20261129T100000.000Z")
	genLarge(b, dir, largeOps, 100)
	b.ResetTimer()
	var size int64
	for b.Loop() {
		path, err := reports.WriteRun(dir)
		if err != nil {
			b.Fatal(err)
		}
		st, _ := os.Stat(path)
		size = st.Size()
	}
	b.ReportMetric(float64(size)/(1<<20), "MB")
}

// checkWitnesses checks that a page draws the first FullWitnesses of kept
// witnesses in full and gives every other one a row.
func checkWitnesses(t *testing.T, page string, kept int) {
	t.Helper()
	full := min(kept, reports.FullWitnesses)
	if n := strings.Count(page, `<article class="witness"`); n != full {
		t.Errorf("%d witnesses in full, want %d", n, full)
	}
	for i := 1; i <= kept; i++ {
		if !strings.Contains(page, fmt.Sprintf(`id="violation-%d"`, i)) {
			t.Errorf("witness %d has no anchor on the page", i)
		}
	}
	if rows := strings.Count(page, `<tr id="violation-`); rows != kept-full {
		t.Errorf("%d witness rows, want %d", rows, kept-full)
	}
}

// A run with a hundred kept witnesses, each among clients retrying fast,
// renders to a page that stays light: the first witnesses in full, the
// rest a row each (a 60 s setnx-del run under client pauses once made a
// 15 MB page that Chromium took 19 s to load).
func TestManyWitnessesStayLight(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "many", "20261129T100000.000Z")
	violations := genLarge(t, dir, 100_000, 100)
	path, err := reports.WriteRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("100,000 operations (%d violations): %.2f MB", violations, float64(len(b))/(1<<20))
	if len(b) > largeMaxBytes {
		t.Errorf("report is %d bytes, want at most %d", len(b), largeMaxBytes)
	}
	checkWitnesses(t, string(b), min(violations, 100))
}
