package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockjepsen/lockjepsen/internal/redistest"
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
