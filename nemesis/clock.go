package nemesis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster"
)

var clockDescriptors = []Descriptor{
	clockDescriptor(ClockJump, shapeJump, "the target nodes' wall clocks jump by --clock-jump, and back at the end of the fault"),
	clockDescriptor(ClockStrobe, shapeStrobe, "the target nodes' wall clocks flip between real time and --clock-jump every 50ms"),
	clockDescriptor(ClockDrift, shapeDrift, "the target nodes' wall clocks run at --clock-rate times real speed"),
	{Name: ClockOffset, Kind: KindClock, FakeClock: true, Standing: true, ByJump: true,
		Description: "every node's wall clock runs --clock-jump off the clients' clocks, from before the first grant to the end of the run: " +
			"a lock that sets an absolute expiry from its client's clock (SET NX PXAT, PEXPIREAT, as rueidislock does) sees its keys expire early or late. " +
			"It takes no key from a lock that sets relative TTLs (PX), so an overlap under it is the lock's. " +
			"It stands in for a client clock fault on a lock written in Go, whose clock the harness cannot move",
		Exercises: []string{momentOffsetGrants},
		Systems:   redisSystems, SystemsWhy: "moves a Redis server's wall clock; etcd's leases do not read it (they run on monotonic timers)",
		Draw: Draw{Class: classClock, Label: "clock", LabelDetail: true},
		new:  func(*ClientFaults) (Fault, error) { return newClockFault(ClockOffset, shapeOffset, nodeClocks{}), nil }},
}

// clockSystems are the systems whose leases read the nodes' wall clocks
// and whose own timeouts do not (cluster.System's NoWallClock and
// ClockTimeouts): a clock that moves during the run.
var clockSystems = systemsWhere(func(d cluster.System) bool { return d.NoWallClock == "" && d.ClockTimeouts == "" })

// redisSystems are the systems whose leases read the nodes' wall clocks:
// a clock moved once, before the first grant, and kept, leaves Redis
// Cluster's gossip timeouts, which each node counts on its own clock, as
// they were.
var redisSystems = systemsWhere(func(d cluster.System) bool { return d.NoWallClock == "" })

// systemsWhere names the systems whose descriptor has a capability, in
// the order of cluster.Systems.
func systemsWhere(has func(cluster.System) bool) []string {
	var names []string
	for _, d := range cluster.AllSystems() {
		if has(d) {
			names = append(names, d.Name)
		}
	}
	return names
}

const clockSystemsWhy = "moves wall clocks, which etcd's leases do not read (they run on monotonic timers)"

func clockDescriptor(name string, shape clockShape, description string) Descriptor {
	return Descriptor{Name: name, Description: description, Kind: KindClock, FakeClock: true, LosesKeys: true, Exercises: serverMoments,
		ByJump:  shape != shapeDrift,
		Systems: clockSystems, SystemsWhy: clockSystemsWhy,
		Draw: Draw{Class: classClock, Label: "clock", LabelDetail: true},
		new:  func(*ClientFaults) (Fault, error) { return newClockFault(name, shape, nodeClocks{}), nil }}
}

// clockShape is how a clock fault moves a clock over its time.
type clockShape int

const (
	shapeJump   clockShape = iota // an offset until stopped
	shapeStrobe                   // flips between the offset and real time
	shapeDrift                    // runs at a rate
	shapeOffset                   // an offset for the whole run (a standing fault)
)

// describe says what the shape does with the action's parameters.
func (s clockShape) describe(a *Action) string {
	switch s {
	case shapeStrobe:
		return fmt.Sprintf("wall clock flips between 0 and %+.3fs every %s for %s", a.Offset.Seconds(), strobePeriod, a.For.Round(time.Millisecond))
	case shapeDrift:
		return fmt.Sprintf("wall clock runs at x%g for %s", a.Rate, a.For.Round(time.Millisecond))
	case shapeOffset:
		return fmt.Sprintf("wall clock %+.3fs off the other clocks for the whole run", a.Offset.Seconds())
	}
	return fmt.Sprintf("wall clock %+.3fs for %s", a.Offset.Seconds(), a.For.Round(time.Millisecond))
}

// clocks are the clocks a clock fault moves: nodes', or protocol
// clients' processes' (clientClocks). A target is a node name, or a
// client worker's number.
type clocks interface {
	available(env *Env, name string, a *Action) error
	targets(env *Env, a *Action) []string
	set(env *Env, target string, offset time.Duration) error
}

type nodeClocks struct{}

