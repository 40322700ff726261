package local_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/etcdq"
	"github.com/lockjepsen/lockjepsen/cluster/local"
	"github.com/lockjepsen/lockjepsen/cluster/proxy"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

func startEtcd(t *testing.T, mesh *proxy.Mesh) *local.EtcdCluster {
	t.Helper()
	redistest.RequireEtcd(t)
	spec := cluster.Spec{System: cluster.Etcd, Nodes: 3, Dir: t.TempDir(), Persistence: cluster.PersistNone}
	spec.Processes = recordIn(spec.Dir)
	if mesh != nil {
		spec.Mesh = meshOf(mesh)
	}
	start := time.Now()
	cl, err := local.StartEtcd(within(t, startDeadline), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("etcd cluster healthy after %v", time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() { cl.Close(context.Background()) })
	return cl
}

// gateway is a test's client of etcd's JSON gateway on the members'
// client URLs: the module does not depend on etcd's Go client. Each call
// goes to the next member in turn, as the Go client's balancer spreads its
// calls, so that a poll reaches every member it was given.
type gateway struct {
	addrs []string
	next  atomic.Uint32
	hc    *http.Client
}

// etcdClient is a gateway to the given client addresses.
func etcdClient(t *testing.T, addrs ...string) *gateway {
	t.Helper()
	if len(addrs) == 0 {
		t.Fatal("an etcd client without addresses")
	}
	tr := &http.Transport{Proxy: nil, DialContext: (&net.Dialer{Timeout: time.Second}).DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &gateway{addrs: addrs, hc: &http.Client{Transport: tr}}
}

// call POSTs req as JSON to path on the next member and decodes a 200
// answer into resp (unless nil); any other answer is an error that carries
// the gateway's message.
func (g *gateway) call(ctx context.Context, path string, req, resp any) error {
	addr := g.addrs[int(g.next.Add(1))%len(g.addrs)]
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	hr.Header.Set("Content-Type", "application/json")
	r, err := g.hc.Do(hr)
	if err != nil {
		return fmt.Errorf("%s%s: %w", addr, path, err)
	}
	defer r.Body.Close()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return fmt.Errorf("%s%s: %w", addr, path, err)
	}
	if r.StatusCode != http.StatusOK {
		return fmt.Errorf("%s%s: %s: %s", addr, path, r.Status, bytes.TrimSpace(body))
	}
	if resp == nil {
		return nil
	}
	if err := json.Unmarshal(body, resp); err != nil {
		return fmt.Errorf("%s%s: %w", addr, path, err)
	}
	return nil
}

// kv is a key and value of the gateway; []byte goes as base64, as the
// gateway expects for proto bytes.
type kv struct {
	Key   []byte `json:"key"`
	Value []byte `json:"value,omitempty"`
}

func (g *gateway) put(ctx context.Context, key, val string) error {
	return g.call(ctx, "/v3/kv/put", kv{Key: []byte(key), Value: []byte(val)}, nil)
}

// get reads key, linearizably unless serializable (which a member answers
// from its own data, without its leader).
func (g *gateway) get(ctx context.Context, key string, serializable bool) (found bool, err error) {
	req := struct {
		Key          []byte `json:"key"`
		Serializable bool   `json:"serializable,omitempty"`
	}{[]byte(key), serializable}
	var r struct {
		Kvs []kv `json:"kvs"`
	}
	if err := g.call(ctx, "/v3/kv/range", req, &r); err != nil {
		return false, err
	}
	return len(r.Kvs) == 1, nil
}

// hasKeys reads keys serializably: whether this member holds them.
func (g *gateway) hasKeys(ctx context.Context, keys ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, k := range keys {
		found, err := g.get(ctx, k, true)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("%v has no %s", g.addrs, k)
		}
	}
	return nil
}

func addrsOf(cl *local.EtcdCluster, except ...string) []string {
	var out []string
outer:
	for _, n := range cl.Nodes() {
		for _, e := range except {
			if n.Name == e {
				continue outer
			}
		}
		out = append(out, n.Addr)
	}
	return out
}

// put writes through c. The timeout bounds one attempt of a poll (every
// put is polled): a write to a member that has lost its leader waits for
// etcd's own request timeout (about 6 s here), and a shorter attempt lets
// the poll see the new leader sooner.
func put(c *gateway, key, val string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return c.put(ctx, key, val)
}

// leaderNow is the member a majority of the members names leader, polled
// until they answer.
func leaderNow(t *testing.T, cl *local.EtcdCluster) string {
	t.Helper()
	return answer(t, "a majority of the members naming a leader", cl.Leader)
}

