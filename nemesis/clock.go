package nemesis

import (
	"context"
	"fmt"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster"
)

var clockDescriptors = []Descriptor{
	clockDescriptor(ClockJump, "the target nodes' wall clocks jump by --clock-jump, and back at the end of the fault"),
	clockDescriptor(ClockStrobe, "the target nodes' wall clocks flip between real time and --clock-jump every 50ms"),
	clockDescriptor(ClockDrift, "the target nodes' wall clocks run at --clock-rate times real speed"),
}

func clockDescriptor(name, description string) Descriptor {
	return Descriptor{Name: name, Description: description, Kind: KindClock, FakeClock: true, LosesKeys: true, Exercises: serverMoments,
		Systems:    []string{cluster.Single, cluster.Sentinel, cluster.Redlock},
		SystemsWhy: "moves wall clocks, which etcd's leases do not read (they run on monotonic timers)",
		Draw:       Draw{Class: classClock, Label: "clock", LabelDetail: true},
		new:        func(*ClientFaults) (Fault, error) { return newClockFault(name), nil }}
}

// clockFault moves node wall clocks. A jump sets an offset until stopped;
// a strobe flips between the offset and real time; a drift ramps the offset
// at (rate-1) seconds per second, computed here rather than with
// libfaketime's own rate, whose reference point is the process start.
type clockFault struct {
	nodeFault
	name  string
	loops map[string]*clockLoop // strobe and drift loops by node; under mu
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

func newClockFault(name string) *clockFault {
	f := &clockFault{name: name, loops: map[string]*clockLoop{}}
	f.restore = f.reset
	return f
}

func (f *clockFault) Name() string { return f.name }

func (f *clockFault) Available(env *Env, a *Action) error {
	if env.Clock == nil || !env.FakeClock {
		return fmt.Errorf("%s needs nodes started with a fake clock (libfaketime)", f.name)
	}
	if f.name == ClockDrift && (a.Rate <= 0 || a.Rate == 1) {
		return fmt.Errorf("clock-drift needs a rate other than 1 (--clock-rate), got %g", a.Rate)
	}
	if f.name != ClockDrift && a.Offset == 0 {
		return fmt.Errorf("%s needs a non-zero --clock-jump", f.name)
	}
	return nil
}

func (f *clockFault) Start(ctx context.Context, env *Env, a *Action) error {
	return f.change(a.Nodes, func(n string) (bool, error) {
		switch f.name {
		case ClockJump:
			// Changed even if the write failed: it may have moved the
			// clock all the same, and a reset costs nothing.
			return true, nodeErr("clock of", n, env.Clock.SetClock(n, a.Offset))
		case ClockStrobe:
			f.loop(n, func(i int, _ time.Duration) time.Duration {
				if i%2 == 0 {
					return a.Offset
				}
				return 0
			}, env)
		case ClockDrift:
			f.loop(n, func(_ int, elapsed time.Duration) time.Duration {
				return time.Duration(float64(elapsed) * (a.Rate - 1))
			}, env)
		}
		return true, nil
	})
}

// loop sets node's clock to offset(i, elapsed) every strobePeriod until
// stopped. Called with f.mu held.
func (f *clockFault) loop(node string, offset func(i int, elapsed time.Duration) time.Duration, env *Env) {
	if old := f.loops[node]; old != nil {
		old.stop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &clockLoop{cancel: cancel, done: make(chan struct{})}
	f.loops[node] = l
	go func() {
		defer close(l.done)
		start := time.Now()
		t := time.NewTicker(strobePeriod)
		defer t.Stop()
		for i := 0; ; i++ {
			_ = env.Clock.SetClock(node, offset(i, time.Since(start)))
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// reset stops the node's loop, if any, and sets its clock back to real
// time. Called with f.mu held.
func (f *clockFault) reset(_ context.Context, env *Env, n string) error {
	if l := f.loops[n]; l != nil {
		l.stop()
		delete(f.loops, n)
	}
	return nodeErr("reset clock of", n, env.Clock.SetClock(n, 0))
}
