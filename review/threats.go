package review

import (
	"fmt"
	"slices"
	"time"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/nemesis"
	"github.com/lockjepsen/lockjepsen/scenario"
	"github.com/lockjepsen/lockjepsen/workloads"
)

// Threat is a failure a lock must survive in production, declared once:
// the review runs every threat that applies to the system, and the
// mitigations named here for each threat it finds unsafe.
type Threat struct {
	Name string
	// Title names the threat for a design review.
	Title string
	// Systems it applies to; nil is every system.
	Systems []string
	// Inject sets the faults on a configuration of the system under
	// review (or, for a mitigation that changes the system, of that one).
	Inject func(c *harness.Config)
	// Mitigations could close the threat, by name, in the order tried.
	Mitigations []string
	// Analog: Inject has an equivalent on systems outside Systems, for a
	// mitigation that changes the system (a Sentinel failover is a
	// member's crash on etcd).
	Analog bool
	// Catches names the real bugs and losses the threat is there to
	// catch, for review --help and the page.
	Catches string
	// Moments are the dangerous moments (checker.ExercisedMoments) that
	// show a run exercised the threat; a cell with no violation and none
	// of them gives no evidence ("not exercised"). A cell counts those of
	// its system (momentsOn).
	Moments []string
	// Renews: the threat renews the lock, so it runs only where the lock
	// can extend (a Go lock, or a client that declares extend).
	Renews bool
	// KillsClients: the threat kills client processes inside a lock call,
	// so it runs only for a lock client in its own process (--client): a
	// Go lock runs inside the harness's process, which cannot be killed
	// alone (the client-crash threat stands in for it).
	KillsClients bool
}

// AppliesTo reports whether the threat is one the system faces.
func (t Threat) AppliesTo(system string) bool {
	return t.Systems == nil || slices.Contains(t.Systems, system)
}

// faultSystems are the systems the named fault runs on, as its descriptor
// says (nil: every system).
func faultSystems(name string) []string {
	d, _ := nemesis.Lookup(name) // the constants name known faults
	return d.Systems
}

// FailoverTTL is the shortest TTL the failover threat runs with on
// Sentinel: a lease that outlives the failover.
const FailoverTTL = scenario.FailoverTTL

// ClusterFailoverTTL is FailoverTTL on Redis Cluster.
const ClusterFailoverTTL = scenario.ClusterFailoverTTL

// failoverSystems are the systems that fail over by themselves.
var failoverSystems = harness.FailoverSystems()

// momentsOn are the moments that show a run of the threat exercised it on
// system, with mit applied (nil: as deployed). A threat whose danger is a
// failover (its Moments name one) is exercised on a system that fails
// over by itself only by a failover while the old primary's lease was
// live: a fault on the holder's node with no failover in time is not its
// danger, and a review that counted it called a Sentinel deployment safe
// under split brain when no replica had been promoted. A mitigation that
// keeps that moment from happening (PreventsFailoverMoment) counts the
// fault on the node, as the threat's analog elsewhere (a member's crash
// on etcd) does.
func (t Threat) momentsOn(system string, mit *Mitigation) []string {
	if !slices.Contains(t.Moments, checker.MomentFailovers) {
		return t.Moments
	}
	if mit != nil && mit.PreventsFailoverMoment {
		return t.Moments
	}
	if slices.Contains(failoverSystems, system) {
		return []string{checker.MomentFailovers}
	}
	return slices.DeleteFunc(slices.Clone(t.Moments), func(m string) bool { return m == checker.MomentFailovers })
}

// runsItsTime reports whether the threat's run as deployed on system goes
// its whole time rather than stopping at its first overlap. On a system
// that fails over, a failover threat's first overlap is the failover's (a
// new primary granted the key while the old primary's holder believed),
// which any lock suffers and which says nothing of the lock's own part.
// What the lock does next shows later: a plain DEL of a client whose key
// went with the old primary deletes another client's key on the new one.
// A review that stopped there said setnx-del "held" under split brain.
func (t Threat) runsItsTime(system string) bool {
	return slices.Contains(t.Moments, checker.MomentFailovers) && slices.Contains(failoverSystems, system)
}

// RestartTTL is the shortest TTL the server-restart threat runs with: a
// lease that outlives the restart.
const RestartTTL = 2 * time.Second

