package main

import (
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/runfile"
	"github.com/lockjepsen/lockjepsen/scenario"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

func TestScenarioList(t *testing.T) {
	code, out, _ := runCLI(t, "scenario", "--list")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(scenario.All())+1 {
		t.Fatalf("%d lines for %d scenarios:\n%s", len(lines), len(scenario.All()), out)
	}
	for i, s := range scenario.All() {
		f := strings.Fields(lines[i+1])
		if len(f) < 3 || f[0] != s.Name || f[1] != s.Expect {
			t.Errorf("line %d: %q, want %s %s ...", i+1, lines[i+1], s.Name, s.Expect)
		}
	}
	for _, want := range []string{"del-release", "setnx-del", "client-pause", "script kleppmann-clock-jump", "kill @holder"} {
		if !strings.Contains(out, want) {
			t.Errorf("the list lacks %q", want)
		}
	}
}

func TestNewCommandsUsageErrors(t *testing.T) {
	store := t.TempDir()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"scenario"}, "arg"},
		{[]string{"scenario", "nope", "--store", store}, `unknown scenario "nope"`},
		{[]string{"scenario", "--list", "baseline"}, "baseline"},
		{[]string{"scenario", "baseline", "--quiet", "--json"}, "exclude"},
		{[]string{"scenario", "baseline", "--time-limit", "-1s", "--store", store}, "--time-limit"},
		{[]string{"matrix", "--store", store}, "choose the runs"},
		{[]string{"matrix", "--all", "--scenarios", "baseline", "--store", store}, "choose the runs"},
		{[]string{"matrix", "--scenarios", "nope", "--store", store}, "unknown scenario"},
		{[]string{"matrix", "--scenarios", "tag:nope", "--store", store}, "tag"},
		{[]string{"matrix", "--systems", "mars", "--store", store}, "unknown system"},
		{[]string{"matrix", "--systems", "single", "--faults", "meteor", "--store", store}, "meteor"},
		{[]string{"matrix", "--systems", "single", "--faults", "kill,none+kill", "--store", store}, "none cannot be combined with other faults"},
		{[]string{"matrix", "--systems", "single", "--locks", "redlock", "--store", store}, "grid is empty"},
		{[]string{"matrix", "--all", "--budget", "0s", "--store", store}, "--budget"},
	}
	for _, tc := range cases {
		code, _, stderr := runCLI(t, tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 mentioning %q", tc.args, code, stderr, tc.want)
		}
	}
	if entries, _ := os.ReadDir(store); len(entries) != 0 {
		t.Errorf("refused commands wrote to the store: %v", entries)
	}
}

