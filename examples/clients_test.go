// Package examples_test runs the lock clients of other languages in
// examples/ on real servers, through the client protocol, with the
// verdicts docs/your-lock.md and docs/libraries.md give them.
package examples_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/nemesis"
	"github.com/lockjepsen/lockjepsen/testkit/harnesstest"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
	"github.com/lockjepsen/lockjepsen/workloads"
)

// requireRuntime skips (or, in CI, fails) a test whose runtime and Redis
// client library are not installed: Debian's python3-redis, nodejs and
// node-redis (scripts/deps installs them).
func requireRuntime(t *testing.T, check ...string) {
	t.Helper()
	redistest.RequireBinary(t)
	if out, err := exec.Command(check[0], check[1:]...).CombinedOutput(); err != nil {
		msg := "the client's runtime is missing (" + strings.Join(check, " ") + "): " + strings.TrimSpace(string(out)) + "; run bash scripts/deps"
		if os.Getenv("LOCKJEPSEN_REQUIRE_REDIS") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
}

var (
	python = []string{"/usr/bin/python3", "-c", "import redis"}
	node   = []string{"node", "-e", "process.env.NODE_PATH='/usr/share/nodejs';require('module').Module._initPaths();require('redis')"}
)

func client(t *testing.T, argv ...string) []string {
	abs, err := filepath.Abs(argv[1])
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{argv[0], abs}, argv[2:]...)
}

// Each case's mechanism: with no faults a correct lock is safe; under
// client-pause a lock without a deadline (redis-py's Lock) is certain to
// overlap once a paused holder's key expires, so the run stops at its
// first violation; a fenced lock's stale write is refused whatever the
// interleaving, so the resource is safe.
func TestForeignClients(t *testing.T) {
	cases := []struct {
		name     string
		runtime  []string
		argv     []string
		workload string
		faults   []string
		expect   string
		// edit, when set, puts the case on its system and faults.
		edit func(*harness.Config)
		// check, when set, checks the results beyond the verdict.
		check func(*testing.T, *harness.Results)
	}{
		{"redis-py Lock, no faults", python, []string{"/usr/bin/python3", "python/redispy_lock.py"}, workloads.Mutex, nil, harness.ExpectSafe, nil, nil},
		{"redis-py Lock, client-pause", python, []string{"/usr/bin/python3", "python/redispy_lock.py"}, workloads.Mutex, []string{nemesis.ClientPause}, harness.ExpectUnsafe, nil, nil},
		{"python token lock, no faults", python, []string{"/usr/bin/python3", "python/token_lock.py"}, workloads.Mutex, nil, harness.ExpectSafe, nil, nil},
		{"python fenced token lock, counter, client-pause", python, []string{"/usr/bin/python3", "python/token_lock.py", "--fenced"}, workloads.Counter, []string{nemesis.ClientPause}, harness.ExpectSafe, nil, nil},
		{"node token lock, no faults", node, []string{"node", "node/token_lock.js"}, workloads.Mutex, nil, harness.ExpectSafe, nil, nil},
		{"node fenced token lock, counter, client-pause", node, []string{"node", "node/token_lock.js", "--fenced"}, workloads.Counter, []string{nemesis.ClientPause}, harness.ExpectSafe, nil, nil},
		{name: "redis-py Lock on Sentinel, no faults", runtime: python, argv: []string{"/usr/bin/python3", "python/redispy_lock.py"}, workload: workloads.Mutex, expect: harness.ExpectSafe,
			edit: func(c *harness.Config) { c.System = cluster.Sentinel }},
		// As the Go token lock's case in harness/sentinel_test.go: the
		// primary is killed right after a grant, before the key reaches a
		// replica (replication slowed by 100 ms); holds of 15-18 s of a
		// 20 s TTL outlast the failover, so a client of the promoted
		// replica, which never saw the key, takes the lock while the
		// holder holds it. The primary stays down 18 s so that a slow
		// failover leaves no violation on the restarted, empty old
		// primary; the run stops at the first violation, which must name
		// two primaries (redis-py's Sentinel client reports the primary
		// it dialed).
		{name: "redis-py Lock on Sentinel, the primary killed after a grant", runtime: python, argv: []string{"/usr/bin/python3", "python/redispy_lock.py"}, workload: workloads.Mutex, expect: harness.ExpectUnsafe,
			edit: func(c *harness.Config) {
				c.System, c.TTL, c.Hold = cluster.Sentinel, 20*time.Second, "15s..18s"
				harnesstest.UntilViolation(c)
				c.Script = killAfterAcquireSteps(c, 18*time.Second)
			}, check: requireTwoPrimaries},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			requireRuntime(t, c.runtime...)
			t.Parallel()
			cfg := harnesstest.ShortConfig(t)
			cfg.Client, cfg.Workload, cfg.Nemesis, cfg.Expect = client(t, c.argv...), c.workload, c.faults, c.expect
			if c.expect == harness.ExpectUnsafe {
				harnesstest.UntilViolation(&cfg)
			}
			if c.faults == nil && c.expect == harness.ExpectSafe {
				// Four client processes for a run with no faults, as in
				// TestLibraryClientsOnTheirSystems.
				cfg.Clients = 4
			}
			if c.edit != nil {
				c.edit(&cfg)
			}
			r := harnesstest.Run(t, cfg).Results
			summary := strings.Join(r.Summary(), "\n")
			if !r.MetExpectation {
				t.Fatalf("expected %s:\n%s\n%s", c.expect, r.Why, summary)
			}
			if c.check != nil {
				c.check(t, r)
			}
			if c.workload == workloads.Counter && !r.Resource.Valid {
				t.Errorf("the fenced resource was damaged:\n%s", summary)
			}
			// A safe verdict from a client that never got the lock would say
			// nothing. Two holds show grants and releases went through; a
			// higher count would measure the machine's load (a CI run under
			// load saw a node client start late and hold four times in 3 s).
			if c.expect == harness.ExpectSafe && r.Exclusion.Holds < 2 {
				t.Errorf("only %d holds: the client hardly ran\n%s", r.Exclusion.Holds, summary)
			}
		})
	}
}

