package reports_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/reports"
	"github.com/lockjepsen/lockjepsen/runfile"
)

// writePage writes the run's report and returns the page, failing the
// test for each of want it lacks.
func writePage(t *testing.T, dir string, want []string) string {
	t.Helper()
	path, err := reports.WriteRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	page := readFile(t, path)
	for _, w := range want {
		if !strings.Contains(page, w) {
			t.Errorf("the page lacks %q", w)
		}
	}
	return page
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Each real run's page says what the checkers said, links its files and
// fetches nothing from the network.
func TestWriteRunRealRuns(t *testing.T) {
	for _, r := range realRuns(t) {
		t.Run(r.name, func(t *testing.T) {
			path, err := reports.WriteRun(r.dir)
			if err != nil {
				t.Fatal(err)
			}
			if path != filepath.Join(r.dir, "report.html") {
				t.Errorf("path %s", path)
			}
			page := readFile(t, path)
			must := []string{
				strings.ToUpper(r.res.Verdict),
				"lockjepsen test --name " + r.name,
				`class="timeline"`,
				`href="history.jsonl.zst"`,
				`href="nodes/n1/redis.log"`,
				"Redis version",
			}
			for _, f := range r.res.Linearizability.Files {
				must = append(must, `href="`+f+`"`)
			}
			for _, s := range must {
				if !strings.Contains(page, s) {
					t.Errorf("the page lacks %q", s)
				}
			}
			for _, s := range []string{"http://", "https://", "<script src", "@import"} {
				if strings.Contains(page, s) {
					t.Errorf("the page refers to the network: %q", s)
				}
			}
			checkWitnesses(t, page, len(r.res.Exclusion.Violations))
			switch r.name {
			case "unsafe":
				// Described from run.json: what the harness that ran it
				// said the lock and faults were.
				for _, want := range []string{"release with a plain DEL", "a client stalls inside its critical section"} {
					if !strings.Contains(page, want) {
						t.Errorf("the unsafe run's page does not describe its lock and faults: no %q", want)
					}
				}
			case "resource":
				if !strings.Contains(page, "lost updates") || !strings.Contains(page, `id="resource"`) {
					t.Errorf("the resource run's page does not show the resource's corruption")
				}
			case "stuck":
				if !strings.Contains(page, "STUCK") || !strings.Contains(page, `class="stuck"`) {
					t.Errorf("the stuck run's page does not show the stuck lock")
				}
			}
		})
	}
}

// A lock of the user's own is not described as the built-in lock its
// configuration names, and a run stored without descriptions says so
// rather than guess.
func TestWriteRunDescribesTheLockItWasGiven(t *testing.T) {
	for _, c := range []struct {
		name      string
		described *runfile.Description
		want      []string
		not       string
	}{
		{"custom", &runfile.Description{Lock: "a lock of your own (harness.Config.Locker), not one of lockjepsen's", CustomLock: true, Workload: "w"},
			[]string{"a lock of your own", "using the custom lock"}, "the correct single-instance lock"},
		{"undescribed", nil, []string{"not described in run.json"}, "the correct single-instance lock"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), c.name, "20261129T090000.000Z")
			info := fixtureInfo()
			info.Described = c.described
			ops := []history.Op{
				{Index: 0, Time: 1000, Type: history.Invoke, F: history.Acquire, Key: "lock-0", Value: &history.Value{TTL: 5e8}},
				{Index: 1, Time: 200000, Type: history.OK, F: history.Acquire, Key: "lock-0", Value: &history.Value{Token: "p0.1", ValidUntil: history.I64(4e8)}},
			}
			writeRunFiles(t, dir, fixtureConfig(c.name), info, ops)
			page := writePage(t, dir, c.want)
			if strings.Contains(page, c.not) {
				t.Errorf("the page says %q", c.not)
			}
		})
	}
}

// Runs that are not whole still render, and say what is missing.
func TestWriteRunOddRuns(t *testing.T) {
	odd := oddRuns(t, t.TempDir())
	want := map[string][]string{
		"unchecked":   {"NOT CHECKED", "lockjepsen check", "Unfinished run", "Truncated history"},
		"interrupted": {"Incomplete run", "Harness errors", "heal pause on n1", "never stopped"},
		"empty":       {"Empty history"},
		"noholds":     {"No lock was ever granted", "STUCK"},
	}
	for name, dir := range odd {
		t.Run(name, func(t *testing.T) {
			path, err := reports.WriteRun(dir)
			if err != nil {
				t.Fatal(err)
			}
			page := readFile(t, path)
			for _, s := range want[name] {
				if !strings.Contains(page, s) {
					t.Errorf("the page lacks %q", s)
				}
			}
		})
	}
	if _, err := reports.WriteRun(t.TempDir()); err == nil || !strings.Contains(err.Error(), "not a lockjepsen run directory") {
		t.Errorf("an empty directory: err = %v", err)
	}
}

func TestWriteMatrix(t *testing.T) {
	base := t.TempDir()
	odd := oddRuns(t, filepath.Join(base, "store"))
	dirs := []string{odd["interrupted"], odd["noholds"], odd["empty"]}
	path := filepath.Join(base, "out", "matrix.html")
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := reports.WriteMatrix(path, dirs, "three odd runs"); err != nil {
		t.Fatal(err)
	}
	page := readFile(t, path)
	if !strings.Contains(page, "three odd runs") {
		t.Errorf("no title")
	}
	for _, d := range dirs {
		rel, _ := filepath.Rel(filepath.Dir(path), filepath.Join(d, "report.html"))
		if !strings.Contains(page, `href="`+filepath.ToSlash(rel)+`"`) {
			t.Errorf("no link to %s", rel)
		}
		if _, err := os.Stat(filepath.Join(d, "report.html")); err != nil {
			t.Errorf("the matrix links %s, which has no report: %v", d, err)
		}
	}
	if err := reports.WriteMatrix(path, []string{base}, ""); err == nil {
		t.Errorf("a directory that is not a run was accepted")
	}
}

