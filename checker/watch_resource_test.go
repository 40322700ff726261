package checker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/history"
)

func watchResource(ops []history.Op) *ResourceDamage {
	w := NewResourceWatcher()
	for _, op := range ops {
		if d := w.Observe(op); d != nil {
			return d
		}
	}
	return nil
}

func TestResourceWatcher(t *testing.T) {
	f := history.I64
	cases := []struct {
		name  string
		b     *hb
		kind  string // "" when the watcher must see no damage
		index int64  // the event that shows it
	}{
		{"increments in turn", new(hb).
			read(1, "k", 0, 1, ok, 0).write(1, "k", 2, 3, ok, 1, nil).
			read(2, "k", 4, 5, ok, 1).write(2, "k", 6, 7, ok, 2, nil), "", 0},
		{"a stale holder's late write repeats a value", new(hb).
			read(1, "k", 0, 1, ok, 0).
			read(2, "k", 2, 3, ok, 0).write(2, "k", 4, 5, ok, 1, nil).
			write(1, "k", 6, 7, ok, 1, nil), DamageLostUpdate, 7},
		{"the same value on two keys is no damage", new(hb).
			write(1, "a", 0, 1, ok, 1, nil).write(2, "b", 2, 3, ok, 1, nil), "", 0},
		{"a write of an unknown outcome is not accepted", new(hb).
			write(1, "k", 0, 1, info, 1, nil).write(2, "k", 2, 3, ok, 1, nil), "", 0},
		{"a write that never completed is not accepted", new(hb).
			write(1, "k", 0, -1, ok, 1, nil).write(2, "k", 2, 3, ok, 1, nil), "", 0},
		{"the later completion shows it, whatever the invoke order", new(hb).
			write(1, "k", 0, 10, ok, 3, nil).write(2, "k", 1, 2, ok, 3, nil), DamageLostUpdate, 3},
		{"a write refused for a stale fence", new(hb).
			read(1, "k", 0, 1, ok, 0).write(1, "k", 2, 3, ok, 1, f(1)).
			write(2, "k", 4, 5, fail, 1, f(0)), DamageRefusedStale, 5},
		{"a read refused for a stale fence", new(hb).
			write(1, "k", 0, 1, ok, 1, f(2)).read(2, "k", 2, 3, fail, 0), DamageRefusedStale, 3},
		{"a failed release is no resource damage", new(hb).
			acquire(1, "k", 0, 1, ok, "a", 100).release(1, "k", 2, 3, fail, "a"), "", 0},
		{"values far above the run are remembered", new(hb).
			write(1, "k", 0, 1, ok, 1000, nil).write(1, "k", 2, 3, ok, 1, nil).
			write(2, "k", 4, 5, ok, 1000, nil), DamageLostUpdate, 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ops := tc.b.build(t)
			d := watchResource(ops)
			switch {
			case tc.kind == "" && d != nil:
				t.Fatalf("damage %+v in a history that has none:\n%s", d, dump(ops))
			case tc.kind == "":
				return
			case d == nil:
				t.Fatalf("no damage seen, want %s at event %d:\n%s", tc.kind, tc.index, dump(ops))
			case d.Kind != tc.kind || d.Index != tc.index:
				t.Fatalf("%s at event %d (%s), want %s at event %d", d.Kind, d.Index, d, tc.kind, tc.index)
			}
			if d.String() == "" {
				t.Fatal("no story")
			}
		})
	}
}

// A lost update names the earlier write of its value when that write is
// among the latest of the run.
func TestResourceWatcherNamesTheRepeatedWrite(t *testing.T) {
	ladder := func() *hb {
		b := new(hb)
		for i := int64(1); i <= 200; i++ {
			b.write(1, "k", 4*i, 4*i+1, ok, i, nil)
		}
		return b
	}
	ops := ladder().write(2, "k", 900, 901, ok, 190, nil).build(t)
	d := watchResource(ops)
	if d == nil || d.Kind != DamageLostUpdate || d.First == nil || d.First.N != 190 || d.First.Process != 1 {
		t.Fatalf("got %+v, want a lost update naming process 1's write of 190", d)
	}
	// Far below the top it is still a repeat, named or not.
	ops = ladder().write(2, "k", 900, 901, ok, 3, nil).build(t)
	if d := watchResource(ops); d == nil || d.Kind != DamageLostUpdate {
		t.Fatalf("got %+v, want a lost update", d)
	}
}

// The watcher that stops a run at the first damage must see damage
// exactly when the resource checker counts some, at the first event that
// shows it, on random counter histories: stale readers, refused and
// unknown writes, two keys.
func TestResourceWatcherAgreesWithResource(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	kinds := map[string]int{}
	for i := 0; i < 2000; i++ {
		ops := randomCounterHistory(rng).build(t)
		res := Resource(ops)
		d := watchResource(ops)
		want := firstDamage(ops)
		switch {
		case (d != nil) != (want >= 0):
			t.Fatalf("history %d: watcher saw %+v, want damage at event %d\n%s", i, d, want, dump(ops))
		case d != nil && d.Index != want:
			t.Fatalf("history %d: watcher's first damage is event %d, want %d\n%s", i, d.Index, want, dump(ops))
		case d == nil && (res.Duplicates > 0 || res.RejectedStale > 0 || res.RejectedReads > 0):
			t.Fatalf("history %d: watcher saw nothing, resource checker %+v\n%s", i, res.ResourceCounts, dump(ops))
		case d != nil && d.Kind == DamageLostUpdate && res.Duplicates == 0:
			t.Fatalf("history %d: watcher saw %s, resource checker no duplicate\n%s", i, d, dump(ops))
		}
		if d != nil {
			kinds[d.Kind]++
		}
	}
	t.Logf("damage by kind: %v", kinds)
	damaged := kinds[DamageLostUpdate] + kinds[DamageRefusedStale]
	if damaged > 1800 || kinds[DamageLostUpdate] < 100 || kinds[DamageRefusedStale] < 100 {
		t.Fatalf("of 2000 random histories, %v were damaged: the generator no longer tests every side", kinds)
	}
}

