package review

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/internal/registry"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/scenario"
	"github.com/lockjepsen/lockjepsen/workloads"
)

// Mitigation is a change a design review could make to close a threat,
// declared once: the review tries it, on the same seeds, for each threat
// it found unsafe that lists it.
type Mitigation struct {
	Name string
	// Title names the change for a design review.
	Title string
	// OnResource: the mitigation protects the resource, not the lock
	// (fencing), so a cell is judged by whether the resource stayed safe.
	OnResource bool
	// SwapsLock: the mitigation runs another lock of the harness's in
	// place of the one under review (Redlock, etcd, WAIT). Its cell says
	// so; for a client under review it is named among what else could
	// serve instead of being run as a fix of that client.
	SwapsLock bool
	// SwapsTo is the system the swapped-in lock runs on, when it needs
	// one of its own (Redlock's independent nodes): a lock reviewed there
	// already is one, and is not offered it.
	SwapsTo string
	// PreventsFailoverMoment: the mitigation keeps a failover threat's
	// dangerous moment (a failover while the old primary's lease is live)
	// from happening: a cut-off primary refuses grants (WAIT,
	// min-replicas), or every lease ends before the failover (a TTL below
	// it). Its cell would read "not exercised" however well it worked, so
	// it counts the fault on the holder's node instead (Threat.momentsOn).
	PreventsFailoverMoment bool
	// Apply changes a configuration that has the threat injected. It
	// returns a note for the cell (what exactly was run), or
	// NotApplicable with the reason.
	Apply func(c *harness.Config, t Threat, m Measured) (note string, err error)
}

// NotApplicable is a mitigation that cannot be tried here; the cell says
// why.
type NotApplicable struct{ Why string }

func (n *NotApplicable) Error() string { return n.Why }

// alreadyOn reports whether a lock reviewed on system already is what m
// would swap in.
func (m Mitigation) alreadyOn(system string) bool { return m.SwapsTo != "" && m.SwapsTo == system }

func notApplicable(format string, a ...any) error {
	return &NotApplicable{Why: fmt.Sprintf(format, a...)}
}

// Measured is what the threat's own runs measured, which some
// mitigations are sized by.
type Measured struct {
	// Failover is the longest Sentinel failover seen (fault to new
	// primary); 0 when none was.
	Failover time.Duration
}

var mitigations = registry.New("mitigation", func(m Mitigation) string { return m.Name },
	[]Mitigation{
		{Name: "fencing", Title: "fencing tokens checked at the resource", OnResource: true, Apply: fencing},
		{Name: "fsync-always", Title: "appendfsync always", Apply: fsyncAlways},
		{Name: "delayed-restart", Title: "a crashed node restarted only after a TTL", Apply: delayedRestart},
		{Name: "ttl-below-failover", Title: "a TTL below the measured failover time", PreventsFailoverMoment: true, Apply: ttlBelowFailover},
		{Name: "wait", Title: "WAIT for a replica to acknowledge each grant", SwapsLock: true, PreventsFailoverMoment: true, Apply: waitForReplica},
		{Name: "min-replicas", Title: "min-replicas-to-write 1 (max lag 1 s)", PreventsFailoverMoment: true, Apply: minReplicas},
		{Name: "redlock", Title: "Redlock over 5 independent nodes instead of one", SwapsLock: true, SwapsTo: cluster.Redlock, Apply: redlockInstead},
	}...)

// RegisterMitigation adds a mitigation that lives outside this module
// (the etcd baseline, whose client a user of this module must not
// inherit).
func RegisterMitigation(m Mitigation) error { return mitigations.Add(m) }

// Mitigations lists every mitigation known, built-in and registered.
func Mitigations() []Mitigation { return mitigations.All() }

// LookupMitigation finds a mitigation by name.
func LookupMitigation(name string) (Mitigation, bool) { return mitigations.Get(name) }

func fencing(c *harness.Config, _ Threat, _ Measured) (string, error) {
	if len(c.Client) > 0 {
		return "", notApplicable("the lock is your client: fencing needs your client to pass a fence to the resource (run your fenced variant as --client)")
	}
	if d, err := locks.Lookup(c.Lock); err == nil && d.Fences {
		return "", notApplicable("%s fences already", c.Lock)
	}
	d, err := locks.Lookup(locks.Fenced)
	if err != nil || !d.Fits(c.System, 1) {
		return "", notApplicable("no fenced lock runs on %s here", c.System)
	}
	c.Lock = locks.Fenced
	switch c.Workload {
	case workloads.Mutex:
		c.Workload = workloads.Counter
	case workloads.Renew:
		c.Workload = workloads.RenewCounter
	}
	return fmt.Sprintf("the %s lock; the resource refuses stale fences", locks.Fenced), nil
}

