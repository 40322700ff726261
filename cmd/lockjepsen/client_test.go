package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

// Issue 34 item 1, end to end: a client that answers every acquire and
// never a release made a 2 s run SAFE, exit 0. It is a harness failure,
// exit 3, that names the client and the releases it did not answer.
func TestClientThatStopsAnsweringFailsTheRun(t *testing.T) {
	redistest.RequireBinary(t)
	client := filepath.Join(t.TempDir(), "norelease.py")
	err := os.WriteFile(client, []byte(`import json, sys
n = 0
for line in sys.stdin:
    m = json.loads(line)
    if m["type"] == "init":
        out = {"type": "init_ok", "in_reply_to": 0, "protocol": 1}
    elif m["type"] == "acquire":
        n += 1
        out = {"type": "ok", "in_reply_to": m["id"], "token": "%s.%d" % (prefix, n)}
    else:
        continue  # a release is never answered
    if m["type"] == "init":
        prefix = m["token_prefix"]
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "test", "--client", "python3 "+client, "--clients", "1", "--nemesis", "none",
		"--time-limit", "2s", "--recovery", "0s", "--store", t.TempDir())
	if code != exitHarness {
		t.Fatalf("exit %d, want %d (a harness failure)\n%s%s", code, exitHarness, stdout, stderr)
	}
	for _, want := range []string{"client p0 (python3 " + client + ")", "stopped answering", "release (request 2)"} {
		if !strings.Contains(stdout+stderr, want) {
			t.Errorf("the output does not say %q:\n%s%s", want, stdout, stderr)
		}
	}
}

// A run of an external client is named after the client's program, or
// the script an interpreter runs, never after an argument (issue 34
// item 13: --client 'sleep 1000' was named single-1000-mutex-none).
func TestClientRunName(t *testing.T) {
	script := filepath.Join(t.TempDir(), "mylock")
	if err := os.WriteFile(script, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		argv []string
		want string
	}{
		{[]string{"sleep", "1000"}, "single-sleep-mutex-none"},
		{[]string{"/usr/bin/python3", "examples/python/token_lock.py"}, "single-token_lock-mutex-none"},
		{[]string{"python3", "-u", "lock.py", "--fenced"}, "single-lock-mutex-none"},
		{[]string{"node", "client.js", "1.5"}, "single-client-mutex-none"},
		{[]string{"java", "-jar", "target/locks.jar"}, "single-locks-mutex-none"},
		{[]string{"go", "run", "./cmd/myclient"}, "single-myclient-mutex-none"},
		{[]string{"python3", script}, "single-mylock-mutex-none"},
		{[]string{"./client", "7", "2.5"}, "single-client-mutex-none"},
	}
	for _, c := range cases {
		cfg := harness.DefaultConfig()
		cfg.Client = c.argv
		if got := cfg.TestName(); got != c.want {
			t.Errorf("--client %q: run named %q, want %q", strings.Join(c.argv, " "), got, c.want)
		}
	}
}

// With --json, a run that fails before it has results (a client that
// does not start) still prints one JSON object: the error, the exit code
// and the run's files (issue 34 item 13).
func TestJSONWhenTheClientFailsAtStartUp(t *testing.T) {
	redistest.RequireBinary(t)
	code, stdout, stderr := runCLI(t, "test", "--client", "/bin/false", "--clients", "1", "--time-limit", "1s", "--json", "--store", t.TempDir())
	if code != exitHarness {
		t.Fatalf("exit %d, want %d\n%s%s", code, exitHarness, stdout, stderr)
	}
	var got failureJSON
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("stdout is not one JSON object (%v):\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	if got.ExitCode != exitHarness || !strings.Contains(got.Error, "/bin/false") || got.Dir == "" {
		t.Fatalf("--json object %+v: want exit_code 3, an error naming the client, and the run's dir", got)
	}
	if _, err := os.Stat(got.Dir); err != nil {
		t.Fatalf("the run's dir: %v", err)
	}
	// A refusal gives an object too, with exit code 2.
	code, stdout, _ = runCLI(t, "test", "--ttl", "5h", "--json", "--store", t.TempDir())
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || code != exitUsage || got.ExitCode != exitUsage || !strings.Contains(got.Error, "--ttl") {
		t.Fatalf("refused run: exit %d, --json %q (%v)", code, stdout, err)
	}
}
