package nemesis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// clockFault moves node wall clocks. A jump sets an offset until stopped;
// a strobe flips between the offset and real time; a drift ramps the offset
// at (rate-1) seconds per second, computed here rather than with
// libfaketime's own rate, whose reference point is the process start.
type clockFault struct {
	name string

	mu    sync.Mutex
	moved map[string]bool
	loops map[string]*clockLoop // strobe and drift loops by node
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
	return &clockFault{name: name, moved: map[string]bool{}, loops: map[string]*clockLoop{}}
}

func (f *clockFault) Name() string { return f.name }

func (f *clockFault) Available(env *Env, a *Action) error {
	if env.Control == nil || !env.FakeClock {
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
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []error
	for _, n := range a.Nodes {
		f.moved[n] = true
		switch f.name {
		case ClockJump:
			if err := env.Control.SetClock(n, a.Offset); err != nil {
				errs = append(errs, fmt.Errorf("clock of %s: %w", n, err))
			}
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
	}
	return errors.Join(errs...)
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
			_ = env.Control.SetClock(node, offset(i, time.Since(start)))
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

func (f *clockFault) Stop(ctx context.Context, env *Env, a *Action) error {
	return f.reset(env, a.Nodes)
}

func (f *clockFault) Heal(ctx context.Context, env *Env) error {
	f.mu.Lock()
	var nodes []string
	for n := range f.moved {
		nodes = append(nodes, n)
	}
	f.mu.Unlock()
	return f.reset(env, nodes)
}

func (f *clockFault) reset(env *Env, nodes []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range nodes {
		if l := f.loops[n]; l != nil {
			l.stop()
			delete(f.loops, n)
		}
	}
	var errs []error
	for _, n := range nodes {
		if !f.moved[n] {
			continue
		}
		if err := env.Control.SetClock(n, 0); err != nil {
			errs = append(errs, fmt.Errorf("reset clock of %s: %w", n, err))
			continue
		}
		delete(f.moved, n)
	}
	return errors.Join(errs...)
}
