package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"sync"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster/proxy"
	"github.com/lockjepsen/lockjepsen/internal/ctxsleep"
)

// Targets policies: which nodes a random action hits.
const (
	TargetOne      = "one"
	TargetMinority = "minority"
	TargetMajority = "majority"
	TargetAll      = "all"
	// TargetHolder is one node among those that granted the latest lease
	// (for Redlock: a node of the holder's majority), so that a fault hits
	// where it matters instead of by chance.
	TargetHolder = "holder"
	// TargetPrimary is the node the sentinels name as primary when the
	// fault starts.
	TargetPrimary = "primary"
)

// Options shape the actions of a random schedule.
type Options struct {
	// Interval is the mean quiet time between two faults; each wait is
	// drawn from [Interval/2, 3×Interval/2].
	Interval time.Duration
	// Duration is the mean time a fault lasts, drawn the same way; a kill
	// lasts RestartDelay instead.
	Duration     time.Duration
	Targets      string
	RestartDelay time.Duration
	LoseUnsynced bool
	AfterGrant   bool
	ClockJump    time.Duration
	ClockRate    float64
	Latency      time.Duration
	Jitter       time.Duration
	BandwidthKB  int64
	// OpTimeout is the clients' op timeout: an OutlastsOps fault's random
	// actions last at least OpTimeoutsPerFault of it.
	OpTimeout time.Duration
}

// Step is one action of a script, started At after the fault phase began.
type Step struct {
	At time.Duration
	// AfterPrevious holds the step back, past At, until the previous
	// step's fault is in place: a fault that must precede another (a cut
	// before a kill that waits for a grant) does not race it.
	AfterPrevious bool
	Action        Action
}

// Schedule runs faults during the fault phase: drawn at random, one at a
// time, or played from a script.
type Schedule struct {
	Env    *Env
	Faults map[string]Fault
	// Names are the faults a random schedule draws from, in a fixed order
	// so that a seed gives the same schedule.
	Names  []string
	Opts   Options
	Rng    *rand.Rand
	Script []Step
	// Interrupt is the run's own context, cancelled on Ctrl-C; the fault
	// phase's context given to Run ends earlier, when the phase's time is
	// up. A delayed restart outlives the fault phase but not an interrupt.
	Interrupt context.Context
	// OnPlayed, when set, is told of every action once it was started (or
	// failed to start), so that the run can store the schedule it
	// executed and a replay can play it again (see Played).
	OnPlayed func(Played)

	start time.Time // when Run began: the fault phase's clock
	// rngMu guards Rng where script steps, which run concurrently, draw
	// from it (a holder placeholder's node).
	rngMu sync.Mutex
}

// Played is one executed action: At is when the schedule took it up
// (drew it, or reached its script step), Applied when the fault was in
// place; they differ by the wait for a grant of an action aimed after
// one. Action is as planned: a script's primary placeholder stays, so
// that a replay aims at the primary of its own time; Hit are the nodes
// the fault was applied to.
type Played struct {
	At, Applied time.Duration
	Action      Action
	Hit         []string
	// LeaseNodes is how many nodes had granted the lease a holder
	// placeholder was resolved from (0: none, or no placeholder).
	LeaseNodes int
	Err        error
}