func fsyncAlways(c *harness.Config, _ Threat, _ Measured) (string, error) {
	if why := harness.OwnPersistence(c.System); why != "" {
		return "", notApplicable("%s", why)
	}
	if c.Persistence == cluster.PersistAlways {
		return "", notApplicable("the servers already run with appendfsync always")
	}
	c.Persistence = cluster.PersistAlways
	return "", nil
}

func delayedRestart(c *harness.Config, _ Threat, _ Measured) (string, error) {
	c.RestartDelay = c.TTLOrDefault() + 200*time.Millisecond
	return fmt.Sprintf("restart after %s", c.RestartDelay), nil
}

func ttlBelowFailover(c *harness.Config, _ Threat, m Measured) (string, error) {
	if !slices.Contains(failoverSystems, c.System) {
		return "", notApplicable("only Sentinel and Redis Cluster fail over")
	}
	if m.Failover <= 0 {
		return "", notApplicable("no failover was measured")
	}
	c.TTL = max((m.Failover / 2).Round(100*time.Millisecond), 200*time.Millisecond)
	c.Hold = harness.DefaultConfig().Hold
	return fmt.Sprintf("TTL %s, half the measured failover of %s: every lease ends before a replica can be promoted, and holders must renew that often", c.TTL, m.Failover.Round(10*time.Millisecond)), nil
}

func waitForReplica(c *harness.Config, _ Threat, _ Measured) (string, error) {
	if d, err := locks.Lookup(locks.WaitName); err != nil || !d.Fits(c.System, harness.LockNodes(c.System)) {
		return "", notApplicable("WAIT needs replicas")
	}
	if len(c.Client) > 0 {
		return "", notApplicable("the lock is your client: the harness's %s lock would replace it", locks.WaitName)
	}
	c.Lock = locks.WaitName
	return fmt.Sprintf("the harness's %s lock: a grant counts only once a replica acknowledged it", locks.WaitName), nil
}

func minReplicas(c *harness.Config, _ Threat, _ Measured) (string, error) {
	if !slices.Contains(failoverSystems, c.System) {
		return "", notApplicable("min-replicas-to-write needs replicas")
	}
	c.MinReplicasToWrite, c.MinReplicasMaxLag = 1, time.Second
	return "", nil
}

func redlockInstead(c *harness.Config, t Threat, _ Measured) (string, error) {
	// A single Redis: one redis-server, by its system's descriptor.
	if d, err := cluster.LookupSystem(c.System); err != nil || d.Server != cluster.ServerRedis || d.DefaultNodes != 1 {
		return "", notApplicable("only a single Redis is replaced by Redlock")
	}
	ttl, workload := c.TTL, c.Workload
	if err := switchSystem(c, t, scenario.Redlock(locks.RedlockName)); err != nil {
		return "", err
	}
	c.TTL, c.Workload = ttl, workload
	return fmt.Sprintf("the harness's %s lock on 5 nodes, faults aimed at the holder's nodes", locks.RedlockName), nil
}

// SwitchSystem moves a configuration to another system for a mitigation
// that replaces it: the system's own timings from the scenarios' builder,
// the threat injected again as it applies there, the clients kept.
func SwitchSystem(c *harness.Config, t Threat, builder func(*harness.Config)) error {
	return switchSystem(c, t, builder)
}

func switchSystem(c *harness.Config, t Threat, builder func(*harness.Config)) error {
	fresh := scenario.Base()
	fresh.Seed, fresh.Workload, fresh.Store, fresh.Client = c.Seed, c.Workload, c.Store, c.Client
	fresh.Renew, fresh.RenewFor, fresh.StopOnFirstViolation, fresh.StopGrace = c.Renew, c.RenewFor, c.StopOnFirstViolation, c.StopGrace
	builder(&fresh)
	if harness.OwnPersistence(fresh.System) == "" {
		fresh.Persistence = c.Persistence
	}
	t.Inject(&fresh)
	*c = fresh
	if len(c.Client) > 0 {
		if ok, systems := harness.ClientRunsOn(c.Client, c.System); !ok {
			return notApplicable("the client runs on %s, not on %s", strings.Join(systems, ", "), c.System)
		}
	}
	return nil
}