// Threats lists every threat, in the order a review runs and shows them.
var Threats = []Threat{
	{Name: nemesis.ClientPause, Title: "client pause (a GC pause, a stalled VM)",
		Catches:     "Kleppmann's pause: a holder acts after its lease (only fencing saves the resource); a lock with no deadline of its own, as etcd 3.4.3's lock (Jepsen)",
		Inject:      func(c *harness.Config) { c.Nemesis = []string{nemesis.ClientPause} },
		Moments:     []string{checker.MomentStaleActs, checker.MomentStaleGrants},
		Mitigations: []string{"fencing", "etcd"}},
	{Name: nemesis.ClientCrash, Title: "client crash (the holder dies)",
		Catches: "a lock with no TTL, held for ever by a dead client",
		Inject:  func(c *harness.Config) { c.Nemesis = []string{nemesis.ClientCrash} },
		Moments: []string{checker.MomentHolderCrashes}},
	{Name: "in-op", Title: "a client killed inside a lock call, with replies delayed a tenth of the TTL",
		Catches: "an acquire made of two commands, SETNX then PEXPIRE (Laravel #31166, ShedLock #105): a death between the two leaves a key with no TTL that nobody ever gets again; a release or extend of several commands left half done",
		Inject:  inOpKills,
		Moments: []string{checker.MomentKilledInOp}, KillsClients: true},
	{Name: "reply-loss", Title: "replies lost after the server applied the request (longer than the op timeout)",
		Catches: "an acquire that sends PEXPIRE only once SETNX answered (Laravel #31166, ShedLock #105): the SETNX applied, its reply lost, the key stays with no TTL; a retry that does not recognise its own key",
		Inject:  replyLoss,
		Moments: []string{checker.MomentRepliesLost}},
	{Name: "slow-network", Title: "a slow network: replies delayed by a tenth of the TTL, with jitter, releases near the lease's end",
		Catches: "a release that reads the key, then deletes it (redis-py before 3.0, Laravel before 5.8); a validity counted from the reply instead of from before the request (node-redlock #169, pottery); a grant whose reply outlives its lease",
		Inject:  slowNetwork,
		Moments: []string{checker.MomentSlowReplies, checker.MomentAcrossGrants}},
	{Name: "long-holds", Title: "holds that outlast the TTL: releases after the lease ran out",
		Catches: "a release or extend that does not check its token, or reports success whatever it found (redsync v4.0.3, ShedLock before #2584)",
		Inject:  longHolds,
		Moments: []string{checker.MomentStaleActs}},
	{Name: "renew-pause", Title: "renewal under client pauses: the holder extends its lease, and stalls",
		Catches: "an extend that does not check the token (ShedLock before #2584, RedLock.net); a watchdog that stops renewing (Redisson #3636)",
		Inject: func(c *harness.Config) {
			renewal(c)
			c.Nemesis = []string{nemesis.ClientPause}
		},
		Moments: []string{checker.MomentStaleActs, checker.MomentStaleGrants}, Renews: true},
	// One client, so that the key a paused holder's lease left is still
	// free when it wakes and extends: under renew-pause another client
	// holds it by then, and a resurrecting extend's SET NX is refused,
	// which is an honest answer.
	{Name: "renew-lapse", Title: "renewal by one client under pauses: its lease runs out while it stalls, and nobody takes the key",
		Catches: "an extend that resurrects an expired key, reporting a renewal of a lease that had lapsed (SET NX on a missing key: redsync WithSetNXOnExtend, ShedLock before #2584)",
		Inject: func(c *harness.Config) {
			renewal(c)
			c.Clients = 1
			c.Nemesis = []string{nemesis.ClientPause}
		},
		Moments: []string{checker.MomentStaleActs}, Renews: true},
	{Name: "renew-slow", Title: "renewal on a slow network: extends whose replies come late",
		Catches: "an extend that reports success on a key another client holds (a GET, then a PEXPIRE); a validity moved by a late extend (redsync v4.3.0)",
		Inject:  renewSlow,
		Moments: []string{checker.MomentSlowReplies, checker.MomentAcrossGrants, checker.MomentAcrossExpiry}, Renews: true},
	{Name: "server-crash", Title: "server crash (SIGKILL, down 300 ms), with the configured persistence",
		Catches: "keys forgotten by a restart without fsync (Kleppmann, antirez)",
		Inject: func(c *harness.Config) {
			serverFault(c, nemesis.Kill)
			c.RestartDelay = 300 * time.Millisecond
		},
		Moments:     []string{checker.MomentNodeFaults},
		Mitigations: []string{"fsync-always", "delayed-restart", "fencing", "redlock", "etcd"}},
	{Name: "server-restart", Title: "server crash right after a grant and immediate restart, with the configured persistence (a lease of 2 s or more)",
		Catches: "keys forgotten by a restart without fsync (Kleppmann, antirez; redsync #186 on one node of the majority)",
		Inject: func(c *harness.Config) {
			serverFault(c, nemesis.Kill)
			c.RestartDelay = 0
			// Aimed at a live lease, so that a server that forgets the key
			// is found on every seed: the kill comes right after a grant,
			// and the holder goes on for half to three quarters of a lease
			// of 2 s or more (1-1.5 s by default), far longer than a local
			// restart (tens of milliseconds, a few hundred on a loaded
			// machine) and the next client's acquire. Left to chance, a 3 s
			// run on a loaded CI machine once saw every kill land between
			// holds. A restart over SSH (two sessions) can take longer than
			// 1.5 s beside busy loops: a longer --ttl leaves it time.
			c.AfterAcquire = true
			c.TTL = max(c.TTL, RestartTTL)
			c.Hold = fmt.Sprintf("%s..%s", fmtD(c.TTL/2), fmtD(c.TTL*3/4))
		},
		Moments:     []string{checker.MomentNodeFaults},
		Mitigations: []string{"fsync-always", "delayed-restart", "fencing", "redlock", "etcd"}},
	{Name: "partition", Title: "a partition between clients and the server",
		Catches: "a lock that believes past its lease when the server stops answering",
		Inject:  func(c *harness.Config) { serverFault(c, nemesis.Partition) },
		Moments: []string{checker.MomentNodeFaults}, Mitigations: []string{"etcd"}},
	{Name: "clock-jump", Title: "a server's clock jumping forward (1.5 TTL)", Systems: faultSystems(nemesis.ClockJump),
		Catches:     "keys expiring early on a node whose clock jumped (Kleppmann; Redis expires keys by the wall clock, redis#416)",
		Inject:      func(c *harness.Config) { serverFault(c, nemesis.ClockJump) },
		Moments:     []string{checker.MomentNodeFaults},
		Mitigations: []string{"fencing", "redlock", "etcd"}},
	{Name: "clock-drift", Title: "a server's clock running 1% fast", Systems: faultSystems(nemesis.ClockDrift),
		Catches: "a drift margin too small for the clocks' drift (Redlock's TTL/100 + 2 ms)",
		Inject: func(c *harness.Config) {
			serverFault(c, nemesis.ClockDrift)
			c.ClockRate = 1.01
		},
		Moments: []string{checker.MomentNodeFaults}},
	{Name: "client-clock", Title: "a client's wall clock 1.5 TTL ahead of the others' for the whole run (protocol clients)",
		Catches: "an expiry kept from the client's wall clock: in the value, taken over with GETSET (the old pattern of Redis's SETNX page; ShedLock #639), or an absolute SET NX PXAT",
		Inject:  func(c *harness.Config) { clockThreat(c, nemesis.ClientClockOffset) },
		Moments: []string{checker.MomentMovedClientAcquires}},
	{Name: "clock-offset", Title: "the servers' clocks 1.5 TTL off the clients' for the whole run", Systems: faultSystems(nemesis.ClockOffset),
		Catches: "an absolute expiry set from the client's clock (SET NX PXAT, PEXPIREAT: rueidislock, valkeylock) that the server's clock ends at once or too late; a relative PX is untouched, so an overlap is the lock's",
		Inject:  func(c *harness.Config) { clockThreat(c, nemesis.ClockOffset) },
		Moments: []string{checker.MomentMovedClockGrants}},
	{Name: "failover", Title: "failover: the primary killed right after a grant, before replication, with a lease that outlives the failover (TTL of 5 s or more; 10 s on Redis Cluster)", Systems: failoverSystems,
		Catches: "a lock lost on a replica that never saw it (Jepsen's Redis analysis; Redisson #5256 with WAIT)",
		Inject: func(c *harness.Config) {
			ownOrAnalog(c, func(p scenario.SystemPreset) func(*harness.Config) { return p.Failover })
		},
		Moments:     []string{checker.MomentFailovers, checker.MomentNodeFaults},
		Mitigations: []string{"ttl-below-failover", "wait", "min-replicas", "fencing", "etcd"}, Analog: true},
	{Name: "split-brain", Title: "split brain: the primary cut off from the sentinels (on Redis Cluster: from the other nodes, right after a grant) but not from half the clients", Systems: failoverSystems,
		Catches: "a deposed primary still granting locks (Jepsen's Redis analysis)",
		Inject: func(c *harness.Config) {
			ownOrAnalog(c, func(p scenario.SystemPreset) func(*harness.Config) { return p.SplitBrain })
		},
		Moments:     []string{checker.MomentFailovers, checker.MomentNodeFaults},
		Mitigations: []string{"min-replicas", "wait", "fencing", "etcd"}, Analog: true},
}