// NewSchedule builds the faults named and checks, before anything runs,
// that every one applies to env.
func NewSchedule(env *Env, names []string, opts Options, rng *rand.Rand, script []Step, clients *ClientFaults) (*Schedule, error) {
	s := &Schedule{Env: env, Faults: map[string]Fault{}, Names: names, Opts: opts, Rng: rng, Script: script}
	add := func(name string) error {
		if _, ok := s.Faults[name]; ok {
			return nil
		}
		f, err := New(name, clients)
		if err != nil {
			return err
		}
		s.Faults[name] = f
		return nil
	}
	for _, n := range names {
		if err := add(n); err != nil {
			return nil, err
		}
		// Check the action a random draw would make, on every node.
		a := s.template(n)
		a.Nodes = env.Nodes
		if AimsAtClient(n) {
			a.Clients = []int{0}
		}
		if err := s.Faults[n].Available(env, &a); err != nil {
			return nil, fmt.Errorf("nemesis %s: %w", n, err)
		}
	}
	if _, err := pickNodes(rand.New(rand.NewSource(1)), env.Nodes, opts.Targets); len(names) > 0 && err != nil {
		return nil, err
	}
	for i, st := range script {
		if err := add(st.Action.Fault); err != nil {
			return nil, fmt.Errorf("script step %d: %w", i+1, err)
		}
		a := st.Action
		s.resolvePrimary(&a)
		for i, n := range a.Nodes {
			if n == HolderPlaceholder && len(env.Nodes) > 0 {
				// Any node will do for the check: the holder is one of them.
				a.Nodes = append([]string(nil), a.Nodes...)
				a.Nodes[i] = env.Nodes[0]
			}
		}
		if err := s.Faults[a.Fault].Available(env, &a); err != nil {
			return nil, fmt.Errorf("script step %d (%s): %w", i+1, a.Fault, err)
		}
	}
	return s, nil
}

// template is an action of the named fault with the schedule's parameters
// and no targets.
func (s *Schedule) template(name string) Action {
	o := s.Opts
	a := Action{Fault: name, Offset: o.ClockJump, Rate: o.ClockRate, LoseUnsynced: o.LoseUnsynced, AfterGrant: o.AfterGrant,
		Link: proxy.Fault{Latency: o.Latency, Jitter: o.Jitter, RateKBps: o.BandwidthKB}}
	return a
}

// Run injects faults until ctx is done, then heals every fault. A failed
// injection is recorded and the schedule goes on; a failure to heal is
// returned (the run reports it as a harness error).
func (s *Schedule) Run(ctx context.Context) error {
	s.start = time.Now()
	if len(s.Script) > 0 {
		s.runScript(ctx)
	} else if len(s.Names) > 0 {
		s.runRandom(ctx)
	}
	<-ctx.Done()
	return s.HealAll()
}

func (s *Schedule) runRandom(ctx context.Context) {
	names := slices.DeleteFunc(slices.Clone(s.Names), IsStanding)
	if len(names) == 0 {
		return
	}
	for {
		ctxsleep.Sleep(ctx, jitter(s.Rng, s.Opts.Interval))
		if ctx.Err() != nil {
			return
		}
		name := names[s.Rng.Intn(len(names))]
		a := s.template(name)
		if AimsAtClient(name) {
			a.Clients = []int{s.Rng.Intn(s.Env.Clients)}
			if _, armed := s.Faults[name].(selfRecording); !armed {
				a.For = jitter(s.Rng, s.Opts.Duration)
			}
		} else {
			a.Nodes = s.targets()
			a.For = jitter(s.Rng, s.Opts.Duration)
			d, _ := Lookup(name)
			if d.DownUntilRestart {
				a.For = s.Opts.RestartDelay
			}
			if d.OutlastsOps {
				a.For = max(a.For, OpTimeoutsPerFault*s.Opts.OpTimeout)
			}
		}
		s.play(ctx, &a, nil)
	}
}

// StandingFor is a standing fault's duration: longer than any fault
// phase, so that it lasts until the phase ends.
const StandingFor = 24 * time.Hour

// StartStanding sets the run's standing faults (Descriptor.Standing),
// before the clients run: a node fault on every node (the servers'
// clocks against the clients'), a client fault on one client drawn from
// the seed (one client's clock against the others'). They stay until the
// schedule heals at the end of the fault phase. A fault that fails to
// start is recorded, as any other's; the error is returned too, since a
// run without its standing fault tests nothing of it.
func (s *Schedule) StartStanding(ctx context.Context) error {
	if len(s.Script) > 0 {
		return nil // a script places every fault itself
	}
	var errs []error
	for _, name := range s.Names {
		if !IsStanding(name) {
			continue
		}
		a := s.template(name)
		// Recorded so: a replay plays it as a step at the phase's start
		// that lasts until the phase ends (play stops it then).
		a.For = StandingFor
		if AimsAtClient(name) {
			a.Clients = []int{s.Rng.Intn(s.Env.Clients)}
		} else {
			a.Nodes = slices.Clone(s.Env.Nodes)
		}
		err := s.Faults[name].Start(ctx, s.Env, &a)
		if s.OnPlayed != nil {
			s.OnPlayed(Played{Action: a, Hit: append([]string(nil), a.Nodes...), Err: err})
		}
		phase := "start"
		if err != nil {
			phase = "error"
			errs = append(errs, fmt.Errorf("standing fault %s: %w", name, err))
		}
		record(s.Env, name, phase, &a, s.Faults[name].Describe(&a), err)
	}
	return errors.Join(errs...)
}

