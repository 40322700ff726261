package nemesis

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/history"
)

// toyBlink is a fault of the test's own, made as a new fault is: a type
// that implements Fault and one descriptor entry, and nothing else. It
// acts on no process (the schedule's part is what is under test here;
// the real faults are tested on real servers in cluster/local and
// harness).
type toyBlink struct {
	mu  sync.Mutex
	on  map[string]bool
	log []string
}

func (f *toyBlink) Name() string                        { return toyName }
func (f *toyBlink) Available(env *Env, a *Action) error { return nil }
func (f *toyBlink) Describe(a *Action) string           { return fmt.Sprintf("blinks %v for %s", a.Nodes, a.For) }

func (f *toyBlink) Start(ctx context.Context, env *Env, a *Action) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range a.Nodes {
		f.on[n] = true
	}
	f.log = append(f.log, "start")
	return nil
}

func (f *toyBlink) Stop(ctx context.Context, env *Env, a *Action) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range a.Nodes {
		delete(f.on, n)
	}
	f.log = append(f.log, "stop")
	return nil
}

func (f *toyBlink) Heal(ctx context.Context, env *Env) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.on)
	f.log = append(f.log, "heal")
	return nil
}

const toyName = "toy-blink"

// registerToy adds d to a kind's list for the test, as a new fault's one
// list entry does.
func registerToy(t *testing.T, d Descriptor) {
	t.Helper()
	old := processDescriptors
	processDescriptors = append(slices.Clone(old), d)
	t.Cleanup(func() { processDescriptors = old })
}

// TestToyFaultNeedsOnlyItsDescriptor registers a fault the package has
// never heard of: parsing, the lists that say what faults mean, the
// random schedule (its duration), the recorded detail and the heal all
// follow from its descriptor and its type, without a case by name.
func TestToyFaultNeedsOnlyItsDescriptor(t *testing.T) {
	const restartDelay, duration = 40 * time.Millisecond, 2 * time.Millisecond
	cases := []struct {
		name    string
		d       Descriptor
		wantFor func(time.Duration) bool
		disrupt bool // named by DisruptFaults
	}{
		{"down until a restart: lasts the restart delay", Descriptor{Kind: KindServer, DownUntilRestart: true},
			func(d time.Duration) bool { return d == restartDelay }, true},
		{"lasting: lasts the drawn duration", Descriptor{Kind: KindLink, RepliesOnly: true},
			func(d time.Duration) bool { return d >= duration/2 && d <= 3*duration/2 }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			toy := &toyBlink{on: map[string]bool{}}
			d := c.d
			d.Name, d.Description = toyName, "a toy fault of the test's own"
			d.Draw = Draw{Class: classOther, Label: "blink"}
			d.new = func(*ClientFaults) (Fault, error) { return toy, nil }
			registerToy(t, d)

			if names, err := ParseList(toyName); err != nil || !slices.Equal(names, []string{toyName}) {
				t.Fatalf("ParseList(%q) = %v, %v", toyName, names, err)
			}
			if !slices.Contains(KnownNames(), toyName) {
				t.Fatalf("KnownNames lacks the toy: %v", KnownNames())
			}
			if got := slices.Contains(DisruptFaults(), toyName); got != c.disrupt {
				t.Fatalf("DisruptFaults names the toy: %v, want %v", got, c.disrupt)
			}

			env := newEnv(t, newFakeControl())
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// The first action's stop ends the phase: the schedule need
			// not draw more to show what it does with one.
			env.OnEvent = func(f, phase string, nodes []string) {
				if f == toyName && phase == "stop" {
					cancel()
				}
			}
			s, err := NewSchedule(env, []string{toyName}, Options{Interval: time.Millisecond, Duration: duration,
				RestartDelay: restartDelay, Targets: TargetOne}, rand.New(rand.NewSource(1)), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Run(ctx); err != nil {
				t.Fatal(err)
			}
			if context.Cause(ctx) == context.DeadlineExceeded {
				t.Fatal("the toy fault was never stopped in 30 s")
			}
			env.Rec.Close()
			res, err := history.ReadFile(env.Rec.Path())
			if err != nil {
				t.Fatal(err)
			}
			var start *history.Op
			for i, op := range res.Ops {
				if op.F == toyName && op.Value.Phase == "start" {
					start = &res.Ops[i]
					break
				}
			}
			if start == nil {
				t.Fatalf("no start of the toy recorded: %+v", res.Ops)
			}
			// The detail is the toy's own Describe of the action played.
			rest, ok := strings.CutPrefix(start.Value.Detail, fmt.Sprintf("blinks %v for ", start.Value.Targets))
			if !ok {
				t.Fatalf("detail %q is not the toy's Describe", start.Value.Detail)
			}
			lasted, err := time.ParseDuration(rest)
			if err != nil {
				t.Fatalf("detail %q: %v", start.Value.Detail, err)
			}
			if !c.wantFor(lasted) {
				t.Fatalf("the toy lasted %s (detail %q)", lasted, start.Value.Detail)
			}
			toy.mu.Lock()
			defer toy.mu.Unlock()
			if len(toy.on) != 0 || !slices.Contains(toy.log, "heal") || toy.log[0] != "start" || toy.log[1] != "stop" {
				t.Fatalf("toy after the run: on %v, calls %v; want started, stopped and healed", toy.on, toy.log)
			}
		})
	}
}
