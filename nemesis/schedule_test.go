package nemesis

import (
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster/proxy"
	"github.com/lockjepsen/lockjepsen/history"
)

// fakeControl records what the nemesis asks of the nodes. The real
// controller is tested on real redis-server in cluster/local and harness;
// this one lets the schedule's own logic be tested quickly.
type fakeControl struct {
	mu     sync.Mutex
	calls  []string
	paused map[string]bool
	dead   map[string]bool
	clock  map[string]time.Duration
}

func newFakeControl() *fakeControl {
	return &fakeControl{paused: map[string]bool{}, dead: map[string]bool{}, clock: map[string]time.Duration{}}
}

func (f *fakeControl) log(s string) { f.calls = append(f.calls, s) }

func (f *fakeControl) Pause(n string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log("pause " + n)
	f.paused[n] = true
	return nil
}
func (f *fakeControl) Resume(n string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log("resume " + n)
	delete(f.paused, n)
	return nil
}
func (f *fakeControl) Kill(n string, lose bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log("kill " + n)
	f.dead[n] = true
	return nil
}
func (f *fakeControl) Restart(ctx context.Context, n string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log("restart " + n)
	delete(f.dead, n)
	return nil
}
func (f *fakeControl) SetClock(n string, d time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.clock[n] = d
	return nil
}

func newEnv(t *testing.T, ctl *fakeControl) *Env {
	rec, err := history.Create(filepath.Join(t.TempDir(), "h.jsonl"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rec.Close() })
	return &Env{Rec: rec, Nodes: []string{"n1", "n2", "n3", "n4", "n5"}, Pauser: ctl, Killer: ctl, Clock: ctl, FakeClock: true,
		Persistence: "none", Clients: 4, TTL: 100 * time.Millisecond}
}

type drawn struct{ Fault, Targets, Detail string }

// runFor runs a random schedule for d and returns what it injected.
func runFor(t *testing.T, seed int64, d time.Duration) ([]drawn, *fakeControl) {
	ctl := newFakeControl()
	env := newEnv(t, ctl)
	s, err := NewSchedule(env, []string{Pause, Kill, ClockJump, ClockStrobe}, Options{
		Interval: 10 * time.Millisecond, Duration: 10 * time.Millisecond, Targets: TargetMinority,
		ClockJump: 150 * time.Millisecond,
	}, rand.New(rand.NewSource(seed)), nil, NewClientFaults(env.Rec, env.TTL, seed))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
	env.Rec.Close()
	path := env.Rec.Path()
	res, err := history.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []drawn
	open := map[string]bool{}
	for _, op := range res.Ops {
		key := fmt.Sprint(op.F, op.Value.Targets)
		switch op.Value.Phase {
		case "start":
			if open[key] {
				t.Fatalf("%s started twice without a stop", key)
			}
			open[key] = true
			out = append(out, drawn{op.F, fmt.Sprint(op.Value.Targets), op.Value.Detail})
		case "stop":
			if !open[key] {
				t.Fatalf("%s stopped without a start", key)
			}
			delete(open, key)
		}
	}
	if len(open) != 0 {
		t.Fatalf("faults never stopped: %v", open)
	}
	return out, ctl
}

func TestRandomScheduleIsHealedAndSeeded(t *testing.T) {
	a, ctl := runFor(t, 7, 400*time.Millisecond)
	if len(a) < 5 {
		t.Fatalf("only %d faults injected", len(a))
	}
	if len(ctl.paused) != 0 || len(ctl.dead) != 0 {
		t.Fatalf("left paused %v, dead %v", ctl.paused, ctl.dead)
	}
	for n, off := range ctl.clock {
		if off != 0 {
			t.Fatalf("clock of %s left at %s", n, off)
		}
	}
	for _, d := range a {
		if d.Targets != "[n1 n2]" && len(d.Targets) != len("[n1 n2]") {
			t.Fatalf("minority of 5 must be 2 nodes, got %s", d.Targets)
		}
	}
	// The same seed draws the same faults, targets and parameters.
	b, _ := runFor(t, 7, 400*time.Millisecond)
	n := min(len(a), len(b)) - 2 // the last draw may fall on either side of the deadline
	if !reflect.DeepEqual(a[:n], b[:n]) {
		t.Fatalf("same seed, different schedules:\n%v\n%v", a[:n], b[:n])
	}
	c, _ := runFor(t, 8, 400*time.Millisecond)
	if reflect.DeepEqual(a[:n], c[:min(n, len(c))]) {
		t.Fatal("different seeds drew the same schedule")
	}
}

