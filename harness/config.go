// Package harness runs one lockjepsen test: it starts the system, runs the
// clients and the nemesis, records the history, checks it and stores every
// file of the run. The CLI and the Go API are thin layers over Run and Check.
package harness

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/nemesis"
	"github.com/lockjepsen/lockjepsen/runfile"
	"github.com/lockjepsen/lockjepsen/workloads"
)

// Expectations a run can be held to.
const (
	ExpectSafe   = "safe"   // no safety violation and no stuck lock
	ExpectUnsafe = "unsafe" // a safety violation is found
	ExpectStuck  = "stuck"  // a liveness failure: the lock gets stuck
	ExpectAny    = "any"    // only harness failures fail the run
)

// Config is one test run. The zero value is not usable; start from
// DefaultConfig.
type Config struct {
	System          string        `json:"system"`
	Lock            string        `json:"lock"`
	Workload        string        `json:"workload"`
	Nemesis         []string      `json:"nemesis"`
	NemesisInterval time.Duration `json:"nemesis_interval"`
	// Nodes is the number of nodes under test; 0 is the system's default
	// (single 1, redlock 5).
	Nodes     int           `json:"nodes"`
	Clients   int           `json:"clients"`
	Keys      int           `json:"keys"`
	TTL       time.Duration `json:"ttl"`
	TimeLimit time.Duration `json:"time_limit"`
	// Recovery is a fault-free phase after the faults are healed, so that
	// liveness after faults can be judged.
	Recovery time.Duration `json:"recovery"`
	// Fault parameters (see nemesis.Options).
	Targets       string        `json:"targets"`
	FaultDuration time.Duration `json:"fault_duration"`
	RestartDelay  time.Duration `json:"restart_delay"`
	LoseUnsynced  bool          `json:"lose_unsynced"`
	// ClockJump is a duration ("750ms", "-2s") or a multiple of the TTL
	// ("1.5ttl").
	ClockJump string        `json:"clock_jump"`
	ClockRate float64       `json:"clock_rate"`
	Latency   time.Duration `json:"latency"`
	Jitter    time.Duration `json:"jitter"`
	Bandwidth int64         `json:"bandwidth_kbps"`
	// Script replaces the random schedule with timed steps (named
	// scenarios use it); Nemesis is then ignored.
	Script []nemesis.Step `json:"script,omitempty"`
	// ScriptName picks a named script (nemesis.Scripts) instead; it is
	// built from the run's parameters when the run starts.
	ScriptName string `json:"script_name,omitempty"`

	// Sentinel system options (0: the default).
	Sentinels          int           `json:"sentinels,omitempty"`
	DownAfter          time.Duration `json:"down_after,omitempty"`
	FailoverTimeout    time.Duration `json:"failover_timeout,omitempty"`
	MinReplicasToWrite int           `json:"min_replicas_to_write,omitempty"`
	MinReplicasMaxLag  time.Duration `json:"min_replicas_max_lag,omitempty"`
	// The wait lock's WAIT arguments (0: 1 replica, 100ms).
	WaitReplicas int           `json:"wait_replicas,omitempty"`
	WaitTimeout  time.Duration `json:"wait_timeout,omitempty"`
	// AfterAcquire starts each server fault right after a lease is granted.
	AfterAcquire bool `json:"after_acquire,omitempty"`

	// Multi-node lock options (0: the lock's default).
	DriftFactor float64 `json:"drift_factor,omitempty"`
	LockTries   int     `json:"lock_tries,omitempty"`

	Hold         string        `json:"hold"`
	LongHoldRate float64       `json:"long_hold_rate"`
	RetryBackoff time.Duration `json:"retry_backoff"`
	OpTimeout    time.Duration `json:"op_timeout"`
	Persistence  string        `json:"persistence"`
	Seed         int64         `json:"seed"`
	Store        string        `json:"store"`
	// Name of the test in the store; derived from the options when empty.
	Name   string `json:"name"`
	Expect string `json:"expect"`
	// StopOnFirstViolation ends the fault phase as soon as two believed
	// holds of one key overlap: the faults are healed, the clients stop
	// (no recovery phase) and the history is checked as usual. A test or
	// CI gate that expects a violation can then give the run a generous
	// time limit without paying for it when the lock breaks early.
	StopOnFirstViolation bool `json:"stop_on_first_violation,omitempty"`
	// StopGrace, with StopOnFirstViolation, lets the run go on this long
	// after the first violation before it stops, so that what the
	// overlapping holders do next is recorded too: a fenced resource
	// refusing the stale holder's write, once it wakes.
	StopGrace time.Duration `json:"stop_grace,omitempty"`
	// Command is the command line that reproduces the run, for the record.
	Command []string `json:"command,omitempty"`

	// Locker, when set, replaces the named lock: a user's own lock under
	// test. It is called once per client process with a connection to the
	// system's node.
	Locker LockerFactory `json:"-"`
	// CustomLock records in config.json that the run tested a Locker of
	// the user's, which the file cannot hold.
	CustomLock bool `json:"custom_lock,omitempty"`
	// Backend starts the system; nil is the local-process backend.
	Backend cluster.Backend `json:"-"`
	// AllowRemote lets clients dial nodes outside 127.0.0.0/8 (a backend
	// whose nodes live elsewhere). Off, such a node is refused before any
	// traffic is sent.
	AllowRemote bool `json:"allow_remote,omitempty"`
	// Progress receives a line every few seconds and the final summary;
	// nil is silent.
	Progress io.Writer `json:"-"`
	// Observer, when set, receives every event of the history as it is
	// recorded, in order, under the recorder's lock: it must be quick and
	// must not block (a progress display counts, it does not print).
	Observer func(history.Op) `json:"-"`
}

