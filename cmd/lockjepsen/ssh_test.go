package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockjepsen/lockjepsen/contrib/ssh/sshtest"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/internal/redistest"
	"github.com/lockjepsen/lockjepsen/review"
	"github.com/lockjepsen/lockjepsen/runfile"
)

// The tests of the ssh backend through the CLI run against the test hosts
// of contrib/ssh/sshtest (containers of the test's own, reached over SSH
// through their published ports), which TestMain removes at the end.

// TestReviewOnHosts: `lockjepsen review --backend ssh --hosts …`
// completes on a single node and on a Sentinel deployment, short reviews
// of one threat and the mitigations that can run on the hosts file's
// deployment: every cell runs on the hosts, and they are left healed.
func TestReviewOnHosts(t *testing.T) {
	redistest.RequireBinary(t)
	f := sshtest.Start(t)
	cases := []struct {
		system           string
		nodes, sentinels int
		args             []string
	}{
		// server-restart is unsafe on one node without persistence; its
		// mitigations fsync-always and fencing (the counter's resource
		// on the hosts file's resource process) run on the same node.
		{"single", 1, 0, []string{"--threats", "server-restart", "--mitigations", "fsync-always,fencing", "--budget", "5m"}},
		// split-brain cuts the primary off with iptables on its host.
		{"sentinel", 3, 3, []string{"--threats", "split-brain", "--mitigations", "fencing", "--budget", "10m"}},
	}
	for _, c := range cases {
		t.Run(c.system, func(t *testing.T) {
			hosts := f.HostsFile(t, f.KnownHosts(t), c.nodes, c.sentinels)
			store := t.TempDir()
			args := append([]string{"review", "--backend", "ssh", "--hosts", hosts, "--system", c.system, "--lock", "token",
				"--seeds", "1", "--quiet", "--store", store}, c.args...)
			code, out, errOut := runCLI(t, args...)
			if code != exitMet {
				t.Fatalf("exit %d, want %d:\n%s\n%s", code, exitMet, out, errOut)
			}
			page := strings.TrimSpace(out[strings.Index(out, "Review: ")+len("Review: "):])
			page = strings.SplitN(page, "\n", 2)[0]
			if _, err := os.Stat(page); err != nil || filepath.Base(page) != review.PageFile {
				t.Fatalf("no review page at %q: %v\n%s", page, err, out)
			}
			runs, _ := filepath.Glob(filepath.Join(store, "*", "*", harness.RunInfoFile))
			if len(runs) < 2 {
				t.Fatalf("%d runs in the store, want the threat and a mitigation at least:\n%s", len(runs), out)
			}
			for _, r := range runs {
				var info harness.RunInfo
				if err := runfile.ReadJSON(r, &info); err != nil {
					t.Fatal(err)
				}
				if info.Backend != "ssh" {
					t.Errorf("%s ran on backend %q, not on the hosts", r, info.Backend)
				}
			}
			t.Logf("%s", out)
			f.RequireHealed(t)
		})
	}
}
