package examples_test

import (
	"strings"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/testkit/harnesstest"
	"github.com/lockjepsen/lockjepsen/workloads"
)

// php needs Debian's php-cli with the libraries the PHP clients load
// (scripts/deps installs them).
var php = []string{"php", "-r", `require "Predis/autoload.php"; require "/usr/share/php/Symfony/Component/Lock/autoload.php"; ` +
	`require "/usr/share/php/Illuminate/Cache/autoload.php"; require "/usr/share/php/Illuminate/Redis/autoload.php"; ` +
	`require "/usr/share/php/Malkusch/Lock/autoload.php"; new Redis();`}

// libraryClients are the clients of real lock libraries in examples/ and
// the systems each declares in its handshake.
var libraryClients = []struct {
	name    string
	runtime []string
	argv    []string
	systems []string
}{
	{"redis-py Lock", python, []string{"/usr/bin/python3", "python/redispy_lock.py"}, []string{cluster.Single, cluster.Sentinel}},
	{"Symfony Lock", php, []string{"php", "php/symfony_lock.php"}, []string{cluster.Single, cluster.Sentinel, cluster.RedisCluster, cluster.Redlock}},
	{"Laravel Cache::lock", php, []string{"php", "php/laravel_lock.php"}, []string{cluster.Single, cluster.Sentinel, cluster.RedisCluster}},
	{"malkusch/lock", php, []string{"php", "php/malkusch_lock.php"}, []string{cluster.Single, cluster.Redlock}},
}

// Each library's client runs safe with no faults on every system it
// declares (with holds well inside the TTL nothing can take a lock from
// its holder), grants and releases go through, and no client process is
// left afterwards. A system a client does not declare is refused before
// anything starts.
func TestLibraryClientsOnTheirSystems(t *testing.T) {
	// The runs go in parallel; the processes are counted once all have
	// ended, since a run's clients share the test binary as parent.
	t.Run("runs", func(t *testing.T) { libraryRuns(t) })
	for _, lc := range libraryClients {
		script := lc.argv[1][strings.LastIndex(lc.argv[1], "/")+1:]
		if left := clientProcesses(t, script); len(left) > 0 {
			t.Errorf("%s: client processes left: %v", lc.name, left)
		}
	}
}

func libraryRuns(t *testing.T) {
	for _, lc := range libraryClients {
		for _, system := range cluster.Systems {
			declared := strings.Contains(strings.Join(lc.systems, ","), system)
			t.Run(lc.name+" on "+system, func(t *testing.T) {
				requireRuntime(t, lc.runtime...)
				if system == cluster.Etcd && declared {
					t.Fatal("no library client here speaks etcd")
				}
				cfg := harnesstest.ShortConfig(t)
				cfg.System, cfg.Client, cfg.Workload, cfg.Expect = system, client(t, lc.argv...), workloads.Mutex, harness.ExpectSafe
				if !declared {
					if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "runs on") {
						t.Fatalf("a client that does not declare %s was not refused: %v", system, err)
					}
					return
				}
				t.Parallel()
				// Four client processes rather than ten: with no faults,
				// three others contending for every grant are as much a
				// test of the library as nine, and each PHP or Python
				// process costs CPU that the runs beside this one need
				// (examples spent 121 s of CPU, 2026-12-05).
				cfg.Clients = 4
				r := harnesstest.Run(t, cfg).Results
				if !r.MetExpectation || len(r.Errors) > 0 {
					t.Fatalf("expected safe: %s %v\n%s", r.Why, r.Errors, strings.Join(r.Summary(), "\n"))
				}
				if r.Exclusion.Holds < 2 {
					t.Errorf("only %d holds: the client hardly ran\n%s", r.Exclusion.Holds, strings.Join(r.Summary(), "\n"))
				}
			})
		}
	}
}

// A PHP client on the Redlock system runs the holder-aimed faults: kills
// aimed at the nodes that granted the live lease, which the harness can
// only find because the client names them (granted_by: Symfony stores a
// sorted set and malkusch a private token, neither of which the
// harness's own GET of the key can match). The restart is delayed past
// the TTL, so the run's verdict is the library's; what must hold is that
// the faults hit live leases.
func TestPHPClientOnRedlockHolderFaults(t *testing.T) {
	for _, argv := range [][]string{{"php", "php/symfony_lock.php"}, {"php", "php/malkusch_lock.php"}} {
		t.Run(argv[1], func(t *testing.T) {
			requireRuntime(t, php...)
			t.Parallel()
			cfg := harnesstest.ShortConfig(t)
			cfg.System, cfg.Client, cfg.Expect = cluster.Redlock, client(t, argv...), harness.ExpectAny
			// Each kill right after a grant (AfterAcquire), so that it
			// meets a live lease rather than a gap between holds.
			cfg.Nemesis, cfg.Targets, cfg.AfterAcquire = []string{"kill"}, "holder", true
			cfg.RestartDelay, cfg.Hold = cfg.TTLOrDefault()+200*time.Millisecond, "100ms..300ms"
			r := harnesstest.Run(t, cfg).Results
			if len(r.Errors) > 0 {
				t.Fatalf("errors: %v", r.Errors)
			}
			if r.Exercised == nil || r.Exercised.NodeFaults == 0 {
				t.Fatalf("no kill hit a live lease: the holder's nodes were not found\n%s", strings.Join(r.Summary(), "\n"))
			}
			t.Logf("%s: %s", argv[1], strings.Join(r.Summary(), "\n"))
		})
	}
}

// The PHP clients on Sentinel (Predis) answer every request while the
// primary is killed and the sentinels fail over: Predis by default
// retries a command that failed on the primary 20 times, 1 s apart, so a
// lock call during the outage would block past the protocol's reply
// timeout and the harness would take the client for hung (as the first
// Symfony and Laravel reviews on Sentinel did). The clients make one
// attempt per request (lockjepsen_client.php, sentinel_attempts). Kills
// aimed at the primary with clients hammering it make certain that
// commands meet a dead primary, and each kill comes right after a grant,
// so that it meets a live lease; the verdict is the library's.
func TestPHPClientsOnSentinelAnswerThroughAFailover(t *testing.T) {
	for _, argv := range [][]string{{"php", "php/symfony_lock.php"}, {"php", "php/laravel_lock.php"}} {
		t.Run(argv[1], func(t *testing.T) {
			requireRuntime(t, php...)
			t.Parallel()
			cfg := harnesstest.ShortConfig(t)
			cfg.System, cfg.Client, cfg.Expect = cluster.Sentinel, client(t, argv...), harness.ExpectAny
			// Each kill right after a grant (AfterAcquire), with holds long
			// enough to be live when it lands: at random times a CI run's
			// kills all fell between holds (2026-12-04).
			cfg.Nemesis, cfg.Targets, cfg.AfterAcquire = []string{"kill"}, "primary", true
			cfg.Hold = "100ms..300ms"
			cfg.TimeLimit, cfg.Recovery = 9*time.Second, 2*time.Second
			r := harnesstest.Run(t, cfg).Results
			if len(r.Errors) > 0 {
				t.Fatalf("errors: %v", r.Errors)
			}
			if r.Exercised == nil || r.Exercised.NodeFaults == 0 {
				t.Fatalf("no kill hit the primary while it held a live lease\n%s", strings.Join(r.Summary(), "\n"))
			}
		})
	}
}