func TestEtcdSpecValidation(t *testing.T) {
	t.Parallel()
	ok := cluster.Spec{System: cluster.Etcd, Nodes: 3, Dir: ".", Persistence: cluster.PersistNone}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	if n := cluster.DefaultNodes(cluster.Etcd); n != 3 {
		t.Errorf("default nodes %d, want 3", n)
	}
	for _, tc := range []struct {
		tweak func(*cluster.Spec)
		want  string
	}{
		{func(s *cluster.Spec) { s.Nodes = 2 }, "odd number of members"},
		{func(s *cluster.Spec) { s.Nodes = 0 }, "odd number of members"},
		{func(s *cluster.Spec) { s.Persistence = cluster.PersistAlways }, "always persists"},
		{func(s *cluster.Spec) { s.FakeClock = true }, "monotonic timers"},
		{func(s *cluster.Spec) { s.Sentinels = 3 }, "sentinel options"},
	} {
		s := ok
		tc.tweak(&s)
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want an error containing %q", s, err, tc.want)
		}
	}
	s := ok
	s.Nodes = 1
	if err := s.Validate(); err != nil {
		t.Errorf("one member: %v", err)
	}
}

// TestEtcdStartsAndStops: a healthy cluster with a leader, its processes
// recorded and gone after Close; the refused faults say why.
func TestEtcdStartsAndStops(t *testing.T) {
	// Not parallel: they would run alongside the sentinel tests, whose
	// failover timings and pre-picked ports suffer from the extra load.
	cl := startEtcd(t, nil)
	nodes := cl.Nodes()
	if len(nodes) != 3 {
		t.Fatalf("%d nodes, want 3", len(nodes))
	}
	var pids []int
	for _, n := range nodes {
		if n.PID == 0 || n.Addr == "" || n.Announce == "" || n.Role != cluster.RoleNode {
			t.Errorf("node %+v incomplete", n)
		}
		if _, err := os.Stat(n.LogPath); err != nil {
			t.Errorf("log of %s: %v", n.Name, err)
		}
		pids = append(pids, n.PID)
	}
	if cl.Resource() != nil {
		t.Error("a resource without asking for one")
	}
	b, err := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(filepath.Dir(nodes[0].LogPath))), "nodes.json"))
	if err != nil {
		t.Fatal(err)
	}
	var recorded []cluster.Node
	if err := json.Unmarshal(b, &recorded); err != nil || len(recorded) != 3 || recorded[0].PID != pids[0] {
		t.Errorf("nodes.json: %v %+v", err, recorded)
	}
	ctx := context.Background()
	leader := leaderNow(t, cl)
	t.Logf("leader %s", leader)
	c := etcdClient(t, addrsOf(cl)...)
	eventually(t, waitDeadline, "a write", func() error { return put(c, "k", "v") })
	ids := map[uint64]string{}
	for _, n := range nodes {
		st, err := cl.Status(ctx, n.Name)
		if err != nil {
			t.Fatal(err)
		}
		if st.Name != n.Name || st.ID == 0 || st.LeaderID == 0 || st.Term == 0 || len(st.Errors) != 0 {
			t.Errorf("status of %s: %+v", n.Name, st)
		}
		ids[st.ID] = n.Name
		if v := etcdq.Version(ctx, n.Addr); !regexp.MustCompile(`^\d+\.\d+\.\d+`).MatchString(v) {
			t.Errorf("version of %s: %q", n.Name, v)
		}
	}
	if len(ids) != 3 {
		t.Errorf("member IDs %v, want three", ids)
	}
	if st, _ := cl.Status(ctx, leader); ids[st.LeaderID] != leader || st.Leader != leader {
		t.Errorf("the leader %s names leader %s (%x), IDs %v", leader, st.Leader, st.LeaderID, ids)
	}

	if _, ok := any(cl).(cluster.ClockSetter); ok {
		t.Error("etcd offers to move its clocks, which its leases do not read")
	}
	if err := cl.Kill("n1", true); err == nil || !strings.Contains(err.Error(), "no unsynced writes") {
		t.Errorf("Kill with loseUnsynced: %v", err)
	}
	if err := cl.Pause("n9"); err == nil {
		t.Error("pause of an unknown node")
	}

	cl.Close(ctx)
	cl.Close(ctx) // idempotent
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("pid %d still there after Close: %v", pid, err)
		}
	}
	if v := etcdq.Version(ctx, nodes[0].Addr); v != "" {
		t.Errorf("a closed member answers version %q", v)
	}
	if _, err := cl.Status(ctx, "n1"); err == nil || !strings.Contains(err.Error(), "n1: status") {
		t.Errorf("status of a closed member: %v", err)
	}
}

