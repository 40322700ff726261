package lockjepsentest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A user who tests their own pinned version of a lock library must test
// that version: importing the Go API must not raise it. The core module
// therefore requires none of the libraries the project adapts (redsync,
// redislock, the etcd client) nor testcontainers; their adapters live in
// the contrib module. This builds a user's module that pins an old redsync
// and imports the Go API, tidies it, and asks which redsync it got.
func TestPinnedLibrariesSurvive(t *testing.T) {
	if testing.Short() {
		t.Skip("fetches modules from the module proxy")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	const pinned = "v4.0.3"
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": "module example.com/pinned\n\ngo 1.26.8\n\n" +
			"require github.com/go-redsync/redsync/v4 " + pinned + "\n\n" +
			"require github.com/lockjepsen/lockjepsen v0.0.0\n\n" +
			"replace github.com/lockjepsen/lockjepsen => " + root + "\n",
		"main.go": "package main\n\nimport (\n\t\"github.com/go-redsync/redsync/v4\"\n\n" +
			"\t\"github.com/lockjepsen/lockjepsen/lockjepsentest\"\n)\n\n" +
			"var _ = lockjepsentest.Run\nvar _ = redsync.New\n\nfunc main() {}\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	goCmd := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		// Outside the project's workspace, as a user's module is. The
		// suite's GOFLAGS (scripts/test sets its build flags there) are
		// kept: with other flags the build below would compile the
		// standard library and lockjepsen again.
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -mod=mod"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	goCmd("mod", "tidy")
	got := goCmd("list", "-m", "github.com/go-redsync/redsync/v4")
	if got != "github.com/go-redsync/redsync/v4 "+pinned {
		t.Errorf("the user's module pinned redsync %s and imported lockjepsentest; after go mod tidy it has %q", pinned, got)
	}
	all := goCmd("list", "-m", "all")
	for _, m := range []string{"github.com/bsm/redislock", "go.etcd.io/etcd/client/v3", "github.com/testcontainers/testcontainers-go"} {
		if strings.Contains(all, m+" ") {
			t.Errorf("importing lockjepsentest brought %s into the user's module", m)
		}
	}
	// Built with -race, as the rest of the suite is: it then reuses the
	// suite's build of the standard library and of lockjepsen (about 5 s),
	// where a plain build compiled both again (about 40 s of both cores,
	// beside the other tests).
	goCmd("build", "-race", "./...")
}
