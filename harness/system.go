package harness

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/etcdq"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/nemesis"
	"github.com/lockjepsen/lockjepsen/workloads"
)

// systemDriver is what the harness knows of one system under test: how a
// lock and its clients see the nodes, which options it takes, and what
// the run must add around it. The phases of a run ask the driver instead
// of testing the system's name, so a new system is its file and one entry
// in systems.
type systemDriver struct {
	name string
	// title says what the system is, for help and the reference.
	title string
	// lockNodes is how many nodes a lock sees when the system has n.
	lockNodes func(n int) int
	// internalLinks: the nodes talk to each other (replication, sentinels,
	// raft); those links run through the mesh so that faults can cut them.
	internalLinks bool
	// sentinels: Sentinel names the primary; clients follow failovers.
	sentinels bool
	// slots: Redis Cluster; the nodes say which primary serves a key's
	// slot, and clients follow redirections after failovers.
	slots bool
	// asyncReplicas: a primary answers before its replicas have the
	// write, so a primary cut off from them (isolate) keeps what it
	// grants to itself, and a replica promoted meanwhile never had it:
	// the checkers then take two primaries' grants as the failover's
	// (checker.Options.CutOffFaults). Not raft: there a cut-off member
	// grants nothing, and a grant it is said to have made is the lock's.
	asyncReplicas bool
	// addressesOnly: the locks dial the nodes themselves (etcd); clients
	// get addresses, not Redis connections.
	addressesOnly bool
	// clientFaultsNeedLinks: a paused client must also stop its
	// background traffic (etcd's keep-alives), which takes links of its
	// own to freeze.
	clientFaultsNeedLinks bool
	// faultTarget is where a server fault hurts the system's lock (a
	// --targets value): the primary where one fails over, the holder's
	// nodes on Redlock; "" is nemesis.TargetOne.
	faultTarget string
	// ownPersistence says why Redis's persistence options do not apply
	// ("" where they do).
	ownPersistence string
	// askHolder: for locks that do not say which nodes granted (redsync),
	// the nemesis's holder target asks the nodes directly.
	askHolder bool
	// majority: the nodes are independent and the lock needs a majority
	// of them to grant (Redlock): the checkers count the grants by fewer
	// (checker.Options.MajorityOf).
	majority bool
	// serverRenewsLeases says why the servers may keep a key past its TTL
	// by themselves, so that the lease model does not judge releases for
	// honesty there; "" where a key lives exactly its TTL.
	serverRenewsLeases string
	// ttl is the system's rule for TTLs: its default and the unit its
	// leases count in; the zero rule takes DefaultConfig's and any TTL.
	ttl TTLRule
	// referenceLock is the harness's correct lock on the system: a
	// review runs it as a control, so that what breaks it too is counted
	// as the deployment's loss and not the reviewed lock's.
	referenceLock string
	// validate refuses options the system cannot take.
	validate func(c *Config) error
	// version records the servers' version in run.json.
	version func(ctx context.Context, addr string, info *RunInfo)
}

// systems lists every system, in the order of cluster.Systems. It is set
// in init because a driver's validation reaches back to the configuration,
// which looks its driver up here.
var systems []systemDriver

func init() {
	systems = []systemDriver{singleSystem, sentinelSystem, redlockSystem, etcdSystem, redisClusterSystem}
}

func lookupSystem(name string) (systemDriver, error) {
	if i := slices.IndexFunc(systems, func(d systemDriver) bool { return d.name == name }); i >= 0 {
		return systems[i], nil
	}
	var names []string
	for _, d := range systems {
		names = append(names, d.name)
	}
	return systemDriver{}, usage("--system %q is unknown; want %s", name, strings.Join(names, ", "))
}

// LockNodes is how many nodes a lock sees on the system at its default
// size (Sentinel and Redis Cluster present one connection), or 0 for an
// unknown system.
func LockNodes(system string) int {
	d, err := lookupSystem(system)
	if err != nil {
		return 0
	}
	return d.lockNodes(cluster.DefaultNodes(system))
}

// SystemTitle says what the system is ("" for an unknown system).
func SystemTitle(system string) string {
	d, _ := lookupSystem(system)
	return d.title
}

// SystemHelp lists the systems with what each is, for the --system flags:
// "single (one redis-server), sentinel (...), ...".
func SystemHelp() string {
	var parts []string
	for _, d := range systems {
		parts = append(parts, fmt.Sprintf("%s (%s)", d.name, d.title))
	}
	return strings.Join(parts, ", ")
}

// ReferenceLock names the harness's correct lock on the system ("" for an
// unknown system), the control a review runs beside a lock under review.
func ReferenceLock(system string) string {
	d, _ := lookupSystem(system)
	return d.referenceLock
}

