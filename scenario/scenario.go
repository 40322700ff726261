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
	"sort"
	"strings"
	"time"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/locks"
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
	// edit turns the base configuration (DefaultConfig with the short
	// timings below) into the scenario.
	edit func(*harness.Config)
}

// Config is the scenario's configuration: harness.DefaultConfig with the
// scenario's system, lock, workload, faults, timings and expectation. Store
// is left at the default ("store"); the caller sets it.
func (s Scenario) Config() harness.Config {
	cfg := harness.DefaultConfig()
	cfg.TimeLimit, cfg.Recovery = 3*time.Second, 1500*time.Millisecond
	cfg.NemesisInterval = 400 * time.Millisecond
	s.edit(&cfg)
	cfg.Expect = s.Expect
	cfg.Name = s.Name
	return cfg
}

// Command is the `lockjepsen test` command line equivalent to the scenario,
// for the record and for users who want to vary it.
func (s Scenario) Command() string {
	return "lockjepsen scenario " + s.Name
}

// HasTag reports whether the scenario carries tag.
func (s Scenario) HasTag(tag string) bool {
	for _, t := range s.Tags {
		if t == tag {
			return true
		}
	}
	return false
}

// Estimate is how long the scenario takes to run, start-up and checking
// included, from its configuration: what `matrix --budget` plans with.
func Estimate(cfg harness.Config) time.Duration {
	// Measured on a 2-core machine: start-up, stop, check and report.
	overhead := 1500 * time.Millisecond
	switch cfg.System {
	case cluster.Sentinel:
		overhead = 5 * time.Second
	case cluster.Redlock:
		overhead = 2 * time.Second
	}
	return cfg.TimeLimit + cfg.Recovery + overhead
}

var registry = map[string]Scenario{}

func add(s Scenario) {
	if _, dup := registry[s.Name]; dup {
		panic("scenario: duplicate " + s.Name)
	}
	registry[s.Name] = s
}

// Get returns the named scenario.
func Get(name string) (Scenario, bool) {
	s, ok := registry[name]
	return s, ok
}

// All returns every scenario in list order: single Redis first, then
// Sentinel, then Redlock; within a system, in the order they tell the story.
func All() []Scenario {
	out := make([]Scenario, 0, len(registry))
	for _, s := range registry {
		out = append(out, s)
	}
	sort.SliceStable(out, func(i, j int) bool { return order[out[i].Name] < order[out[j].Name] })
	return out
}

