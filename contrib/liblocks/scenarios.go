package liblocks

import (
	"time"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/nemesis"
	"github.com/lockjepsen/lockjepsen/scenario"
	"github.com/lockjepsen/lockjepsen/workloads"
)

// Scenarios are the named scenarios of this package's locks, with the
// verdicts they are known to give; Register adds them to the scenario
// registry.
var Scenarios = []scenario.Scenario{
	{Name: "redislock-restart", Expect: checker.VerdictUnsafe, Tags: []string{"single", "quick", "library"},
		Shows: "github.com/bsm/redislock, a single-instance library, under the same crash: it is exactly as unsafe as the token lock",
		Edit: scenario.Then(scenario.Single, func(c *harness.Config) {
			c.Lock = RedislockName
			scenario.ServerFault(c, "kill")
		})},

	// The context locks of the Redis and Valkey clients (ctxlock.go).
	{Name: "rueidislock-baseline", Expect: checker.VerdictSafe, Tags: ctxTags(RueidislockName, "single"),
		Shows: "github.com/redis/rueidis/rueidislock at its defaults (2 of 3 keys) with no faults: safe, the holder's belief a context the library cancels",
		Edit:  scenario.Seeded(11, ctxOn(scenario.Single, RueidislockName))},
	{Name: "rueidislock-clock-offset", Expect: checker.VerdictUnsafe, Tags: ctxTags(RueidislockName, "single"),
		Shows: "rueidislock with the server's clock 1.5 TTL ahead of the clients': SET NX PXAT from the client's clock sets a key that has already expired, the server answers OK, and every caller holds the lock at once",
		Edit:  scenario.Seeded(12, ctxOn(scenario.Single, RueidislockName, clockOffset))},
	{Name: "valkeylock-clock-offset", Expect: checker.VerdictUnsafe, Tags: ctxTags(ValkeylockName, "single"),
		Shows: "valkeylock, the same design in valkey-go, under the same offset: unsafe the same way",
		Edit:  scenario.Seeded(12, ctxOn(scenario.Single, ValkeylockName, clockOffset))},
	{Name: "rueidislock-server-pause", Expect: checker.VerdictUnsafe, Tags: ctxTags(RueidislockName, "single"),
		Shows: "rueidislock-1 with the server paused for 1.25-3.75 TTL right after a grant: the renewal sent at TTL/2 is bounded by the deadline it asks for (now + TTL), not the key's, so the holder's context lives on after its key expired, until the server answers or 1.5 TTL (the lease model's belief past its key)",
		Edit:  scenario.Seeded(13, ctxOn(scenario.Single, Rueidislock1Name, serverPause))},
	{Name: "rueidislock-partition", Expect: checker.VerdictUnsafe, Tags: ctxTags(RueidislockName, "single"),
		Shows: "rueidislock-1 with every client cut off from the server (a black hole) for 1.25-3.75 TTL right after a grant: the renewal hangs as on a paused server, and the context outlives the key by up to TTL/2 (the lease model's belief past its key)",
		Edit:  scenario.Seeded(15, ctxOn(scenario.Single, Rueidislock1Name, afterGrantFor(nemesis.Partition)))},
	{Name: "rueidislock-latency", Expect: checker.VerdictSafe, Tags: ctxTags(RueidislockName, "single"),
		Shows: "rueidislock with every reply, invalidations included, delayed 10 ms (± 5): each renewal's reply and each notification comes late, but the key is renewed before it expires and nobody takes it meanwhile: safe",
		Edit:  scenario.Seeded(16, ctxOn(scenario.Single, RueidislockName, replyLatency))},
	{Name: "rueidislock-sentinel-kill-after-acquire", Expect: checker.VerdictUnsafe, Tags: ctxTags(RueidislockName, "sentinel"),
		Shows: "rueidislock on Sentinel through rueidis's own Sentinel client: the primary killed right after a grant, before replication; the connection's close notifies the holder at once, but the library answers it with a renewal, which waits for the client to find the new primary, and the promoted replica grants the lock to another client while the holder's context lives",
		Edit:  scenario.Seeded(17, ctxOn(scenario.Sentinel, RueidislockName, holderOutlivesFailover))},
	{Name: "rueidislock-cluster-baseline", Expect: checker.VerdictSafe, Tags: ctxTags(RueidislockName, "cluster"),
		Shows: "rueidislock on Redis Cluster, its three keys in three slots (all served by one primary for lock-0), with no faults: safe",
		Edit:  scenario.Seeded(14, ctxOn(scenario.RedisCluster, RueidislockName))},

	{Name: "redsync-baseline", Expect: checker.VerdictSafe, Tags: redsyncTags(),
		Shows: "github.com/go-redsync/redsync, a Redlock library, with no faults: safe",
		Edit:  scenario.Seeded(5, scenario.Redlock(RedsyncName))},
	{Name: "redsync-minority", Expect: checker.VerdictSafe, Tags: redsyncTags(),
		Shows: "redsync with partitions and pauses of a minority: safe",
		Edit: redsyncSeeded(6, func(c *harness.Config) {
			c.Nemesis = []string{"partition", "pause"}
			c.Targets = "minority"
		})},
	{Name: "redsync-restart", Expect: checker.VerdictUnsafe, Tags: redsyncTags(),
		Shows: "redsync when a node of the holder's majority restarts at once without persistence: unsafe, like our Redlock",
		Edit: redsyncSeeded(7, func(c *harness.Config) {
			c.Nemesis = []string{"kill"}
			c.Targets = "holder"
			c.Hold = "150ms..400ms"
		})},
	{Name: "redsync-delayed-restart", Expect: checker.VerdictSafe, Tags: redsyncTags(),
		Shows: "redsync with the restart delayed past the TTL: safe",
		Edit: redsyncSeeded(8, func(c *harness.Config) {
			c.Nemesis = []string{"kill"}
			c.Targets = "holder"
			c.RestartDelay = c.TTLOrDefault() + 200*time.Millisecond
			c.Hold = "100ms..300ms"
		})},

	// The consensus baseline: etcd 3 members, the same workloads.
	{Name: "etcd-baseline", Expect: checker.VerdictSafe, Tags: []string{"etcd"},
		Shows: "etcd's lock (concurrency.Mutex on a lease) on three members with no faults: safe",
		Edit:  scenario.Etcd(EtcdName)},
	{Name: "etcd-member-faults", Expect: checker.VerdictSafe, Tags: []string{"etcd"},
		Shows: "pauses and kills of one member at a time: raft keeps a majority, the lock stays safe",
		Edit:  etcdMemberFaults("pause", "kill")},
	{Name: "etcd-partition", Expect: checker.VerdictSafe, Tags: []string{"etcd"},
		Shows: "a member cut off from clients and peers: requests to it time out, the majority goes on, safe",
		Edit:  etcdMemberFaults("partition")},
	{Name: "etcd-session-client-pause", Expect: checker.VerdictUnsafe, Tags: []string{"etcd"},
		Shows: "Jepsen's etcd 3.4.3 finding: with the session's keep-alive, a client paused past the TTL loses its lease and wakes up still holding the lock",
		Edit: scenario.Then(scenario.Etcd(EtcdSessionName), func(c *harness.Config) {
			c.Nemesis = []string{nemesis.ClientPause}
		})},
	{Name: "etcd-session-fenced-counter", Expect: checker.VerdictUnsafe, Tags: []string{"etcd"},
		Shows: "the same pauses on the counter: the lock is not exclusive, but the create revision fences the resource and no update is lost",
		Edit: scenario.Then(scenario.Etcd(EtcdSessionName), func(c *harness.Config) {
			c.Workload = workloads.Counter
			c.Nemesis = []string{nemesis.ClientPause}
		})},
	{Name: "etcd-gc-pause-fenced", Expect: checker.VerdictSafe, Tags: []string{"etcd"},
		Shows: "etcd's lock without keep-alive under the same pauses on the counter: the holder's belief ends with its lease, and the fence refuses the late write",
		Edit: scenario.Then(scenario.Etcd(EtcdName), func(c *harness.Config) {
			c.Workload = workloads.Counter
			c.Nemesis = []string{nemesis.ClientPause}
		})},
}

