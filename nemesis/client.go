package nemesis

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster/proxy"
	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/locks"
)

// ClientFaults stalls or crashes clients from inside their critical
// section. The schedule arms a client; the fault happens at that client's
// next critical section, after its last validity check, which is exactly
// where a GC pause or a crash hurts most. It implements workloads.Hooks.
type ClientFaults struct {
	Rec *history.Recorder
	TTL time.Duration
	// Mesh, when clients have links of their own in it, makes a pause
	// freeze the whole client process rather than one goroutine: the
	// paused client's links carry nothing for the pause, as a stopped
	// process sends nothing, not even the keep-alives a client library
	// sends in the background (the etcd-session lock's lease renewals).
	Mesh *proxy.Mesh

	// Rng draws the delay of an in-op kill; set by NewClientFaults from
	// the run's seed, guarded by mu.
	Rng *rand.Rand

	mu    sync.Mutex
	armed map[int]string           // worker -> fault name
	stop  chan struct{}            // closed by Heal to end pauses in progress
	took  map[string]time.Duration // lock call -> its recent duration (see EndCall)
	// timesCalls is set, before the run, when an InOp fault is checked
	// (Available).
	timesCalls atomic.Bool
}

// NewClientFaults returns client faults for a run; seed draws the delays
// of in-op kills.
func NewClientFaults(rec *history.Recorder, ttl time.Duration, seed int64) *ClientFaults {
	return &ClientFaults{Rec: rec, TTL: ttl, Rng: rand.New(rand.NewSource(seed)), armed: map[int]string{}, stop: make(chan struct{}),
		took: map[string]time.Duration{}}
}

var clientDescriptors = []Descriptor{
	{Name: ClientPause, Description: "a client stalls inside its critical section, after its last validity check, past its lease's remaining TTL",
		Kind: KindClient, FreezesClient: true,
		Exercises: []string{momentStaleActs, momentStaleGrants},
		Draw:      Draw{Class: classClient, Label: "paused"}, new: buildClient(ClientPause)},
	{Name: ClientCrash, Description: "a client holding the lock stops for good without releasing it, as a killed process would",
		Kind: KindClient, Instant: true, Crashes: true,
		Exercises: []string{momentCrashes},
		Draw:      Draw{Class: classClient, Label: "crashed"}, new: buildClient(ClientCrash)},
	{Name: ClientKillInOp, Description: "a client process is killed (SIGKILL) with a lock call's request in flight, between two of its commands with luck; needs a lock client in its own process (--client)",
		Kind: KindClient, InOp: true,
		Exercises: []string{momentKilledInOp},
		Draw:      Draw{Class: classClient, Label: "killed in a call"}, new: buildClient(ClientKillInOp)},
}

type clientFault struct {
	c    *ClientFaults
	name string
}

func buildClient(name string) func(*ClientFaults) (Fault, error) {
	return func(c *ClientFaults) (Fault, error) {
		if c == nil {
			return nil, fmt.Errorf("%s needs client hooks", name)
		}
		return clientFault{c, name}, nil
	}
}

func (f clientFault) Name() string   { return f.name }
func (f clientFault) recordsItself() {}

func (f clientFault) Available(env *Env, a *Action) error {
	d, _ := Lookup(f.name)
	if d.InOp {
		f.c.timesCalls.Store(true)
	}
	if err := d.CheckClients(env.ClientProcesses); err != nil {
		return err
	}
	if len(a.Clients) != 1 || a.Clients[0] < 0 || a.Clients[0] >= env.Clients {
		return fmt.Errorf("%s hits exactly one client of 0..%d, got %v", f.name, env.Clients-1, a.Clients)
	}
	return nil
}

// Start arms the client. An armed client that has not yet reached its
// critical section stays armed with its first fault; the second is
// recorded as skipped so that the history says why nothing happened.
func (f clientFault) Start(ctx context.Context, env *Env, a *Action) error {
	w := a.Clients[0]
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	if prev, busy := f.c.armed[w]; busy {
		f.c.Rec.Record(history.Op{Process: history.NemesisProcess, Type: history.Info, F: f.name,
			Value: &history.Value{Phase: "skipped", Targets: []string{workerName(w)},
				Detail: fmt.Sprintf("client worker %d is still armed with %s", w, prev)}})
		return nil
	}
	f.c.armed[w] = f.name
	return nil
}

func (f clientFault) Stop(ctx context.Context, env *Env, a *Action) error { return nil }

