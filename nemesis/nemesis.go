// Package nemesis injects faults into a run on a schedule and heals them.
// Each fault is one small type; the schedule draws from the faults that
// apply, at times drawn from the run's seed, and heals every fault when the
// fault phase ends. Faults record their own start and stop events in the
// history when they really take effect.
package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"time"

	"github.com/lockjepsen/lockjepsen/history"
)

// Fault is one kind of fault.
type Fault interface {
	Name() string
	// Inject applies one instance of the fault. It may return at once (the
	// fault is armed and takes effect later) or when the fault is over.
	Inject(ctx context.Context, rng *rand.Rand) error
	// Heal undoes every effect of the fault; it must be idempotent.
	Heal(ctx context.Context) error
}

// Names of the faults available today.
const (
	None        = "none"
	ClientPause = "client-pause"
	ClientCrash = "client-crash"
)

// Known lists the fault names with a line each, for --help.
var Known = map[string]string{
	ClientPause: "a client stalls inside its critical section, after its last validity check, past its lease's remaining TTL",
	ClientCrash: "a client holding the lock stops for good without releasing it, as a killed process would",
}

// ParseList reads "--nemesis a,b"; "none" or "" is no fault.
func ParseList(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == None {
		return nil, nil
	}
	var out []string
	seen := map[string]bool{}
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if _, ok := Known[name]; !ok {
			return nil, fmt.Errorf("unknown nemesis %q (want none or a comma list of: %s)", name, strings.Join(KnownNames(), ", "))
		}
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	return out, nil
}

// KnownNames is the sorted list of fault names.
func KnownNames() []string {
	var names []string
	for n := range Known {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Schedule injects faults at random intervals drawn from Rng.
type Schedule struct {
	Faults []Fault
	// Interval is the mean time between injections; each wait is drawn
	// uniformly from [Interval/2, 3*Interval/2].
	Interval time.Duration
	Rng      *rand.Rand
	Rec      *history.Recorder
}

// Run injects faults until ctx is done, then heals every fault. Errors from
// injections are recorded as nemesis events and do not stop the schedule; a
// failure to heal is returned.
func (s *Schedule) Run(ctx context.Context) error {
	if len(s.Faults) > 0 {
		for {
			wait := s.Interval/2 + time.Duration(s.Rng.Int63n(int64(s.Interval)+1))
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return s.HealAll()
			case <-t.C:
			}
			f := s.Faults[s.Rng.Intn(len(s.Faults))]
			if err := f.Inject(ctx, s.Rng); err != nil && ctx.Err() == nil {
				s.Rec.Record(history.Op{Process: history.NemesisProcess, Type: history.Info, F: f.Name(),
					Value: &history.Value{Phase: "error"}, Error: err.Error()})
			}
		}
	}
	<-ctx.Done()
	return nil
}

// HealAll heals every fault with a fresh deadline.
func (s *Schedule) HealAll() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	for _, f := range s.Faults {
		if err := f.Heal(ctx); err != nil {
			errs = append(errs, fmt.Errorf("heal %s: %w", f.Name(), err))
		}
	}
	return errors.Join(errs...)
}