// A client written from docs/client-protocol.md alone, with the old
// redis-py bug (release by GET, a compare in the client, then DEL), is
// found unsafe. The fault that finds it is latency on the client links:
// with replies 50 ms late and holds of 400-450 ms of a 500 ms TTL, a
// holder's GET runs before its key expires and its DEL after, when the
// next holder has the key. The run stops at the first violation.
func TestHandMadeClientFromTheDocs(t *testing.T) {
	requireRuntime(t, python...)
	cfg := harnesstest.ShortConfig(t)
	cfg.Client = client(t, "/usr/bin/python3", "testdata/getdel_client.py")
	harnesstest.DelayedReleases(&cfg)
	r := harnesstest.Run(t, cfg).Results
	if r.First.Violation == nil {
		t.Fatalf("no first violation recorded\n%s", strings.Join(r.Summary(), "\n"))
	}
	v := r.Exclusion.Violations[0]
	if !strings.Contains(v.Story, "Likely cause: process ") {
		t.Errorf("the witness does not name the release that deleted the key:\n%s", v.Story)
	}
	t.Logf("latency on the client links found the GET-then-DEL release unsafe %s into the run: %s",
		time.Duration(*r.First.Violation).Round(time.Millisecond), v.Story)
}

// A client that exits in the middle of the run fails the run as a harness
// failure that names it and gives its stderr; what was recorded stays
// checkable, and no client process is left running.
func TestClientExitingMidRun(t *testing.T) {
	redistest.RequireBinary(t)
	cfg := harnesstest.ShortConfig(t)
	cfg.Client = client(t, "/usr/bin/python3", "../locks/extclient/testdata/badclient.py", "exit")
	cfg.Expect = harness.ExpectAny
	out, err := harness.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := out.Results
	if !r.HarnessFailed() || !strings.Contains(strings.Join(r.Errors, "\n"), "exited: exit status 3") ||
		!strings.Contains(strings.Join(r.Errors, "\n"), "boom: the client crashed") {
		t.Fatalf("errors %q; want the client's exit with its stderr", r.Errors)
	}
	if _, err := harness.Check(out.Dir); err != nil {
		t.Fatalf("the history of the failed run cannot be checked: %v", err)
	}
	if r.Verdict == checker.VerdictSafe && r.MetExpectation {
		t.Error("a failed run met its expectation")
	}
	if left := clientProcesses(t, "badclient.py"); len(left) > 0 {
		t.Errorf("client processes left: %v", left)
	}
}