// slowNetwork delays the replies on the clients' links to the servers
// (the holder's nodes on Redlock) by a tenth of the TTL, with jitter, for
// the whole run, and holds end near the lease's end: a release that reads
// the key and then deletes it breaks only when the key expires between
// the two, and a validity counted from the reply claims as much as the
// reply was late. Measured on this machine (docs/review.md): with a 500 ms
// TTL, 50 ms ± 10 ms and holds of 400-450 ms (between TTL − 2L and
// TTL − L) break a GET-then-DEL release within seconds; the default holds
// of 0-20 ms with the same latency found nothing in 15 s.
func slowNetwork(c *harness.Config) {
	slowLinks(c)
	c.Workload = workloads.Mutex
	c.RetryBackoff = max(c.RetryBackoff, spareCores)
	l, ttl := c.Latency, c.TTLOrDefault()
	c.Hold = fmt.Sprintf("%s..%s", fmtD(ttl-2*l), fmtD(ttl-l))
}

// inOpKills plays the in-op-kills script: replies delayed by a tenth of
// the TTL for the whole run, and every 100 ms of the run's first third a
// client, in turn, killed with its next acquire, extend or release in
// flight. One client on the mutex workload, so that a kill often finds a
// call that takes the key (with ten, most calls are refused acquires,
// one command each).
func inOpKills(c *harness.Config) {
	c.Nemesis, c.ScriptName = nil, nemesis.InOpKills
	// A kill lands between the two commands of a grant only when its call
	// is an acquire that takes the key: with three clients most calls are
	// refused acquires, one command each, and four kills before the quiet
	// rest left a SETNX-then-PEXPIRE key in 1 run of 5 (fourteen, in 3 of
	// 5). One client takes the key at every acquire, and half its calls
	// are grants: fourteen kills miss them all once in 16,000 runs.
	c.NemesisInterval = 100 * time.Millisecond
	leaveQuiet(c)
	c.Workload, c.Clients = workloads.Mutex, 1
	c.RetryBackoff = max(c.RetryBackoff, spareCores)
}