func (nodeClocks) available(env *Env, name string, _ *Action) error {
	if env.Clock == nil || !env.FakeClock {
		return fmt.Errorf("%s needs nodes started with a fake clock (libfaketime)", name)
	}
	return nil
}

func (nodeClocks) targets(_ *Env, a *Action) []string { return a.Nodes }

func (nodeClocks) set(env *Env, node string, offset time.Duration) error {
	return nodeErr("clock of", node, env.Clock.SetClock(node, offset))
}

// clockFault moves wall clocks. A jump sets an offset until stopped;
// a strobe flips between the offset and real time; a drift ramps the offset
// at (rate-1) seconds per second, computed here rather than with
// libfaketime's own rate, whose reference point is the process start.
type clockFault struct {
	nodeFault
	name   string
	shape  clockShape
	clocks clocks
	loops  map[string]*clockLoop // strobe and drift loops by target; under mu
}

type clockLoop struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// stop ends the loop and waits, so that it cannot set the clock again
// after the caller resets it.
func (l *clockLoop) stop() {
	l.cancel()
	<-l.done
}

const strobePeriod = 50 * time.Millisecond

func newClockFault(name string, shape clockShape, c clocks) *clockFault {
	f := &clockFault{name: name, shape: shape, clocks: c, loops: map[string]*clockLoop{}}
	f.restore = f.reset
	return f
}

func (f *clockFault) Name() string { return f.name }

func (f *clockFault) Describe(a *Action) string { return f.shape.describe(a) }

func (f *clockFault) Available(env *Env, a *Action) error {
	if err := f.clocks.available(env, f.name, a); err != nil {
		return err
	}
	if f.shape == shapeDrift && (a.Rate <= 0 || a.Rate == 1) {
		return fmt.Errorf("%s needs a rate other than 1 (--clock-rate), got %g", f.name, a.Rate)
	}
	if f.shape != shapeDrift && a.Offset == 0 {
		return fmt.Errorf("%s needs a non-zero --clock-jump", f.name)
	}
	return nil
}

func (f *clockFault) Start(ctx context.Context, env *Env, a *Action) error {
	return f.change(f.clocks.targets(env, a), func(n string) (bool, error) {
		switch f.shape {
		case shapeJump, shapeOffset:
			// Changed even if the write failed: it may have moved the
			// clock all the same, and a reset costs nothing.
			return true, f.clocks.set(env, n, a.Offset)
		case shapeStrobe:
			f.loop(n, func(i int, _ time.Duration) time.Duration {
				if i%2 == 0 {
					return a.Offset
				}
				return 0
			}, env)
		case shapeDrift:
			f.loop(n, func(_ int, elapsed time.Duration) time.Duration {
				return time.Duration(float64(elapsed) * (a.Rate - 1))
			}, env)
		}
		return true, nil
	})
}

func (f *clockFault) Stop(ctx context.Context, env *Env, a *Action) error {
	return f.restoreNodes(ctx, env, f.clocks.targets(env, a))
}

// loop sets target's clock to offset(i, elapsed) every strobePeriod until
// stopped. Called with f.mu held.
func (f *clockFault) loop(target string, offset func(i int, elapsed time.Duration) time.Duration, env *Env) {
	if old := f.loops[target]; old != nil {
		old.stop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &clockLoop{cancel: cancel, done: make(chan struct{})}
	f.loops[target] = l
	go func() {
		defer close(l.done)
		start := time.Now()
		t := time.NewTicker(strobePeriod)
		defer t.Stop()
		for i := 0; ; i++ {
			_ = f.clocks.set(env, target, offset(i, time.Since(start)))
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// reset stops the target's loop, if any, and sets its clock back to real
// time. Called with f.mu held.
func (f *clockFault) reset(_ context.Context, env *Env, n string) error {
	if l := f.loops[n]; l != nil {
		l.stop()
		delete(f.loops, n)
	}
	if err := f.clocks.set(env, n, 0); err != nil {
		return fmt.Errorf("resetting: %w", err)
	}
	return nil
}

// workerTargets and targetWorker name client workers as clock targets.
func workerTargets(workers []int) []string {
	out := make([]string, len(workers))
	for i, w := range workers {
		out[i] = strconv.Itoa(w)
	}
	return out
}

func targetWorker(target string) (int, error) {
	w, err := strconv.Atoi(strings.TrimSpace(target))
	if err != nil {
		return 0, fmt.Errorf("client clock target %q is not a client worker", target)
	}
	return w, nil
}
