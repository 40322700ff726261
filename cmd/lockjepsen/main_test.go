package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockjepsen/lockjepsen/contrib/liblocks"
	"github.com/lockjepsen/lockjepsen/contrib/ssh/sshtest"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

// The test binary doubles as the CLI, so that a test can run it as a
// separate process and signal it.
func TestMain(m *testing.M) {
	if os.Getenv("LOCKJEPSEN_BE_CLI") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	// run registers the library locks; tests that call the grid directly
	// need them too, whichever test runs first.
	if err := liblocks.Register(); err != nil {
		fmt.Fprintf(os.Stderr, "register the library locks: %v\n", err)
		os.Exit(1)
	}
	// The ssh backend's tests share the test hosts; Main removes them.
	sshtest.Main(m)
}

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestUsageErrorsExit2(t *testing.T) {
	store := t.TempDir()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"test", "--clients", "0", "--store", store}, "--clients"},
		{[]string{"test", "--clients", "many", "--store", store}, "clients"},
		{[]string{"test", "--no-such-flag"}, "no-such-flag"},
		{[]string{"test", "--nemesis", "meteor", "--store", store}, "meteor"},
		// none is known; what is wrong is none with faults (issue 34, item 12).
		{[]string{"test", "--nemesis", "none,kill", "--store", store}, "none cannot be combined with other faults"},
		{[]string{"test", "--lock", "nope", "--store", store}, "--lock"},
		{[]string{"test", "--ttl", "soon", "--store", store}, "ttl"},
		{[]string{"test", "--system", "mars", "--store", store}, "--system"},
		// A client's script given as a path from elsewhere (the examples'
		// clients are paths from the repository's root).
		{[]string{"test", "--client", "sh no/such/client.sh", "--store", store}, "its script no/such/client.sh is not there"},
		{[]string{"check"}, "arg"},
		{[]string{"check", filepath.Join(store, "nothing")}, "not a lockjepsen run directory"},
		{[]string{"frobnicate"}, "unknown command"},
		// Issue 53, item 16: silently accepted before.
		{[]string{"test", "--name", "a\nb", "--store", store}, "control character"},
		{[]string{"soak", "--duration", "2s", "--time-limit", "5s", "--store", store}, "give one"},
		{[]string{"shrink", "--tries", "2/3/4", store}, "want k/n"},
		// Issue 53, item 15: refused before the work, not after it.
		{[]string{"review", "--out", "/dev/null", "--budget", "6m", "--store", store}, "--out /dev/null"},
		{[]string{"review", "--client", "python3 no/such/client.py", "--store", store}, "its script no/such/client.py is not there"},
		{[]string{"review", "--render", store, "--budget", "1m"}, "takes no other flag"},
		// Impossible combinations are refused before any server starts.
		{[]string{"test", "--system", "etcd", "--lock", "etcd-session", "--ttl", "1500ms", "--store", store}, "whole seconds"},
		// A TTL typed is honoured or refused, never replaced by the
		// system's default: etcd's 1s is what --ttl 0 or no --ttl gives.
		{[]string{"test", "--system", "etcd", "--lock", "etcd-session", "--ttl", "500ms", "--store", store}, "--ttl 500ms on etcd: leases are whole seconds, at least 1s"},
		{[]string{"test", "--system", "etcd", "--lock", "etcd", "--nemesis", "failover", "--store", store}, "needs --system sentinel"},
		{[]string{"test", "--system", "redlock", "--lock", "redlock", "--nemesis", "isolate", "--store", store}, "isolate"},
		{[]string{"test", "--system", "single", "--lock", "etcd-session", "--store", store}, "needs --system etcd"},
		{[]string{"test", "--system", "cluster", "--nodes", "5", "--store", store}, "at least 6"},
		{[]string{"test", "--system", "cluster", "--lock", "fenced", "--store", store}, "--lock fenced"},
		{[]string{"test", "--system", "cluster", "--backend", "compose", "--store", store}, "local and docker backends"},
		{[]string{"test", "--system", "cluster", "--backend", "docker", "--script", "cluster-isolate-primary", "--store", store}, "cannot isolate"},
		{[]string{"test", "--system", "cluster", "--backend", "docker", "--nemesis", "isolate", "--store", store}, "cannot isolate"},
		{[]string{"test", "--system", "cluster", "--sentinels", "3", "--store", store}, "--system sentinel"},
		{[]string{"test", "--system", "cluster", "--min-replicas-to-write", "2", "--store", store}, "min-replicas-to-write"},
		{[]string{"test", "--system", "redlock", "--lock", "redlock", "--min-replicas-to-write", "1", "--store", store}, "sentinel or cluster"},
		// Names the store keeps for itself (store/latest would point at
		// itself), and durations no one means.
		{[]string{"test", "--name", "latest", "--store", store}, "reserved"},
		{[]string{"test", "--name", "matrix", "--store", store}, "reserved"},
		{[]string{"test", "--nemesis", "kill", "--restart-delay", "1h", "--store", store}, "--restart-delay"},
		{[]string{"test", "--time-limit", "1000h", "--store", store}, "--time-limit"},
		{[]string{"test", "--system", "redlock", "--lock", "redlock", "--node-timeout", "-1s", "--store", store}, "--node-timeout"},
		{[]string{"test", "--record-failed-acquires", "some", "--store", store}, "--record-failed-acquires"},
		// Refused up front, not after the servers started (issue 34,
		// items 10, 11 and 13).
		{[]string{"test", "--system", "sentinel", "--lock", "wait", "--wait-replicas", "9", "--store", store}, "--wait-replicas 9: --system sentinel with 3 nodes has 2 replica(s)"},
		{[]string{"test", "--system", "sentinel", "--lock", "wait", "--nodes", "2", "--wait-replicas", "2", "--store", store}, "has 1 replica(s)"},
		{[]string{"test", "--system", "sentinel", "--down-after", "1000h", "--store", store}, "down-after 1000h0m0s must be a whole number of milliseconds between 1ms and 24h"},
		{[]string{"test", "--system", "sentinel", "--failover-timeout", "1000h", "--store", store}, "failover-timeout 1000h0m0s must be a whole number of milliseconds between 1ms and 24h"},
		{[]string{"test", "--nemesis", "clock-jump", "--clock-jump", "1000h", "--store", store}, "more than a day"},
		{[]string{"test", "--nemesis", "clock-jump", "--clock-jump", "1000000ttl", "--store", store}, "1000000ttl of --ttl 500ms is 138h53m20s, more than a day"},
		{[]string{"test", "--nemesis", "clock-jump", "--clock-jump", "-200000ttl", "--store", store}, "more than a day"},
		{[]string{"test", "--name", strings.Repeat("n", 300), "--store", store}, "--name: the run's name is 300 bytes long"},
		{[]string{"soak", "--duration", "0", "--store", store}, "--duration must be positive"},
		{[]string{"soak", "--duration", "1000h", "--store", store}, "--duration must be positive and at most 24h"},
	}
	for _, tc := range cases {
		code, _, stderr := runCLI(t, tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 mentioning %q", tc.args, code, stderr, tc.want)
		}
	}
	if entries, _ := os.ReadDir(store); len(entries) > 0 {
		t.Errorf("a refused run left %d entries in the store (want none: refused before it starts)", len(entries))
	}
}

