package reports

import (
	"bytes"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/runfile"
)

// Handler serves a store directory for `lockjepsen serve`:
//
//	/              every run, newest first, with its verdict; filters by
//	               system, lock, fault and verdict (query parameters)
//	/matrix        the matrix page of the runs the same filters select
//	/runs/RUN/     redirects to the run's report.html, rendered on demand
//	               when it is missing or older than the run's files;
//	               /runs/RUN/?files lists the run's directory
//	/runs/RUN/FILE the run's files (history, results, node logs, …)
//
// Only files under the store are served: paths are resolved through an
// os.Root, so neither ".." nor a symbolic link can lead out of it.
func Handler(store string) http.Handler {
	h := &server{store: store, cache: map[string]cached{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", h.index)
	mux.HandleFunc("GET /matrix", h.matrix)
	mux.HandleFunc("GET /runs/{path...}", h.file)
	return mux
}

type server struct {
	store string
	mu    sync.Mutex
	cache map[string]cached // run dir (relative) -> summary
	// render serializes on-demand rendering so that concurrent requests
	// do not render the same big run twice.
	render sync.Mutex
}

type cached struct {
	mod time.Time
	sum runSummary
}

// runs lists the runs under the store: directories up to four levels deep
// holding a history or a configuration. Symbolic links (store/latest) are
// not followed, so every run is listed once.
func (h *server) runs() ([]runSummary, error) {
	root, err := os.OpenRoot(h.store)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	var rels []string
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == "." {
				return err
			}
			return nil
		}
		if !d.IsDir() {
			return nil
		}
		if p != "." && (strings.Count(p, "/") >= 4 || d.Name() == "nodes" && len(rels) > 0 && strings.HasPrefix(p, rels[len(rels)-1]+"/")) {
			return fs.SkipDir
		}
		for _, f := range runMarkers {
			if st, err := root.Stat(path.Join(p, f)); err == nil && st.Mode().IsRegular() {
				if p != "." {
					rels = append(rels, p)
				}
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]runSummary, 0, len(rels))
	for _, rel := range rels {
		out = append(out, h.summary(rel))
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Started.After(out[j].Started) })
	return out, nil
}

func (h *server) summary(rel string) runSummary {
	dir := filepath.Join(h.store, filepath.FromSlash(rel))
	var mod time.Time
	for _, f := range runInputs {
		if st, err := os.Stat(filepath.Join(dir, f)); err == nil && st.ModTime().After(mod) {
			mod = st.ModTime()
		}
	}
	h.mu.Lock()
	c, ok := h.cache[rel]
	h.mu.Unlock()
	if ok && c.mod.Equal(mod) {
		return c.sum
	}
	s := summarize(loadMeta(dir))
	s.Href = "/runs/" + urlPath(rel) + "/" + ReportFile
	s.Files = "/runs/" + urlPath(rel) + "/?files"
	s.Dir = rel
	h.mu.Lock()
	h.cache[rel] = cached{mod, s}
	h.mu.Unlock()
	return s
}

