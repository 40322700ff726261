package harness

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/etcdq"
	"github.com/lockjepsen/lockjepsen/nemesis"
	"github.com/lockjepsen/lockjepsen/workloads"
)

// The harness knows a system only by its descriptor (cluster.System):
// the phases of a run ask its capabilities instead of testing its name,
// so a new system is its descriptor and the backends' start code.

func lookupSystem(name string) (cluster.System, error) {
	d, err := cluster.LookupSystem(name)
	if err != nil {
		return d, usage("--system %q is unknown; want %s", name, strings.Join(cluster.SystemNames(), ", "))
	}
	return d, nil
}

// LockNodes is how many nodes a lock sees on the system at its default
// size (Sentinel and Redis Cluster present one connection), or 0 for an
// unknown system.
func LockNodes(system string) int {
	d, err := lookupSystem(system)
	if err != nil {
		return 0
	}
	return d.LockNodes(d.DefaultNodes)
}

// SystemTitle says what the system is ("" for an unknown system).
func SystemTitle(system string) string {
	d, _ := lookupSystem(system)
	return d.Title
}

// SystemHelp lists the systems with what each is, for the --system flags:
// "single (one redis-server), sentinel (...), ...".
func SystemHelp() string {
	var parts []string
	for _, d := range cluster.AllSystems() {
		parts = append(parts, fmt.Sprintf("%s (%s)", d.Name, d.Title))
	}
	return strings.Join(parts, ", ")
}

// ReferenceLock names the harness's correct lock on the system ("" for an
// unknown system), the control a review runs beside a lock under review.
func ReferenceLock(system string) string {
	d, _ := lookupSystem(system)
	return d.ReferenceLock
}

// FaultTarget is where a server fault hurts a lock on the system: the
// --targets value the scenarios, the matrix and the review aim with: the
// primary where clients follow one, the holder's nodes where a lock needs
// a majority, else one node.
func FaultTarget(system string) string {
	d, _ := lookupSystem(system)
	return faultTarget(d)
}

func faultTarget(d cluster.System) string {
	switch {
	case d.FollowsPrimary():
		return nemesis.TargetPrimary
	case d.Majority:
		return nemesis.TargetHolder
	}
	return nemesis.TargetOne
}

// FailoverSystems are the systems that fail over by themselves, in the
// order of cluster.Systems.
func FailoverSystems() []string {
	var names []string
	for _, d := range cluster.AllSystems() {
		if d.FailsOver() {
			names = append(names, d.Name)
		}
	}
	return names
}

// OwnPersistence says why Redis's persistence options do not apply to
// the system, or "" where they do.
func OwnPersistence(system string) string {
	d, _ := lookupSystem(system)
	return d.OwnPersistence
}

// DefaultTTL is the TTL a run on the system takes when none is given
// (a TTL of 0).
func DefaultTTL(system string) time.Duration {
	d, _ := lookupSystem(system)
	return defaultTTL(d)
}

// defaultTTLAnywhere is the default TTL of the systems without one of
// their own.
const defaultTTLAnywhere = 500 * time.Millisecond

func defaultTTL(d cluster.System) time.Duration {
	if d.TTL.Default > 0 {
		return d.TTL.Default
	}
	return defaultTTLAnywhere
}

// checkTTL refuses a TTL the system's leases cannot count.
func checkTTL(d cluster.System, ttl time.Duration) error {
	if r := d.TTL; r.Refuses(ttl) {
		return usage("--ttl %s on %s: leases are %s, at least %s; use --ttl %s, %s, ...", ttl, d.Name, r.Why, r.Unit, r.Unit, 2*r.Unit)
	}
	return nil
}

// TTLHelp says, for the --ttl flags, what a TTL of 0 means and the TTL
// rules of the systems that have their own, as "0: the system's default,
// 500ms; on etcd 1s, and only whole seconds".
func TTLHelp() string {
	parts := []string{"0: the system's default, " + defaultTTLAnywhere.String()}
	for _, d := range cluster.AllSystems() {
		if d.TTL == (cluster.TTLRule{}) {
			continue
		}
		var says []string
		if d.TTL.Default > 0 {
			says = append(says, d.TTL.Default.String())
		}
		if d.TTL.Why != "" {
			says = append(says, "only "+d.TTL.Why)
		}
		parts = append(parts, "on "+d.Name+" "+strings.Join(says, ", and "))
	}
	return strings.Join(parts, "; ")
}

// system returns the configuration's descriptor; Validate has checked it.
func (c *Config) system() cluster.System {
	d, _ := lookupSystem(c.System)
	return d
}

// versionOf records the version of a system's server in run.json, by the
// server its nodes run.
var versionOf = map[string]func(ctx context.Context, addr string, info *RunInfo){
	cluster.ServerRedis: recordRedisVersion,
	cluster.ServerEtcd:  func(ctx context.Context, addr string, info *RunInfo) { info.EtcdVersion = etcdq.Version(ctx, addr) },
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
	if c.system().HasSentinels() {
		s.Sentinels, s.DownAfter, s.FailoverTimeout = c.Sentinels, c.DownAfter, c.FailoverTimeout
	}
	if c.system().FailsOver() {
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
	if d.OwnPersistence != "" && c.Persistence != cluster.PersistNone {
		return usage("--persistence is for Redis: %s", d.OwnPersistence)
	}
	if d.NoWallClock != "" && c.needsFakeClock() {
		return usage("clock faults are not supported on %s: %s", d.Name, d.NoWallClock)
	}
	if err := checkTTL(d, c.TTL); err != nil {
		return err
	}
	if c.Nodes < 0 || c.Nodes > 15 {
		return usage("--nodes must be between 1 and 15 (0: the system's default)")
	}
	if !d.HasSentinels() && c.hasSentinelOptions() {
		return usage("--sentinels, --down-after and --failover-timeout are for --system %s", strings.Join(systemsWith(cluster.System.HasSentinels), " or "))
	}
	if !d.FailsOver() && c.hasMinReplicas() {
		return usage("--min-replicas-* are for --system %s", strings.Join(FailoverSystems(), " or "))
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
	if !c.system().HasSentinels() {
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

// systemsWith names the systems that have a capability, in order.
func systemsWith(has func(cluster.System) bool) []string {
	var names []string
	for _, d := range cluster.AllSystems() {
		if has(d) {
			names = append(names, d.Name)
		}
	}
	return names
}
