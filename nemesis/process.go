package nemesis

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/lockjepsen/lockjepsen/cluster"
)

// pauseFault freezes node processes with SIGSTOP.
type pauseFault struct {
	mu     sync.Mutex
	paused map[string]bool
}

func newPauseFault() *pauseFault { return &pauseFault{paused: map[string]bool{}} }

func (f *pauseFault) Name() string { return Pause }

func (f *pauseFault) Available(env *Env, a *Action) error {
	if env.Control == nil {
		return fmt.Errorf("pause needs a backend that controls node processes")
	}
	return nil
}

func (f *pauseFault) Start(ctx context.Context, env *Env, a *Action) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []error
	for _, n := range a.Nodes {
		if err := env.Control.Pause(n); err != nil {
			errs = append(errs, fmt.Errorf("pause %s: %w", n, err))
			continue
		}
		f.paused[n] = true
	}
	return errors.Join(errs...)
}

func (f *pauseFault) Stop(ctx context.Context, env *Env, a *Action) error {
	return f.resume(env, a.Nodes)
}

func (f *pauseFault) Heal(ctx context.Context, env *Env) error {
	f.mu.Lock()
	var nodes []string
	for n := range f.paused {
		nodes = append(nodes, n)
	}
	f.mu.Unlock()
	return f.resume(env, nodes)
}

func (f *pauseFault) resume(env *Env, nodes []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []error
	for _, n := range nodes {
		if !f.paused[n] {
			continue
		}
		if err := env.Control.Resume(n); err != nil {
			errs = append(errs, fmt.Errorf("resume %s: %w", n, err))
			continue
		}
		delete(f.paused, n)
	}
	return errors.Join(errs...)
}

// killFault kills node processes and restarts them when stopped.
type killFault struct {
	mu     sync.Mutex
	killed map[string]bool
}

func newKillFault() *killFault { return &killFault{killed: map[string]bool{}} }

func (f *killFault) Name() string { return Kill }

func (f *killFault) Available(env *Env, a *Action) error {
	if env.Control == nil {
		return fmt.Errorf("kill needs a backend that controls node processes")
	}
	if a.LoseUnsynced && env.Persistence == cluster.PersistNone {
		return fmt.Errorf("--lose-unsynced needs --persistence everysec or always: with none there is no file to lose")
	}
	return nil
}

func (f *killFault) Start(ctx context.Context, env *Env, a *Action) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []error
	for _, n := range a.Nodes {
		if f.killed[n] {
			continue
		}
		if err := env.Control.Kill(n, a.LoseUnsynced); err != nil {
			errs = append(errs, fmt.Errorf("kill %s: %w", n, err))
			continue
		}
		f.killed[n] = true
		// What the node had sent but the network had not delivered dies
		// with it, as on a crashed machine: without this the proxies would
		// deliver a delayed replication stream after the kill.
		if env.Mesh != nil {
			for _, l := range env.Mesh.Links() {
				if l.To == n {
					if err := l.Drop(); err != nil {
						errs = append(errs, err)
					}
				}
			}
		}
	}
	return errors.Join(errs...)
}

func (f *killFault) Stop(ctx context.Context, env *Env, a *Action) error {
	return f.restart(ctx, env, a.Nodes)
}

func (f *killFault) Heal(ctx context.Context, env *Env) error {
	f.mu.Lock()
	var nodes []string
	for n := range f.killed {
		nodes = append(nodes, n)
	}
	f.mu.Unlock()
	return f.restart(ctx, env, nodes)
}

func (f *killFault) restart(ctx context.Context, env *Env, nodes []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []error
	for _, n := range nodes {
		if !f.killed[n] {
			continue
		}
		if err := env.Control.Restart(ctx, n); err != nil {
			errs = append(errs, fmt.Errorf("restart %s: %w", n, err))
			continue
		}
		delete(f.killed, n)
	}
	return errors.Join(errs...)
}

// failoverFault asks the sentinels for a manual failover.
type failoverFault struct{}

func (failoverFault) Name() string { return Failover }

func (failoverFault) Available(env *Env, a *Action) error {
	if env.ManualFailover == nil {
		return fmt.Errorf("failover needs the sentinel system")
	}
	return nil
}

func (failoverFault) Start(ctx context.Context, env *Env, a *Action) error {
	_, err := env.ManualFailover(ctx)
	return err
}

func (failoverFault) Stop(ctx context.Context, env *Env, a *Action) error { return nil }
func (failoverFault) Heal(ctx context.Context, env *Env) error            { return nil }