func urlPath(rel string) string {
	parts := strings.Split(rel, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}

// filters are the index's query parameters.
type filters struct {
	System, Lock, Fault, Verdict string
}

func (f filters) match(s runSummary) bool {
	if f.System != "" && s.System != f.System {
		return false
	}
	if f.Lock != "" && s.Lock != f.Lock {
		return false
	}
	if f.Verdict != "" && s.Verdict != f.Verdict {
		return false
	}
	if f.Fault != "" {
		if f.Fault == "none" {
			return s.Nemesis == "none"
		}
		ok := false
		for _, n := range s.Faults {
			ok = ok || n == f.Fault
		}
		return ok || s.Nemesis == f.Fault
	}
	return true
}

type indexPage struct {
	Store    string
	Runs     []runSummary
	Total    int
	F        filters
	Systems  []string
	Locks    []string
	Faults   []string
	Verdicts []string
	Query    string
	Error    string
}

func (h *server) selected(r *http.Request) (all, sel []runSummary, f filters, err error) {
	q := r.URL.Query()
	f = filters{System: q.Get("system"), Lock: q.Get("lock"), Fault: q.Get("fault"), Verdict: q.Get("verdict")}
	all, err = h.runs()
	for _, s := range all {
		if f.match(s) {
			sel = append(sel, s)
		}
	}
	return all, sel, f, err
}

func (h *server) index(w http.ResponseWriter, r *http.Request) {
	all, sel, f, err := h.selected(r)
	pg := &indexPage{Store: h.store, Runs: sel, Total: len(all), F: f, Query: r.URL.RawQuery}
	if err != nil {
		pg.Error = err.Error()
	}
	set := func(vals map[string]bool) []string {
		out := make([]string, 0, len(vals))
		for v := range vals {
			if v != "" {
				out = append(out, v)
			}
		}
		sort.Strings(out)
		return out
	}
	sys, locks, faults, verdicts := map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, s := range all {
		sys[s.System], locks[s.Lock], verdicts[s.Verdict] = true, true, true
		if len(s.Faults) == 0 {
			faults[s.Nemesis] = true
		}
		for _, n := range s.Faults {
			faults[n] = true
		}
	}
	pg.Systems, pg.Locks, pg.Faults, pg.Verdicts = set(sys), set(locks), set(faults), set(verdicts)
	servePage(w, func(b io.Writer) error { return tmpl.ExecuteTemplate(b, "index.html.tmpl", pg) })
}

func (h *server) matrix(w http.ResponseWriter, r *http.Request) {
	_, sel, f, err := h.selected(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	title := "lockjepsen runs in " + h.store
	var parts []string
	for _, p := range []string{f.System, f.Lock, f.Fault, f.Verdict} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	if len(parts) > 0 {
		title += " (" + strings.Join(parts, ", ") + ")"
	}
	mp := buildMatrix(sel, title)
	mp.Back = "/?" + r.URL.RawQuery
	servePage(w, func(b io.Writer) error { return tmpl.ExecuteTemplate(b, "matrix.html.tmpl", mp) })
}

// file serves /runs/REL: a run directory redirects to its report, a
// report is rendered on demand, anything else is a file of the store.
func (h *server) file(w http.ResponseWriter, r *http.Request) {
	rel := strings.TrimSuffix(r.PathValue("path"), "/")
	if rel == "" {
		http.Redirect(w, r, "/", http.StatusFound)
		return
	}
	if !fs.ValidPath(rel) {
		http.NotFound(w, r)
		return
	}
	root, err := os.OpenRoot(h.store)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer root.Close()
	isRun := func(p string) bool {
		for _, f := range runMarkers {
			if st, err := root.Stat(path.Join(p, f)); err == nil && st.Mode().IsRegular() {
				return true
			}
		}
		return false
	}
	if isRun(rel) && r.URL.Query().Has("files") {
		// The run's directory listing.
		if !strings.HasSuffix(r.URL.Path, "/") {
			http.Redirect(w, r, "/runs/"+urlPath(rel)+"/?files", http.StatusFound)
			return
		}
		http.ServeFileFS(w, r, root.FS(), rel)
		return
	}
	if isRun(rel) {
		http.Redirect(w, r, "/runs/"+urlPath(rel)+"/"+ReportFile, http.StatusFound)
		return
	}
	if path.Base(rel) == ReportFile && isRun(path.Dir(rel)) {
		h.report(w, r, root, path.Dir(rel))
		return
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if h.servePlainHistory(w, root, rel) {
		return
	}
	if ext := path.Ext(rel); ext == ".jsonl" || ext == ".log" || ext == ".aof" || ext == ".manifest" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	}
	http.ServeFileFS(w, r, root.FS(), rel)
}

// report serves a run's report.html, (re)writing it first when it is
// missing or older than the run's files; a store that cannot be written
// gets the page rendered in memory.
func (h *server) report(w http.ResponseWriter, r *http.Request, root *os.Root, rel string) {
	if link := escapingLink(root, rel); link != "" {
		// The renderer reads the run's files by path, outside the root:
		// a link leading out of the store must stop it here, as a request
		// for that file itself is stopped.
		http.Error(w, "a file of this run leads out of the store: "+link, http.StatusForbidden)
		return
	}
	dir := filepath.Join(h.store, filepath.FromSlash(rel))
	h.render.Lock()
	defer h.render.Unlock()
	var newest time.Time
	for _, f := range runInputs {
		if st, err := root.Stat(path.Join(rel, f)); err == nil && st.ModTime().After(newest) {
			newest = st.ModTime()
		}
	}
	st, err := root.Stat(path.Join(rel, ReportFile))
	if err == nil && !st.ModTime().Before(newest) {
		http.ServeFileFS(w, r, root.FS(), path.Join(rel, ReportFile))
		return
	}
	if _, err := WriteRun(dir); err == nil {
		http.ServeFileFS(w, r, root.FS(), path.Join(rel, ReportFile))
		return
	}
	servePage(w, func(b io.Writer) error { return RenderRun(b, dir) })
}

// servePage renders a whole page before the first byte goes out, so that
// a failed rendering answers 500 rather than half a page with 200.
func servePage(w http.ResponseWriter, render func(io.Writer) error) {
	var buf bytes.Buffer
	if err := render(&buf); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(buf.Bytes())
}

// servePlainHistory answers a request for a run's history.jsonl that the
// run wrote compressed with the JSON Lines themselves, so that a browser
// shows them; it reports whether it answered.
func (h *server) servePlainHistory(w http.ResponseWriter, root *os.Root, rel string) bool {
	if path.Base(rel) != runfile.HistoryFile {
		return false
	}
	if _, err := root.Stat(rel); err == nil {
		return false // a plain history of its own
	}
	zrel := path.Join(path.Dir(rel), runfile.CompressedHistoryFile)
	if st, err := root.Stat(zrel); err != nil || !st.Mode().IsRegular() {
		return false
	}
	f, err := history.Open(filepath.Join(h.store, filepath.FromSlash(zrel)))
	if err != nil {
		return false
	}
	defer f.Close()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.Copy(w, f) // a client that goes away mid-copy wanted no more
	return true
}

// escapingLink is the first symbolic link under the run directory rel
// that leads out of root (or nowhere), "" when there is none.
func escapingLink(root *os.Root, rel string) string {
	found := ""
	fs.WalkDir(root.FS(), rel, func(p string, d fs.DirEntry, err error) error {
		if err != nil || found != "" {
			return fs.SkipDir
		}
		if d.Type()&fs.ModeSymlink != 0 {
			if _, serr := root.Stat(p); serr != nil {
				found = p
				return fs.SkipAll
			}
		}
		return nil
	})
	return found
}