// runScript starts each step at its time; steps may overlap.
func (s *Schedule) runScript(ctx context.Context) {
	start := time.Now()
	var wg sync.WaitGroup
	placed := make([]chan struct{}, len(s.Script))
	for i := range s.Script {
		st := s.Script[i]
		placed[i] = make(chan struct{})
		ctxsleep.Sleep(ctx, time.Until(start.Add(st.At)))
		if ctx.Err() != nil {
			break
		}
		var previous chan struct{}
		if st.AfterPrevious && i > 0 {
			previous = placed[i-1]
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if previous != nil {
				select {
				case <-previous:
				case <-ctx.Done():
					close(placed[i])
					return
				}
			}
			s.play(ctx, &st.Action, func() { close(placed[i]) })
		}()
	}
	wg.Wait()
}

// play starts one action, waits its duration and stops it. If the fault
// phase ends first, the action is stopped at once. placed, if not nil, is
// called once the fault is in place or will not be.
func (s *Schedule) play(ctx context.Context, a *Action, placed func()) {
	var once sync.Once
	if placed != nil {
		defer once.Do(placed)
	} else {
		placed = func() {}
	}
	f := s.Faults[a.Fault]
	at, planned := time.Since(s.start), *a
	var lease []string // the lease a grant brought, for a holder placeholder
	if a.AfterGrant && s.Env.Granted != nil {
		// Drop a grant seen earlier: the fault must follow a fresh one.
		select {
		case <-s.Env.Granted:
		default:
		}
		var ok bool
		if lease, ok = s.awaitGrant(ctx, a); !ok {
			return
		}
		// The primary is the one that granted just now.
		if s.Opts.Targets == TargetPrimary && s.Env.Primary != nil {
			if p := s.Env.Primary(); p != "" {
				a.Nodes = []string{p}
			}
		}
	}
	s.resolvePrimary(a)
	leaseNodes := s.resolveHolder(a, lease)
	_, quiet := f.(selfRecording)
	detail := f.Describe(a)
	if !quiet && s.Env.OnEvent != nil {
		// Told before the fault is applied: a failover's Start returns
		// only once the failover is over, and what watches for a fault's
		// effect must know when the fault began.
		s.Env.OnEvent(a.Fault, PhaseStarting, a.Nodes)
	}
	err := f.Start(ctx, s.Env, a)
	once.Do(placed)
	if s.OnPlayed != nil {
		s.OnPlayed(Played{At: at, Applied: time.Since(s.start), Action: planned, Hit: append([]string(nil), a.Nodes...), LeaseNodes: leaseNodes, Err: err})
	}
	if !quiet || err != nil {
		phase := "start"
		if err != nil {
			phase = "error"
		}
		record(s.Env, a.Fault, phase, a, detail, err)
	}
	if quiet {
		return
	}
	if d, _ := Lookup(a.Fault); d.DownUntilRestart {
		// A delayed restart is the operator's mitigation (restart only
		// after the longest TTL), not part of the fault: the end of the
		// fault phase must not cut it short, or healing would be an
		// immediate restart. An interrupt does cut it short: the user
		// wants the run to end, and the node is restarted at once.
		interrupt := s.Interrupt
		if interrupt == nil {
			interrupt = context.WithoutCancel(ctx)
		}
		ctxsleep.Sleep(interrupt, a.For)
	} else {
		ctxsleep.Sleep(ctx, a.For)
	}
	// Stopping must happen even when the phase is over, with its own
	// deadline.
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	err = f.Stop(stopCtx, s.Env, a)
	record(s.Env, a.Fault, "stop", a, "", err)
}

