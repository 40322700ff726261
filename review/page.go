package review

import (
	"bytes"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"strings"

	"github.com/lockjepsen/lockjepsen/internal/atomicfile"
	"github.com/lockjepsen/lockjepsen/runfile"
)

// Files a review writes into its directory.
const (
	PageFile = "review.html"
	DataFile = "review.json"
)

// Write stores review.json and review.html in dir.
func (r *Review) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("review directory: %w", err)
	}
	if err := runfile.WriteJSON(filepath.Join(dir, DataFile), r); err != nil {
		return err
	}
	page, err := r.Page(dir)
	if err != nil {
		return err
	}
	return atomicfile.WriteBytes(filepath.Join(dir, PageFile), page)
}

// Read loads a stored review.json.
func Read(dir string) (*Review, error) {
	var r Review
	if err := runfile.ReadJSON(filepath.Join(dir, DataFile), &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// pageCell is a table cell as drawn.
type pageCell struct {
	State, Label, Class, Note, Story, Href, Ref string
	// Answers are the cell's three answers in a line.
	Answers string
	Empty   bool
}

// pageRow is a table row as drawn.
type pageRow struct {
	Title   string
	Catches string
	Cells   []pageCell
	Timings []string
}

// command is one cell's reproduction.
type command struct{ Ref, Cell, Line string }

// Page renders review.html with links relative to dir.
func (r *Review) Page(dir string) ([]byte, error) {
	var rows []pageRow
	var cmds []command
	for _, row := range r.Rows {
		pr := pageRow{Title: row.Title, Timings: row.Timings}
		if t, ok := LookupThreat(row.Threat); ok {
			pr.Catches = t.Catches
		}
		cells := []Cell{row.Configured}
		for _, col := range r.Columns {
			c, ok := row.Cell(col.Name)
			if !ok {
				c = Cell{Threat: row.Threat, Mitigation: col.Name}
			}
			cells = append(cells, c)
		}
		for _, c := range cells {
			pc := r.drawCell(c, dir)
			if len(c.Command) > 0 {
				pc.Ref = fmt.Sprintf("c%d", len(cmds)+1)
				name := short(c.Threat)
				if c.Mitigation != "" {
					name += " + " + r.title(c.Mitigation)
				}
				cmds = append(cmds, command{Ref: pc.Ref, Cell: name, Line: shellLine(c.Command)})
			}
			pr.Cells = append(pr.Cells, pc)
		}
		rows = append(rows, pr)
	}
	var buf bytes.Buffer
	err := pageTemplate.Execute(&buf, map[string]any{"R": r, "Rows": rows, "Commands": cmds, "Subject": r.subject(),
		"Effort": r.effort(), "TTL": fmtD(r.TTL), "Elapsed": fmtD(r.Ended.Sub(r.Started))})
	return buf.Bytes(), err
}

func (r *Review) subject() string {
	if len(r.Client) > 0 {
		return fmt.Sprintf("the client %q on %s", strings.Join(r.Client, " "), r.System)
	}
	return fmt.Sprintf("the %s lock on %s", r.Lock, r.System)
}

// stateLabels are the words a cell shows.
var stateLabels = map[string]string{
	StateUnsafe: "unsafe", StateStuck: "stuck", StateNotFound: "not found", StateUnknown: "unknown",
	StateError: "harness error", StateNotApplicable: "n/a", StateNotNeeded: "not needed", StateSkipped: "skipped",
}

func (r *Review) drawCell(c Cell, dir string) pageCell {
	if c.State == "" {
		return pageCell{Empty: true, Label: "—"}
	}
	pc := pageCell{State: c.State, Label: stateLabels[c.State], Class: c.State, Note: c.Note, Story: c.Story}
	if c.State == StateNotNeeded {
		pc.Note = "" // the row says why: the threat was not found
	}
	if c.State == StateNotFound {
		pc.Label = fmt.Sprintf("not found in %d × %s", len(c.Runs), fmtD(c.TimeLimit))
		if r.onResource(c.Mitigation) {
			pc.Label = "resource " + pc.Label
		}
	}
	if c.State == StateUnsafe && r.onResource(c.Mitigation) {
		pc.Label = "resource unsafe"
	}
	if c.LockState != "" && !r.onResource(c.Mitigation) {
		// A resource cell (fencing) is judged by the resource alone.
		pc.Label, pc.Class = answerLabel(c, pc.Label, pc.Class)
		pc.Answers = fmt.Sprintf("lock: %s · deployment: %s · use: %s", answerWord(c.LockState), answerWord(c.DeploymentState), answerWord(c.UseState))
	}
	for _, run := range c.Runs {
		if run.Report != "" && (pc.Href == "" || (c.State == StateUnsafe && run.Verdict == "unsafe")) {
			pc.Href = relLink(dir, run.Report)
			if c.State == StateUnsafe && run.Verdict == "unsafe" {
				break
			}
		}
	}
	return pc
}

// answerLabel leads a cell with the first answer that applies: the lock
// itself, then the deployment, then its use; a cell whose threat never
// produced its dangerous moment says so in amber, never green.
func answerLabel(c Cell, label, class string) (string, string) {
	switch {
	case c.State != StateUnsafe && c.State != StateNotFound:
		return label, class // stuck, unknown, an error: the state says it
	case c.LockState == StateUnsafe:
		return "lock broken", StateUnsafe
	case c.DeploymentState == StateUnsafe:
		return "deployment lost the key", StateUnsafe
	case c.UseState == StateUnsafe:
		return "use unsafe: needs fencing", "use-unsafe"
	case c.LockState == StateNotExercised:
		return fmt.Sprintf("not exercised (0 of its moments in %d × %s)", len(c.Runs), fmtD(c.TimeLimit)), StateNotExercised
	}
	return fmt.Sprintf("not found in %d × %s; %s", len(c.Runs), fmtD(c.TimeLimit), momentsSay(c)), StateNotFound
}

func answerWord(state string) string {
	switch state {
	case StateUnsafe:
		return "unsafe"
	case StateNotExercised:
		return "not exercised"
	}
	return "not found"
}

func relLink(dir, path string) string {
	abs, err1 := filepath.Abs(path)
	base, err2 := filepath.Abs(dir)
	if err1 != nil || err2 != nil {
		return filepath.ToSlash(path)
	}
	rel, err := filepath.Rel(base, abs)
	if err != nil {
		return filepath.ToSlash(abs)
	}
	return filepath.ToSlash(rel)
}

// shellLine quotes a command's words for a POSIX shell.
func shellLine(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.IndexFunc(a, func(r rune) bool { return !safeShell(r) }) < 0 {
			out[i] = a
		} else {
			out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(out, " ")
}

func safeShell(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r)
}

var pageTemplate = template.Must(template.New("review").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>Design review: {{.Subject}}</title>
<style>
body{font:15px/1.45 system-ui,sans-serif;margin:2em auto;max-width:78em;padding:0 1em;color:#222}
h1{font-size:1.6em;margin-bottom:.2em} h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ccc}
.meta{color:#555;margin-top:0}
#verdict{font-size:1.08em;background:#f6f6f6;border-left:4px solid #444;padding:.7em 1em}
table{border-collapse:collapse;width:100%;margin-top:.5em}
th,td{border:1px solid #ccc;padding:.35em .5em;vertical-align:top;text-align:left}
th{background:#eee;font-weight:600}
td.threat{font-weight:600;max-width:18em} td.threat .note{font-weight:400}
.state{font-weight:700;display:block}
.unsafe{background:#fbd5d5}.stuck{background:#fde8c8}.not-found{background:#d9f2d9}
.not-exercised{background:#fff1b8}.use-unsafe{background:#fde0c8}
.answers{font-size:.8em;color:#333;display:block}
.unknown,.error{background:#eee}.not-applicable,.not-needed,.skipped{color:#777}
.note{font-size:.85em;color:#444;display:block;margin-top:.2em}
.ref{font-size:.8em}
code{font:13px/1.3 ui-monospace,monospace;word-break:break-all}
ul.timings{margin:.2em 0 0 1em;padding:0;font-size:.85em;font-weight:400}
.caveat{font-size:.92em;color:#444}
@media print{
 body{margin:0;max-width:none;font-size:10.5pt}
 a{color:inherit;text-decoration:none}
 td,th{padding:.2em .3em}
 tr,.cmd{break-inside:avoid}
 .unsafe,.stuck,.not-found{-webkit-print-color-adjust:exact;print-color-adjust:exact}
 h2{break-after:avoid}
}
</style></head><body>
<h1>Design review: {{.Subject}}</h1>
<p class="meta">TTL {{.TTL}}, workload {{.R.Workload}}, persistence {{.R.Persistence}}; {{.Effort}} per cell;
ran {{.R.Started.Format "2006-01-02 15:04 MST"}} for {{.Elapsed}} (budget {{.R.Budget}}){{if .R.Interrupted}}; <strong>interrupted</strong>: cells not run are marked skipped{{end}}.</p>
<h2>Verdict</h2>
<p id="verdict">{{.R.Verdict}}</p>
<p class="caveat">{{.R.Caveat}}</p>
{{if .R.Mechanisms}}<h2>What broke in the lock itself</h2>
<table id="mechanisms"><thead><tr><th>mechanism</th><th>times</th><th>under</th><th>first example</th></tr></thead><tbody>
{{range .R.Mechanisms}}<tr><td><strong>{{.Kind}}</strong>{{if .Cause}} ({{.Cause}}){{end}}: {{.Says}}</td><td>{{.Count}}</td><td>{{range $i, $t := .Threats}}{{if $i}}, {{end}}{{$t}}{{end}}</td><td>{{.Example}}</td></tr>
{{end}}</tbody></table>{{end}}
{{if .R.Deployment}}<h2>What the deployment loses</h2>
<p class="caveat">A server-side fault took the key from under a lock that did nothing wrong: any lock on this deployment breaks the same way.</p>
<ul id="deployment">{{range .R.Deployment}}<li><strong>{{.Threat}}</strong>: {{.Says}} ({{.Count}}){{if .Control}}; {{.Control}}{{end}}</li>{{end}}</ul>{{end}}
{{if .R.ElseCouldServe}}<h2>What else could serve</h2>
<p class="caveat">These would replace the lock under review rather than mend it, so the review names them without running them against it: {{range $i, $m := .R.ElseCouldServe}}{{if $i}}; {{end}}{{$m}}{{end}}.</p>{{end}}
<h2>Threats × mitigations</h2>
<p class="caveat">Each cell leads with the first answer that applies: the lock itself broke its promise; the deployment lost the key from under a lock that did nothing wrong; its use needs fencing (the resource suffered while the lock kept its promise). A cell whose threat never produced its dangerous moment is <span class="not-exercised">not exercised</span>: it gives no evidence.</p>
<table id="cells">
<thead><tr><th>threat</th><th>as deployed</th>{{range .R.Columns}}<th>{{.Title}}</th>{{end}}</tr></thead>
<tbody>
{{range .Rows}}<tr><td class="threat">{{.Title}}{{if .Catches}}<span class="note">catches: {{.Catches}}</span>{{end}}</td>
{{range .Cells}}<td class="{{.Class}}">{{if .Empty}}{{.Label}}{{else}}<span class="state">{{if .Href}}<a href="{{.Href}}">{{.Label}}</a>{{else}}{{.Label}}{{end}}</span>{{if .Answers}}<span class="answers">{{.Answers}}</span>{{end}}{{if .Note}}<span class="note">{{.Note}}</span>{{end}}{{if .Ref}}<a class="ref" href="#{{.Ref}}">command</a>{{end}}{{end}}</td>
{{end}}</tr>
{{end}}</tbody></table>
<p class="caveat">Each cell links to the report of its deciding run: the first unsafe seed, else the first seed. A resource cell judges the protected resource, not the lock: with fencing the lock may still let two clients believe they hold it, while the resource refuses the stale one's writes.</p>
{{if .R.NotTried}}<p class="caveat">Not tried on this system: {{range $k, $v := .R.NotTried}}<br>{{$k}}: {{$v}}{{end}}</p>{{end}}
<h2>Timing, measured</h2>
<ul>
<li>The TTL as deployed: {{.TTL}}.</li>
{{range .Rows}}{{$t := .Title}}{{range .Timings}}<li>{{$t}}: {{.}}.</li>{{end}}{{end}}
</ul>
<h2>Witnesses</h2>
<ul>
{{range .R.Rows}}{{if .Configured.Story}}<li><strong>{{.Title}}</strong>: {{.Configured.Story}}</li>{{end}}{{end}}
</ul>
<h2>Reproduce each cell</h2>
<ul>
{{range .Commands}}<li class="cmd" id="{{.Ref}}">{{.Cell}}: <code>{{.Line}}</code></li>{{end}}
</ul>
</body></html>
`))