// firstDamage is the index of the first refused read or write, or of the
// first accepted write of a value accepted before, by brute force.
func firstDamage(ops []history.Op) int64 {
	open := map[int]history.Op{}
	seen := map[string]bool{}
	for _, op := range ops {
		if op.Type == history.Invoke {
			open[op.Process] = op
			continue
		}
		inv, ok := open[op.Process]
		delete(open, op.Process)
		if !ok || (op.F != history.Write && op.F != history.Read) {
			continue
		}
		if op.Type == history.Fail {
			return op.Index
		}
		if op.Type == history.OK && op.F == history.Write {
			k := fmt.Sprint(inv.Key, "/", *inv.Value.N)
			if seen[k] {
				return op.Index
			}
			seen[k] = true
		}
	}
	return -1
}

// randomCounterHistory is a few clients incrementing counters on two keys
// with no lock at all: reads and writes interleave freely, a write may be
// refused or its outcome unknown (it may still land), a read may be
// refused.
func randomCounterHistory(rng *rand.Rand) *hb {
	b := &hb{generated: true}
	value := map[string]int64{}
	type proc struct {
		open    bool
		f, key  string
		read, n int64
	}
	procs := make([]proc, 2+rng.Intn(3))
	steps := 4 + rng.Intn(20)
	for t := int64(0); t < int64(steps); t++ {
		p := rng.Intn(len(procs))
		ps := &procs[p]
		if !ps.open {
			ps.open, ps.key = true, []string{"a", "b"}[rng.Intn(2)]
			if rng.Intn(2) == 0 {
				ps.f = history.Read
				b.ev(t, p, history.Invoke, history.Read, ps.key, nil)
			} else {
				ps.f, ps.n = history.Write, ps.read+1
				b.ev(t, p, history.Invoke, history.Write, ps.key, &history.Value{N: history.I64(ps.n)})
			}
			continue
		}
		ps.open = false
		typ := history.OK
		switch r := rng.Intn(20); {
		case r == 0:
			typ = history.Fail
		case r == 1:
			typ = history.Info
		}
		var v *history.Value
		switch {
		case ps.f == history.Read && typ == history.OK:
			ps.read = value[ps.key]
			v = &history.Value{N: history.I64(ps.read)}
		case ps.f == history.Write && (typ == history.OK || typ == history.Info && rng.Intn(2) == 0):
			value[ps.key] = ps.n
		}
		if typ == history.Info {
			b.ev(t, p, typ, ps.f, ps.key, v).events[len(b.events)-1].Error = "timeout"
			continue
		}
		b.ev(t, p, typ, ps.f, ps.key, v)
	}
	return b
}

// A lock's own renewals (background events) change nothing the checkers
// find: the holder's belief is its operations'. Random histories with
// renewals sprinkled in, at the instants of their neighbours, get the
// results of the same histories without them, but for event positions.
func TestBackgroundRenewalsChangeNothing(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	for i := 0; i < 500; i++ {
		b := randomHistory(rng)
		plain := b.build(t)
		with := &hb{events: append([]history.Op(nil), b.events...), generated: true}
		for n := rng.Intn(6); n > 0; n-- {
			at := plain[rng.Intn(len(plain))]
			outcome := []history.Type{ok, fail, info}[rng.Intn(3)]
			with.ev(at.Time/1e6, rng.Intn(3), history.Background, history.Extend, "k0",
				&history.Value{TTL: ms(1000), Token: "a", From: history.I64(at.Time), Outcome: outcome})
		}
		for _, opts := range []Options{{}, {TTL: time.Duration(ms(20))}} {
			want, got := Check(plain, opts), Check(with.build(t), opts)
			// Except the never-frees check's counts: a renewal lengthens
			// its key's life on the server, whatever the holder believes
			// (neverfree_test.go). These histories last milliseconds, far
			// less than its margin, so it finds nothing either way.
			if want.NeverFrees.Episodes+got.NeverFrees.Episodes > 0 {
				t.Fatalf("history %d: never frees, %d and %d episodes", i, want.NeverFrees.Episodes, got.NeverFrees.Episodes)
			}
			want.NeverFrees, got.NeverFrees = nil, nil
			if d := diffResults(withoutIndices(t, want), withoutIndices(t, got)); d != "" {
				t.Fatalf("history %d: renewals changed the results: %s", i, d)
			}
		}
	}
}

// withoutIndices is r with every event position zeroed: events added to a
// history move the others.
func withoutIndices(t *testing.T, r *Results) *Results {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // Never is beyond a float's exact integers
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	var zero func(v any)
	zero = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if strings.Contains(k, "index") {
					x[k] = 0
				} else {
					zero(e)
				}
			}
		case []any:
			for _, e := range x {
				zero(e)
			}
		}
	}
	zero(m)
	b, _ = json.Marshal(m)
	var out Results
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}