// ctxTags are the tags of a context lock's scenarios: its library and
// system; "library" marks the library scenarios.
func ctxTags(lock, system string) []string { return []string{system, lock, "library"} }

// ctxOn is lock on a system, holds of 100-300 ms, then edits.
func ctxOn(system func(*harness.Config), lock string, edits ...func(*harness.Config)) func(*harness.Config) {
	return scenario.Then(append([]func(*harness.Config){system, func(c *harness.Config) {
		c.Lock, c.Hold = lock, "100ms..300ms"
	}}, edits...)...)
}

// clockOffset moves every server's clock 1.5 TTL ahead of the clients'
// from before the first grant; the run ends at the first overlap.
func clockOffset(c *harness.Config) {
	c.Nemesis = []string{nemesis.ClockOffset}
	c.ClockJump = "1.5ttl"
	c.Clients = 4
	c.StopOnFirstViolation, c.TimeLimit = true, 10*time.Second
}

// serverPause pauses the server right after a grant (a fault aimed at a
// live lease) for 1.25-3.75 TTL (FaultDuration's jitter), always past the
// key's expiry at 1 TTL, with holds of 1.5-2 TTL that outlast it.
func serverPause(c *harness.Config) {
	c.Nemesis, c.AfterAcquire = []string{nemesis.Pause}, true
	c.TTL, c.Hold = time.Second, "1500ms..2s"
	c.FaultDuration, c.NemesisInterval = 2500*time.Millisecond, 3*time.Second
	c.Clients, c.TimeLimit = 3, 9*time.Second
}