// Errors in a configuration file name the file and the line.
func TestConfigFileErrorsPointAtTheLine(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, text, want string
	}{
		{"config.yaml", "# a test\nsystem: single\nlock: token\nnemesis: [kill, pause]\nclients: 4\nttl: 500ms\ntll: 1s\n",
			`config.yaml:7: unknown field "tll" (did you mean "ttl"?)`},
		{"value.yaml", "lock: token\nttl: soon\n", `value.yaml:2: ttl: invalid value "soon"`},
		{"twice.yaml", "lock: token\nclients: 3\nclients: 4\n", `twice.yaml:3: field "clients" given twice (first on line 2)`},
		{"syntax.yaml", "lock: token\nnemesis: [kill\nttl: 1s\n", "syntax.yaml:"},
		{"nested.yaml", "lock:\n  name: token\n", "nested.yaml:2: lock: want a value"},
		{"list.yaml", "- lock\n- token\n", "list.yaml:1: the configuration must be a mapping"},
		{"config.json", "{\n  \"lock\": \"token\",\n  \"time_limit\": \"1s\",\n  \"bogus\": 1\n}\n", `config.json:4: unknown field "bogus"`},
		{"bad.json", "{\n  \"lock\": \"token\",\n  \"ttl\": 12,\n}\n", "bad.json:3: ttl: invalid value \"12\""},
		// A value the flag parses but the configuration refuses, and a
		// second document that would be ignored (issue 34, item 13).
		{"range.yaml", "lock: token\nclients: 4\nttl: 5h\n", "range.yaml:3: --ttl must be between 10ms and 1h"},
		{"jitter.yaml", "latency: 10ms\njitter: 50ms\n", "jitter.yaml:2: --jitter must be between 0 and --latency"},
		{"two.yaml", "ttl: 500ms\n---\nttl: 1s\n", "two.yaml:3: a second YAML document"},
		{"typo3.yaml", "tll: 1s\n", `typo3.yaml:1: unknown field "tll" (did you mean "ttl"?)`},
		// Issue 53, item 17: the parser names no line for this one.
		{"tab.yaml", "\tttl: 500ms\n", "tab.yaml:1: found character that cannot start any token (a tab indents this line"},
	}
	for _, tc := range cases {
		path := filepath.Join(dir, tc.name)
		os.WriteFile(path, []byte(tc.text), 0o644)
		code, _, stderr := runCLI(t, "test", "--config", path, "--store", filepath.Join(dir, "store"))
		if code != exitUsage || !strings.Contains(stderr, filepath.Join(dir, tc.want)) && !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 with %q", tc.name, code, stderr, tc.want)
		}
	}
	// A file that never ends is refused after a bounded read (issue 53,
	// item 4: /dev/zero read 17.5 GB before it was killed).
	if code, _, stderr := runCLI(t, "test", "--config", "/dev/zero"); code != exitUsage || !strings.Contains(stderr, "larger than") {
		t.Errorf("--config /dev/zero: exit %d, stderr %q; want exit 2, larger than", code, stderr)
	}
	code, _, stderr := runCLI(t, "test", "--config", filepath.Join(dir, "missing.yaml"))
	if code != exitUsage || !strings.Contains(stderr, "missing.yaml") {
		t.Errorf("missing file: exit %d %q", code, stderr)
	}
}