// DefaultConfig is the configuration of `lockjepsen test` with no flags.
func DefaultConfig() Config {
	return Config{
		System:          cluster.Single,
		Lock:            locks.Token,
		Workload:        workloads.Mutex,
		NemesisInterval: time.Second,
		Clients:         10,
		Keys:            1,
		TTL:             500 * time.Millisecond,
		TimeLimit:       30 * time.Second,
		Recovery:        3 * time.Second,
		Hold:            "0..20ms",
		Targets:         nemesis.TargetOne,
		FaultDuration:   time.Second,
		ClockJump:       "1.5ttl",
		ClockRate:       1.05,
		Latency:         100 * time.Millisecond,
		Jitter:          20 * time.Millisecond,
		Bandwidth:       64,
		RetryBackoff:    2 * time.Millisecond,
		OpTimeout:       250 * time.Millisecond,
		Persistence:     cluster.PersistNone,
		Seed:            1,
		Store:           "store",
		Expect:          ExpectSafe,
	}
}

// UsageError is a configuration the harness refuses before starting
// anything (exit code 2).
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

func usage(format string, a ...any) error {
	return &UsageError{fmt.Errorf(format, a...)}
}

// IsUsage reports whether err is a usage error.
func IsUsage(err error) bool {
	var u *UsageError
	return errors.As(err, &u)
}