// TestEtcdNodeFaults: with one member paused or killed the others go on
// serving writes; a restarted member keeps its data and catches up.
func TestEtcdNodeFaults(t *testing.T) {
	// Not parallel (see TestEtcdStartsAndStops).
	cl := startEtcd(t, nil)
	ctx := context.Background()
	leader := leaderNow(t, cl)
	// The leader is the harder case for both faults.
	others := etcdClient(t, addrsOf(cl, leader)...)

	if err := cl.Pause(leader); err != nil {
		t.Fatal(err)
	}
	took := eventually(t, waitDeadline, "a write with the leader paused", func() error { return put(others, "paused", "1") })
	t.Logf("pause of leader %s: writes again after %v", leader, took.Round(time.Millisecond))
	if err := cl.Resume(leader); err != nil {
		t.Fatal(err)
	}
	if err := cl.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}

	victim := leaderNow(t, cl)
	others = etcdClient(t, addrsOf(cl, victim)...)
	if err := cl.Kill(victim, false); err != nil {
		t.Fatal(err)
	}
	if err := cl.Kill(victim, false); err == nil {
		t.Error("killing a dead node must fail")
	}
	took = eventually(t, waitDeadline, "a write with a member killed", func() error { return put(others, "killed", "1") })
	t.Logf("kill of %s: writes again after %v", victim, took.Round(time.Millisecond))
	if err := cl.Restart(ctx, victim); err != nil {
		t.Fatal(err)
	}
	if err := cl.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	// The restarted member has both its old data and what it missed.
	var addr string
	for _, n := range cl.Nodes() {
		if n.Name == victim {
			addr = n.Addr
		}
	}
	only := etcdClient(t, addr)
	eventually(t, waitDeadline, "the restarted member catches up", func() error {
		return only.hasKeys(ctx, "paused", "killed")
	})
}

// TestEtcdIsolateThroughMesh: a partition of a member's inbound "net" link
// isolates it (every peer connection into or out of it crosses that link):
// it loses leadership and serves no linearizable read, for longer than
// rafthttp's stream timeouts, while a client still reaches it; healing
// brings the cluster back.
func TestEtcdIsolateThroughMesh(t *testing.T) {
	// Not parallel (see TestEtcdStartsAndStops).
	mesh := proxy.NewMesh()
	t.Cleanup(func() { mesh.Close() })
	cl := startEtcd(t, mesh)
	ctx := context.Background()
	for _, n := range cl.Nodes() {
		l := mesh.Find("net", n.Name)
		if l == nil || l.Addr() != n.Announce {
			t.Fatalf("node %s: no inbound link at its peer address %s", n.Name, n.Announce)
		}
	}
	victim := leaderNow(t, cl)
	var victimAddr string
	for _, n := range cl.Nodes() {
		if n.Name == victim {
			victimAddr = n.Addr
		}
	}
	if err := mesh.Find("net", victim).Apply(proxy.Fault{Mode: proxy.Partition}); err != nil {
		t.Fatal(err)
	}
	cutAt := time.Now()
	t.Logf("cut the inbound link of leader %s", victim)

	others := etcdClient(t, addrsOf(cl, victim)...)
	took := eventually(t, waitDeadline, "a new leader among the others, taking writes", func() error {
		l, err := cl.Leader(ctx)
		if err != nil {
			return err
		}
		if l == victim {
			return fmt.Errorf("%s still leads", victim)
		}
		return put(others, "after-cut", "1")
	})
	t.Logf("a new leader and writes after %v", took.Round(time.Millisecond))

	// Past rafthttp's 5 s stream timeouts, after which it would fall back
	// to connections the isolated member dials itself. (A slow machine
	// only makes the member slower; no read may succeed however long.)
	only := etcdClient(t, victimAddr)
	var err error
	for time.Since(cutAt) < 7*time.Second {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err = only.get(rctx, "after-cut", false)
		cancel()
		if err == nil {
			t.Fatalf("the isolated member %s served a linearizable read %v after the cut", victim, time.Since(cutAt).Round(time.Millisecond))
		}
	}
	t.Logf("linearizable read on %s: %v", victim, err)
	// It still answers its clients, and (with no quorum to hear from)
	// steps down.
	eventually(t, waitDeadline, "the isolated "+victim+" answering its clients, no longer leading", func() error {
		st, err := cl.Status(ctx, victim)
		if err != nil {
			return err
		}
		if st.Leader == victim {
			return fmt.Errorf("%s still thinks it leads: %+v", victim, st)
		}
		return nil
	})
	c, err := net.DialTimeout("tcp", victimAddr, 10*time.Second)
	if err != nil {
		t.Fatalf("a client cannot dial %s: %v", victim, err)
	}
	c.Close()

	if err := mesh.HealAll(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cl.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("healthy %v after the heal", time.Since(start).Round(time.Millisecond))
	var found bool
	eventually(t, waitDeadline, "a linearizable read on "+victim+" after the heal", func() (err error) {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		found, err = only.get(rctx, "after-cut", false)
		return err
	})
	if !found {
		t.Fatalf("after the heal %s does not read after-cut", victim)
	}
}
