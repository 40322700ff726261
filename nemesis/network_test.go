package nemesis

import (
	"context"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster/proxy"
)

// recordingInternal records what the nemesis asks of a backend's internal
// network. The real ones (the docker and compose clusters, through a
// toxiproxy server) are tested on real containers in cluster/docker; this
// one lets the fault's choice between the mesh and the backend be tested
// quickly.
type recordingInternal struct {
	mu    sync.Mutex
	nodes []string // nil: every node
	calls []string
	cut   map[string]proxy.Fault
}

func (r *recordingInternal) CutInternal(ctx context.Context, node string, f proxy.Fault) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "cut "+node+" "+f.String())
	r.cut[node] = f
	return nil
}

func (r *recordingInternal) HealInternal(ctx context.Context, node string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "heal "+node)
	delete(r.cut, node)
	return nil
}

type listingInternal struct{ *recordingInternal }

func (l listingInternal) InternalNodes() []string { return l.nodes }

func TestIsolateUsesTheMeshOrTheBackend(t *testing.T) {
	mesh := proxy.NewMesh()
	t.Cleanup(func() { mesh.Close() })
	// n1 has an internal link in the mesh (the local backend); n2 has none
	// (a container backend cuts it itself).
	netN1, err := mesh.Add(InternalLinkFrom, "n1", "127.0.0.1:1", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mesh.Add(ClientLinkName(0), "n2", "127.0.0.1:1", ""); err != nil {
		t.Fatal(err)
	}
	in := &recordingInternal{cut: map[string]proxy.Fault{}}
	env := newEnv(t, newFakeControl())
	env.Mesh, env.Internal = mesh, in
	f := newNetFault(Isolate)
	a := &Action{Fault: Isolate, Nodes: []string{"n1", "n2"}}
	if err := f.Available(env, a); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := f.Start(ctx, env, a); err != nil {
		t.Fatal(err)
	}
	if lf, ok := netN1.Fault(); !ok || lf.Mode != proxy.Partition {
		t.Errorf("mesh link net->n1: fault %v %v, want a partition", lf, ok)
	}
	if got := in.cut["n2"]; got.Mode != proxy.Partition || len(in.cut) != 1 {
		t.Errorf("backend cuts %v, want only n2 partitioned", in.cut)
	}
	if c := mesh.Find(ClientLinkName(0), "n2"); c != nil {
		if _, ok := c.Fault(); ok {
			t.Error("isolate touched a client's link")
		}
	}
	if err := f.Stop(ctx, env, a); err != nil {
		t.Fatal(err)
	}
	if _, ok := netN1.Fault(); ok || len(in.cut) != 0 {
		t.Errorf("after stop: mesh link faulted %v, backend cuts %v", ok, in.cut)
	}

	// An internal latency (the kill-after-acquire script's), healed by
	// Heal rather than Stop.
	lat := newNetFault(Latency)
	la := &Action{Fault: Latency, Nodes: []string{"n2"}, Internal: true, Link: proxy.Fault{Latency: 100 * time.Millisecond}}
	if err := lat.Available(env, la); err != nil {
		t.Fatal(err)
	}
	if err := lat.Start(ctx, env, la); err != nil {
		t.Fatal(err)
	}
	if got := in.cut["n2"]; got.Mode != proxy.Latency || got.Latency != 100*time.Millisecond {
		t.Errorf("internal latency: backend has %v", got)
	}
	if err := lat.Heal(ctx, env); err != nil {
		t.Fatal(err)
	}
	if err := lat.Heal(ctx, env); err != nil {
		t.Fatalf("a second heal: %v", err)
	}
	if len(in.cut) != 0 {
		t.Errorf("after heal, backend cuts %v", in.cut)
	}
	if n := strings.Count(strings.Join(in.calls, ";"), "heal n2"); n != 2 {
		t.Errorf("calls %v: want n2 healed once per fault", in.calls)
	}
}

func TestIsolateRefusedWithoutInternalLinks(t *testing.T) {
	env := newEnv(t, newFakeControl())
	env.Mesh = proxy.NewMesh()
	t.Cleanup(func() { env.Mesh.Close() })
	steps := []Step{{At: 0, Action: Action{Fault: Isolate, Nodes: []string{"n1"}, For: time.Second}}}
	_, err := NewSchedule(env, nil, Options{Targets: TargetOne}, rand.New(rand.NewSource(1)), steps, nil)
	if err == nil || !strings.Contains(err.Error(), "cannot be cut") {
		t.Fatalf("isolate with neither a mesh link nor a backend network: %v, want a clear refusal", err)
	}
	// A backend that says which nodes it can cut refuses the others (a
	// container cluster of the redlock system has no internal links).
	env.Internal = listingInternal{&recordingInternal{nodes: []string{"n2"}, cut: map[string]proxy.Fault{}}}
	_, err = NewSchedule(env, []string{Isolate}, Options{Targets: TargetOne}, rand.New(rand.NewSource(1)), nil, nil)
	if err == nil || !strings.Contains(err.Error(), "no internal link into n1") {
		t.Fatalf("isolate on a node the backend cannot cut: %v", err)
	}
	env.Nodes = []string{"n2"}
	if _, err := NewSchedule(env, []string{Isolate}, Options{Targets: TargetOne}, rand.New(rand.NewSource(1)), nil, nil); err != nil {
		t.Fatalf("isolate on a node the backend can cut: %v", err)
	}
	if !slices.Equal(env.Internal.(InternalNodes).InternalNodes(), []string{"n2"}) {
		t.Fatal("InternalNodes changed")
	}
}
