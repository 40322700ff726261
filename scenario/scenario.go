// Package scenario is the registry of named lockjepsen scenarios: a system,
// a lock, a workload, a fault schedule, timings short enough for CI, and the
// verdict the scenario is known to give. `lockjepsen scenario NAME` runs one,
// `lockjepsen matrix` runs several, and the test suite checks every one of
// them against its expected verdict.
//
// The timings are the smallest that reliably give the verdict on a 2-core
// machine; run longer with a larger TimeLimit for more confidence in a safe
// verdict.
package scenario

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/internal/registry"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/nemesis"
	"github.com/lockjepsen/lockjepsen/workloads"
)

// Scenario is one named test with its expected verdict.
type Scenario struct {
	// Name is what `lockjepsen scenario NAME` takes: lower case, dashes.
	Name string
	// Shows says in one line what the scenario demonstrates.
	Shows string
	// Expect is the verdict the scenario gives: harness.ExpectSafe,
	// ExpectUnsafe or ExpectStuck.
	Expect string
	// Tags group scenarios for `lockjepsen matrix --scenarios tag:NAME`:
	// the system name, "redsync", "quick" (a single Redis, under 10 s).
	Tags []string
	// Edit turns the base configuration (DefaultConfig with the short
	// timings below) into the scenario.
	Edit func(*harness.Config)
}

// Config is the scenario's configuration: harness.DefaultConfig with the
// scenario's system, lock, workload, faults, timings and expectation. Store
// is left at the default ("store"); the caller sets it.
func (s Scenario) Config() harness.Config {
	cfg := Base()
	s.Edit(&cfg)
	cfg.Expect = s.Expect
	cfg.Name = s.Name
	return cfg
}

// Base is what every scenario starts from: harness.DefaultConfig with
// timings short enough for CI.
func Base() harness.Config {
	cfg := harness.DefaultConfig()
	cfg.TimeLimit, cfg.Recovery = 3*time.Second, 1500*time.Millisecond
	cfg.NemesisInterval = 400 * time.Millisecond
	return cfg
}

// Command is the `lockjepsen test` command line equivalent to the scenario,
// for the record and for users who want to vary it.
func (s Scenario) Command() string {
	return "lockjepsen scenario " + s.Name
}

// HasTag reports whether the scenario carries tag.
func (s Scenario) HasTag(tag string) bool {
	return slices.Contains(s.Tags, tag)
}

// Estimate is how long the scenario takes to run, start-up and checking
// included, from its configuration: what `matrix --budget` plans with.
func Estimate(cfg harness.Config) time.Duration {
	// Measured on a 2-core machine: start-up, stop, check and report; the
	// system's descriptor says what its own start-up adds.
	overhead := 1500 * time.Millisecond
	if d, err := cluster.LookupSystem(cfg.System); err == nil && d.StartOverhead > 0 {
		overhead = d.StartOverhead
	}
	return cfg.TimeLimit + cfg.Recovery + overhead
}

var known = registry.New("scenario", func(s Scenario) string { return s.Name })

// Register adds scenarios, such as those of locks that live in another
// module (contrib/liblocks). A name already taken, or a scenario without a
// name or an edit, is refused.
func Register(list ...Scenario) error {
	for _, s := range list {
		if s.Name == "" || s.Edit == nil {
			return fmt.Errorf("register scenario %q: a scenario needs a name and an edit", s.Name)
		}
		if err := known.Add(s); err != nil {
			return err
		}
	}
	return nil
}

// Get returns the named scenario.
func Get(name string) (Scenario, bool) { return known.Get(name) }

// All returns every scenario in list order: by system (single Redis,
// Sentinel, Redlock, etcd), and within a system in the order they were
// registered, which is the order they tell the story in.
func All() []Scenario {
	out := known.All()
	system := map[string]int{}
	for _, s := range out {
		system[s.Name] = slices.Index(cluster.Systems, s.Config().System)
	}
	sort.SliceStable(out, func(i, j int) bool { return system[out[i].Name] < system[out[j].Name] })
	return out
}