func TestUnavailableFaultsAreRefusedBeforeTheRun(t *testing.T) {
	ctl := newFakeControl()
	cases := []struct {
		names []string
		edit  func(*Env, *Options)
	}{
		{[]string{Partition}, func(e *Env, o *Options) { e.Mesh = nil }},
		{[]string{Pause}, func(e *Env, o *Options) { e.Pauser = nil }},
		{[]string{Kill}, func(e *Env, o *Options) { e.Killer = nil }},
		{[]string{ClockJump}, func(e *Env, o *Options) { e.Clock = nil }},
		{[]string{ClockJump}, func(e *Env, o *Options) { e.FakeClock = false; o.ClockJump = time.Second }},
		{[]string{ClockJump}, func(e *Env, o *Options) { o.ClockJump = 0 }},
		{[]string{ClockDrift}, func(e *Env, o *Options) { o.ClockRate = 1 }},
		{[]string{Kill}, func(e *Env, o *Options) { o.LoseUnsynced = true }},
		{[]string{Pause}, func(e *Env, o *Options) { e.Nodes = e.Nodes[:1]; o.Targets = TargetMinority }},
		{[]string{Pause}, func(e *Env, o *Options) { o.Targets = "most" }},
		// A Go lock: no client clocks to move.
		{[]string{ClientClockJump}, func(e *Env, o *Options) { e.ClientClock = nil }},
		{[]string{ClockOffset}, func(e *Env, o *Options) { o.ClockJump = 0 }},
	}
	for i, tc := range cases {
		env := newEnv(t, ctl)
		opts := Options{Interval: time.Second, Targets: TargetOne, ClockJump: time.Second, ClockRate: 2}
		tc.edit(env, &opts)
		if _, err := NewSchedule(env, tc.names, opts, rand.New(rand.NewSource(1)), nil, nil); err == nil {
			t.Errorf("case %d (%v): accepted", i, tc.names)
		}
	}
}

