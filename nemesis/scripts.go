package nemesis

import (
	"fmt"
	"sort"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/proxy"
)

// ScriptParams are what a named script is built from.
type ScriptParams struct {
	Nodes     []string
	Clients   int
	TTL       time.Duration
	TimeLimit time.Duration
	Interval  time.Duration
	Duration  time.Duration
	ClockJump time.Duration
	// Sentinels are the sentinel names (sentinel system only).
	Sentinels []string
	// System is the system under test.
	System string
}

// Script is a named schedule of timed steps, for scenarios from the
// literature that a random schedule would hit only by chance.
type Script struct {
	Name        string
	Description string
	// Check refuses parameters the script cannot work with.
	Check func(p ScriptParams) error
	Build func(p ScriptParams) []Step
}

// InOpKills is the named script of kills inside an operation.
const InOpKills = "in-op-kills"

// ReplyLossEarly is the named script of reply loss, then quiet.
const ReplyLossEarly = "reply-loss-early"

// quietTail is when the faults of a script that leaves the rest of the
// run quiet end: after its first third. A key the faults leave behind
// is judged only from refusals that come long after every lease that
// could hold it (checker's never-frees margin, max(2 TTL, 2 s)), and
// faults until the end would keep moving that point.
func quietTail(limit time.Duration) time.Duration { return limit / 3 }

// Scripts are the named scripts, by name.
var Scripts = map[string]Script{
	InOpKills: {
		Name: InOpKills,
		Description: "replies from every node are delayed by a tenth of the TTL (± a fiftieth) for the whole run, and every " +
			"--nemesis-interval of the run's first third a client, in turn, is killed with its next lock call in flight, so that the kill lands " +
			"between two commands of an acquire, extend or release that makes several, and a key it leaves behind shows in the quiet rest; needs a lock client in its own process",
		Check: func(p ScriptParams) error {
			if p.TTL < 10*time.Millisecond || p.Interval <= 0 {
				return fmt.Errorf("needs a TTL of 10ms or more and a positive --nemesis-interval, got %s and %s", p.TTL, p.Interval)
			}
			return nil
		},
		Build: func(p ScriptParams) []Step {
			steps := []Step{{At: 0, Action: Action{Fault: Latency, Nodes: p.Nodes, For: p.TimeLimit,
				Link: proxy.Fault{Latency: p.TTL / 10, Jitter: p.TTL / 50}}}}
			for i, t := 0, p.Interval; t < quietTail(p.TimeLimit); i, t = i+1, t+p.Interval {
				steps = append(steps, Step{At: t, Action: Action{Fault: ClientKillInOp, Clients: []int{i % max(p.Clients, 1)}}})
			}
			return steps
		},
	},
	ReplyLossEarly: {
		Name: ReplyLossEarly,
		Description: "the replies of every node are lost in windows of --fault-duration, every --nemesis-interval, in the run's first third; " +
			"the rest is quiet, so that a key left behind by a request applied but unanswered shows as refusals",
		Check: func(p ScriptParams) error {
			if p.Duration <= 0 || p.Interval <= 0 {
				return fmt.Errorf("needs a positive --fault-duration and --nemesis-interval, got %s and %s", p.Duration, p.Interval)
			}
			return nil
		},
		Build: func(p ScriptParams) []Step {
			var steps []Step
			for t := p.Interval; t+p.Duration < quietTail(p.TimeLimit); t += p.Interval + p.Duration {
				steps = append(steps, Step{At: t, Action: Action{Fault: ReplyLoss, Nodes: p.Nodes, For: p.Duration}})
			}
			return steps
		},
	},
	"kleppmann-clock-jump": {
		Name: "kleppmann-clock-jump",
		Description: "Kleppmann's Redlock counterexample: client 0 is cut off from n4 and n5 and can lock only n1-n3; " +
			"client 1 is cut off from n1 and n2 and can lock only n3-n5; n3's clock jumps forward again and again, " +
			"so its key expires under client 0 and client 1 gets its majority",
		Check: func(p ScriptParams) error {
			if len(p.Nodes) != 5 || p.Clients < 2 {
				return fmt.Errorf("needs 5 nodes and at least 2 clients, got %d nodes and %d clients", len(p.Nodes), p.Clients)
			}
			if p.ClockJump <= 0 {
				return fmt.Errorf("needs a forward --clock-jump, got %s", p.ClockJump)
			}
			return nil
		},
		Build: func(p ScriptParams) []Step {
			n := p.Nodes
			steps := []Step{
				{At: 0, Action: Action{Fault: Partition, Nodes: []string{n[3], n[4]}, Clients: []int{0}, For: p.TimeLimit}},
				{At: 0, Action: Action{Fault: Partition, Nodes: []string{n[0], n[1]}, Clients: []int{1}, For: p.TimeLimit}},
			}
			for t := p.Interval; t+p.Duration < p.TimeLimit; t += p.Interval + p.Duration {
				steps = append(steps, Step{At: t, Action: Action{Fault: ClockJump, Nodes: []string{n[2]}, For: p.Duration, Offset: p.ClockJump}})
			}
			return steps
		},
	},
}

