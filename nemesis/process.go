package nemesis

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster"
)

var processDescriptors = []Descriptor{
	{Name: Pause, Description: "the target nodes' processes are frozen (SIGSTOP) and later continued",
		Kind: KindServer, Exercises: serverMoments,
		Draw: Draw{Class: classProcess, Label: "paused"},
		new:  func(*ClientFaults) (Fault, error) { return newPauseFault(), nil }},
	{Name: Kill, Description: "the target nodes are killed (SIGKILL) and restarted after --restart-delay, same port and data",
		Kind: KindServer, LosesKeys: true, DownUntilRestart: true, Exercises: serverMoments, Draw: Draw{Class: classProcess, Label: "killed"},
		new: func(*ClientFaults) (Fault, error) { return newKillFault(), nil }},
}

// pauseFault freezes node processes with SIGSTOP.
type pauseFault struct{ nodeFault }

func newPauseFault() *pauseFault {
	return &pauseFault{nodeFault{restore: func(_ context.Context, env *Env, n string) error {
		return nodeErr("resume", n, env.Pauser.Resume(n))
	}}}
}

func (f *pauseFault) Name() string { return Pause }

func (f *pauseFault) Describe(a *Action) string {
	return fmt.Sprintf("SIGSTOP for %s", a.For.Round(time.Millisecond))
}

func (f *pauseFault) Available(env *Env, a *Action) error {
	if env.Pauser == nil {
		return fmt.Errorf("pause needs a backend that can freeze node processes")
	}
	return nil
}

func (f *pauseFault) Start(ctx context.Context, env *Env, a *Action) error {
	return f.change(a.Nodes, func(n string) (bool, error) {
		err := env.Pauser.Pause(n)
		return err == nil, nodeErr("pause", n, err)
	})
}

// killFault kills node processes and restarts them when stopped.
type killFault struct{ nodeFault }

func newKillFault() *killFault {
	return &killFault{nodeFault{restore: func(ctx context.Context, env *Env, n string) error {
		return nodeErr("restart", n, env.Killer.Restart(ctx, n))
	}}}
}

func (f *killFault) Name() string { return Kill }

func (f *killFault) Describe(a *Action) string {
	d := fmt.Sprintf("SIGKILL, restart after %s", a.For)
	if a.AfterGrant {
		d += ", right after a lease was granted"
	}
	if a.LoseUnsynced {
		d += ", losing the last second of the append-only file"
	}
	return d
}

func (f *killFault) Available(env *Env, a *Action) error {
	if env.Killer == nil {
		return fmt.Errorf("kill needs a backend that can kill and restart node processes")
	}
	if a.LoseUnsynced && env.Persistence == cluster.PersistNone {
		return fmt.Errorf("--lose-unsynced needs --persistence everysec or always: with none there is no file to lose")
	}
	return nil
}

func (f *killFault) Start(ctx context.Context, env *Env, a *Action) error {
	return f.change(a.Nodes, func(n string) (bool, error) {
		if f.isChanged(n) {
			return true, nil // down already: a kill would find no process
		}
		if err := env.Killer.Kill(n, a.LoseUnsynced); err != nil {
			return false, nodeErr("kill", n, err)
		}
		return true, dropInFlight(env, n)
	})
}

// dropInFlight loses what the node had sent but the network had not
// delivered, as on a crashed machine: without this the proxies would
// deliver a delayed replication stream after the kill.
func dropInFlight(env *Env, node string) error {
	if env.Mesh == nil {
		return nil
	}
	var errs []error
	for _, l := range env.Mesh.Links() {
		if l.To == node {
			errs = append(errs, l.Drop())
		}
	}
	return errors.Join(errs...)
}
