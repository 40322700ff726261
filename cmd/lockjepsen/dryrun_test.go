package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSSHDryRunPrintsAndRunsNothing: --dry-run prints the commands of the
// servers' start, of each fault and its heal, and of the stop, and runs
// no test. The hosts file names SSH ports nothing listens on and a key
// file that does not exist: a dry run dials no host, so it still works.
func TestSSHDryRunPrintsAndRunsNothing(t *testing.T) {
	dir := t.TempDir()
	hosts := writeFile(t, dir, "hosts.yaml", `defaults: {user: root, key: `+filepath.Join(dir, "no-such-key")+`, dir: /var/lib/lockjepsen}
nodes:
  - {name: n1, ssh: "127.0.0.1:1", address: 127.0.0.1, port: 7001, primary: true}
  - {name: n2, ssh: "127.0.0.1:1", address: 127.0.0.1, port: 7002}
  - {name: n3, ssh: "127.0.0.1:1", address: 127.0.0.1, port: 7003}
  - {name: s1, role: sentinel, ssh: "127.0.0.1:1", address: 127.0.0.1, port: 27001}
  - {name: s2, role: sentinel, ssh: "127.0.0.1:1", address: 127.0.0.1, port: 27002}
  - {name: s3, role: sentinel, ssh: "127.0.0.1:1", address: 127.0.0.1, port: 27003}
`)
	store := filepath.Join(dir, "store")
	code, out, errOut := runCLI(t, "test", "--backend", "ssh", "--hosts", hosts, "--system", "sentinel", "--dry-run", "--store", store)
	if code != 0 {
		t.Fatalf("exit %d, want 0; stderr:\n%s", code, errOut)
	}
	for _, want := range []string{"redis-server /var/lib/lockjepsen/n1/server.conf", "redis-sentinel", "# fault: pause n1", "kill -STOP",
		"# fault: partition n1", "iptables -A LOCKJEPSEN", "# stop", "nothing was run on any host"} {
		if !strings.Contains(out, want) {
			t.Errorf("the dry run does not print %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(store); !os.IsNotExist(err) {
		t.Errorf("a dry run made the store %s (%v): it must run no test", store, err)
	}
	for _, args := range [][]string{
		{"test", "--dry-run"},
		{"test", "--backend", "ssh", "--hosts", hosts, "--dry-run", "--trust-on-first-use"},
	} {
		if code, _, errOut := runCLI(t, args...); code != 2 {
			t.Errorf("%q: exit %d, want 2; stderr:\n%s", args, code, errOut)
		}
	}
}

// TestSSHRefusesWhatTheHostsFileCannotRun: a run the hosts file cannot
// hold is bad usage (exit 2), refused before any host is dialed (the file
// names SSH ports nothing listens on) and before the store is made.
func TestSSHRefusesWhatTheHostsFileCannotRun(t *testing.T) {
	dir := t.TempDir()
	hosts := writeFile(t, dir, "hosts.yaml", `defaults: {user: root, key: `+filepath.Join(dir, "no-such-key")+`, dir: /var/lib/lockjepsen}
nodes:
  - {name: n1, ssh: "127.0.0.1:1", address: 127.0.0.1, port: 7001}
  - {name: n2, ssh: "127.0.0.1:1", address: 127.0.0.1, port: 7002}
  - {name: n3, ssh: "127.0.0.1:1", address: 127.0.0.1, port: 7003}
`)
	store := filepath.Join(dir, "store")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--system", "single"}, "lists 3 redis nodes; the run asks for --nodes 1"},
		{[]string{"--system", "sentinel"}, "lists 0 sentinels"},
		{[]string{"--system", "redlock", "--lock", "redlock"}, "lists 3 redis nodes; the run asks for --nodes 5"},
		{[]string{"--system", "redlock", "--lock", "redlock", "--nodes", "3", "--workload", "counter"}, "no process with role resource"},
		{[]string{"--system", "redlock", "--lock", "redlock", "--nodes", "3", "--nemesis", "clock-jump"}, "has no faketime_preload"},
		{[]string{"--system", "etcd", "--lock", "etcd"}, "the ssh backend runs the single, sentinel and redlock systems so far, not etcd"},
		{[]string{"--system", "cluster", "--nodes", "6"}, "cluster"},
		// A run the file can hold, whose key file is missing: refused
		// before any host is dialed (issue 53, item 15).
		{[]string{"--system", "redlock", "--lock", "redlock", "--nodes", "3", "--workload", "mutex"}, "no-such-key"},
	} {
		args := append([]string{"test", "--backend", "ssh", "--hosts", hosts, "--store", store}, c.args...)
		if code, _, errOut := runCLI(t, args...); code != exitUsage || !strings.Contains(errOut, c.want) {
			t.Errorf("%q: exit %d, want 2 and %q; stderr:\n%s", c.args, code, c.want, errOut)
		}
	}
	if _, err := os.Stat(store); !os.IsNotExist(err) {
		t.Errorf("a refused run made the store %s (%v)", store, err)
	}
}
