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
	"unicode"

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
	runfile.Settings
	// Script replaces the random schedule with timed steps (named
	// scenarios use it); Nemesis is then ignored.
	Script []nemesis.Step `json:"script,omitempty"`
	// ReplayOf names the run whose schedule Script replays (see
	// ReplayConfig); run.json records it and the report links it.
	ReplayOf string `json:"replay_of,omitempty"`

	// Locker, when set, replaces the named lock: a user's own lock under
	// test. It is called once per client process with a connection to the
	// system's node.
	Locker LockerFactory `json:"-"`
	// Backend starts the system; nil is cluster.DefaultBackend, the
	// local-process backend once its package is imported.
	Backend cluster.Backend `json:"-"`
	// Progress receives a line every few seconds and the final summary;
	// nil is silent.
	Progress io.Writer `json:"-"`
	// Observer, when set, receives every event of the history as it is
	// recorded, in order, under the recorder's lock: it must be quick and
	// must not block (a progress display counts, it does not print).
	Observer func(history.Op) `json:"-"`
	// LiveViolations, when set, is told the mutual-exclusion violations
	// that the check alongside the run has counted so far, each time the
	// count changes, and -1 if that check gives up (the stored history is
	// then checked after the run, and nothing is counted while it goes).
	// The check takes the events a batch of about a thousand at a time,
	// so the count lags the history by that much. It is called from the
	// check's goroutine, and under the recorder's lock when the check
	// gives up: it must be quick and must not record.
	LiveViolations func(n int) `json:"-"`
}