// SplitBrainOpTimeout is the op timeout that sentinel-split-brain's
// scenario and tests give their clients, instead of the default 250 ms.
// The clients cut off from the sentinels reach the old primary only
// through the connections they already have: a command that times out
// closes its connection, and go-redis asks the sentinels for the primary
// on every dial. On a saturated machine 250 ms stalls are common, and a
// fresh machine's CI lost every connection of those clients: two
// failovers, no grant by the deposed primary, no violation.
const SplitBrainOpTimeout = time.Second

func init() {
	Scripts["sentinel-split-brain"] = Script{
		Name: "sentinel-split-brain",
		Description: "Jepsen's Redis analysis: the primary is cut off from its replicas and sentinels while half the clients, " +
			"cut off from the sentinels, still reach it; the sentinels promote a replica and the other clients follow, " +
			"so two primaries grant the lock; after healing the old primary is demoted and its writes are lost",
		Check: func(p ScriptParams) error {
			if len(p.Sentinels) == 0 || p.Clients < 2 {
				return fmt.Errorf("needs the sentinel system and at least 2 clients")
			}
			return needsFailoverTime(p)
		},
		// One cycle every 20s: 6s of isolation (Sentinel needs about 3s to
		// promote), then time for the old primary to be demoted.
		Build: func(p ScriptParams) []Step {
			return SplitBrainSteps(p.Sentinels, p.Clients, 6*time.Second, 20*time.Second, p.TimeLimit)
		},
	}
	Scripts["sentinel-kill-after-acquire"] = Script{
		Name: "sentinel-kill-after-acquire",
		Description: "replication is slowed by 100ms on the cluster's internal links; the primary is killed right after a " +
			"client acquires and stays down past the failover, so a replica that never saw the lock is promoted",
		Check: func(p ScriptParams) error {
			if len(p.Sentinels) == 0 {
				return fmt.Errorf("needs the sentinel system")
			}
			return needsFailoverTime(p)
		},
		Build: func(p ScriptParams) []Step { return killLaggingPrimary(p, 5*time.Second, 100*time.Millisecond) },
	}
}

func nodesOf(p ScriptParams) []string { return append([]string(nil), p.Nodes...) }

// SplitBrainSteps are sentinel-split-brain's steps: a window of isolation,
// isolation long, starts every `every` from 1 s into the fault phase. The
// primary is cut off from its replicas and sentinels while clients 0 to
// clients/2-1, cut off from the sentinels, still reach it.
func SplitBrainSteps(sentinels []string, clients int, isolation, every, timeLimit time.Duration) []Step {
	var half []int
	for c := 0; c < clients/2; c++ {
		half = append(half, c)
	}
	var steps []Step
	for t := time.Second; t+isolation <= timeLimit; t += every {
		steps = append(steps,
			Step{At: t, Action: Action{Fault: Partition, Nodes: sentinels, Clients: half, For: isolation}},
			Step{At: t, Action: Action{Fault: Isolate, Nodes: []string{PrimaryPlaceholder}, For: isolation}})
	}
	return steps
}

// needsFailoverTime is the part of a failover script's Check that every
// system shares: the run must outlast a failover.
func needsFailoverTime(p ScriptParams) error {
	if p.TimeLimit < 8*time.Second {
		return fmt.Errorf("needs --time-limit of at least 8s for a failover to happen, got %s", p.TimeLimit)
	}
	return nil
}

// killLaggingPrimary slows replication by lag on the cluster's internal
// links for the whole run, and every 20s kills the primary right after a
// grant and keeps it down for down (past the failover): a grant has not
// reached the replica when the kill right after it lands, which on the
// local backend (a SIGKILL) it does within the lag.
func killLaggingPrimary(p ScriptParams, down, lag time.Duration) []Step {
	steps := []Step{{At: 0, Action: Action{Fault: Latency, Nodes: nodesOf(p), Internal: true, For: p.TimeLimit,
		Link: proxy.Fault{Latency: lag}}}}
	// Each kill after the step before it is in place: the first one's
	// grant must come after the latency, or it reaches the replica at
	// once (steps at one time start side by side).
	for t := time.Duration(0); t+down <= p.TimeLimit; t += 20 * time.Second {
		steps = append(steps, Step{At: t, AfterPrevious: true, Action: Action{Fault: Kill, Nodes: []string{PrimaryPlaceholder},
			AfterGrant: true, For: down}})
	}
	return steps
}