// A standing fault is set once, on every node, before the schedule runs;
// the random draws never take it again; it lasts until the heal; its
// events pair up as the others' do.
func TestStandingFaultIsSetOnceAndHealed(t *testing.T) {
	ctl := newFakeControl()
	env := newEnv(t, ctl)
	s, err := NewSchedule(env, []string{ClockOffset, Pause}, Options{Interval: 10 * time.Millisecond, Duration: 10 * time.Millisecond,
		Targets: TargetOne, ClockJump: 150 * time.Millisecond}, rand.New(rand.NewSource(1)), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.StartStanding(context.Background()); err != nil {
		t.Fatal(err)
	}
	moved := 0
	ctl.mu.Lock()
	for _, off := range ctl.clock {
		if off == 150*time.Millisecond {
			moved++
		}
	}
	ctl.mu.Unlock()
	if moved != len(env.Nodes) {
		t.Fatalf("clocks after StartStanding %v, want every node at +150ms", ctl.clock)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
	for n, off := range ctl.clock {
		if off != 0 {
			t.Errorf("clock of %s left at %s after the heal", n, off)
		}
	}
	env.Rec.Close()
	res, err := history.ReadFile(env.Rec.Path())
	if err != nil {
		t.Fatal(err)
	}
	starts := 0
	for _, op := range res.Ops {
		if op.F == ClockOffset && op.Value.Phase == "start" {
			starts++
		}
	}
	if starts != 1 {
		t.Fatalf("clock-offset started %d times, want once", starts)
	}
}

func TestPickNodes(t *testing.T) {
	nodes := []string{"n1", "n2", "n3", "n4", "n5"}
	r := rand.New(rand.NewSource(1))
	for policy, want := range map[string]int{TargetOne: 1, TargetMinority: 2, TargetMajority: 3, TargetAll: 5} {
		got, err := pickNodes(r, nodes, policy)
		if err != nil || len(got) != want {
			t.Errorf("%s: %v %v", policy, got, err)
		}
	}
}

// gatedFault holds its fault's start until gate is closed.
type gatedFault struct {
	Fault
	gate chan struct{}
}

func (g gatedFault) Start(ctx context.Context, env *Env, a *Action) error {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.Fault.Start(ctx, env, a)
}

// TestAfterPreviousOrdersSteps: a step marked AfterPrevious starts only once
// the previous step's fault is in place, however long that takes; a step
// without it does not wait (which shows the test can tell them apart).
func TestAfterPreviousOrdersSteps(t *testing.T) {
	for _, after := range []bool{false, true} {
		t.Run(fmt.Sprint("AfterPrevious=", after), func(t *testing.T) {
			ctl := newFakeControl()
			env := newEnv(t, ctl)
			script := []Step{
				{Action: Action{Fault: Pause, Nodes: []string{"n1"}, For: time.Millisecond}},
				{AfterPrevious: after, Action: Action{Fault: Kill, Nodes: []string{"n2"}, For: time.Millisecond}},
			}
			s, err := NewSchedule(env, nil, Options{}, rand.New(rand.NewSource(1)), script, nil)
			if err != nil {
				t.Fatal(err)
			}
			gate := make(chan struct{})
			s.Faults[Pause] = gatedFault{Fault: s.Faults[Pause], gate: gate}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- s.Run(ctx) }()
			calls := func() []string {
				ctl.mu.Lock()
				defer ctl.mu.Unlock()
				return append([]string(nil), ctl.calls...)
			}
			waitFor := func(what string, want ...string) {
				deadline := time.Now().Add(30 * time.Second)
				for {
					have := calls()
					missing := slices.DeleteFunc(slices.Clone(want), func(c string) bool { return slices.Contains(have, c) })
					if len(missing) == 0 {
						return
					}
					if time.Now().After(deadline) {
						t.Fatalf("%s: still no %v after 30 s; calls: %v", what, missing, have)
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			if !after {
				waitFor("the kill while the pause is held back", "kill n2")
			}
			close(gate)
			waitFor("both faults", "pause n1", "kill n2")
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			got := calls()
			pause, kill := slices.Index(got, "pause n1"), slices.Index(got, "kill n2")
			if pause < 0 || kill < 0 || (pause < kill) != after {
				t.Errorf("calls %v: pause at %d, kill at %d", got, pause, kill)
			}
		})
	}
}

// A step planned at the holder and aimed after a grant strikes a node of
// the lease it waited for; given LeaseNodes, it lets grants by another
// number of nodes pass. Without LeaseNodes it takes the first grant,
// which shows the test can tell the two apart. OnPlayed keeps the
// placeholder as planned, the node hit and the lease's size.
func TestHolderStepAimsAtItsKindOfLease(t *testing.T) {
	first, second := []string{"n1", "n5"}, []string{"n2", "n3", "n4"}
	for _, c := range []struct {
		leaseNodes int
		want       []string
	}{{0, first}, {3, second}} {
		t.Run(fmt.Sprint("LeaseNodes=", c.leaseNodes), func(t *testing.T) {
			ctl := newFakeControl()
			env := newEnv(t, ctl)
			granted := make(chan struct{})
			asked := make(chan int, 100)
			var mu sync.Mutex
			lease := first
			env.Granted = granted
			env.Holder = func() []string {
				mu.Lock()
				l := lease
				mu.Unlock()
				asked <- len(l)
				return l
			}
			script := []Step{{Action: Action{Fault: Kill, Nodes: []string{HolderPlaceholder}, AfterGrant: true, LeaseNodes: c.leaseNodes, For: time.Millisecond}}}
			s, err := NewSchedule(env, nil, Options{}, rand.New(rand.NewSource(1)), script, nil)
			if err != nil {
				t.Fatal(err)
			}
			played := make(chan Played, 1)
			s.OnPlayed = func(p Played) { played <- p }
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- s.Run(ctx) }()
			// Grant the first lease until the schedule has asked who holds it.
			for n := 0; n != len(first); {
				select {
				case granted <- struct{}{}:
				case n = <-asked:
				case <-ctx.Done():
					t.Fatal("the schedule never asked for the holder")
				}
			}
			mu.Lock()
			lease = second
			mu.Unlock()
			var p Played
			for got := false; !got; {
				select {
				case granted <- struct{}{}:
				case p = <-played:
					got = true
				case <-asked:
				case <-ctx.Done():
					t.Fatal("the kill was never played")
				}
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if len(p.Hit) != 1 || !slices.Contains(c.want, p.Hit[0]) || p.LeaseNodes != len(c.want) {
				t.Errorf("killed %v of a lease of %d nodes, want one of %v", p.Hit, p.LeaseNodes, c.want)
			}
			if !slices.Equal(p.Action.Nodes, []string{HolderPlaceholder}) {
				t.Errorf("played as planned on %v, want the placeholder kept", p.Action.Nodes)
			}
		})
	}
}

// An in-op kill needs clients in their own processes: for a Go lock,
// which runs inside the harness's, the schedule is refused before the
// run, saying why and what stands in; with client processes it is
// accepted.
func TestInOpKillNeedsAClientProcess(t *testing.T) {
	for _, procs := range []bool{false, true} {
		env := newEnv(t, newFakeControl())
		env.ClientProcesses = procs
		_, err := NewSchedule(env, []string{ClientKillInOp}, Options{Interval: time.Second, Targets: TargetOne},
			rand.New(rand.NewSource(1)), nil, NewClientFaults(env.Rec, env.TTL, 1))
		switch {
		case procs && err != nil:
			t.Errorf("with client processes: %v", err)
		case !procs && (err == nil || !strings.Contains(err.Error(), "--client") || !strings.Contains(err.Error(), ClientCrash)):
			t.Errorf("for a Go lock: %v; want a refusal that names --client and %s", err, ClientCrash)
		}
	}
}

// A random reply-loss window outlasts the op timeout (OutlastsOps), so
// that a call that began just before it ends still times out inside it:
// asked for 10 ms, each lasts OpTimeoutsPerFault op timeouts.
func TestReplyLossOutlastsTheOpTimeout(t *testing.T) {
	env := newEnv(t, newFakeControl())
	env.Mesh = proxy.NewMesh()
	t.Cleanup(func() { env.Mesh.Close() })
	if _, err := env.Mesh.Add(ClientLinkName(0), "n1", "127.0.0.1:1", ""); err != nil {
		t.Fatal(err)
	}
	const opTimeout = 30 * time.Millisecond
	s, err := NewSchedule(env, []string{ReplyLoss}, Options{Interval: 10 * time.Millisecond, Duration: 10 * time.Millisecond,
		Targets: TargetOne, OpTimeout: opTimeout}, rand.New(rand.NewSource(1)), nil, NewClientFaults(env.Rec, env.TTL, 1))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var played []Played
	s.OnPlayed = func(p Played) {
		mu.Lock()
		defer mu.Unlock()
		played = append(played, p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel()
	if err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(played) == 0 {
		t.Fatal("no reply-loss window in 600 ms")
	}
	for _, p := range played {
		if p.Err != nil || p.Action.For < OpTimeoutsPerFault*opTimeout {
			t.Errorf("window %+v: want one of %s or more", p, OpTimeoutsPerFault*opTimeout)
		}
	}
}