// DefaultConfig is the configuration of `lockjepsen test` with no flags.
func DefaultConfig() Config {
	return Config{Settings: runfile.Settings{
		System:               cluster.Single,
		Lock:                 locks.Token,
		Workload:             workloads.Mutex,
		NemesisInterval:      time.Second,
		Clients:              10,
		Keys:                 1,
		TTL:                  0, // the system's default, which Validate fills in
		TimeLimit:            30 * time.Second,
		Recovery:             3 * time.Second,
		Hold:                 "0..20ms",
		Targets:              nemesis.TargetOne,
		FaultDuration:        time.Second,
		ClockJump:            "1.5ttl",
		ClockRate:            1.05,
		Latency:              100 * time.Millisecond,
		Jitter:               20 * time.Millisecond,
		Bandwidth:            64,
		RetryBackoff:         2 * time.Millisecond,
		OpTimeout:            250 * time.Millisecond,
		Persistence:          cluster.PersistNone,
		Seed:                 1,
		Store:                "store",
		Expect:               ExpectSafe,
		RecordFailedAcquires: RecordAll,
	}}
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

// Validate completes the configuration (complete) and checks every
// option, naming the one that is wrong.
func (c *Config) Validate() error {
	c.complete()
	for _, check := range []func() error{c.validateSystem, c.validateWorkload, c.validateFaults, c.validateRanges, c.validateRun, c.validateBackend} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// complete fills in, once, what depends on the system: a TTL of 0, the
// one not chosen, becomes the system's default TTL (etcd's 1s). A TTL
// given is kept, and refused by validateSystem where the system cannot
// count it: a value the user typed is never replaced.
func (c *Config) complete() {
	d, err := cluster.LookupSystem(c.System)
	if err != nil {
		return // validateSystem says why
	}
	if c.TTL == 0 {
		c.TTL = defaultTTL(d)
	}
}

// TTLOrDefault is the TTL the run takes: TTL, or while it is 0 the
// system's default, which Validate fills in. What is derived from the TTL
// before Validate (a restart delayed past a lease, a review's holds)
// reads it, not TTL.
func (c *Config) TTLOrDefault() time.Duration {
	if c.TTL != 0 {
		return c.TTL
	}
	return DefaultTTL(c.System)
}

func (c *Config) validateWorkload() error {
	if c.DriftFactor < 0 || c.DriftFactor >= 1 || c.LockTries < 0 || c.LockTries > 1000 || c.NodeTimeout < 0 || c.NodeTimeout > time.Minute {
		return usage("--drift-factor must be in [0, 1), --lock-tries in 0..1000 and --node-timeout in 0..1m")
	}
	if !slices.Contains(workloads.Names, c.Workload) {
		return usage("--workload %q is unknown; want one of %s", c.Workload, strings.Join(workloads.Names, ", "))
	}
	return c.validateRenewal()
}

// validateRenewal checks --renew and --renew-for, which only the renewal
// workloads take.
func (c *Config) validateRenewal() error {
	renewing := c.Workload == workloads.Renew || c.Workload == workloads.RenewCounter
	if !renewing {
		if c.Renew != "" || c.RenewFor != "" || c.RenewBefore != 0 {
			return usage("--renew, --renew-for and --renew-before are for --workload %s or %s", workloads.Renew, workloads.RenewCounter)
		}
		return nil
	}
	if !slices.Contains(workloads.RenewModes, c.renewMode()) {
		return usage("--renew %q is unknown; want %s", c.Renew, strings.Join(workloads.RenewModes, " or "))
	}
	if c.RenewBefore != 0 && (c.renewMode() != workloads.RenewExplicit || c.RenewBefore < 0 || c.RenewBefore >= c.TTL) {
		return usage("--renew-before %v: want 0 < it < --ttl (%v), with --renew %s", c.RenewBefore, c.TTL, workloads.RenewExplicit)
	}
	if _, err := parseTTLRange(c.RenewFor); err != nil {
		return usage("--renew-for %q: %v", c.RenewFor, err)
	}
	return nil
}

func (c *Config) renewMode() string {
	if c.Renew == "" {
		return workloads.RenewExplicit
	}
	return c.Renew
}

func (c *Config) renewTTLs() [2]float64 {
	r, _ := parseTTLRange(c.RenewFor)
	return r
}

// parseTTLRange reads "3" or "1..5", in TTLs; "" is 1..5.
func parseTTLRange(s string) ([2]float64, error) {
	if s == "" {
		return [2]float64{1, 5}, nil
	}
	from, to, ok := strings.Cut(s, "..")
	if !ok {
		to = from
	}
	lo, err1 := strconv.ParseFloat(strings.TrimSpace(from), 64)
	hi, err2 := strconv.ParseFloat(strings.TrimSpace(to), 64)
	switch {
	case err1 != nil || err2 != nil:
		return [2]float64{}, errors.New("want a number of TTLs or a range such as 1..5")
	case lo <= 0 || hi < lo || hi > 100:
		return [2]float64{}, errors.New("want 0 < from ≤ to ≤ 100 TTLs")
	}
	return [2]float64{lo, hi}, nil
}

// validateFaults checks the faults, their targets and the script. A fault
// that does not fit the system is refused here rather than when the
// schedule meets the cluster, which would be after the servers had
// started.
func (c *Config) validateFaults() error {
	for _, n := range c.Nemesis {
		if n == nemesis.None {
			return usage("--nemesis %s cannot be combined with other faults (got %s): give %s alone, or only the faults", n, strings.Join(c.Nemesis, ","), n)
		}
		if _, err := nemesis.Lookup(n); err != nil {
			return usage("--nemesis %q is unknown; want none or a comma list of %s", n, strings.Join(nemesis.KnownNames(), ", "))
		}
		if d, err := nemesis.Lookup(n); err == nil {
			if err := d.CheckSystem(c.System); err != nil {
				return usage("--nemesis %v", err)
			}
		}
	}
	for _, n := range c.faultsUsed() {
		if d, err := nemesis.Lookup(n); err == nil {
			if err := d.CheckClients(len(c.Client) > 0); err != nil {
				return usage("%v", err)
			}
		}
		if nemesis.MovesClientClocks([]string{n}) && len(c.Client) == 0 {
			return usage("--nemesis %s %s", n, nemesis.GoLockClockWhy)
		}
	}
	switch c.Targets {
	case nemesis.TargetOne, nemesis.TargetAll, nemesis.TargetMajority, nemesis.TargetHolder:
	case nemesis.TargetPrimary:
		if !c.system().FollowsPrimary() {
			return usage("--targets primary needs --system %s", strings.Join(systemsWith(cluster.System.FollowsPrimary), " or "))
		}
	case nemesis.TargetMinority:
		if len(c.Nemesis) > 0 && c.NodeCount() < 3 {
			return usage("--targets minority of %d node(s) hits no node; use one, majority or all", c.NodeCount())
		}
	default:
		return usage("--targets %q is unknown; want one, minority, majority, all, holder or primary", c.Targets)
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
	return nil
}

// validateRanges checks the numbers and durations, and the options that
// go together.
func (c *Config) validateRanges() error {
	jump, err := c.ClockJumpDuration()
	if err != nil {
		return usage("--clock-jump: %v", err)
	}
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
		{c.CheckpointEvery == 0 || c.CheckpointEvery >= 100*time.Millisecond, "--checkpoint-every", "must be 0 (none) or at least 100ms"},
		{c.OpTimeout >= time.Millisecond && c.OpTimeout <= time.Minute, "--op-timeout", "must be between 1ms and 1m"},
		{c.LongHoldRate >= 0 && c.LongHoldRate <= 1, "--long-hold-rate", "must be between 0 and 1"},
		{c.Store != "", "--store", "must not be empty"},
		{c.FaultDuration >= 0 && c.FaultDuration <= time.Hour, "--fault-duration", "must be between 0 and 1h"},
		// A killed node stays down this long, past the fault phase if
		// need be; longer than any TTL worth testing is a typo.
		{c.RestartDelay >= 0 && c.RestartDelay <= 10*time.Minute, "--restart-delay", "must be between 0 and 10m"},
		{c.ClockRate > 0 && c.ClockRate <= 100, "--clock-rate", "must be in (0, 100]"},
		{jump != 0 || len(nemesis.MovedByJump(c.Nemesis)) == 0, "--clock-jump", "must not be zero for " + strings.Join(nemesis.MovedByJump(c.Nemesis), ", ")},
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
	return nil
}

// validateRun checks what the run expects and where it is stored.
func (c *Config) validateRun() error {
	switch c.Expect {
	case ExpectSafe, ExpectUnsafe, ExpectStuck, ExpectAny:
	default:
		return usage("--expect %q is unknown; want safe, unsafe, stuck or any", c.Expect)
	}
	if strings.ContainsFunc(c.Name, unicode.IsControl) {
		return usage("--name %q has a control character (a newline, a tab): it names a directory of the store", c.Name)
	}
	if strings.ContainsAny(c.Name, `/\`) || c.Name == "." || c.Name == ".." {
		return usage("--name %q must be a plain name, not a path", c.Name)
	}
	if n := len(c.TestName()); n > MaxNameLength {
		return usage("--name: the run's name is %d bytes long, and names a directory of the store, at most %d bytes; give a shorter --name", n, MaxNameLength)
	}
	if runfile.Reserved(c.TestName()) {
		return usage("--name %q is reserved in the store (%s); choose another name", c.TestName(), strings.Join(runfile.ReservedNames, ", "))
	}
	switch c.RecordFailedAcquires {
	case "", RecordAll, RecordSummary:
	default:
		return usage("--record-failed-acquires %q is unknown; want %s or %s", c.RecordFailedAcquires, RecordAll, RecordSummary)
	}
	return nil
}

// MaxNameLength bounds a run's name, a directory of the store: most file
// systems take 255 bytes a name, and the store adds nothing to it.
const MaxNameLength = 255

// The values of --record-failed-acquires.
const (
	RecordAll     = "all"
	RecordSummary = "summary"
)

// validateLock checks the named lock against the system it runs on.
func (c *Config) validateLock() error {
	if c.WaitReplicas < 0 || c.WaitTimeout < 0 {
		return usage("--wait-replicas and --wait-timeout must not be negative")
	}
	if c.Lock == locks.WaitName && c.WaitTimeout >= c.OpTimeout {
		return usage("--wait-timeout %s must be shorter than --op-timeout %s, or every slow WAIT is an unknown outcome", c.WaitTimeout, c.OpTimeout)
	}
	if len(c.Client) > 0 {
		if err := c.validateClient(); err != nil {
			return err
		}
	}
	if c.Locker != nil || c.CustomLock || len(c.Client) > 0 {
		return c.validateCustomLockName()
	}
	d, err := locks.Lookup(c.Lock)
	if err != nil {
		return usage("--lock %s: %v", c.Lock, err)
	}
	if !slices.Contains(d.Systems, c.System) {
		return usage("--lock %s needs --system %s, not --system %s", c.Lock, strings.Join(d.Systems, " or "), c.System)
	}
	if err := locks.CheckNodes(c.Lock, c.system().LockNodes(c.NodeCount())); err != nil {
		return usage("--lock %s on --system %s: %v", c.Lock, c.System, err)
	}
	return c.validateWaitReplicas()
}

// validateWaitReplicas refuses a WAIT for more replicas than the system
// has: no grant could ever be acknowledged, and the run would report the
// lock stuck.
func (c *Config) validateWaitReplicas() error {
	if c.Lock != locks.WaitName {
		return nil
	}
	want := max(c.WaitReplicas, 1) // the wait lock's default
	spec := c.spec(".").WithDefaults()
	if have := spec.Replicas(); want > have {
		return usage("--wait-replicas %d: --system %s with %d nodes has %d replica(s), so no grant could ever be acknowledged; give --wait-replicas 1..%d or more --nodes", want, c.System, c.NodeCount(), have, have)
	}
	return nil
}

func (c *Config) scriptParams() nemesis.ScriptParams {
	jump, _ := c.ClockJumpDuration()
	nodes := make([]string, c.NodeCount())
	for i := range nodes {
		nodes[i] = fmt.Sprintf("n%d", i+1)
	}
	return nemesis.ScriptParams{Nodes: nodes, Clients: c.Clients, TTL: c.TTL, TimeLimit: c.TimeLimit,
		Interval: c.NemesisInterval, Duration: c.FaultDuration, ClockJump: jump, Sentinels: c.sentinelNames(), System: c.System}
}

// steps is the run's scripted schedule, if any.
func (c *Config) steps() []nemesis.Step {
	if c.ScriptName != "" {
		return nemesis.Scripts[c.ScriptName].Build(c.scriptParams())
	}
	return c.Script
}

// usesFault says whether the run's faults, given by --nemesis or by its
// schedule, include the named one.
func (c *Config) usesFault(name string) bool { return slices.Contains(c.faultsUsed(), name) }

// faultsUsed are the faults the run injects: the nemesis's, and those its
// script's steps name, once each.
func (c *Config) faultsUsed() []string {
	faults := slices.Clone(c.Nemesis)
	steps := c.Script
	if sc, ok := nemesis.Scripts[c.ScriptName]; ok && sc.Build != nil {
		// Validation may not have reached the script yet: an unknown
		// one has no steps here and is refused there.
		steps = sc.Build(c.scriptParams())
	}
	for _, s := range steps {
		if s.Action.Fault != "" && !slices.Contains(faults, s.Action.Fault) {
			faults = append(faults, s.Action.Fault)
		}
	}
	return faults
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
		d := time.Duration(x * float64(c.TTL))
		if d > maxClockJump || d < -maxClockJump {
			return 0, fmt.Errorf("%s of --ttl %s is %s, more than a day", s, c.TTL, d)
		}
		return d, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is neither a duration (750ms, -2s) nor a multiple of the TTL (1.5ttl)", s)
	}
	if d > maxClockJump || d < -maxClockJump {
		return 0, fmt.Errorf("%s is more than a day", d)
	}
	return d, nil
}

// maxClockJump bounds a clock jump however it is written: a node's clock
// moved further than any run lasts is a typo.
const maxClockJump = 24 * time.Hour

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
	return strings.Join([]string{c.System, c.LockLabel(), c.Workload, nem}, "-")
}

// LockLabel is what the run calls its lock: the built-in lock's name, or
// for a lock of the user's the name they gave it ("custom" if none), never
// the built-in lock its configuration happens to name.
func (c *Config) LockLabel() string {
	switch {
	case c.Locker == nil && !c.CustomLock && len(c.Client) == 0:
		return c.Lock
	case c.CustomLockName != "":
		return c.CustomLockName
	case len(c.Client) > 0:
		return clientName(c.Client)
	}
	return "custom"
}

// validateCustomLockName refuses a name for the user's lock that could not
// name a store directory, or that is a built-in lock's: a report must never
// describe the user's lock as one of lockjepsen's.
func (c *Config) validateCustomLockName() error {
	n := c.CustomLockName
	switch {
	case n == "":
		return nil
	case strings.ContainsAny(n, `/\ `) || n == "." || n == "..":
		return usage("the custom lock's name %q must be a plain word (no spaces or slashes)", n)
	case slices.Contains(locks.Names(), n):
		return usage("the custom lock's name %q is a built-in lock's; name it after your own lock", n)
	}
	return nil
}