// Names returns every scenario name in list order.
func Names() []string {
	var names []string
	for _, s := range All() {
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

// order is the list order.
var order = map[string]int{}

func init() {
	const (
		safe   = checker.VerdictSafe
		unsafe = checker.VerdictUnsafe
		stuck  = checker.VerdictStuck
	)
	single := func(c *harness.Config) { c.System = cluster.Single }
	// Server faults on a single Redis: holds long enough that a fault
	// usually lands on a holder.
	serverFault := func(c *harness.Config, faults ...string) {
		c.Nemesis = faults
		c.Hold = "100ms..300ms"
		c.FaultDuration = 300 * time.Millisecond
	}
	// Redlock: few clients, so that the free nodes are not split among many
	// contenders; long holds and frequent faults, so that a fault lands on
	// a holder's node many times in a short run.
	redlock := func(lock string) func(*harness.Config) {
		return func(c *harness.Config) {
			c.System, c.Lock = cluster.Redlock, lock
			c.Clients = 3
			c.NemesisInterval, c.FaultDuration = 150*time.Millisecond, 150*time.Millisecond
			c.TimeLimit = 5 * time.Second
		}
	}
	// The seeds of the Redlock test cases (harness/redlock_test.go).
	seeded := func(seed int64, f func(*harness.Config)) func(*harness.Config) {
		return func(c *harness.Config) { f(c); c.Seed = seed }
	}
	sentinel := func(c *harness.Config) {
		c.System, c.Lock = cluster.Sentinel, locks.Token
		c.TimeLimit, c.Recovery = 9*time.Second, 2*time.Second
	}
	// etcd: whole-second leases; a longer recovery, because the etcd
	// client reconnects to a member it lost with a backoff.
	etcd := func(lock string) func(*harness.Config) {
		return func(c *harness.Config) {
			c.System, c.Lock, c.TTL = cluster.Etcd, lock, time.Second
			c.TimeLimit, c.Recovery = 6*time.Second, 3*time.Second
		}
	}
	then := func(fs ...func(*harness.Config)) func(*harness.Config) {
		return func(c *harness.Config) {
			for _, f := range fs {
				f(c)
			}
		}
	}
	list := []Scenario{
		// Single Redis: the client-side scenarios.
		{Name: "baseline", Expect: safe, Tags: []string{"single", "quick"},
			Shows: "the token lock (SET NX PX, compare-and-delete release) with no faults: the harness finds nothing where there is nothing",
			edit:  single},
		{Name: "token-client-pause", Expect: safe, Tags: []string{"single", "quick"},
			Shows: "the token lock with stalled clients: a stale holder's release deletes nothing that is not its own",
			edit:  then(single, func(c *harness.Config) { c.Nemesis = []string{"client-pause"} })},
		{Name: "del-release", Expect: unsafe, Tags: []string{"single", "quick"},
			Shows: "release with a plain DEL: a client stalled past its lease wakes up and deletes the next holder's key",
			edit: then(single, func(c *harness.Config) {
				c.Lock = locks.SetnxDel
				c.Nemesis = []string{"client-pause"}
			})},
		{Name: "del-release-long-hold", Expect: unsafe, Tags: []string{"single", "quick"},
			Shows: "release with a plain DEL and 5% of holds outlasting the TTL: no fault needed to delete another's lock",
			edit: then(single, func(c *harness.Config) {
				c.Lock = locks.SetnxDel
				c.LongHoldRate = 0.05
			})},
		{Name: "no-ttl", Expect: stuck, Tags: []string{"single", "quick"},
			Shows: "a lock without expiry (SET NX): a crashed holder blocks everyone for ever",
			edit: then(single, func(c *harness.Config) {
				c.Lock = locks.SetnxNoTTL
				c.Nemesis = []string{"client-crash"}
			})},
		{Name: "token-client-crash", Expect: safe, Tags: []string{"single", "quick"},
			Shows: "the token lock with crashed holders: the TTL frees the lock and nobody overlaps",
			edit:  then(single, func(c *harness.Config) { c.Nemesis = []string{"client-crash"} })},
		{Name: "gc-pause", Expect: unsafe, Tags: []string{"single", "quick"},
			Shows: "Kleppmann's argument: a client pauses between its lease check and its write; the lock looks fine, the counter loses updates",
			edit: then(single, func(c *harness.Config) {
				c.Workload = workloads.Counter
				c.Nemesis = []string{"client-pause"}
			})},
		{Name: "gc-pause-fenced", Expect: safe, Tags: []string{"single", "quick"},
			Shows: "the same pauses with fencing tokens: the resource rejects the stale write and the counter stays right",
			edit: then(single, func(c *harness.Config) {
				c.Workload = workloads.Counter
				c.Lock = locks.Fenced
				c.Nemesis = []string{"client-pause"}
			})},
		// Single Redis: server faults.
		{Name: "clock-jump", Expect: unsafe, Tags: []string{"single", "quick", "clock"},
			Shows: "the server's wall clock jumps forward past the TTL: the key expires under its holder",
			edit:  then(single, func(c *harness.Config) { serverFault(c, "clock-jump") })},
		{Name: "clock-strobe", Expect: unsafe, Tags: []string{"single", "quick", "clock"},
			Shows: "the server's clock flips between real time and 1s behind: flipping back is a forward jump that expires keys",
			edit: then(single, func(c *harness.Config) {
				serverFault(c, "clock-strobe")
				c.ClockJump = "-1s"
			})},
		{Name: "clock-drift", Expect: safe, Tags: []string{"single", "quick", "clock"},
			Shows: "the server's clock runs 1% fast: within the lock's drift margin, nothing happens",
			edit: then(single, func(c *harness.Config) {
				serverFault(c, "clock-drift")
				c.ClockRate = 1.01
			})},
		{Name: "crash-no-fsync", Expect: unsafe, Tags: []string{"single", "quick"},
			Shows: "the server is killed and restarts at once without persistence: it forgets the lock and grants it again",
			edit:  then(single, func(c *harness.Config) { serverFault(c, "kill") })},
		{Name: "crash-fsync-always", Expect: safe, Tags: []string{"single", "quick"},
			Shows: "the same crashes with appendfsync always: the restarted server still has the key",
			edit: then(single, func(c *harness.Config) {
				serverFault(c, "kill")
				c.Persistence = cluster.PersistAlways
			})},
		{Name: "crash-delayed-restart", Expect: safe, Tags: []string{"single", "quick"},
			Shows: "the same crashes, restarted only after a TTL (Redis's advice): every lease has expired by then",
			edit: then(single, func(c *harness.Config) {
				serverFault(c, "kill")
				c.RestartDelay = c.TTL + 200*time.Millisecond
			})},
		{Name: "server-pause", Expect: safe, Tags: []string{"single", "quick"},
			Shows: "the server is frozen (SIGSTOP): the lock is unavailable, not unsafe",
			edit:  then(single, func(c *harness.Config) { serverFault(c, "pause") })},
		{Name: "partition", Expect: safe, Tags: []string{"single", "quick"},
			Shows: "the server is cut off: requests time out with unknown outcomes, and the lock stays safe",
			edit:  then(single, func(c *harness.Config) { serverFault(c, "partition") })},
		{Name: "redislock-restart", Expect: unsafe, Tags: []string{"single", "quick", "library"},
			Shows: "github.com/bsm/redislock, a single-instance library, under the same crash: it is exactly as unsafe as the token lock",
			edit: then(single, func(c *harness.Config) {
				c.Lock = locks.RedislockName
				serverFault(c, "kill")
			})},

		// Sentinel.
		{Name: "sentinel-baseline", Expect: safe, Tags: []string{"sentinel"},
			Shows: "a primary, two replicas and three sentinels with no faults: safe",
			edit:  sentinel},
		{Name: "sentinel-split-brain", Expect: unsafe, Tags: []string{"sentinel"},
			Shows: "Jepsen's Redis analysis: the primary is cut off from the sentinels but not from half the clients; two primaries grant the lock",
			edit: then(sentinel, func(c *harness.Config) {
				c.ScriptName = "sentinel-split-brain"
				c.Hold = "50ms..150ms"
			})},
		{Name: "sentinel-kill-after-acquire", Expect: unsafe, Tags: []string{"sentinel"},
			Shows: "the primary is killed right after a grant, before replication: the promoted replica never saw the lock",
			edit: then(sentinel, func(c *harness.Config) {
				c.ScriptName = "sentinel-kill-after-acquire"
				// The lease must outlive the failover (about 2.5s).
				c.TTL, c.Hold = 5*time.Second, "3s..4500ms"
			})},

		// Redlock and redsync.
		{Name: "redlock-baseline", Expect: safe, Tags: []string{"redlock"},
			Shows: "our Redlock over five independent nodes with no faults: safe",
			edit:  seeded(1, redlock(locks.RedlockName))},
		{Name: "redlock-minority", Expect: safe, Tags: []string{"redlock"},
			Shows: "partitions and pauses of a minority of the nodes: the majority still decides, safe",
			edit: then(seeded(2, redlock(locks.RedlockName)), func(c *harness.Config) {
				c.Nemesis = []string{"partition", "pause"}
				c.Targets = "minority"
			})},
		{Name: "redlock-clock-jump", Expect: unsafe, Tags: []string{"redlock", "clock"},
			Shows: "a clock jump on a node of the holder's majority: its key expires and another client gets a majority",
			edit: then(seeded(9, redlock(locks.RedlockName)), func(c *harness.Config) {
				c.Nemesis = []string{"clock-jump"}
				c.Targets = "holder"
				c.Hold = "150ms..400ms"
			})},
		{Name: "redlock-restart", Expect: unsafe, Tags: []string{"redlock"},
			Shows: "a node of the holder's majority crashes and restarts at once without persistence: it forgets the key",
			edit: then(seeded(3, redlock(locks.RedlockName)), func(c *harness.Config) {
				c.Nemesis = []string{"kill"}
				c.Targets = "holder"
				c.Hold = "150ms..400ms"
			})},
		{Name: "redlock-delayed-restart", Expect: safe, Tags: []string{"redlock"},
			Shows: "the same crashes with the restart delayed past the TTL, as the Redlock description requires: safe",
			edit: then(seeded(4, redlock(locks.RedlockName)), func(c *harness.Config) {
				c.Nemesis = []string{"kill"}
				c.Targets = "holder"
				c.RestartDelay = c.TTL + 200*time.Millisecond
				c.Hold = "100ms..300ms"
			})},
		{Name: "kleppmann-clock-jump", Expect: unsafe, Tags: []string{"redlock", "clock"},
			Shows: "Kleppmann's counterexample, scripted: two clients each reach three nodes; the shared node's clock jumps and both hold a majority",
			edit: then(seeded(10, redlock(locks.RedlockName)), func(c *harness.Config) {
				c.ScriptName = "kleppmann-clock-jump"
				c.Clients = 2
				c.Hold = "100ms..300ms"
				c.TimeLimit = 6 * time.Second
			})},
		{Name: "redsync-baseline", Expect: safe, Tags: []string{"redlock", "redsync", "library"},
			Shows: "github.com/go-redsync/redsync, a Redlock library, with no faults: safe",
			edit:  seeded(5, redlock(locks.RedsyncName))},
		{Name: "redsync-minority", Expect: safe, Tags: []string{"redlock", "redsync", "library"},
			Shows: "redsync with partitions and pauses of a minority: safe",
			edit: then(seeded(6, redlock(locks.RedsyncName)), func(c *harness.Config) {
				c.Nemesis = []string{"partition", "pause"}
				c.Targets = "minority"
			})},
		{Name: "redsync-restart", Expect: unsafe, Tags: []string{"redlock", "redsync", "library"},
			Shows: "redsync when a node of the holder's majority restarts at once without persistence: unsafe, like our Redlock",
			edit: then(seeded(7, redlock(locks.RedsyncName)), func(c *harness.Config) {
				c.Nemesis = []string{"kill"}
				c.Targets = "holder"
				c.Hold = "150ms..400ms"
			})},
		{Name: "redsync-delayed-restart", Expect: safe, Tags: []string{"redlock", "redsync", "library"},
			Shows: "redsync with the restart delayed past the TTL: safe",
			edit: then(seeded(8, redlock(locks.RedsyncName)), func(c *harness.Config) {
				c.Nemesis = []string{"kill"}
				c.Targets = "holder"
				c.RestartDelay = c.TTL + 200*time.Millisecond
				c.Hold = "100ms..300ms"
			})},

		// The consensus baseline: etcd 3 members, the same workloads.
		{Name: "etcd-baseline", Expect: safe, Tags: []string{"etcd"},
			Shows: "etcd's lock (concurrency.Mutex on a lease) on three members with no faults: safe",
			edit:  etcd(locks.EtcdName)},
		{Name: "etcd-member-faults", Expect: safe, Tags: []string{"etcd"},
			Shows: "pauses and kills of one member at a time: raft keeps a majority, the lock stays safe",
			edit: then(etcd(locks.EtcdName), func(c *harness.Config) {
				c.Nemesis = []string{"pause", "kill"}
				c.Targets = "one"
				c.NemesisInterval, c.FaultDuration = time.Second, time.Second
			})},
		{Name: "etcd-partition", Expect: safe, Tags: []string{"etcd"},
			Shows: "a member cut off from clients and peers: requests to it time out, the majority goes on, safe",
			edit: then(etcd(locks.EtcdName), func(c *harness.Config) {
				c.Nemesis = []string{"partition"}
				c.Targets = "one"
				c.NemesisInterval, c.FaultDuration = time.Second, time.Second
			})},
		{Name: "etcd-session-client-pause", Expect: unsafe, Tags: []string{"etcd"},
			Shows: "Jepsen's etcd 3.4.3 finding: with the session's keep-alive, a client paused past the TTL loses its lease and wakes up still holding the lock",
			edit: then(etcd(locks.EtcdSessionName), func(c *harness.Config) {
				c.Nemesis = []string{"client-pause"}
			})},
		{Name: "etcd-session-fenced-counter", Expect: unsafe, Tags: []string{"etcd"},
			Shows: "the same pauses on the counter: the lock is not exclusive, but the create revision fences the resource and no update is lost",
			edit: then(etcd(locks.EtcdSessionName), func(c *harness.Config) {
				c.Workload = workloads.Counter
				c.Nemesis = []string{"client-pause"}
			})},
		{Name: "etcd-gc-pause-fenced", Expect: safe, Tags: []string{"etcd"},
			Shows: "etcd's lock without keep-alive under the same pauses on the counter: the holder's belief ends with its lease, and the fence refuses the late write",
			edit: then(etcd(locks.EtcdName), func(c *harness.Config) {
				c.Workload = workloads.Counter
				c.Nemesis = []string{"client-pause"}
			})},
	}
	for i, s := range list {
		add(s)
		order[s.Name] = i
	}
}