// Names returns every scenario name in list order.
func Names() []string { return NamesOf(All()) }

// NamesOf returns the names of list, in its order.
func NamesOf(list []Scenario) []string {
	var names []string
	for _, s := range list {
		names = append(names, s.Name)
	}
	return names
}

// Select resolves a comma list of scenario names and tags ("tag:quick"),
// keeping list order and dropping repeats. An unknown name is an error
// naming the known ones.
func Select(list string) ([]Scenario, error) {
	var out []Scenario
	seen := map[string]bool{}
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		var picked []Scenario
		if tag, ok := strings.CutPrefix(item, "tag:"); ok {
			for _, s := range All() {
				if s.HasTag(tag) {
					picked = append(picked, s)
				}
			}
			if len(picked) == 0 {
				return nil, fmt.Errorf("no scenario has the tag %q", tag)
			}
		} else {
			s, ok := Get(item)
			if !ok {
				return nil, fmt.Errorf("unknown scenario %q; known: %s", item, strings.Join(Names(), ", "))
			}
			picked = []Scenario{s}
		}
		for _, s := range picked {
			if !seen[s.Name] {
				seen[s.Name] = true
				out = append(out, s)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no scenario named")
	}
	return out, nil
}

// Find returns the first scenario that runs lock on system with workload
// under exactly the faults given (in any order), with no script and the
// default persistence, restart delay and hold-time options: how `matrix`
// finds the tuned parameters and the expected verdict of a grid cell. ok is
// false when no scenario matches.
func Find(system, lock, workload string, faults []string) (Scenario, bool) {
	want := sortedJoin(faults)
	def := harness.DefaultConfig()
	for _, s := range All() {
		c := s.Config()
		if c.System == system && c.Lock == lock && c.Workload == workload && sortedJoin(c.Nemesis) == want &&
			c.ScriptName == "" && c.Persistence == def.Persistence && c.RestartDelay == 0 && c.LongHoldRate == 0 &&
			c.ClockJump == def.ClockJump && c.ClockRate == def.ClockRate {
			return s, true
		}
	}
	return Scenario{}, false
}

func sortedJoin(list []string) string {
	l := append([]string(nil), list...)
	sort.Strings(l)
	return strings.Join(l, ",")
}

// Builders of scenario edits, shared with the scenarios of other modules.

// Single runs on one Redis.
func Single(c *harness.Config) { c.System = cluster.Single }

// Sentinel runs on a primary, replicas and sentinels, long enough for a
// failover (about 2.5 s) to happen and settle within the run.
func Sentinel(c *harness.Config) {
	c.System = cluster.Sentinel
	c.TimeLimit, c.Recovery = 9*time.Second, 2*time.Second
}

// ServerFault: server faults on a single Redis, with holds long enough
// that a fault usually lands on a holder.
func ServerFault(c *harness.Config, faults ...string) {
	c.Nemesis = faults
	c.Hold = "100ms..300ms"
	c.FaultDuration = 300 * time.Millisecond
}

// Redlock runs lock on the redlock system: few clients, so that the free
// nodes are not split among many contenders; long holds and frequent
// faults, so that a fault lands on a holder's node many times in a short
// run.
func Redlock(lock string) func(*harness.Config) {
	return func(c *harness.Config) {
		c.System, c.Lock = cluster.Redlock, lock
		c.Clients = 3
		c.NemesisInterval, c.FaultDuration = 150*time.Millisecond, 150*time.Millisecond
		c.TimeLimit = 5 * time.Second
	}
}

// RedisCluster runs the token lock on Redis Cluster, long enough for a
// failover and the clients' next reload of the slots (every second) to
// happen and settle within the run.
func RedisCluster(c *harness.Config) {
	c.System, c.Lock = cluster.RedisCluster, locks.Token
	c.TimeLimit, c.Recovery = 12*time.Second, 3*time.Second
}

// clusterLongLeases: the lease granted right before the fault must
// outlive the failover and the clients' move to the new primary (about
// 3.5 s idle): holds of 8-9.5 s under a TTL of 10 s. The run ends at the
// first violation, a second later: a client can reload the slots from
// the new primary and be granted before the next poll of the primary
// monitor (every 100 ms) has recorded the failover.
//
// The limit is long because the run ends at that violation, not at the
// limit: the fault waits for a grant, and when a client was granted just
// before the fault's step began (the cut not yet in place), the next
// grant comes a whole hold later. With 12 s, a kill at 10 s left the
// failover no time, and a CI run of 2026-12-05 judged the run safe.
func clusterLongLeases(c *harness.Config) {
	c.Clients = 4
	c.TTL, c.Hold = 10*time.Second, "8s..9500ms"
	c.StopOnFirstViolation, c.StopGrace = true, time.Second
	c.TimeLimit = 30 * time.Second
}

// Seeded fixes the seed of f's runs.
func Seeded(seed int64, f func(*harness.Config)) func(*harness.Config) {
	return func(c *harness.Config) { f(c); c.Seed = seed }
}

// Etcd runs lock on three etcd members: whole-second leases, and a longer
// recovery, because the etcd client reconnects to a member it lost with a
// backoff.
func Etcd(lock string) func(*harness.Config) {
	return func(c *harness.Config) {
		c.System, c.Lock, c.TTL = cluster.Etcd, lock, harness.DefaultTTL(cluster.Etcd)
		c.TimeLimit, c.Recovery = 6*time.Second, 3*time.Second
	}
}

// Then applies fs in order.
func Then(fs ...func(*harness.Config)) func(*harness.Config) {
	return func(c *harness.Config) {
		for _, f := range fs {
			f(c)
		}
	}
}

// Verdicts, as scenarios expect them.
const (
	safe   = checker.VerdictSafe
	unsafe = checker.VerdictUnsafe
	stuck  = checker.VerdictStuck
)

func init() {
	single, serverFault, redlock, seeded, then := Single, ServerFault, Redlock, Seeded, Then
	redisCluster := RedisCluster
	sentinel := then(Sentinel, func(c *harness.Config) { c.Lock = locks.Token })
	client := func(argv ...string) func(*harness.Config) {
		return then(single, func(c *harness.Config) { c.Client = argv })
	}
	list := []Scenario{
		// Single Redis: the client-side scenarios.
		{Name: "baseline", Expect: safe, Tags: []string{"single", "quick"},
			Shows: "the token lock (SET NX PX, compare-and-delete release) with no faults: the harness finds nothing where there is nothing",
			Edit:  single},
		{Name: "token-client-pause", Expect: safe, Tags: []string{"single", "quick"},
			Shows: "the token lock with stalled clients: a stale holder's release deletes nothing that is not its own",
			Edit:  then(single, func(c *harness.Config) { c.Nemesis = []string{nemesis.ClientPause} })},
		{Name: "del-release", Expect: unsafe, Tags: []string{"single", "quick"},
			Shows: "release with a plain DEL: a client stalled past its lease wakes up and deletes the next holder's key",
			Edit: then(single, func(c *harness.Config) {
				c.Lock = locks.SetnxDel
				c.Nemesis = []string{nemesis.ClientPause}
			})},
		{Name: "del-release-long-hold", Expect: unsafe, Tags: []string{"single", "quick"},
			Shows: "release with a plain DEL and 5% of holds outlasting the TTL: no fault needed to delete another's lock",
			Edit: then(single, func(c *harness.Config) {
				c.Lock = locks.SetnxDel
				c.LongHoldRate = 0.05
			})},
		{Name: "no-ttl", Expect: stuck, Tags: []string{"single", "quick"},
			Shows: "a lock without expiry (SET NX): a crashed holder blocks everyone for ever",
			Edit: then(single, func(c *harness.Config) {
				c.Lock = locks.SetnxNoTTL
				c.Nemesis = []string{nemesis.ClientCrash}
			})},
		{Name: "token-client-crash", Expect: safe, Tags: []string{"single", "quick"},
			Shows: "the token lock with crashed holders: the TTL frees the lock and nobody overlaps",
			Edit:  then(single, func(c *harness.Config) { c.Nemesis = []string{nemesis.ClientCrash} })},
		{Name: "gc-pause", Expect: unsafe, Tags: []string{"single", "quick"},
			Shows: "Kleppmann's argument: a client pauses between its lease check and its write; the lock looks fine, the counter loses updates",
			Edit: then(single, func(c *harness.Config) {
				c.Workload = workloads.Counter
				c.Nemesis = []string{nemesis.ClientPause}
			})},
		{Name: "gc-pause-fenced", Expect: safe, Tags: []string{"single", "quick"},
			Shows: "the same pauses with fencing tokens: the resource rejects the stale write and the counter stays right",
			Edit: then(single, func(c *harness.Config) {
				c.Workload = workloads.Counter
				c.Lock = locks.Fenced
				c.Nemesis = []string{nemesis.ClientPause}
			})},
		// Single Redis: server faults.
		{Name: "clock-jump", Expect: unsafe, Tags: []string{"single", "quick", "clock"},
			Shows: "the server's wall clock jumps forward past the TTL: the key expires under its holder",
			Edit:  then(single, func(c *harness.Config) { serverFault(c, "clock-jump") })},
		{Name: "clock-strobe", Expect: unsafe, Tags: []string{"single", "quick", "clock"},
			Shows: "the server's clock flips between real time and 1s behind: flipping back is a forward jump that expires keys",
			Edit: then(single, func(c *harness.Config) {
				serverFault(c, "clock-strobe")
				c.ClockJump = "-1s"
			})},
		{Name: "clock-drift", Expect: safe, Tags: []string{"single", "quick", "clock"},
			Shows: "the server's clock runs 1% fast: within the lock's drift margin, nothing happens",
			Edit: then(single, func(c *harness.Config) {
				serverFault(c, "clock-drift")
				c.ClockRate = 1.01
			})},
		{Name: "crash-no-fsync", Expect: unsafe, Tags: []string{"single", "quick"},
			Shows: "the server is killed and restarts at once without persistence: it forgets the lock and grants it again",
			Edit:  then(single, func(c *harness.Config) { serverFault(c, "kill") })},
		{Name: "crash-fsync-always", Expect: safe, Tags: []string{"single", "quick"},
			Shows: "the same crashes with appendfsync always: the restarted server still has the key",
			Edit: then(single, func(c *harness.Config) {
				serverFault(c, "kill")
				c.Persistence = cluster.PersistAlways
			})},
		{Name: "crash-delayed-restart", Expect: safe, Tags: []string{"single", "quick"},
			Shows: "the same crashes, restarted only after a TTL (Redis's advice): every lease has expired by then",
			Edit: then(single, func(c *harness.Config) {
				serverFault(c, "kill")
				c.RestartDelay = c.TTLOrDefault() + 200*time.Millisecond
			})},
		{Name: "server-pause", Expect: safe, Tags: []string{"single", "quick"},
			Shows: "the server is frozen (SIGSTOP): the lock is unavailable, not unsafe",
			Edit:  then(single, func(c *harness.Config) { serverFault(c, "pause") })},
		{Name: "partition", Expect: safe, Tags: []string{"single", "quick"},
			Shows: "the server is cut off: requests time out with unknown outcomes, and the lock stays safe",
			Edit:  then(single, func(c *harness.Config) { serverFault(c, "partition") })},

		// Sentinel.
		{Name: "sentinel-baseline", Expect: safe, Tags: []string{"sentinel"},
			Shows: "a primary, two replicas and three sentinels with no faults: safe",
			Edit:  sentinel},
		{Name: "sentinel-split-brain", Expect: unsafe, Tags: []string{"sentinel"},
			Shows: "Jepsen's Redis analysis: the primary is cut off from the sentinels but not from half the clients; two primaries grant the lock",
			Edit:  then(sentinel, sentinelSplitBrain)},
		{Name: "sentinel-kill-after-acquire", Expect: unsafe, Tags: []string{"sentinel"},
			Shows: "the primary is killed right after a grant, before replication: the promoted replica never saw the lock",
			Edit: then(sentinel, func(c *harness.Config) {
				c.ScriptName = "sentinel-kill-after-acquire"
				// The lease must outlive the failover (about 2.5s).
				c.TTL, c.Hold = 5*time.Second, "3s..4500ms"
			})},

		// Redis Cluster: three primaries with a replica each, failing
		// over by their own election (about 2.5 s).
		{Name: "cluster-baseline", Expect: safe, Tags: []string{"cluster"},
			Shows: "Redis Cluster (3 primaries, 3 replicas) with no faults, four keys over the three primaries' slots: safe",
			Edit: then(redisCluster, func(c *harness.Config) {
				c.TimeLimit, c.Recovery = 5*time.Second, 1500*time.Millisecond
				c.Keys = 4 // lock-0 on n1, lock-1 and lock-2 on n2, lock-3 on n3
			})},
		{Name: "cluster-kill-after-acquire", Expect: unsafe, Tags: []string{"cluster"},
			Shows: "the replica of the lock's slot has fallen behind (its replication cut) and the primary is killed right after a grant: the replica the cluster promotes never saw the lock",
			Edit:  then(redisCluster, clusterLongLeases, func(c *harness.Config) { c.ScriptName = "cluster-kill-after-acquire" })},
		{Name: "cluster-kill-min-replicas", Expect: unsafe, Tags: []string{"cluster"},
			Shows: "a kill right after a grant with min-replicas-to-write 1 (lag 1 s) and replication 250 ms behind (a cut replica would stop all writes): the promoted replica grants only once it has a replica again (the old primary, back 8 s later), so only a lease that outlives the outage is lost, and this one does",
			Edit: then(redisCluster, clusterLongLeases, func(c *harness.Config) {
				c.ScriptName = "cluster-kill-lagging-replica"
				c.MinReplicasToWrite, c.MinReplicasMaxLag = 1, time.Second
				// The holder must outlive the 8 s outage and the old
				// primary's resync as a replica.
				c.TTL, c.Hold = 15*time.Second, "12s..13s"
				// One kill (the script kills every 20 s): a kill a whole
				// hold late, at 13 s, is lost by 23 s.
				c.TimeLimit = 26 * time.Second
			})},
		{Name: "cluster-isolate-primary", Expect: unsafe, Tags: []string{"cluster"},
			Shows: "the slot's primary is cut off from the cluster right after a grant, its replica behind: the cluster promotes the replica and clients lock it while the holder still believes",
			Edit:  then(redisCluster, clusterLongLeases, func(c *harness.Config) { c.ScriptName = "cluster-isolate-primary" })},

		// Renewal: holds of several TTLs, renewed explicitly or by a
		// watchdog.
		{Name: "renew-explicit", Expect: safe, Tags: []string{"single", "renew", "quick"},
			Shows: "the token lock held for 1-5 TTLs, extended before each step: safe",
			Edit: then(single, func(c *harness.Config) {
				c.Workload, c.Renew, c.Keys = workloads.Renew, workloads.RenewExplicit, 4
			})},
		{Name: "renew-explicit-client-pause", Expect: safe, Tags: []string{"single", "renew", "quick"},
			Shows: "the same with stalled clients: a holder that wakes past its lease fails its next extend and stops",
			Edit: then(single, func(c *harness.Config) {
				c.Workload, c.Renew, c.Keys = workloads.Renew, workloads.RenewExplicit, 4
				c.Nemesis = []string{nemesis.ClientPause}
			})},
		{Name: "renew-watchdog-client-pause", Expect: unsafe, Tags: []string{"single", "renew", "quick"},
			Shows: "a Redisson-style watchdog: the pause stops the renewer with the holder, the key expires, and the holder wakes up believing",
			Edit: then(single, func(c *harness.Config) {
				c.Workload, c.Renew, c.Keys = workloads.Renew, workloads.RenewWatchdog, 4
				c.Nemesis = []string{nemesis.ClientPause}
			})},
		{Name: "renew-watchdog-fenced-counter", Expect: unsafe, Tags: []string{"single", "renew", "quick"},
			Shows: "the same with fencing and a write at every step: the lock is not exclusive, the resource refuses the stale holder",
			Edit: then(single, func(c *harness.Config) {
				c.Lock, c.Workload, c.Renew, c.Keys = locks.Fenced, workloads.RenewCounter, workloads.RenewWatchdog, 4
				c.Nemesis = []string{nemesis.ClientPause}
			})},

		// Lock clients of other languages (examples/, over the client
		// protocol); their paths are relative to the repository's root,
		// where these scenarios run. Python is Debian's, for which
		// python3-redis is installed: a python3 earlier on the PATH (a
		// version manager's shim, a virtualenv) may have no redis-py.
		{Name: "python-redispy", Expect: safe, Tags: []string{"single", "client"},
			Shows: "redis-py's own redis.lock.Lock, in Python, with no faults: safe",
			Edit:  client(debianPython, "examples/python/redispy_lock.py")},
		{Name: "python-redispy-client-pause", Expect: unsafe, Tags: []string{"single", "client"},
			Shows: "redis-py's Lock with the client process stopped (SIGSTOP) past its TTL: its holder believes until it releases, and has no fence",
			Edit: then(client(debianPython, "examples/python/redispy_lock.py"), func(c *harness.Config) {
				c.Nemesis = []string{nemesis.ClientPause}
			})},
		{Name: "python-fenced-counter", Expect: safe, Tags: []string{"single", "client"},
			Shows: "a fenced token lock in Python, the counter, stopped client processes: the resource refuses the stale writes",
			Edit: then(client(debianPython, "examples/python/token_lock.py", "--fenced"), func(c *harness.Config) {
				c.Workload, c.Nemesis = workloads.Counter, []string{nemesis.ClientPause}
			})},
		{Name: "node-fenced-counter", Expect: safe, Tags: []string{"single", "client"},
			Shows: "the same fenced token lock in Node (node-redis): the resource stays safe",
			Edit: then(client("node", "examples/node/token_lock.js", "--fenced"), func(c *harness.Config) {
				c.Workload, c.Nemesis = workloads.Counter, []string{nemesis.ClientPause}
			})},

		// The lock libraries teams use (issue 35; docs/libraries.md has
		// each one's review), through their clients in examples/: each
		// library's most telling case. Not tagged with their systems, so
		// that the CI gate's default tag:sentinel (which installs no PHP)
		// does not pick them up; tag:library and --all run them.
		{Name: "symfony-server-kill-stuck", Expect: stuck, Tags: []string{"library", "client", "php", "single"},
			Shows: "Symfony Lock's RedisStore on phpredis, the server killed and restarted at once: a client that spoke during the outage has a connection phpredis marked failed, and no later command reconnects it; nobody gets the lock again",
			Edit:  then(client("php", "examples/php/symfony_lock.php"), func(c *harness.Config) { serverFault(c, "kill") })},
		{Name: "laravel-client-pause", Expect: unsafe, Tags: []string{"library", "client", "php", "single"},
			Shows: "Laravel's Cache::lock() gives its holder no deadline: a holder paused past its key's whole second still believes, and another client holds the lock",
			Edit: then(client("php", "examples/php/laravel_lock.php"), func(c *harness.Config) {
				// A lock with no deadline is paused for 2 TTL: twice the
				// key's lifetime of a whole second.
				c.Nemesis, c.TTL = []string{nemesis.ClientPause}, time.Second
			})},
		{Name: "malkusch-client-pause", Expect: unsafe, Tags: []string{"library", "client", "php", "single"},
			Shows: "malkusch/lock's synchronized() never tells its callback the lock is gone: a callback paused past the key's timeout + 1 s runs beside the next holder's",
			Edit: then(client("php", "examples/php/malkusch_lock.php"), func(c *harness.Config) {
				// The key lives timeout + 1 s (3 s); the pause of a lock
				// with no deadline is 2 TTL (4 s).
				c.Nemesis, c.TTL = []string{nemesis.ClientPause}, 2*time.Second
				c.TimeLimit = 5 * time.Second
			})},
		{Name: "redispy-sentinel-kill-after-acquire", Expect: unsafe, Tags: []string{"library", "client", "python"},
			Shows: "redis-py's Lock on Sentinel: the primary killed right after a grant, before replication; the promoted replica grants the lock again while the holder holds it",
			Edit: then(sentinel, func(c *harness.Config) {
				c.Client = []string{debianPython, "examples/python/redispy_lock.py"}
				c.ScriptName = "sentinel-kill-after-acquire"
				c.TTL, c.Hold = 5*time.Second, "3s..4500ms" // as sentinel-kill-after-acquire
			})},

		// Redlock and redsync.
		{Name: "redlock-baseline", Expect: safe, Tags: []string{"redlock"},
			Shows: "our Redlock over five independent nodes with no faults: safe",
			Edit:  seeded(1, redlock(locks.RedlockName))},
		{Name: "redlock-minority", Expect: safe, Tags: []string{"redlock"},
			Shows: "partitions and pauses of a minority of the nodes: the majority still decides, safe",
			Edit: then(seeded(2, redlock(locks.RedlockName)), func(c *harness.Config) {
				c.Nemesis = []string{"partition", "pause"}
				c.Targets = "minority"
			})},
		{Name: "redlock-clock-jump", Expect: unsafe, Tags: []string{"redlock", "clock"},
			Shows: "a clock jump on a node of the holder's majority: its key expires and another client gets a majority",
			Edit: then(seeded(9, redlock(locks.RedlockName)), func(c *harness.Config) {
				c.Nemesis = []string{"clock-jump"}
				c.Targets = "holder"
				c.Hold = "150ms..400ms"
			})},
		{Name: "redlock-restart", Expect: unsafe, Tags: []string{"redlock"},
			Shows: "a node of the holder's majority crashes and restarts at once without persistence: it forgets the key",
			Edit: then(seeded(3, redlock(locks.RedlockName)), func(c *harness.Config) {
				c.Nemesis = []string{"kill"}
				c.Targets = "holder"
				c.Hold = "150ms..400ms"
			})},
		{Name: "redlock-delayed-restart", Expect: safe, Tags: []string{"redlock"},
			Shows: "the same crashes with the restart delayed past the TTL, as the Redlock description requires: safe",
			Edit: then(seeded(4, redlock(locks.RedlockName)), func(c *harness.Config) {
				c.Nemesis = []string{"kill"}
				c.Targets = "holder"
				c.RestartDelay = c.TTLOrDefault() + 200*time.Millisecond
				c.Hold = "100ms..300ms"
			})},
		{Name: "kleppmann-clock-jump", Expect: unsafe, Tags: []string{"redlock", "clock"},
			Shows: "Kleppmann's counterexample, scripted: two clients each reach three nodes; the shared node's clock jumps and both hold a majority",
			Edit: then(seeded(10, redlock(locks.RedlockName)), func(c *harness.Config) {
				c.ScriptName = "kleppmann-clock-jump"
				c.Clients = 2
				c.Hold = "100ms..300ms"
				c.TimeLimit = 6 * time.Second
			})},
	}
	if err := Register(list...); err != nil {
		panic(err) // the list above is wrong: caught by every test
	}
}

// debianPython is the interpreter Debian's python3-redis belongs to
// (scripts/deps installs it).
const debianPython = "/usr/bin/python3"
