package checker

import (
	"fmt"
	"math/rand"
	"reflect"
	"testing"

	"github.com/lockjepsen/lockjepsen/history"
)

// randomHistory generates a small history of clients that acquire, extend
// and release without any lock service behind them: outcomes are random, so
// holds overlap often, and the short, tied timestamps exercise touching
// intervals and equal instants.
func randomHistory(rng *rand.Rand) *hb {
	b := &hb{generated: true}
	clients := 2 + rng.Intn(3)
	keys := []string{"k0", "k1"}[:1+rng.Intn(2)]
	for p := 0; p < clients; p++ {
		t := int64(rng.Intn(10))
		key := keys[rng.Intn(len(keys))]
		for cycle := 0; cycle < 1+rng.Intn(3); cycle++ {
			inv, comp := t, t+int64(rng.Intn(4))
			tok := fmt.Sprintf("c%d-%d", p, cycle)
			vuMs := int64(-1)
			if rng.Intn(5) > 0 {
				vuMs = comp + int64(rng.Intn(25)) - 1
			}
			switch r := rng.Intn(20); {
			case r < 1: // never completes: the client is done
				b.acquire(p, key, inv, -1, ok, tok, vuMs)
				goto next
			case r < 4:
				b.acquire(p, key, inv, comp, info, tok, vuMs)
				t = comp + int64(rng.Intn(5))
				continue
			case r < 9:
				b.acquire(p, key, inv, comp, fail, tok, vuMs)
				t = comp + int64(rng.Intn(5))
				continue
			default:
				b.acquire(p, key, inv, comp, ok, tok, vuMs)
			}
			t = comp + int64(rng.Intn(4))
			if rng.Intn(3) == 0 {
				inv, comp = t, t+int64(rng.Intn(4))
				outcome := []history.Type{ok, fail, info}[rng.Intn(3)]
				b.extend(p, key, inv, comp, outcome, tok, comp+int64(rng.Intn(12)))
				t = comp + int64(rng.Intn(3))
			}
			if rng.Intn(8) == 0 {
				b.crash(t, p)
				goto next
			}
			if rng.Intn(6) > 0 { // else: acquire again without releasing
				inv, comp = t, t+int64(rng.Intn(4))
				b.release(p, key, inv, comp, []history.Type{ok, ok, fail, info}[rng.Intn(4)], tok)
				t = comp + int64(rng.Intn(6))
			}
		}
	next:
	}
	return b
}

// The exclusion checker and porcupine must agree on every history; a
// disagreement is a bug in one of them.
func TestCrossCheckExclusionPorcupine(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	n := 1000
	if testing.Short() {
		n = 500
	}
	valid := 0
	for i := 0; i < n; i++ {
		ops := randomHistory(rng).build(t)
		a := scan(ops)
		ex := a.exclusion(Options{})
		lin := a.linearizability(Options{}.withDefaults())
		if lin.Valid == ValidUnknown {
			t.Fatalf("history %d: porcupine unknown: %+v", i, lin)
		}
		if ex.Valid != (lin.Valid == ValidTrue) {
			for _, op := range ops {
				t.Log(op.String(), op.Value)
			}
			for _, h := range a.holds {
				t.Logf("hold %+v", h)
			}
			t.Fatalf("history %d: exclusion valid=%v (%d violations), porcupine %v", i, ex.Valid, ex.Count, lin.Valid)
		}
		if ex.Valid {
			valid++
		}
	}
	t.Logf("%d of %d random histories valid", valid, n)
	if valid < n/10 || valid > n*9/10 {
		t.Fatalf("generator is lopsided: %d of %d valid", valid, n)
	}
}

// The Tracker, the one engine of the hold rules, gives the holds of the
// oracle's rules (written apart in oracle_test.go) on random histories
// with crashes, faults, shared tokens and calls that never complete.
func TestTrackerMatchesOracle(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	n := 3000
	if testing.Short() {
		n = 1000
	}
	for i := range n {
		ops := richHistory(rng)
		if want, got := scan(ops).holds, Holds(ops); !reflect.DeepEqual(want, got) {
			for _, op := range ops {
				t.Log(op.String(), op.Value)
			}
			for j := range max(len(want), len(got)) {
				if j >= len(want) || j >= len(got) || !reflect.DeepEqual(want[j], got[j]) {
					t.Fatalf("history %d: %d holds, oracle %d; first difference at hold %d", i, len(got), len(want), j)
				}
			}
		}
	}
}