// replyLoss loses the replies of the servers' client links in windows of
// four op timeouts (nemesis.OpTimeoutsPerFault), 200 ms apart, in the
// run's first third (the reply-loss-early script), on the mutex workload:
// what is judged is what the lock leaves on the server, in the quiet
// rest. Windows to the end of the run kept every refusal within a TTL of
// an acquire whose outcome was unknown, and a key with no TTL was never
// told from a fresh one.
func replyLoss(c *harness.Config) {
	c.Nemesis, c.ScriptName = nil, nemesis.ReplyLossEarly
	c.NemesisInterval = 200 * time.Millisecond
	c.FaultDuration = nemesis.OpTimeoutsPerFault * c.OpTimeout
	c.Workload = workloads.Mutex
	c.RetryBackoff = max(c.RetryBackoff, spareCores)
	leaveQuiet(c)
}

// leaveQuiet gives a threat whose faults play in the run's first third
// (nemesis.InOpKills, ReplyLossEarly) a run long enough that a key they
// leave behind shows: two thirds of it must outlast the never-frees
// check's margin after the last fault, max(2 TTL, 2 s), plus a TTL and a
// few refusals. A broken lock stops the run at its finding.
func leaveQuiet(c *harness.Config) {
	ttl := c.TTLOrDefault()
	c.TimeLimit = max(c.TimeLimit, 3*(max(2*ttl, 2*time.Second)+2*ttl)/2)
}

