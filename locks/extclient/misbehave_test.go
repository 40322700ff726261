package extclient_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/locks/extclient"
)

// script writes a Python client into a temporary directory and returns
// the options that start it as client p3.
func script(t *testing.T, src string, f *fatals) extclient.Options {
	t.Helper()
	path := filepath.Join(t.TempDir(), "client.py")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return extclient.Options{Argv: []string{"python3", path}, TTL: 500 * time.Millisecond,
		OpTimeout: 100 * time.Millisecond, Fatal: f.add}
}

// Issue 34 item 3: a client that logs in a loop filled 518 MB in a 2 s
// run. Its stderr file keeps the first and the last 2 MiB, with a note of
// what was dropped between them.
func TestClientStderrIsCapped(t *testing.T) {
	f := &fatals{}
	o := script(t, `import json, sys
for i in range(0, 1000000, 1000):
    sys.stderr.write("".join("line %07d\n" % j for j in range(i, i + 1000)))
sys.stderr.write("LAST LINE\n")
sys.stderr.flush()
for line in sys.stdin:
    sys.stdout.write(json.dumps({"type": "init_ok", "in_reply_to": 0, "protocol": 1}) + "\n")
    sys.stdout.flush()
`, f)
	o.StderrDir = t.TempDir()
	cl, err := extclient.Start(context.Background(), o, nil, 3)
	if err != nil {
		t.Fatal(err)
	}
	cl.Close()
	b, err := os.ReadFile(filepath.Join(o.StderrDir, "p3.stderr"))
	if err != nil {
		t.Fatal(err)
	}
	const written, kept = 1000000*13 + 10, 4 << 20
	note := fmt.Sprintf("[lockjepsen: %d bytes of this client's stderr dropped here; the file keeps the first 2097152 and the last 2097152]", written-kept)
	s := string(b)
	if len(s) > kept+len(note)+2 {
		t.Errorf("the stderr file has %d bytes; want at most %d and the note", len(s), kept)
	}
	if !strings.HasPrefix(s, "line 0000000\nline 0000001\n") || !strings.HasSuffix(s, "line 0999999\nLAST LINE\n") {
		t.Errorf("the file does not keep both ends: %.40q … %q", s, s[max(0, len(s)-40):])
	}
	if !strings.Contains(s, note) {
		t.Errorf("the file lacks the note %q", note)
	}
}