func get(t *testing.T, srv *httptest.Server, path string) (int, string) {
	t.Helper()
	c := srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 == 3 {
		return resp.StatusCode, resp.Header.Get("Location")
	}
	return resp.StatusCode, string(b)
}

func TestHandler(t *testing.T) {
	base := t.TempDir()
	store := filepath.Join(base, "store")
	odd := oddRuns(t, store)
	os.WriteFile(filepath.Join(base, "secret.txt"), []byte("secret"), 0o644)
	if err := os.Symlink(filepath.Join(base, "secret.txt"), filepath.Join(store, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("interrupted/20261129T090001.000Z", filepath.Join(store, "latest")); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(reports.Handler(store))
	defer srv.Close()

	code, body := get(t, srv, "/")
	if code != 200 {
		t.Fatalf("index: %d %s", code, body)
	}
	for name := range odd {
		if !strings.Contains(body, "/runs/"+name+"/") {
			t.Errorf("the index does not list %s", name)
		}
	}
	if strings.Count(body, "/runs/interrupted/") != strings.Count(body, "/runs/noholds/") {
		t.Errorf("store/latest made a run appear twice")
	}
	// Newest first: the fixtures' names carry their order.
	if strings.Index(body, "/runs/noholds/") > strings.Index(body, "/runs/unchecked/") {
		t.Errorf("runs are not newest first")
	}
	code, body = get(t, srv, "/?verdict=stuck")
	if code != 200 || !strings.Contains(body, "/runs/noholds/") || strings.Contains(body, "/runs/interrupted/") {
		t.Errorf("verdict filter: %d", code)
	}
	code, body = get(t, srv, "/?fault=pause")
	if code != 200 || strings.Contains(body, "/runs/noholds/") {
		t.Errorf("fault filter kept a run without that fault")
	}
	code, body = get(t, srv, "/matrix?lock=token")
	if code != 200 || !strings.Contains(body, `class="matrix"`) {
		t.Errorf("matrix: %d", code)
	}

	// A run directory redirects to its report, rendered on demand.
	rel := "interrupted/20261129T090001.000Z"
	code, loc := get(t, srv, "/runs/"+rel+"/")
	if code != http.StatusFound || loc != "/runs/"+rel+"/report.html" {
		t.Errorf("run dir: %d %s", code, loc)
	}
	os.Remove(filepath.Join(store, rel, "report.html"))
	code, body = get(t, srv, "/runs/"+rel+"/report.html")
	if code != 200 || !strings.Contains(body, "Incomplete run") {
		t.Errorf("report on demand: %d", code)
	}
	if _, err := os.Stat(filepath.Join(store, rel, "report.html")); err != nil {
		t.Errorf("the report was not cached: %v", err)
	}
	code, body = get(t, srv, "/runs/latest/report.html")
	if code != 200 || !strings.Contains(body, "Incomplete run") {
		t.Errorf("store/latest: %d", code)
	}
	code, body = get(t, srv, "/runs/"+rel+"/?files")
	if code != 200 || !strings.Contains(body, "history.jsonl") || !strings.Contains(body, "results.json") {
		t.Errorf("run files listing: %d %s", code, body)
	}
	code, body = get(t, srv, "/runs/"+rel+"/history.jsonl")
	if code != 200 || !strings.Contains(body, `"f":"acquire"`) {
		t.Errorf("history: %d", code)
	}
	// A run that wrote its history compressed is shown as JSON Lines too.
	plain := filepath.Join(store, rel, "history.jsonl")
	hw, err := history.CreateWriter(plain + history.CompressedSuffix)
	if err != nil {
		t.Fatal(err)
	}
	hw.Write([]byte(body))
	if err := hw.Close(); err != nil {
		t.Fatal(err)
	}
	os.Remove(plain)
	if code, got := get(t, srv, "/runs/"+rel+"/history.jsonl"); code != 200 || got != body {
		t.Errorf("the compressed history served as text: %d, %d bytes, want the %d of the plain file", code, len(got), len(body))
	}
	// A report is not drawn from files a link leads to outside the store
	// (issue 53, item 11): the renderer reads by path, outside the root.
	outside := filepath.Join(base, "outside-run")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config.json", "results.json", "run.json"} {
		if b, err := os.ReadFile(filepath.Join(store, rel, f)); err == nil {
			os.WriteFile(filepath.Join(outside, f), b, 0o644)
			os.Remove(filepath.Join(store, rel, f))
			if err := os.Symlink(filepath.Join(outside, f), filepath.Join(store, rel, f)); err != nil {
				t.Fatal(err)
			}
		}
	}
	os.Remove(filepath.Join(store, rel, "report.html"))
	if code, body := get(t, srv, "/runs/"+rel+"/report.html"); code != http.StatusForbidden || !strings.Contains(body, "leads out of the store") {
		t.Errorf("a report from files outside the store: %d %.200s", code, body)
	}
	// Nothing outside the store.
	for _, p := range []string{"/runs/../secret.txt", "/runs/%2e%2e/secret.txt", "/runs/escape", "/runs/" + rel + "/../../../secret.txt", "/runs//etc/passwd"} {
		code, body := get(t, srv, p)
		if strings.Contains(body, "secret") && code == 200 || strings.Contains(body, "root:") {
			t.Errorf("%s served a file outside the store: %d %q", p, code, body)
		}
	}
}