// Describe says what arming does for an in-op kill; a pause or crash
// records its own events, with what it did, when the client reaches it.
func (f clientFault) Describe(a *Action) string {
	if d, _ := Lookup(f.name); d.InOp {
		return fmt.Sprintf("client worker %v armed: killed (SIGKILL) at its next lock call, with the request in flight", a.Clients)
	}
	return ""
}

// Heal disarms every client and wakes clients that are stalled now.
func (f clientFault) Heal(ctx context.Context, env *Env) error {
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	for w, name := range f.c.armed {
		if name == f.name {
			delete(f.c.armed, w)
		}
	}
	if f.name == ClientPause {
		select {
		case <-f.c.stop:
		default:
			close(f.c.stop)
		}
	}
	return nil
}

// InCriticalSection is called by a client after its last validity check.
func (c *ClientFaults) InCriticalSection(ctx context.Context, worker, process int, lease locks.Lease) bool {
	c.mu.Lock()
	name, ok := c.armed[worker]
	if ok && inOp(name) {
		ok = false // its call comes; a critical section is not its place
	} else {
		delete(c.armed, worker)
	}
	stop := c.stop
	c.mu.Unlock()
	if !ok {
		return false
	}
	target := []string{fmt.Sprintf("client %d", process)}
	switch name {
	case ClientCrash:
		detail := "crashed holding " + lease.Token() + " without releasing it"
		if p, ok := lease.(locks.ClientProcess); ok {
			p.KillProcess()
			detail += "; its process was killed (SIGKILL)"
		}
		if b, ok := lease.(locks.Background); ok {
			b.StopRenewal()
			detail += "; its background renewal stopped with it"
		}
		c.Rec.Record(history.Op{Process: history.NemesisProcess, Type: history.Info, F: ClientCrash,
			Value: &history.Value{Phase: "start", Clients: []int{process}, Targets: target, Detail: detail}})
		return true
	case ClientPause:
		d, why := c.pauseFor(lease)
		thaw, frozen := c.freeze(worker)
		defer thaw()
		if frozen > 0 {
			why += fmt.Sprintf("; its %d links carry nothing, keep-alives included", frozen)
		}
		if p, ok := lease.(locks.ClientProcess); ok && p.StopProcess() == nil {
			defer p.ContinueProcess()
			why += "; its process is stopped (SIGSTOP), every thread included"
		}
		if b, ok := lease.(locks.Background); ok {
			b.PauseRenewal()
			defer b.ResumeRenewal()
			why += "; its background renewal is paused with it"
		}
		c.Rec.Record(history.Op{Process: history.NemesisProcess, Type: history.Info, F: ClientPause,
			Value: &history.Value{Phase: "start", Clients: []int{process}, Targets: target,
				Detail: fmt.Sprintf("stall %s holding %s (%s)", d.Round(time.Millisecond), lease.Token(), why)}})
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-stop:
			t.Stop()
		case <-ctx.Done():
			t.Stop()
		}
		c.Rec.Record(history.Op{Process: history.NemesisProcess, Type: history.Info, F: ClientPause,
			Value: &history.Value{Phase: "stop", Clients: []int{process}, Targets: target}})
	}
	return false
}

// freeze cuts the worker's own links (those without a fault already) and
// returns what undoes it. Healing closes the connections that were open
// (see proxy.Partition), so the client reconnects after the pause, as a
// process whose connections timed out while it was stopped would.
func (c *ClientFaults) freeze(worker int) (thaw func(), frozen int) {
	if c.Mesh == nil {
		return func() {}, 0
	}
	var links []*proxy.Link
	for _, l := range c.Mesh.Links() {
		if l.From != ClientLinkName(worker) {
			continue
		}
		if _, faulted := l.Fault(); faulted {
			continue // a network fault has it; that fault's heal restores it
		}
		if err := l.Apply(proxy.Fault{Mode: proxy.Partition}); err == nil {
			links = append(links, l)
		}
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, l := range links {
			if f, ok := l.Fault(); ok && f.Mode == proxy.Partition {
				l.Heal(ctx)
			}
		}
	}, len(links)
}

// pauseFor stalls past the lease's remaining validity by half a TTL, so
// that the key has surely expired on the server when the client wakes.
func (c *ClientFaults) pauseFor(lease locks.Lease) (time.Duration, string) {
	vu := lease.ValidUntil()
	if vu.IsZero() {
		return 2 * c.TTL, "no expiry: 2×TTL"
	}
	remaining := time.Until(vu)
	if remaining < 0 {
		remaining = 0
	}
	return remaining + c.TTL/2, fmt.Sprintf("remaining validity %s + TTL/2", remaining.Round(time.Millisecond))
}

func workerName(w int) string { return fmt.Sprintf("client worker %d", w) }