// A client's start-up is not the run's time: clients that take longer to
// start than the whole time limit (an interpreter behind a version
// manager's shim took 4 s on a loaded machine) still run for all of it,
// instead of leaving a history with no operation.
func TestSlowStartingClientsGetTheWholeTimeLimit(t *testing.T) {
	redistest.RequireBinary(t)
	cfg := harnesstest.ShortConfig(t)
	cfg.Client = client(t, "/usr/bin/python3", "../locks/extclient/testdata/badclient.py", "slow-start", "2")
	cfg.TimeLimit, cfg.Recovery = time.Second, 200*time.Millisecond
	cfg.Expect = harness.ExpectAny // the client grants nothing: the verdict is unknown
	r := harnesstest.Run(t, cfg).Results
	if len(r.Errors) > 0 {
		t.Fatalf("errors: %q", r.Errors)
	}
	// Each worker tries again after a refusal: a run that started its
	// clock after they started sees many attempts, one that spent its
	// time limit waiting for them sees none.
	if r.Liveness.AcquireAttempts < cfg.Clients {
		t.Fatalf("%d acquire attempts from %d clients in %s: the clients did not get the time limit\n%s",
			r.Liveness.AcquireAttempts, cfg.Clients, cfg.TimeLimit, strings.Join(r.Summary(), "\n"))
	}
}

// requireTwoPrimaries: harnesstest.RequireTwoPrimaries (the Go token
// lock's test asks the same).
func requireTwoPrimaries(t *testing.T, r *harness.Results) { harnesstest.RequireTwoPrimaries(t, r) }

// killAfterAcquireSteps: harnesstest.KillAfterAcquireSteps.
func killAfterAcquireSteps(c *harness.Config, down time.Duration) []nemesis.Step {
	return harnesstest.KillAfterAcquireSteps(c, down)
}

// clientProcesses lists the processes of this test binary's children
// whose command line names script.
func clientProcesses(t *testing.T, script string) []string {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	var left []string
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(cmdline), script) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// Field 4 of stat is the parent pid.
		if f := strings.Fields(string(stat)); len(f) > 3 && f[3] == strconv.Itoa(os.Getpid()) {
			left = append(left, e.Name()+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	return left
}

// A run interrupted before any client started (Ctrl-C while a slow
// client loads) records no operation and does not become the store's
// latest run: latest still names the newest run worth reading (issue 53,
// item 3).
func TestRunWithNoOperationIsNotLatest(t *testing.T) {
	redistest.RequireBinary(t)
	cfg := harnesstest.ShortConfig(t)
	cfg.Client = client(t, "/usr/bin/python3", "../locks/extclient/testdata/badclient.py", "slow-start", "5")
	cfg.Expect = harness.ExpectAny
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(time.Second, cancel)
	out, err := harness.Run(ctx, cfg)
	if err == nil && out != nil && out.Results.Ops > 0 {
		t.Skipf("the clients started within a second on this machine: %d operations", out.Results.Ops)
	}
	if _, lerr := os.Lstat(filepath.Join(cfg.Store, "latest")); lerr == nil {
		t.Errorf("the interrupted empty run became %s/latest (run: %v)", cfg.Store, err)
	}
}