// needsRedisCluster is the Check of the Redis Cluster scripts: a failover
// takes about 2.5 s (cluster.ClusterNodeTimeout, the failure reports, the
// replica's election delay).
func needsRedisCluster(p ScriptParams) error {
	if d, err := cluster.LookupSystem(p.System); err != nil || d.Reach != cluster.ReachSlots {
		return fmt.Errorf("needs the cluster system")
	}
	if p.Clients < 2 {
		return fmt.Errorf("needs at least 2 clients")
	}
	return needsFailoverTime(p)
}

func init() {
	Scripts["cluster-kill-after-acquire"] = Script{
		Name: "cluster-kill-after-acquire",
		Description: "Redis Cluster: the replication into the replica of the lock's slot is cut (a replica that has fallen " +
			"behind), then its primary is killed right after a client acquires and stays down past the failover, so the " +
			"replica is promoted without the lock",
		Check: needsRedisCluster,
		Build: func(p ScriptParams) []Step {
			// A cut in place before the grant, not a latency the kill
			// must outrun: a docker kill on a loaded machine has taken
			// longer than 100 ms to drop the links. The cut lasts while
			// the kill waits for a grant (a lease held from before) and
			// the node is down.
			primary := []string{PrimaryPlaceholder}
			var steps []Step
			for t := time.Duration(0); t+8*time.Second <= p.TimeLimit; t += 20 * time.Second {
				steps = append(steps,
					Step{At: t, Action: Action{Fault: Partition, Nodes: primary, Internal: true, For: 16 * time.Second}},
					Step{At: t, AfterPrevious: true, Action: Action{Fault: Kill, Nodes: primary, AfterGrant: true, For: 8 * time.Second}})
			}
			return steps
		},
	}
	Scripts["cluster-kill-lagging-replica"] = Script{
		Name: "cluster-kill-lagging-replica",
		Description: "Redis Cluster: replication is slowed by 250ms on the cluster's own links, so replicas stay connected " +
			"(as min-replicas-to-write needs) but behind; the primary of the lock's slot is killed right after a client " +
			"acquires and stays down past the failover",
		Check: needsRedisCluster,
		// 250 ms rather than Sentinel's 100: a loaded machine (a CI
		// run's own vet and compiles) has taken longer than 100 ms from
		// the grant to the kill, and the key reached the replica. Below
		// half of cluster.ClusterNodeTimeout, so the bus still sees
		// every node alive.
		Build: func(p ScriptParams) []Step { return killLaggingPrimary(p, 8*time.Second, 250*time.Millisecond) },
	}
	Scripts["cluster-isolate-primary"] = Script{
		Name: "cluster-isolate-primary",
		Description: "Redis Cluster: half the clients are cut off from the primary of the lock's slot, and so is its " +
			"replica's replication (a replica that has fallen behind); right after a grant that primary is cut off from " +
			"every other node (bus and replication, both ways) while the other half of the clients still reach it; the " +
			"others promote its replica, which never saw the grant, and the cut-off clients lock it",
		Check: needsRedisCluster,
		Build: func(p ScriptParams) []Step {
			var half []int
			for c := p.Clients / 2; c < p.Clients; c++ {
				half = append(half, c)
			}
			// Replication is cut, not slowed as in
			// cluster-kill-lagging-replica: the isolation replaces a
			// link's latency with its cut, and toxiproxy delivers what
			// the latency held back when it does.
			//
			// Each step after the one before it is in place: steps at one
			// time start side by side, and a grant that comes before the
			// cuts reaches the replica, which, once promoted, refuses the
			// cut-off clients. That is the likely reading of a CI run of
			// 2026-12-05 (before this order) that isolated the primary
			// twice, under load, and lost no lease.
			primary := []string{PrimaryPlaceholder}
			steps := []Step{
				{At: 0, Action: Action{Fault: Partition, Nodes: primary, Internal: true, For: p.TimeLimit}},
				{At: 0, AfterPrevious: true, Action: Action{Fault: Partition, Nodes: primary, Clients: half, For: p.TimeLimit}}}
			for t := time.Duration(0); t+8*time.Second <= p.TimeLimit; t += 20 * time.Second {
				steps = append(steps, Step{At: t, AfterPrevious: true, Action: Action{Fault: Isolate, Nodes: primary,
					AfterGrant: true, For: 8 * time.Second}})
			}
			return steps
		},
	}
}

// ScriptNames is the sorted list of script names.
func ScriptNames() []string {
	var out []string
	for n := range Scripts {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