// resolvePrimary replaces the primary placeholder in a scripted action by
// the node that is primary now.
func (s *Schedule) resolvePrimary(a *Action) {
	for i, n := range a.Nodes {
		if n == PrimaryPlaceholder && s.Env.Primary != nil {
			nodes := append([]string(nil), a.Nodes...)
			nodes[i] = s.Env.Primary()
			a.Nodes = nodes
		}
	}
}

// awaitGrant waits for the next grant, by a.LeaseNodes nodes if set on
// an action aimed at the holder, and returns the nodes that granted it
// when the action aims at the holder; false when ctx ended first.
func (s *Schedule) awaitGrant(ctx context.Context, a *Action) ([]string, bool) {
	for {
		select {
		case <-s.Env.Granted:
		case <-ctx.Done():
			return nil, false
		}
		if s.Env.Holder == nil || !slices.Contains(a.Nodes, HolderPlaceholder) {
			return nil, true
		}
		if lease := s.Env.Holder(); a.LeaseNodes == 0 || len(lease) == a.LeaseNodes {
			return lease, true
		}
	}
}

// resolveHolder replaces the holder placeholder by a node that granted
// lease (the one awaited), else the latest lease now, or by a random node
// before any grant (or when the run cannot say), and returns how many
// nodes granted that lease. It draws once either way, so that a seed
// gives the same random schedule whatever the holder.
func (s *Schedule) resolveHolder(a *Action, lease []string) int {
	i := slices.Index(a.Nodes, HolderPlaceholder)
	if i < 0 {
		return 0
	}
	granted := lease
	if granted == nil && s.Env.Holder != nil {
		granted = s.Env.Holder()
	}
	pool := granted
	if len(pool) == 0 {
		pool = s.Env.Nodes
	}
	s.rngMu.Lock()
	pick := 0
	if s.Rng != nil {
		pick = s.Rng.Intn(len(pool))
	}
	s.rngMu.Unlock()
	nodes := append([]string(nil), a.Nodes...)
	nodes[i] = pool[pick]
	a.Nodes = nodes
	return len(granted)
}

// HealAll heals every fault with a fresh deadline.
func (s *Schedule) HealAll() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	for _, name := range KnownNames() {
		if f, ok := s.Faults[name]; ok {
			if err := f.Heal(ctx, s.Env); err != nil {
				errs = append(errs, fmt.Errorf("heal %s: %w", name, err))
			}
		}
	}
	return errors.Join(errs...)
}

func jitter(r *rand.Rand, mean time.Duration) time.Duration {
	if mean <= 0 {
		return 0
	}
	return mean/2 + time.Duration(r.Int63n(int64(mean)+1))
}

// targets draws the nodes of a random action. The draw from the seed is
// made whatever the policy, so that the schedule's other draws stay in
// step across runs.
func (s *Schedule) targets() []string {
	nodes, _ := pickNodes(s.Rng, s.Env.Nodes, s.Opts.Targets)
	if s.Opts.Targets == TargetPrimary && s.Env.Primary != nil {
		if p := s.Env.Primary(); p != "" {
			return []string{p}
		}
	}
	if s.Opts.Targets == TargetHolder {
		// Resolved when the action starts (play), after the grant it
		// waits for if any: the lease it aims at is the one live then.
		return []string{HolderPlaceholder}
	}
	return nodes
}

// pickNodes draws the target nodes of a random action.
func pickNodes(r *rand.Rand, nodes []string, policy string) ([]string, error) {
	n := len(nodes)
	var k int
	switch policy {
	case TargetOne, TargetHolder, TargetPrimary, "":
		k = 1
	case TargetMinority:
		k = (n - 1) / 2
	case TargetMajority:
		k = n/2 + 1
	case TargetAll:
		k = n
	default:
		return nil, fmt.Errorf("unknown --targets %q (want one, minority, majority or all)", policy)
	}
	if k == 0 || n == 0 {
		return nil, fmt.Errorf("--targets %s of %d nodes is no node", policy, n)
	}
	perm := r.Perm(n)
	out := make([]string, 0, k)
	for _, i := range perm[:k] {
		out = append(out, nodes[i])
	}
	return out, nil
}
