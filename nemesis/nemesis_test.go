package nemesis

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster"
)

func TestParseList(t *testing.T) {
	cases := []struct {
		in   string
		want []string
		ok   bool
	}{
		{"", nil, true},
		{"none", nil, true},
		{"client-pause", []string{"client-pause"}, true},
		{"client-pause, client-crash,client-pause", []string{"client-pause", "client-crash"}, true},
		{"client-pause,meteor", nil, false},
		{"none,client-pause", nil, false},
		{"client-pause, none", nil, false},
	}
	for _, tc := range cases {
		got, err := ParseList(tc.in)
		if (err == nil) != tc.ok || (tc.ok && !reflect.DeepEqual(got, tc.want)) {
			t.Errorf("%q: got %v, %v", tc.in, got, err)
		}
	}
}

// none with other faults is not called unknown, a name the user knows,
// but refused as a combination (issue 34, item 12).
func TestParseListNoneWithFaults(t *testing.T) {
	for _, in := range []string{"none,kill", "kill,none"} {
		_, err := ParseList(in)
		if err == nil || strings.Contains(err.Error(), "unknown") || !strings.Contains(err.Error(), "none cannot be combined with other faults") {
			t.Errorf("%q: got %v, want none refused as a combination", in, err)
		}
	}
}

// Every descriptor builds its own fault, and what the rest of lockjepsen
// reads from a descriptor is there: a fault that forgot its help line or
// its colour would show up only in a report.
func TestEveryDescriptorBuildsItsFault(t *testing.T) {
	clients := NewClientFaults(nil, time.Second, 1)
	seen := map[string]bool{}
	for _, d := range All() {
		t.Run(d.Name, func(t *testing.T) {
			if seen[d.Name] {
				t.Fatalf("%s is declared twice", d.Name)
			}
			seen[d.Name] = true
			if d.Description == "" || !strings.HasPrefix(d.Draw.Class, "f-") {
				t.Errorf("incomplete: %+v", d)
			}
			if (d.Systems == nil) != (d.SystemsWhy == "") {
				t.Errorf("systems %v without a reason, or a reason without systems: %q", d.Systems, d.SystemsWhy)
			}
			f, err := New(d.Name, clients)
			if err != nil || f.Name() != d.Name {
				t.Fatalf("New(%s) = %v, %v", d.Name, f, err)
			}
			if got, err := Lookup(d.Name); err != nil || got.Name != d.Name {
				t.Errorf("Lookup(%s) = %v, %v", d.Name, got.Name, err)
			}
		})
	}
	if names := KnownNames(); len(names) != len(seen) || !slices.IsSorted(names) {
		t.Errorf("KnownNames %v for %d faults", names, len(seen))
	}
}

func TestLookupRefusesUnknownFaults(t *testing.T) {
	for _, name := range []string{"", None, "meteor", "Partition", "client-"} {
		_, err := Lookup(name)
		if err == nil || !strings.Contains(err.Error(), "unknown nemesis") || !strings.Contains(err.Error(), Partition) {
			t.Errorf("Lookup(%q): %v", name, err)
		}
		if _, err := New(name, nil); err == nil {
			t.Errorf("New(%q) built a fault", name)
		}
	}
	if _, err := New(ClientPause, nil); err == nil {
		t.Error("a client fault was built without client hooks")
	}
}

func TestFits(t *testing.T) {
	cases := []struct {
		fault, system string
		fits          bool
	}{
		{Partition, cluster.Single, true},
		{Partition, cluster.Etcd, true},
		{Failover, cluster.Sentinel, true},
		{Failover, cluster.Redlock, false},
		{Isolate, cluster.Etcd, true},
		{Isolate, cluster.Single, false},
		{ClockJump, cluster.Redlock, true},
		{ClockDrift, cluster.Etcd, false},
	}
	for _, tc := range cases {
		d, err := Lookup(tc.fault)
		if err != nil {
			t.Fatal(err)
		}
		err = d.CheckSystem(tc.system)
		if d.Fits(tc.system) != tc.fits || (err == nil) != tc.fits {
			t.Errorf("%s on %s: fits %v, %v; want %v", tc.fault, tc.system, d.Fits(tc.system), err, tc.fits)
		}
		if err != nil && !strings.Contains(err.Error(), d.SystemsWhy) {
			t.Errorf("%s on %s: %v does not say why", tc.fault, tc.system, err)
		}
	}
}

func TestNeedsFakeClockAndLinks(t *testing.T) {
	cases := []struct {
		names             []string
		backgroundClients bool
		clock, links      bool
	}{
		{nil, true, false, false},
		{[]string{Pause, Kill, ClientPause}, false, false, false},
		// A paused client's background traffic needs links to freeze.
		{[]string{Pause, Kill, ClientPause}, true, false, true},
		{[]string{ClientCrash}, true, false, false},
		{[]string{Pause, ClockStrobe}, false, true, false},
		{[]string{Latency}, false, false, true},
		{[]string{Isolate, Failover}, true, false, false},
		{[]string{"meteor", ClockDrift, Reject}, false, true, true},
	}
	for _, tc := range cases {
		if got := NeedsFakeClock(tc.names); got != tc.clock {
			t.Errorf("NeedsFakeClock(%v) = %v", tc.names, got)
		}
		if got := NeedsLinks(tc.names, tc.backgroundClients); got != tc.links {
			t.Errorf("NeedsLinks(%v, %v) = %v", tc.names, tc.backgroundClients, got)
		}
	}
}

// Every fault says what it acts on, and exactly the client faults and
// the client clock faults aim at a client.
func TestEveryFaultHasAKind(t *testing.T) {
	kinds := []Kind{KindServer, KindLink, KindClient, KindClock, KindClientClock}
	clientClocks := []string{ClientClockJump, ClientClockStrobe, ClientClockDrift, ClientClockOffset}
	for _, d := range All() {
		if !slices.Contains(kinds, d.Kind) {
			t.Errorf("%s: kind %q, want one of %v", d.Name, d.Kind, kinds)
		}
		if want := d.Name == ClientPause || d.Name == ClientCrash || d.Name == ClientKillInOp || slices.Contains(clientClocks, d.Name); AimsAtClient(d.Name) != want {
			t.Errorf("AimsAtClient(%s) = %v, want %v", d.Name, !want, want)
		}
	}
	if AimsAtClient("meteor") {
		t.Error("an unknown fault aims at a client")
	}
}

// A stop restores only its own action's nodes, a node whose restore
// failed is restored by the heal, and a node never changed is left alone.
func TestNodeFaultRestoresWhatItChanged(t *testing.T) {
	failOnce := map[string]bool{"n2": true}
	var restored []string
	f := &nodeFault{restore: func(_ context.Context, _ *Env, n string) error {
		if failOnce[n] {
			delete(failOnce, n)
			return errors.New("busy")
		}
		restored = append(restored, n)
		return nil
	}}
	ctx := context.Background()
	err := f.change([]string{"n1", "n2", "n3"}, func(n string) (bool, error) {
		if n == "n3" {
			return false, errors.New("unreachable")
		}
		return true, nil
	})
	if err == nil {
		t.Error("a failed change was not reported")
	}
	if err := f.Stop(ctx, nil, &Action{Nodes: []string{"n2", "n3"}}); err == nil {
		t.Error("a failed restore was not reported")
	}
	if err := f.Heal(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.Heal(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if want := []string{"n1", "n2"}; !reflect.DeepEqual(restored, want) {
		t.Errorf("restored %v, want %v", restored, want)
	}
}