// FaultTarget is where a server fault hurts a lock on the system: the
// --targets value the scenarios, the matrix and the review aim with.
func FaultTarget(system string) string {
	d, _ := lookupSystem(system)
	if d.faultTarget == "" {
		return nemesis.TargetOne
	}
	return d.faultTarget
}

// failsOver: the system promotes a replica by itself (Sentinel, Redis
// Cluster), so it takes the min-replicas options and faces failovers.
func (d systemDriver) failsOver() bool { return d.sentinels || d.slots }

// FailoverSystems are the systems that fail over by themselves, in the
// order of cluster.Systems.
func FailoverSystems() []string {
	var names []string
	for _, d := range systems {
		if d.failsOver() {
			names = append(names, d.name)
		}
	}
	return names
}

// OwnPersistence says why Redis's persistence options do not apply to
// the system, or "" where they do.
func OwnPersistence(system string) string {
	d, _ := lookupSystem(system)
	return d.ownPersistence
}

// TTLRule is a system's rule for lock TTLs.
type TTLRule struct {
	// Default is the TTL a run takes when none is given; 0 is
	// DefaultConfig's.
	Default time.Duration
	// Unit: the system's leases count in whole multiples of it, at least
	// one; 0 takes any TTL.
	Unit time.Duration
	// Why says what the leases count in, for help and errors: "whole
	// seconds".
	Why string
}

// DefaultTTL is the TTL a run on the system takes when none is given.
func DefaultTTL(system string) time.Duration {
	d, _ := lookupSystem(system)
	if d.ttl.Default > 0 {
		return d.ttl.Default
	}
	return DefaultConfig().TTL
}

// check refuses a TTL the system's leases cannot count.
func (r TTLRule) check(system string, ttl time.Duration) error {
	if r.Unit > 0 && (ttl < r.Unit || ttl%r.Unit != 0) {
		return usage("--ttl %s on %s: leases are %s, at least %s; use --ttl %s, %s, ...", ttl, system, r.Why, r.Unit, r.Unit, 2*r.Unit)
	}
	return nil
}

