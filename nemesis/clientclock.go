package nemesis

import (
	"fmt"
	"time"
)

// ClientClocks moves the wall clocks of a run's protocol clients (docs/
// client-protocol.md): each client worker's process runs under
// libfaketime with an offset file of its own, which a client replaced
// after a crash reads too. The harness implements it; nil where the
// lock under test is a Go lock in the harness's own process, whose clock
// no fault can move (Go reads it through the vDSO, not libc).
type ClientClocks interface {
	// SetClientClock sets the wall clock of worker's client process to
	// real time + offset; its monotonic clock stays real.
	SetClientClock(worker int, offset time.Duration) error
	// ClientProcess is the process number (the history's) of worker's
	// client now.
	ClientProcess(worker int) int
}

// GoLockClockWhy says why client clock faults are refused for a Go lock
// (the sentence follows the fault's name).
const GoLockClockWhy = "moves a protocol client's wall clock (libfaketime in its process); a Go lock runs inside the harness's own process, " +
	"whose clock no fault can move (Go reads it through the vDSO, not libc): test it with --client, or use clock-offset, " +
	"which moves the servers' clocks against the clients' and stands in for a client clock fault"

var clientClockDescriptors = []Descriptor{
	clientClockDescriptor(ClientClockJump, shapeJump,
		"one protocol client's wall clock jumps by --clock-jump, and back at the end of the fault"),
	clientClockDescriptor(ClientClockStrobe, shapeStrobe,
		"one protocol client's wall clock flips between real time and --clock-jump every 50ms"),
	clientClockDescriptor(ClientClockDrift, shapeDrift,
		"one protocol client's wall clock runs at --clock-rate times real speed"),
	clientClockDescriptor(ClientClockOffset, shapeOffset,
		"one protocol client's wall clock runs --clock-jump off the others' from before the first grant to the end of the run"),
}

func clientClockDescriptor(name string, shape clockShape, description string) Descriptor {
	return Descriptor{Name: name, Kind: KindClientClock, Standing: shape == shapeOffset, ByJump: shape != shapeDrift,
		Description: description + " (its monotonic clock stays real): a lock that keeps its expiry from its client's wall clock " +
			"(the expiry in the value, taken over with GETSET; an absolute SET NX PXAT) breaks. " +
			"Protocol clients only (--client): a Go lock runs in the harness's process, whose clock no fault can move; clock-offset stands in for it",
		Exercises: []string{momentMovedClientAcquires},
		Draw:      Draw{Class: classClient, Label: "clock", LabelDetail: true},
		new:       func(*ClientFaults) (Fault, error) { return newClockFault(name, shape, clientClocks{}), nil }}
}

// clientClocks are the protocol clients' clocks, by worker.
type clientClocks struct{}

func (clientClocks) available(env *Env, name string, a *Action) error {
	if env.ClientClock == nil {
		return fmt.Errorf("%s %s", name, GoLockClockWhy)
	}
	if len(a.Clients) != 1 || a.Clients[0] < 0 || a.Clients[0] >= env.Clients {
		return fmt.Errorf("%s hits exactly one client of 0..%d, got %v", name, env.Clients-1, a.Clients)
	}
	return nil
}

// targets are the action's workers; it notes their processes now, which
// the fault's events name (Action.ClientProcs).
func (clientClocks) targets(env *Env, a *Action) []string {
	if a.ClientProcs == nil {
		for _, w := range a.Clients {
			a.ClientProcs = append(a.ClientProcs, env.ClientClock.ClientProcess(w))
		}
	}
	return workerTargets(a.Clients)
}

func (clientClocks) set(env *Env, target string, offset time.Duration) error {
	w, err := targetWorker(target)
	if err != nil {
		return err
	}
	if err := env.ClientClock.SetClientClock(w, offset); err != nil {
		return fmt.Errorf("clock of %s: %w", workerName(w), err)
	}
	return nil
}