// Validate checks every option and names the one that is wrong.
func (c *Config) Validate() error {
	switch c.System {
	case cluster.Single, cluster.Redlock, cluster.Sentinel, cluster.Etcd:
	default:
		return usage("--system %q is unknown; want single, sentinel, redlock or etcd", c.System)
	}
	if c.System == cluster.Etcd {
		if c.Locker == nil && !c.CustomLock && !slices.Contains(locks.EtcdNames, c.Lock) {
			return usage("--system etcd runs only --lock %s", strings.Join(locks.EtcdNames, " or "))
		}
		if c.Persistence != cluster.PersistNone {
			return usage("--persistence is for Redis: etcd always fsyncs its log")
		}
		if c.needsFakeClock() {
			return usage("clock faults are not supported on etcd: its leases run on monotonic timers")
		}
		if c.TTL < time.Second || c.TTL%time.Second != 0 {
			return usage("--ttl %s on etcd: leases are whole seconds, at least 1s; use --ttl 1s, 2s, ...", c.TTL)
		}
		if c.Backend != nil && c.Backend.Name() != "local" {
			return usage("--system etcd runs on the local backend only, not --backend %s", c.Backend.Name())
		}
	} else if slices.Contains(locks.EtcdNames, c.Lock) {
		return usage("--lock %s needs --system etcd", c.Lock)
	}
	if c.Nodes < 0 || c.Nodes > 15 {
		return usage("--nodes must be between 1 and 15 (0: the system's default)")
	}
	spec := cluster.Spec{System: c.System, Nodes: c.NodeCount(), Dir: ".", Persistence: cluster.PersistNone}
	if c.System == cluster.Sentinel {
		spec.Sentinels, spec.DownAfter, spec.FailoverTimeout = c.Sentinels, c.DownAfter, c.FailoverTimeout
		spec.MinReplicasToWrite, spec.MinReplicasMaxLag = c.MinReplicasToWrite, c.MinReplicasMaxLag
	} else if c.Sentinels != 0 || c.DownAfter != 0 || c.FailoverTimeout != 0 || c.MinReplicasToWrite != 0 || c.MinReplicasMaxLag != 0 {
		return usage("--sentinels, --down-after, --failover-timeout and --min-replicas-* are for --system sentinel")
	}
	if c.WaitReplicas < 0 || c.WaitTimeout < 0 {
		return usage("--wait-replicas and --wait-timeout must not be negative")
	}
	if c.Lock == locks.WaitName && c.System != cluster.Sentinel {
		return usage("--lock wait needs replicas: use --system sentinel")
	}
	if c.Lock == locks.WaitName && c.WaitTimeout >= c.OpTimeout {
		return usage("--wait-timeout %s must be shorter than --op-timeout %s, or every slow WAIT is an unknown outcome", c.WaitTimeout, c.OpTimeout)
	}
	if err := spec.WithDefaults().Validate(); err != nil {
		return usage("--system %s with --nodes %d: %v", c.System, c.NodeCount(), err)
	}
	if c.Locker == nil && !c.CustomLock {
		if !slices.Contains(locks.AllNames, c.Lock) && !slices.Contains(locks.EtcdNames, c.Lock) {
			return usage("--lock %q is unknown; want one of %s", c.Lock, strings.Join(append(append([]string{}, locks.AllNames...), locks.EtcdNames...), ", "))
		}
		// On Sentinel a lock sees one node: whichever is primary.
		lockNodes := c.NodeCount()
		if c.System == cluster.Sentinel {
			lockNodes = 1
		}
		if err := locks.CheckNodes(c.Lock, lockNodes); err != nil {
			return usage("--lock %s on --system %s: %v", c.Lock, c.System, err)
		}
	}
	if c.DriftFactor < 0 || c.DriftFactor >= 1 || c.LockTries < 0 || c.LockTries > 1000 {
		return usage("--drift-factor must be in [0, 1) and --lock-tries in 0..1000")
	}
	if !slices.Contains(workloads.Names, c.Workload) {
		return usage("--workload %q is unknown; want one of %s", c.Workload, strings.Join(workloads.Names, ", "))
	}
	for _, n := range c.Nemesis {
		if _, ok := nemesis.Known[n]; !ok {
			return usage("--nemesis %q is unknown; want none or a comma list of %s", n, strings.Join(nemesis.KnownNames(), ", "))
		}
		// Refused here rather than when the schedule meets the cluster,
		// which would be after the servers had started.
		switch {
		case n == nemesis.Failover && c.System != cluster.Sentinel:
			return usage("--nemesis failover asks the sentinels for a failover: it needs --system sentinel")
		case n == nemesis.Isolate && c.System != cluster.Sentinel && c.System != cluster.Etcd:
			return usage("--nemesis isolate cuts a node off from the rest of its cluster: it needs --system sentinel or etcd (single and redlock nodes do not talk to each other)")
		}
	}
	jump, err := c.ClockJumpDuration()
	if err != nil {
		return usage("--clock-jump: %v", err)
	}
	clock := nemesis.NeedsFakeClock(c.Nemesis)
	checks := []struct {
		ok   bool
		flag string
		msg  string
	}{
		{c.Clients >= 1 && c.Clients <= 1000, "--clients", "must be between 1 and 1000"},
		{c.Keys >= 1 && c.Keys <= 10000, "--keys", "must be between 1 and 10000"},
		{c.TTL >= 10*time.Millisecond && c.TTL <= time.Hour, "--ttl", "must be between 10ms and 1h"},
		{c.TimeLimit > 0 && c.TimeLimit <= 24*time.Hour, "--time-limit", "must be positive and at most 24h"},
		{c.Recovery >= 0 && c.Recovery <= time.Hour, "--recovery", "must be between 0 and 1h"},
		{c.NemesisInterval >= 10*time.Millisecond && c.NemesisInterval <= time.Hour, "--nemesis-interval", "must be between 10ms and 1h"},
		{c.RetryBackoff >= 0 && c.RetryBackoff <= time.Minute, "--retry-backoff", "must be between 0 and 1m"},
		{c.StopGrace >= 0 && c.StopGrace <= time.Hour && (c.StopGrace == 0 || c.StopOnFirstViolation), "--stop-grace", "must be between 0 and 1h, and goes with --stop-on-first-violation"},
		{c.OpTimeout >= time.Millisecond && c.OpTimeout <= time.Minute, "--op-timeout", "must be between 1ms and 1m"},
		{c.LongHoldRate >= 0 && c.LongHoldRate <= 1, "--long-hold-rate", "must be between 0 and 1"},
		{c.Store != "", "--store", "must not be empty"},
		{c.FaultDuration >= 0 && c.FaultDuration <= time.Hour, "--fault-duration", "must be between 0 and 1h"},
		// A killed node stays down this long, past the fault phase if
		// need be; longer than any TTL worth testing is a typo.
		{c.RestartDelay >= 0 && c.RestartDelay <= 10*time.Minute, "--restart-delay", "must be between 0 and 10m"},
		{c.ClockRate > 0 && c.ClockRate <= 100, "--clock-rate", "must be in (0, 100]"},
		{!clock || jump != 0 || !(slices.Contains(c.Nemesis, nemesis.ClockJump) || slices.Contains(c.Nemesis, nemesis.ClockStrobe)), "--clock-jump", "must not be zero for clock-jump or clock-strobe"},
		{!slices.Contains(c.Nemesis, nemesis.ClockDrift) || c.ClockRate != 1, "--clock-rate", "must differ from 1 for clock-drift"},
		{c.Latency >= 0 && c.Latency <= time.Minute, "--latency", "must be between 0 and 1m"},
		{c.Jitter >= 0 && c.Jitter <= c.Latency, "--jitter", "must be between 0 and --latency"},
		{c.Bandwidth > 0, "--bandwidth", "must be positive (KB/s)"},
		{!c.LoseUnsynced || c.Persistence != cluster.PersistNone, "--lose-unsynced", "needs --persistence everysec or always"},
	}
	for _, ch := range checks {
		if !ch.ok {
			return usage("%s %s", ch.flag, ch.msg)
		}
	}
	if _, err := workloads.ParseDist(c.Hold); err != nil {
		return usage("--hold: %v", err)
	}
	switch c.Persistence {
	case cluster.PersistNone, cluster.PersistEverysec, cluster.PersistAlways:
	default:
		return usage("--persistence %q is unknown; want none, everysec or always", c.Persistence)
	}
	switch c.Targets {
	case nemesis.TargetOne, nemesis.TargetAll, nemesis.TargetMajority, nemesis.TargetHolder:
	case nemesis.TargetPrimary:
		if c.System != cluster.Sentinel {
			return usage("--targets primary needs --system sentinel")
		}
	case nemesis.TargetMinority:
		if len(c.Nemesis) > 0 && c.NodeCount() < 3 {
			return usage("--targets minority of %d node(s) hits no node; use one, majority or all", c.NodeCount())
		}
	default:
		return usage("--targets %q is unknown; want one, minority, majority, all, holder or primary", c.Targets)
	}
	switch c.Expect {
	case ExpectSafe, ExpectUnsafe, ExpectStuck, ExpectAny:
	default:
		return usage("--expect %q is unknown; want safe, unsafe, stuck or any", c.Expect)
	}
	if c.ScriptName != "" {
		sc, ok := nemesis.Scripts[c.ScriptName]
		if !ok {
			return usage("--script %q is unknown; want one of %s", c.ScriptName, strings.Join(nemesis.ScriptNames(), ", "))
		}
		if len(c.Script) > 0 || len(c.Nemesis) > 0 {
			return usage("--script replaces --nemesis; give one or the other")
		}
		if err := sc.Check(c.scriptParams()); err != nil {
			return usage("--script %s: %v", c.ScriptName, err)
		}
	}
	if strings.ContainsAny(c.Name, `/\`) || c.Name == "." || c.Name == ".." {
		return usage("--name %q must be a plain name, not a path", c.Name)
	}
	if runfile.Reserved(c.TestName()) {
		return usage("--name %q is reserved in the store (%s); choose another name", c.TestName(), strings.Join(runfile.ReservedNames, ", "))
	}
	return nil
}

func (c *Config) scriptParams() nemesis.ScriptParams {
	jump, _ := c.ClockJumpDuration()
	nodes := make([]string, c.NodeCount())
	for i := range nodes {
		nodes[i] = fmt.Sprintf("n%d", i+1)
	}
	var sentinels []string
	if c.System == cluster.Sentinel {
		k := c.Sentinels
		if k == 0 {
			k = cluster.DefaultSentinels
		}
		for i := 1; i <= k; i++ {
			sentinels = append(sentinels, fmt.Sprintf("s%d", i))
		}
	}
	return nemesis.ScriptParams{Nodes: nodes, Clients: c.Clients, TTL: c.TTL, TimeLimit: c.TimeLimit,
		Interval: c.NemesisInterval, Duration: c.FaultDuration, ClockJump: jump, Sentinels: sentinels}
}

// steps is the run's scripted schedule, if any.
func (c *Config) steps() []nemesis.Step {
	if c.ScriptName != "" {
		return nemesis.Scripts[c.ScriptName].Build(c.scriptParams())
	}
	return c.Script
}

// NodeCount is the number of nodes of the system under test.
func (c *Config) NodeCount() int {
	if c.Nodes > 0 {
		return c.Nodes
	}
	return cluster.DefaultNodes(c.System)
}

// ClockJumpDuration resolves ClockJump against the TTL.
func (c *Config) ClockJumpDuration() (time.Duration, error) {
	s := strings.TrimSpace(c.ClockJump)
	if s == "" {
		return 0, nil
	}
	if f, ok := strings.CutSuffix(s, "ttl"); ok {
		x, err := strconv.ParseFloat(f, 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) || math.Abs(x) > 1e6 {
			return 0, fmt.Errorf("%q is not a multiple of the TTL (e.g. 1.5ttl)", s)
		}
		return time.Duration(x * float64(c.TTL)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is neither a duration (750ms, -2s) nor a multiple of the TTL (1.5ttl)", s)
	}
	if d > 24*time.Hour || d < -24*time.Hour {
		return 0, fmt.Errorf("%s is more than a day", d)
	}
	return d, nil
}

// TestName is the run's name in the store.
func (c *Config) TestName() string {
	if c.Name != "" {
		return c.Name
	}
	nem := "none"
	switch {
	case c.ScriptName != "":
		nem = c.ScriptName
	case len(c.Script) > 0:
		nem = "script"
	case len(c.Nemesis) > 0:
		nem = strings.Join(c.Nemesis, "+")
	}
	lock := c.Lock
	if c.Locker != nil || c.CustomLock {
		lock = "custom"
	}
	return strings.Join([]string{c.System, lock, c.Workload, nem}, "-")
}