// A configuration file sets flags; flags on the command line win. --json
// prints the results as one object; progress goes to stderr as plain lines
// when stderr is not a terminal.
func TestConfigFileAndJSONOutput(t *testing.T) {
	redistest.RequireBinary(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "lock.yaml")
	os.WriteFile(path, []byte("lock: token\nclients: 3\ntime_limit: 60s\nrecovery: 0s\nname: from-file\nnemesis: [client-pause]\n"), 0o644)
	t.Setenv("LOCKJEPSEN_PROGRESS_EVERY", "300ms")
	code, out, stderr := runCLI(t, "test", "--config", path, "--time-limit", "1500ms", "--store", filepath.Join(dir, "store"), "--json")
	if code != exitMet {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	var res struct {
		Dir     string `json:"dir"`
		Verdict string `json:"verdict"`
		Met     bool   `json:"met_expectation"`
		Ops     int    `json:"ops"`
		Test    string `json:"test"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || strings.Count(strings.TrimSpace(out), "\n") != 0 {
		t.Fatalf("stdout is not one JSON object (%v):\n%s", err, out)
	}
	if res.Verdict != "safe" || !res.Met || res.Ops == 0 || res.Test != "from-file" || !strings.Contains(res.Dir, "from-file") {
		t.Fatalf("%+v", res)
	}
	var cfg struct {
		Clients   int   `json:"clients"`
		TimeLimit int64 `json:"time_limit"`
	}
	b, _ := os.ReadFile(filepath.Join(res.Dir, "config.json"))
	json.Unmarshal(b, &cfg)
	if cfg.Clients != 3 || time.Duration(cfg.TimeLimit) != 1500*time.Millisecond {
		t.Fatalf("file or flag not applied: %+v", cfg)
	}
	if !strings.Contains(stderr, "ops, faults:") || strings.Contains(stderr, "\r") {
		t.Fatalf("no plain progress lines on stderr:\n%s", stderr)
	}
}

// --stop-on-first-violation with a generous time limit: every client pause
// of del-release outlasts the staller's lease, another client takes the
// expired lock, and the staller's plain DEL deletes the key of whoever
// holds it then, so a third client acquires inside that hold. A pause is
// armed every 0.4 s on average, and the run ends at the first violation
// (1.5-2.3 s for the whole command, measured over 15 seeds).
func TestScenarioQuiet(t *testing.T) {
	redistest.RequireBinary(t)
	store := t.TempDir()
	code, out, stderr := runCLI(t, "scenario", "del-release", "--stop-on-first-violation", "--time-limit", "60s", "--store", store, "--quiet")
	if code != exitMet {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	if strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, "UNSAFE: ") || !strings.Contains(out, "(expected unsafe: met)") || stderr != "" {
		t.Fatalf("--quiet printed:\n%s\nstderr:\n%s", out, stderr)
	}
	if _, err := os.Stat(filepath.Join(store, "del-release", "..", "latest", "results.json")); err != nil {
		t.Fatal(err)
	}
}

// The unsafe run is scenario clock-jump with --stop-on-first-violation: the
// server's clock jumps 1.5 TTL forward (a jump of 150-450 ms starts every
// 0.2-0.6 s), each jump expires the key of whoever holds the lock (ten
// clients holding for 100-300 ms keep it held nearly all the time), and
// another client takes it within a retry. The first jump gave the violation
// in 15 seeds of 15 (0.6-1.7 s for the whole command); the 10 s limit gives
// a dozen more. --time-limit is the matrix's, so the safe baseline runs
// those 10 s too: a limit of a minute would cost a minute of run and the
// check of half a million operations.
func TestMatrixWritesReportResultsAndJUnit(t *testing.T) {
	redistest.RequireBinary(t)
	store := t.TempDir()
	out := filepath.Join(store, "m")
	junitPath := filepath.Join(store, "junit.xml")
	code, stdout, stderr := runCLI(t, "matrix", "--scenarios", "baseline,clock-jump", "--stop-on-first-violation", "--time-limit", "10s", "--recovery", "500ms",
		"--store", store, "--out", out, "--junit", junitPath)
	if code != exitMet {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"[1/2 baseline]", "[2/2 clock-jump]", "expected unsafe: met"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	res := readMatrixResults(t, filepath.Join(out, "results.json"))
	if !res.Met || len(res.Runs) != 2 || res.Counts.Met != 2 {
		t.Fatalf("results.json: %+v", res)
	}
	for i, want := range []struct{ name, verdict string }{{"baseline", "safe"}, {"clock-jump", "unsafe"}} {
		r := res.Runs[i]
		if r.Scenario != want.name || r.Verdict != want.verdict || r.Expected != want.verdict || !r.Met || r.Duration <= 0 {
			t.Errorf("run %d: %+v", i, r)
		}
		if _, err := runfile.FindHistory(r.Dir); err != nil {
			t.Errorf("run %d: %v", i, err)
		}
	}
	if res.Runs[1].Violations == 0 || res.Runs[1].Story == "" {
		t.Errorf("the unsafe run has no violations or story: %+v", res.Runs[1])
	}
	if _, err := os.Stat(filepath.Join(out, "matrix.html")); err != nil {
		t.Fatal(err)
	}
	j := readJUnit(t, junitPath)
	if j.Tests != 2 || j.Failures != 0 || len(j.Suites) != 1 || len(j.Suites[0].Cases) != 2 {
		t.Fatalf("junit: %+v", j)
	}
	c := j.Suites[0].Cases[1]
	if c.Name != "clock-jump" || c.Failure != nil || !strings.Contains(c.SystemOut, "UNSAFE") {
		t.Fatalf("junit case: %+v", c)
	}

	// A budget too small for the second run skips it, and the matrix fails.
	// (No violation is expected here: the unsafe run never starts.)
	code, stdout, _ = runCLI(t, "matrix", "--scenarios", "baseline,clock-jump", "--time-limit", "1500ms", "--recovery", "500ms",
		"--store", store, "--out", out, "--junit", junitPath, "--budget", "4s", "--quiet")
	if code != exitNotMet || strings.TrimSpace(stdout) != "matrix: 2 runs, 1 met, 0 not met, 0 harness errors, 1 skipped" {
		t.Fatalf("exit %d: %q", code, stdout)
	}
	j = readJUnit(t, junitPath)
	if j.Skipped != 1 || j.Suites[0].Cases[1].Skipped == nil || !strings.Contains(j.Suites[0].Cases[1].Skipped.Message, "budget") {
		t.Fatalf("junit: %+v", j)
	}
}

// A run whose verdict differs from its expectation is a failed test case
// whose message and text tell the story.
func TestJUnitFailureTellsTheStory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.xml")
	res := &matrixResults{Title: "t", Started: time.Now(), Runs: []matrixRun{
		{Scenario: "gc-pause-fenced", System: "single", Lock: "fenced", Workload: "counter", Faults: "client-pause",
			Expected: "safe", Verdict: "unsafe", Summary: "UNSAFE: 3 mutual-exclusion violations",
			Story: "process 1 held lock-0 from 0.1s; process 2 acquired it while 1 still believed it held it", Dir: "/x/run",
			details: []string{"UNSAFE: 3 mutual-exclusion violations", "liveness: ..."}},
		{Scenario: "baseline", System: "single", Expected: "safe", Verdict: "safe", Met: true},
		{Scenario: "broken", System: "single", Expected: "safe", Verdict: stateError, Error: "redis-server would not start"},
		{Scenario: "crash-fsync-always", System: "single", Expected: "safe", Verdict: "safe", Met: true,
			Vacuous: "vacuous: safe, but none of the faults' dangerous moments happened (node_faults_on_live_lease: 0)"},
	}}
	if err := writeJUnit(path, res); err != nil {
		t.Fatal(err)
	}
	j := readJUnit(t, path)
	if j.Tests != 4 || j.Failures != 1 || j.Errors != 1 {
		t.Fatalf("%+v", j)
	}
	// A vacuous pass is a pass with a property a gate can refuse.
	if p := j.Suites[0].Cases[3].Properties; p == nil || len(p.Property) != 1 || p.Property[0].Name != "vacuous" || j.Suites[0].Cases[1].Properties != nil {
		t.Fatalf("properties: %+v", j.Suites[0].Cases)
	}
	f := j.Suites[0].Cases[0].Failure
	if f == nil || !strings.Contains(f.Message, "verdict unsafe, expected safe") || !strings.Contains(f.Text, "process 2 acquired it") || !strings.Contains(f.Text, "/x/run") {
		t.Fatalf("failure: %+v", f)
	}
	if e := j.Suites[0].Cases[2].Error; e == nil || !strings.Contains(e.Message, "would not start") {
		t.Fatalf("error: %+v", e)
	}
}

// Ctrl-C during a matrix keeps the finished run and writes the matrix
// files for what ran.
func TestInterruptedMatrixKeepsFinishedRuns(t *testing.T) {
	redistest.RequireBinary(t)
	store := t.TempDir()
	out := filepath.Join(store, "m")
	junitPath := filepath.Join(store, "junit.xml")
	// Each run takes 4.5s: the interrupt lands early in the second.
	cmd, buf := startCLI(t, nil, "matrix", "--scenarios", "baseline,token-client-pause",
		"--store", store, "--out", out, "--junit", junitPath, "--config", writeFile(t, store, "m.yaml", "title: interrupted\n"))
	waitFor(t, "the matrix at its second run", func() string {
		first, _ := filepath.Glob(filepath.Join(store, "baseline", "*", "results.json"))
		second, _ := filepath.Glob(filepath.Join(store, "token-client-pause", "*", runfile.CompressedHistoryFile))
		if len(first) != 1 || len(second) != 1 {
			return "the first run's results and the second run's history; output:\n" + buf.String()
		}
		return ""
	})
	cmd.Process.Signal(os.Interrupt)
	waitExit(t, cmd, buf)
	if code := cmd.ProcessState.ExitCode(); code != exitNotMet {
		t.Fatalf("exit %d, want %d:\n%s", code, exitNotMet, buf.String())
	}
	res := readMatrixResults(t, filepath.Join(out, "results.json"))
	if !res.Interrupted || res.Met || len(res.Runs) != 2 || res.Title != "interrupted" {
		t.Fatalf("results.json: %+v", res)
	}
	if r := res.Runs[0]; r.Verdict != "safe" || !r.Met {
		t.Fatalf("the finished run: %+v", r)
	}
	if r := res.Runs[1]; r.Met || !(r.Interrupted || r.Verdict == stateSkipped) {
		t.Fatalf("the interrupted run: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(res.Runs[0].Dir, "report.html")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(out, "matrix.html")); err != nil {
		t.Fatal(err)
	}
	if j := readJUnit(t, junitPath); j.Tests != 2 || j.Failures+j.Skipped != 1 {
		t.Fatalf("junit: %+v", j)
	}
}

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func readMatrixResults(t *testing.T, path string) matrixResults {
	t.Helper()
	var res matrixResults
	if err := runfile.ReadJSON(path, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

func readJUnit(t *testing.T, path string) junitSuites {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var j junitSuites
	if err := xml.Unmarshal(b, &j); err != nil {
		t.Fatalf("%s is not JUnit XML: %v", path, err)
	}
	return j
}

// Progress counts what the harness records (operations, the faults in
// force) and shows the violations the check alongside the run counted,
// or that it stopped and the run's check will count them.
func TestProgressCountsTheHistory(t *testing.T) {
	p := newProgress(io.Discard, harness.DefaultConfig(), "")
	vu := func(ns int64) *history.Value { return &history.Value{ValidUntil: history.I64(ns)} }
	nemesis := func(t int64, phase string) history.Op {
		return history.Op{Time: t, Process: history.NemesisProcess, Type: history.Info, F: "kill",
			Value: &history.Value{Phase: phase, Targets: []string{"n1"}}}
	}
	for _, op := range []history.Op{
		{Time: 10, Process: 1, Type: history.Invoke, F: history.Acquire, Key: "lock-0"},
		{Time: 20, Process: 1, Type: history.OK, F: history.Acquire, Key: "lock-0", Value: vu(1000)},
		nemesis(30, "start"),
		{Time: 40, Process: 2, Type: history.Invoke, F: history.Acquire, Key: "lock-0"},
		{Time: 50, Process: 2, Type: history.OK, F: history.Acquire, Key: "lock-0", Value: vu(1050)},
		{Time: 60, Process: 1, Type: history.Invoke, F: history.Release, Key: "lock-0"},
	} {
		p.observe(op)
	}
	if s := p.statusLocked(); p.ops != 3 || !strings.Contains(s, "faults: kill n1") || !strings.Contains(s, "3 ops") || !strings.Contains(s, "violations so far: 0") {
		t.Fatalf("ops %d: %s", p.ops, s)
	}
	p.liveViolations(1)
	if s := p.statusLocked(); !strings.Contains(s, "violations so far: 1") {
		t.Fatalf("%s", s)
	}
	p.observe(nemesis(70, "stop"))
	p.observe(history.Op{Time: 75, Process: 3, Type: history.Invoke, F: history.Acquire, Key: "lock-0"})
	p.liveViolations(-1)
	if s := p.statusLocked(); !strings.Contains(s, "faults: none") || !strings.Contains(s, "4 ops") || !strings.Contains(s, "violations so far: counted after the run") {
		t.Fatalf("%s", s)
	}
}

// The grid has etcd rows: etcd's locks on etcd only, no clock faults
// (refused on etcd), named scenarios where there are some.
func TestGridEtcdRows(t *testing.T) {
	runs, err := gridRuns("etcd", "", gridFaults, "mutex", false)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range runs {
		names = append(names, r.Scenario)
		if strings.Contains(r.Faults, "clock") {
			t.Errorf("%s: clock faults on etcd", r.Scenario)
		}
	}
	want := "etcd-baseline,etcd-etcd-mutex-client-pause,etcd-etcd-mutex-kill,etcd-partition," +
		"etcd-etcd-session-mutex-none,etcd-session-client-pause,etcd-etcd-session-mutex-kill,etcd-etcd-session-mutex-partition"
	if got := strings.Join(names, ","); got != want {
		t.Errorf("etcd grid:\n got %s\nwant %s", got, want)
	}
	runs, err = gridRuns("single,etcd", "token,etcd-session", "none", "mutex", true)
	if err != nil {
		t.Fatal(err)
	}
	names = nil
	for _, r := range runs {
		names = append(names, r.System+"/"+r.Lock)
	}
	if got := strings.Join(names, ","); got != "single/token,etcd/etcd-session" {
		t.Errorf("locks across systems: %s", got)
	}
	// A grid cell takes its system's TTL (etcd's whole second), which
	// Validate fills in, and aims its faults where they hurt there.
	for _, tc := range []struct {
		sys, targets string
		ttl          time.Duration
	}{
		{"etcd", "one", time.Second}, {"single", "one", 500 * time.Millisecond},
		{"sentinel", "primary", 500 * time.Millisecond}, {"cluster", "primary", 500 * time.Millisecond},
		{"redlock", "holder", 500 * time.Millisecond},
	} {
		c := gridConfig(tc.sys, harness.ReferenceLock(tc.sys), "mutex", nil)
		if err := c.Validate(); err != nil {
			t.Errorf("%s grid cell: %v", tc.sys, err)
		}
		if c.TTL != tc.ttl || c.Targets != tc.targets {
			t.Errorf("%s grid cell: TTL %s, targets %s; want %s, %s", tc.sys, c.TTL, c.Targets, tc.ttl, tc.targets)
		}
	}
}

// A TTL not given on etcd, or given as 0, is etcd's default, 1s, and the
// stored run records the 1s it ran at, never 0 (an explicit 500ms is
// refused: TestUsageErrorsExit2).
func TestEtcdRunsAtItsDefaultTTL(t *testing.T) {
	redistest.RequireEtcd(t)
	for _, ttl := range [][]string{nil, {"--ttl", "0"}} {
		store := t.TempDir()
		args := append([]string{"test", "--system", "etcd", "--lock", "etcd", "--time-limit", "1s", "--recovery", "0s", "--quiet", "--store", store}, ttl...)
		if code, stdout, stderr := runCLI(t, args...); code != exitMet {
			t.Fatalf("%q: exit %d\n%s\n%s", args, code, stdout, stderr)
		}
		var cfg harness.Config
		if err := runfile.ReadJSON(filepath.Join(runDir(t, store), harness.ConfigFile), &cfg); err != nil {
			t.Fatal(err)
		}
		if cfg.TTL != time.Second {
			t.Errorf("%q: the run recorded TTL %s, want etcd's 1s", args, cfg.TTL)
		}
	}
}

// A matrix run's report reproduces that run, not the whole matrix: a grid
// cell's command is a `test` command that validates to the same config.
func TestMatrixRunCommand(t *testing.T) {
	runs, err := gridRuns("etcd,single", "", "none,kill", "mutex", false)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		cmd := strings.Join(runCommand(r, false), " ")
		if _, named := scenario.Get(r.Scenario); named {
			if cmd != "lockjepsen scenario "+r.Scenario {
				t.Errorf("%s: %s", r.Scenario, cmd)
			}
			continue
		}
		for _, want := range []string{"lockjepsen test", "--system " + r.cfg.System, "--lock " + r.cfg.Lock, "--hold " + r.cfg.Hold, "--expect any"} {
			if !strings.Contains(cmd, want) {
				t.Errorf("%s: %q lacks %q", r.Scenario, cmd, want)
			}
		}
	}
}

// Output paths the user gave that cannot be written are bad input (exit
// 2), and a --out that received nothing is not success; a flag of another
// command in --config is not a typo of a flag of this one (issue 34
// item 13).
func TestOutputPathsAndMisplacedFields(t *testing.T) {
	redistest.RequireBinary(t)
	store := t.TempDir()
	shortRun(t, store)
	dir := runDir(t, store)
	tmp := t.TempDir()
	file := writeFile(t, tmp, "a-file", "not a directory\n")
	ttl := writeFile(t, tmp, "ttl.yaml", "ttl: 500ms\n")
	cases := []struct {
		args []string
		want string
		not  string
	}{
		{args: []string{"report", "--matrix", filepath.Join(tmp, "missing", "m.html"), dir}, want: "--matrix"},
		{args: []string{"report", "--matrix", filepath.Join(file, "m.html"), dir}, want: "not a directory"},
		{args: []string{"check", "--out", file, dir}, want: "is a file"},
		{args: []string{"check", "--out", "/dev/null/results", dir}, want: "nothing was written"},
		{args: []string{"matrix", "--config", ttl, "--store", store}, want: `unknown field "ttl": not a flag of this command`, not: "did you mean"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args[:2], " "), func(t *testing.T) {
			code, stdout, stderr := runCLI(t, c.args...)
			if code != exitUsage || !strings.Contains(stderr, c.want) || c.not != "" && strings.Contains(stderr, c.not) {
				t.Fatalf("%v: exit %d, want %d with %q\n%s%s", c.args, code, exitUsage, c.want, stdout, stderr)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, harness.ResultsFile)); err != nil {
		t.Fatalf("the run's results.json: %v", err)
	}
}

// A value from a --config file counts as given, as the same flag typed
// would (issue 53, item 8): commands that act only on given flags (a
// scenario's --time-limit, --seed, test's replay) ignored the file's, and
// `client: ""` tested the built-in lock.
func TestConfigFileValuesCountAsGiven(t *testing.T) {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs.Duration("time-limit", time.Second, "")
	fs.Int64("seed", 0, "")
	fs.String("client", "", "")
	fs.Duration("recovery", time.Second, "")
	if err := fs.Parse([]string{"--recovery", "2s"}); err != nil {
		t.Fatal(err)
	}
	path := writeFile(t, t.TempDir(), "c.yaml", "time-limit: 9s\nseed: 7\nclient: \"\"\nrecovery: 5s\n")
	if err := applyConfigFile(path, fs); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"time-limit", "seed", "client", "recovery"} {
		if !fs.Changed(name) {
			t.Errorf("--%s from the file does not count as given", name)
		}
	}
	if v := fs.Lookup("recovery").Value.String(); v != "2s" {
		t.Errorf("recovery %s: the command line must win over the file", v)
	}
	if v := fs.Lookup("time-limit").Value.String(); v != "9s" {
		t.Errorf("time-limit %s, want the file's 9s", v)
	}
	code, _, stderr := runCLI(t, "test", "--config", writeFile(t, t.TempDir(), "e.yaml", "client: \"\"\n"), "--store", t.TempDir())
	if code != exitUsage || !strings.Contains(stderr, "--client is empty") {
		t.Errorf("client: \"\" in a file: exit %d, stderr %q; want exit 2", code, stderr)
	}
}

// Issue 53 item 8: the matrix's grid keys (systems, locks, faults,
// workload) in a --config file choose a grid, as the same flags typed
// would, and a bad one is refused with the file's line.
func TestMatrixGridKeysFromConfigFile(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, file string
		wantRuns   int
		wantErr    string
	}{
		{"grid", "systems: single\nlocks: token\nfaults: [none, kill]\n", 2, ""},
		{"faults alone", "faults: none\nsystems: [single]\n", -1, ""},
		{"grid and scenarios", "systems: single\nscenarios: baseline\n", 0, "choose the runs"},
		{"bad system", "systems: mars\n", 0, "mars"},
		{"bad fault", "systems: single\nfaults: [none, meteor]\n", 0, "meteor"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var mf matrixFlags
			fs := pflag.NewFlagSet("matrix", pflag.ContinueOnError)
			mf.flags(fs)
			path := writeFile(t, dir, strings.ReplaceAll(c.name, " ", "-")+".yaml", c.file)
			if err := fs.Parse([]string{"--config", path, "--store", dir}); err != nil {
				t.Fatal(err)
			}
			runs, err := mf.runs(fs)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want one naming %q", err, c.wantErr)
				}
				// What the CLI prints names the file's line of a refused value.
				if c.wantErr != "choose the runs" {
					msg := explainOrigin(&harness.UsageError{Err: err}, fs).Error()
					if !strings.Contains(msg, filepath.Base(path)+":") {
						t.Errorf("%q does not name the file's line", msg)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("grid keys in a file refused: %v", err)
			}
			if c.wantRuns >= 0 && len(runs) != c.wantRuns {
				t.Errorf("%d runs, want %d", len(runs), c.wantRuns)
			}
			for _, r := range runs {
				if r.cfg.System != "single" {
					t.Errorf("run %s on %s, want the file's system single", r.Scenario, r.cfg.System)
				}
			}
		})
	}
}