// afterGrantFor makes fault (a server or link fault on the one node) start
// right after a grant (a fault aimed at a live lease) and last 1.25-3.75
// TTL, as serverPause does.
func afterGrantFor(fault string) func(*harness.Config) {
	return func(c *harness.Config) {
		serverPause(c)
		c.Nemesis = []string{fault}
	}
}

// replyLatency delays every reply of the server by 10 ms ± 5 for the whole
// run: under rueidislock's TryNextAfter (20 ms), which bounds each key's
// SET, so grants still happen.
func replyLatency(c *harness.Config) {
	c.Nemesis = []string{nemesis.Latency}
	c.Latency, c.Jitter = 10*time.Millisecond, 5*time.Millisecond
	c.NemesisInterval, c.FaultDuration = 100*time.Millisecond, time.Minute
}

// holderOutlivesFailover kills the primary right after a grant, before
// replication (sentinel-kill-after-acquire), under a holder that holds for
// 7-9 s of a 10 s lease: far past the failover (3 s here, 5 s loaded), so
// that the promoted replica's first grant always comes while the holder
// still holds. The run goes on past the violation, so that the overlap
// measured is the whole of it (until the holder's renewal reaches the new
// primary, or it releases).
func holderOutlivesFailover(c *harness.Config) {
	c.ScriptName = "sentinel-kill-after-acquire"
	c.TTL, c.Hold = 10*time.Second, "7s..9s"
}

// redsyncTags are the tags of every redsync scenario.
func redsyncTags() []string { return []string{"redlock", RedsyncName, "library"} }

// redsyncSeeded is redsync on five nodes, with the seed that the
// scenario's verdict was established with, then edit.
func redsyncSeeded(seed int64, edit func(*harness.Config)) func(*harness.Config) {
	return scenario.Then(scenario.Seeded(seed, scenario.Redlock(RedsyncName)), edit)
}

// etcdMemberFaults is etcd's lock under the faults of one member at a
// time, a second long, a second apart.
func etcdMemberFaults(faults ...string) func(*harness.Config) {
	return scenario.Then(scenario.Etcd(EtcdName), func(c *harness.Config) {
		c.Nemesis = append([]string(nil), faults...)
		c.Targets = "one"
		c.NemesisInterval, c.FaultDuration = time.Second, time.Second
		// Each fault starts right after a grant, on a lease held 100-300
		// ms: left to chance, the few faults of a 6 s run all landed
		// between holds (a matrix run counted no fault on a live lease),
		// and the safe verdict was vacuous.
		c.AfterAcquire = true
		c.Hold = "100ms..300ms"
	})
}
