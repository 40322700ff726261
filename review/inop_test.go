package review_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/review"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

// A client whose acquire is SETNX then a separate PEXPIRE (Laravel
// #31166, ShedLock #105; nemesis/testdata) reviewed under the two threats
// of faults inside an operation: each cell runs, without a harness error,
// and is exercised by its own moment (a client killed in a call, a reply
// lost after the server may have applied it). Whether the lock is called
// broken for the key it leaves with no TTL is the stuck-lock checker's,
// not judged here.
func TestReviewInsideAnOperation(t *testing.T) {
	redistest.RequireBinary(t)
	if out, err := exec.Command("/usr/bin/python3", "-c", "import redis").CombinedOutput(); err != nil {
		t.Skip("Debian's python3-redis is missing: " + strings.TrimSpace(string(out)))
	}
	script, err := filepath.Abs("../nemesis/testdata/setnx_then_pexpire.py")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	r, err := review.Run(context.Background(), review.Options{
		System: cluster.Single, Client: []string{"/usr/bin/python3", script}, Threats: []string{"in-op", "reply-loss"},
		Seeds: 1, TimeLimit: 3 * time.Second, Budget: 10 * time.Minute,
		Store: filepath.Join(dir, "store"), Out: filepath.Join(dir, "review"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Rows) != 2 {
		t.Fatalf("%d rows, want in-op and reply-loss", len(r.Rows))
	}
	for _, row := range r.Rows {
		c := row.Configured
		if c.State == review.StateError {
			t.Fatalf("%s: harness failure: %s", row.Threat, c.Note)
		}
		n := 0
		for _, m := range c.Moments {
			n += c.Exercised[m]
		}
		t.Logf("%s: %s, lock %s, moments %v of %v", row.Threat, c.State, c.LockState, c.Exercised, c.Moments)
		if n == 0 {
			t.Errorf("%s: not exercised: %v of %v", row.Threat, c.Exercised, c.Moments)
		}
	}
	t.Logf("%s", r.Verdict)
}