func TestHelpListsEveryFlagWithDefault(t *testing.T) {
	code, out, _ := runCLI(t, "test", "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"--system", "--lock", "--workload", "--nemesis", "--clients", "--ttl", "--time-limit",
		"--seed", "--store", "--expect", "0: the system's default, 500ms; on etcd 1s, and only whole seconds", "setnx-del", "client-pause"} {
		if !strings.Contains(out, want) {
			t.Errorf("--help does not mention %q", want)
		}
	}
}

func TestExitCodesFollowTheExpectation(t *testing.T) {
	redistest.RequireBinary(t)
	// A relative store, as users type it: redis-server runs in another
	// directory, so the harness must hand it absolute paths.
	t.Chdir(t.TempDir())
	store := "store"
	base := []string{"test", "--time-limit", "1s", "--recovery", "0s", "--store", store}
	if code, out, errOut := runCLI(t, base...); code != exitMet || !strings.Contains(out, "SAFE") {
		t.Fatalf("safe run: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, out, _ := runCLI(t, append(base, "--expect", "unsafe")...); code != exitNotMet || !strings.Contains(out, "NOT met") {
		t.Fatalf("safe run expected unsafe: exit %d\n%s", code, out)
	}
	code, out, _ := runCLI(t, "check", filepath.Join(store, "latest"))
	if code != exitNotMet || !strings.Contains(out, "SAFE") {
		t.Fatalf("check of the last run (expecting unsafe): exit %d\n%s", code, out)
	}
}

func TestMissingRedisExits3(t *testing.T) {
	t.Setenv("LOCKJEPSEN_REDIS_SERVER", "/nonexistent/redis-server")
	code, _, stderr := runCLI(t, "test", "--time-limit", "1s", "--store", t.TempDir())
	if code != exitHarness || !strings.Contains(stderr, "redis-server") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

func TestReportAndServe(t *testing.T) {
	redistest.RequireBinary(t)
	store := t.TempDir()
	if code, out, errOut := runCLI(t, "test", "--time-limit", "1s", "--recovery", "0s", "--store", store); code != 0 || !strings.Contains(out, "Report: ") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	latest := filepath.Join(store, "latest")
	os.Remove(filepath.Join(latest, "report.html"))
	if code, out, _ := runCLI(t, "report", latest); code != 0 || !strings.Contains(out, "report.html") {
		t.Fatalf("report: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(latest, "report.html")); err != nil {
		t.Fatal(err)
	}
	matrix := filepath.Join(store, "matrix.html")
	if code, _, _ := runCLI(t, "report", "--matrix", matrix, latest); code != 0 {
		t.Fatalf("matrix: exit %d", code)
	}
	if code, _, stderr := runCLI(t, "report", store); code != exitUsage || !strings.Contains(stderr, "not a lockjepsen run directory") {
		t.Fatalf("report on a store: exit %d %s", code, stderr)
	}

	cmd := exec.Command(os.Args[0], "serve", "--store", store, "--port", "0")
	cmd.Env = append(os.Environ(), "LOCKJEPSEN_BE_CLI=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	url := strings.Fields(line[strings.Index(line, "http://"):])[0]
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "single-token-mutex-none") {
		t.Fatalf("index: %d\n%.500s", resp.StatusCode, body)
	}
	cmd.Process.Signal(os.Interrupt)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve did not stop cleanly on SIGINT: %v", err)
	}
}

// Issue 34 item 4: --client "" (an unset variable in a CI job) was
// ignored, and the built-in lock was tested and passed. Every command
// that takes --client refuses it before anything starts.
func TestEmptyClientRefused(t *testing.T) {
	store := t.TempDir()
	for _, args := range [][]string{
		{"test", "--client", ""},
		{"test", "--client", "  ", "--time-limit", "1s"},
		{"scenario", "baseline", "--client", ""},
		{"matrix", "--scenarios", "baseline", "--client", ""},
		{"review", "--client", ""},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, stdout, stderr := runCLI(t, append(args, "--store", store)...)
			if code != exitUsage || !strings.Contains(stderr, "--client is empty") {
				t.Fatalf("exit %d, want %d and a refusal of the empty --client\n%s%s", code, exitUsage, stdout, stderr)
			}
		})
	}
}
