package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	sshbackend "github.com/lockjepsen/lockjepsen/contrib/ssh"
	"github.com/lockjepsen/lockjepsen/contrib/ssh/sshtest"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/review"
	"github.com/lockjepsen/lockjepsen/runfile"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
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
		// A 6 s lease makes the threat's holds 3-4.5 s, which outlast a
		// kill and a restart over SSH beside two busy loops (its default
		// 1-1.5 s holds once did not: the run saw a kill on a live lease
		// and no overlap), with 12 s for the kill to follow a grant; the
		// threat's run stops at its overlap.
		{"single", 1, 0, []string{"--threats", "server-restart", "--mitigations", "fsync-always,fencing", "--ttl", "6s", "--time-limit", "12s", "--budget", "5m"}},
		// split-brain cuts the primary off with iptables on its host,
		// from 1 s for 6 s; the sentinels promote a replica within the
		// window. Runs of this test that saw no failover there (a CI run
		// beside two busy loops, a fresh machine's CI, 2 of 3 runs here
		// beside busy loops) were the cut's fault, not the machine's:
		// its rules matched the co-located sentinel's packets to the
		// replicas, and when that sentinel led the failover it found no
		// replica to promote (contrib/ssh TestSentinelOnHosts checks the
		// cut from that host's side).
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
			r, err := review.Read(filepath.Dir(page))
			if err != nil {
				t.Fatal(err)
			}
			for _, row := range r.Rows {
				if c := strings.Join(row.Configured.Command, " "); !strings.Contains(c, "--backend ssh --hosts "+hosts) {
					t.Errorf("the reproducing command of %s does not run on the hosts: %s", row.Configured.Threat, c)
				}
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

// TestSignalsLeaveHostsHealed: SIGINT to `lockjepsen test --backend ssh`
// while a fault is in effect on a host (an iptables cut of the Sentinel
// primary, a SIGSTOP of a single node) heals it before the process exits;
// SIGKILL, which gives it no chance, leaves the fault and the server
// behind with a marker that lists them, and the next run heals them from
// the marker before it starts.
func TestSignalsLeaveHostsHealed(t *testing.T) {
	redistest.RequireBinary(t)
	f := sshtest.Start(t)
	// Each fault lasts the whole run: the signal comes while it is on.
	long := []string{"--nemesis-interval", "100ms", "--fault-duration", "60s", "--time-limit", "60s"}
	cut := func(t *testing.T) string { return f.Rules(t, 0) }
	stopped := func(t *testing.T) string { return f.Stopped(t, 0) }
	cases := []struct {
		name             string
		nodes, sentinels int
		args             []string
		// on is what the fault leaves on host 1 while in effect.
		on  func(*testing.T) string
		sig os.Signal
		// undo is what n1's marker must list after SIGKILL.
		undo string
	}{
		{"SIGINT while the Sentinel primary is cut off", 3, 3, append([]string{"--system", "sentinel", "--nemesis", "isolate"}, long...), cut, os.Interrupt, ""},
		{"SIGINT while the node is paused", 1, 0, append([]string{"--nemesis", "pause"}, long...), stopped, os.Interrupt, ""},
		{"SIGKILL while the node is paused", 1, 0, append([]string{"--nemesis", "pause"}, long...), stopped, os.Kill, "kill -CONT"},
		{"SIGKILL while the Sentinel primary is cut off", 3, 3, append([]string{"--system", "sentinel", "--nemesis", "isolate"}, long...), cut, os.Kill, "iptables -D " + sshbackend.Chain},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hosts := f.HostsFile(t, f.KnownHosts(t), c.nodes, c.sentinels)
			args := append([]string{"test", "--backend", "ssh", "--hosts", hosts, "--store", t.TempDir()}, c.args...)
			cmd, out := startCLI(t, nil, args...)
			waitFor(t, "the fault in effect on host 1", func() string {
				if c.on(t) == "" {
					return "the fault on host 1"
				}
				return ""
			})
			cmd.Process.Signal(c.sig)
			waitExit(t, cmd, out)
			if c.sig == os.Interrupt {
				if code := cmd.ProcessState.ExitCode(); code != exitNotMet {
					t.Fatalf("exit %d after SIGINT, want %d:\n%s", code, exitNotMet, out)
				}
				f.RequireHealed(t)
				return
			}
			// Killed: the fault and the server are still there, and the
			// marker says how to undo them.
			if c.on(t) == "" {
				t.Fatalf("the fault was gone after SIGKILL: this case does not test the next run's heal")
			}
			marker := f.OnHost(t, 0, "cat "+sshtest.Dir+"/n1/"+sshbackend.MarkerFile)
			if !strings.Contains(marker, c.undo) {
				t.Fatalf("the marker does not list %q:\n%s", c.undo, marker)
			}
			system := "single"
			if c.sentinels > 0 {
				system = "sentinel"
			}
			code, stdout, stderr := runCLI(t, "test", "--backend", "ssh", "--hosts", hosts, "--system", system, "--time-limit", "1s", "--recovery", "0s", "--store", t.TempDir())
			if code != exitMet {
				t.Fatalf("the next run: exit %d\n%s\n%s", code, stdout, stderr)
			}
			if !strings.Contains(stdout+stderr, "ssh: healed on n1 what a killed run left") {
				t.Errorf("the next run does not say it healed what the killed one left:\n%s\n%s", stdout, stderr)
			}
			f.RequireHealed(t)
		})
	}
}