// TTLHelp says, for the --ttl flags, the TTL rules of the systems that
// have their own, as "on etcd whole seconds, and 1s unless given".
func TTLHelp() string {
	var parts []string
	for _, d := range systems {
		if d.ttl == (TTLRule{}) {
			continue
		}
		part := "on " + d.name + " " + d.ttl.Why
		if d.ttl.Default > 0 {
			part += ", and " + d.ttl.Default.String() + " unless given"
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, "; ")
}

// system returns the configuration's driver; Validate has checked it.
func (c *Config) system() systemDriver {
	d, _ := lookupSystem(c.System)
	return d
}

func everyNode(n int) int { return n }

// noOptions is the validation of a system with no options of its own.
func noOptions(*Config) error { return nil }

var singleSystem = systemDriver{
	name: cluster.Single, title: "one redis-server", lockNodes: everyNode, referenceLock: locks.Token, validate: noOptions, version: recordRedisVersion,
}

var redlockSystem = systemDriver{
	name: cluster.Redlock, title: "independent redis-servers, for Redlock", lockNodes: everyNode, referenceLock: locks.RedlockName, askHolder: true, validate: noOptions, version: recordRedisVersion,
	faultTarget: nemesis.TargetHolder, majority: true,
}

var sentinelSystem = systemDriver{
	name: cluster.Sentinel, title: "a primary, its replicas and the sentinels that fail it over", referenceLock: locks.Token,
	// A lock sees one node: whichever is primary.
	lockNodes:     func(int) int { return 1 },
	internalLinks: true,
	sentinels:     true,
	asyncReplicas: true,
	faultTarget:   nemesis.TargetPrimary,
	validate:      noOptions,
	version:       recordRedisVersion,
}

var etcdSystem = systemDriver{
	name: cluster.Etcd, title: "etcd members (raft): the consensus baseline", lockNodes: everyNode, referenceLock: "etcd", internalLinks: true, addressesOnly: true, clientFaultsNeedLinks: true,
	serverRenewsLeases: "etcd's leader renews every lease when leadership changes, so a key may outlive its TTL",
	ownPersistence:     "etcd syncs its log before it answers",
	// etcd grants leases in whole seconds: LeaseGrant takes a TTL in
	// seconds.
	ttl: TTLRule{Default: time.Second, Unit: time.Second, Why: "whole seconds"},
	// Which backends run it, the backends say themselves
	// (cluster.Fitter).
	validate: func(c *Config) error {
		if c.needsFakeClock() {
			return usage("clock faults are not supported on etcd: its leases run on monotonic timers")
		}
		return nil
	},
	version: func(ctx context.Context, addr string, info *RunInfo) { info.EtcdVersion = etcdq.Version(ctx, addr) },
}

// Spec is what the backend is asked to start for a valid configuration,
// with dir for the servers' files (a backend's dry run shows it): with
// the resource store and the fake clock the run needs.
func (c *Config) Spec(dir string) cluster.Spec {
	s := c.spec(dir)
	s.Resource, s.FakeClock = workloads.UsesResource(c.Workload), c.needsFakeClock()
	s.Faults = c.faultsUsed()
	return s
}

// spec is what the backend is asked to start for the configuration.
func (c *Config) spec(dir string) cluster.Spec {
	s := cluster.Spec{System: c.System, Nodes: c.NodeCount(), Dir: dir, Persistence: c.Persistence}
	if c.system().sentinels {
		s.Sentinels, s.DownAfter, s.FailoverTimeout = c.Sentinels, c.DownAfter, c.FailoverTimeout
	}
	if c.system().failsOver() {
		s.MinReplicasToWrite, s.MinReplicasMaxLag = c.MinReplicasToWrite, c.MinReplicasMaxLag
	}
	return s
}

func (c *Config) hasSentinelOptions() bool {
	return c.Sentinels != 0 || c.DownAfter != 0 || c.FailoverTimeout != 0
}

func (c *Config) hasMinReplicas() bool { return c.MinReplicasToWrite != 0 || c.MinReplicasMaxLag != 0 }

// validateSystem checks the system, the lock on it, and the options that
// depend on it.
func (c *Config) validateSystem() error {
	d, err := lookupSystem(c.System)
	if err != nil {
		return err
	}
	if err := c.validateLock(); err != nil {
		return err
	}
	if d.ownPersistence != "" && c.Persistence != cluster.PersistNone {
		return usage("--persistence is for Redis: %s", d.ownPersistence)
	}
	if err := d.validate(c); err != nil {
		return err
	}
	if err := d.ttl.check(d.name, c.TTL); err != nil {
		return err
	}
	if c.Nodes < 0 || c.Nodes > 15 {
		return usage("--nodes must be between 1 and 15 (0: the system's default)")
	}
	if !d.sentinels && c.hasSentinelOptions() {
		return usage("--sentinels, --down-after and --failover-timeout are for --system sentinel")
	}
	if !d.failsOver() && c.hasMinReplicas() {
		return usage("--min-replicas-* are for --system sentinel or cluster")
	}
	spec := c.spec(".")
	spec.Persistence = cluster.PersistNone // checked on its own
	if err := spec.WithDefaults().Validate(); err != nil {
		return usage("--system %s with --nodes %d: %v", c.System, c.NodeCount(), err)
	}
	return nil
}

// backend is the configuration's backend: the one it names, or the
// default one (the local backend, once its package is imported).
func (c *Config) backend() cluster.Backend {
	if c.Backend != nil {
		return c.Backend
	}
	return cluster.DefaultBackend()
}

// runReapers are the backends that clean up after killed runs in the
// store: the default one, which runs the store's processes unless told
// otherwise, and the configuration's own.
func (c *Config) runReapers() []cluster.RunReaper {
	var reapers []cluster.RunReaper
	seen := map[string]bool{}
	for _, b := range []cluster.Backend{cluster.DefaultBackend(), c.backend()} {
		if r, ok := b.(cluster.RunReaper); ok && !seen[b.Name()] {
			seen[b.Name()] = true
			reapers = append(reapers, r)
		}
	}
	return reapers
}

// validateBackend checks that there is a backend, and asks one that runs
// a given deployment (a hosts file), or cannot land every fault on every
// system, whether it can run this configuration's spec, last: the spec
// needs the rest validated.
func (c *Config) validateBackend() error {
	b := c.backend()
	if b == nil {
		return usage("no backend: set Config.Backend, or import github.com/lockjepsen/lockjepsen/cluster/local for the local one")
	}
	f, ok := b.(cluster.Fitter)
	if !ok {
		return nil
	}
	if err := f.Fit(c.Spec(".").WithDefaults()); err != nil {
		return usage("--backend %s: %v", b.Name(), err)
	}
	return nil
}

func recordRedisVersion(ctx context.Context, addr string, info *RunInfo) {
	info.RedisVersion = redisVersion(ctx, addr)
}

func redisVersion(ctx context.Context, addr string) string {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DisableIdentity: true})
	defer c.Close()
	s, err := c.Info(ctx, "server").Result()
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v
		}
	}
	return ""
}

// sentinelNames are the sentinels a configuration starts, for scripts
// written before the run.
func (c *Config) sentinelNames() []string {
	if !c.system().sentinels {
		return nil
	}
	k := c.Sentinels
	if k == 0 {
		k = cluster.DefaultSentinels
	}
	var names []string
	for i := 1; i <= k; i++ {
		names = append(names, fmt.Sprintf("s%d", i))
	}
	return names
}