// spareCores is the shortest wait after a refused acquire in the mutex
// threats (2 ms by default): ten clients in Python retrying a held key as
// fast as they can keep two cores busy, and none of the mechanisms these
// threats are for needs faster retries.
const spareCores = 10 * time.Millisecond

// slowLinks slows the client links from the start to the end of the run:
// one fault, injected at once, that lasts longer than any run.
func slowLinks(c *harness.Config) {
	serverFault(c, nemesis.Latency)
	c.Latency, c.Jitter = c.TTLOrDefault()/10, c.TTLOrDefault()/50
	c.NemesisInterval, c.FaultDuration = 100*time.Millisecond, 10*time.Minute
}

// longHolds makes a third of the holds outlast the TTL, so that their
// releases come after the lease has run out; the mutex workload, since
// what is judged is the lock's release, not the resource.
func longHolds(c *harness.Config) {
	c.Workload = workloads.Mutex
	c.RetryBackoff = max(c.RetryBackoff, spareCores)
	c.LongHoldRate = 0.3
}

// renewSlow is renewal on slow links (replies late by L, a tenth of the
// TTL), whose explicit holders extend L/2 before their validity ends
// rather than every TTL/3: an extend that reads the key and then sets its
// TTL in a second command reads its own key, which expires before the
// second command arrives (L later), and the other clients, retrying at
// once, are granted it meanwhile. Every TTL/3 no extend came near the
// expiry, and a GET-then-PEXPIRE lock was called held.
func renewSlow(c *harness.Config) {
	renewal(c)
	slowLinks(c)
	if c.Renew == "" || c.Renew == workloads.RenewExplicit {
		c.RenewBefore = c.Latency / 2
	}
}

// renewal holds the lock for 3 to 5 TTLs, renewing it as the lock does:
// explicitly, or by a watchdog where the lock renews in the background.
// Three clients, so that a paused holder's key is soon wanted by another.
func renewal(c *harness.Config) {
	c.Workload = workloads.Renew
	c.Hold = harness.DefaultConfig().Hold
	c.RenewFor = "3..5"
	c.Clients = 3
	c.NemesisInterval = 100 * time.Millisecond
	if d, err := locks.Lookup(c.Lock); err == nil && d.BackgroundRenewal && len(c.Client) == 0 {
		c.Renew = workloads.RenewWatchdog
	}
}

// ownOrAnalog runs the system's own variant of a failover threat, which
// variant picks from its preset, or the analog where it has none.
func ownOrAnalog(c *harness.Config, variant func(scenario.SystemPreset) func(*harness.Config)) {
	if p, err := scenario.PresetFor(c.System); err == nil && variant(p) != nil {
		variant(p)(c)
		return
	}
	analog(c)
}

// serverFault injects a server fault the way the scenarios do, aimed where
// it hurts on each system: the primary of a Sentinel system, a node that
// granted the latest lease on Redlock (the holder's majority).
func serverFault(c *harness.Config, fault string) {
	scenario.ServerFault(c, fault)
	c.Targets = harness.FaultTarget(c.System)
}

// clockThreat sets a standing clock fault of --clock-jump (1.5 TTL by
// default) for a short run of four clients: the fault is in place before the first
// grant, so a lock it breaks breaks at once (the run stops at its first
// overlap), and a lock it does not has been exercised by every grant.
func clockThreat(c *harness.Config, fault string) {
	c.Nemesis = []string{fault}
	// Four clients contend enough for a first finding, and start faster
	// than ten interpreters.
	c.Clients = min(c.Clients, 4)
	c.TimeLimit = min(c.TimeLimit, 1500*time.Millisecond)
	c.Recovery = min(c.Recovery, 500*time.Millisecond)
}

// analog is a Sentinel threat's equivalent on a system without Sentinel
// (the etcd baseline): the primary's loss is a member's crash or
// isolation.
func analog(c *harness.Config) {
	c.ScriptName = ""
	c.Nemesis = []string{nemesis.Kill, nemesis.Partition}
	c.Targets = "one"
	c.FaultDuration = time.Second
}

// LookupThreat finds a threat by name.
func LookupThreat(name string) (Threat, bool) {
	i := slices.IndexFunc(Threats, func(t Threat) bool { return t.Name == name })
	if i < 0 {
		return Threat{}, false
	}
	return Threats[i], true
}
