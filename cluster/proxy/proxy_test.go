package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	zlog "github.com/rs/zerolog/log"

	"github.com/lockjepsen/lockjepsen/internal/redistest"
)

// newMesh starts a redis-server and a mesh whose links all lead to it.
func newMesh(t *testing.T) (*Mesh, string) {
	t.Helper()
	srv, _ := redistest.Start(t)
	m := NewMesh()
	t.Cleanup(func() { m.Close() })
	return m, srv.Addr()
}

func addLink(t *testing.T, m *Mesh, from, to, upstream string) *Link {
	t.Helper()
	l, err := m.Add(from, to, upstream, "")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// client dials through a link. Retries are off so every failure is seen,
// and timeouts are short so a black hole shows up quickly.
func client(t *testing.T, addr string, timeout time.Duration) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr: addr, MaxRetries: -1, DisableIdentity: true, ContextTimeoutEnabled: true,
		DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout, DialerRetries: 1,
		PoolSize: 4,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

func timed(f func() error) (time.Duration, error) {
	start := time.Now()
	err := f()
	return time.Since(start), err
}

// eventually polls f until it succeeds or the deadline passes.
func eventually(t *testing.T, within time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still failing after %v: %v", within, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func healWithin(t *testing.T, l *Link, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	elapsed, err := timed(func() error { return l.Heal(ctx) })
	if err != nil {
		t.Fatalf("heal %s: %v", l, err)
	}
	if elapsed > d+50*time.Millisecond {
		t.Fatalf("heal %s took %v, deadline was %v", l, elapsed, d)
	}
	if f, ok := l.Fault(); ok {
		t.Fatalf("link %s still has fault %s after heal", l, f)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

func TestHealthyLinkForwards(t *testing.T) {
	t.Parallel()
	m, up := newMesh(t)
	l := addLink(t, m, "c1", "n1", up)
	if m.Find("c1", "n1") != l || m.Find("n1", "c1") != nil {
		t.Fatal("Find does not return the link")
	}
	c := client(t, l.Addr(), time.Second)
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("GET k = %q, %v", v, err)
	}
	if _, ok := l.Fault(); ok {
		t.Fatal("new link has a fault")
	}
}

func TestPartitionCutsOnlyThatLink(t *testing.T) {
	t.Parallel()
	m, up := newMesh(t)
	cut := addLink(t, m, "c1", "n1", up)
	other := addLink(t, m, "c2", "n1", up)
	cc := client(t, cut.Addr(), 300*time.Millisecond)
	oc := client(t, other.Addr(), 300*time.Millisecond)
	ctx := context.Background()
	// A pooled connection and a fresh one must both be cut.
	if err := cc.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	fresh := client(t, cut.Addr(), 300*time.Millisecond)

	if err := cut.Apply(Fault{Mode: Partition}); err != nil {
		t.Fatal(err)
	}
	if f, ok := cut.Fault(); !ok || f.Mode != Partition {
		t.Fatalf("Fault() = %v, %v", f, ok)
	}
	for name, c := range map[string]*redis.Client{"pooled": cc, "fresh": fresh} {
		elapsed, err := timed(func() error { return c.Ping(ctx).Err() })
		if err == nil || !isTimeout(err) {
			t.Fatalf("%s connection: PING through cut link: err %v, want a timeout", name, err)
		}
		if elapsed < 250*time.Millisecond {
			t.Fatalf("%s connection: PING failed after %v, before its timeout: not a black hole", name, elapsed)
		}
	}
	if err := oc.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING through the other link to the same node: %v", err)
	}

	healWithin(t, cut, time.Second)
	eventually(t, 2*time.Second, func() error { return cc.Ping(ctx).Err() })
	eventually(t, 2*time.Second, func() error { return fresh.Ping(ctx).Err() })
}

func TestRejectFailsPromptly(t *testing.T) {
	t.Parallel()
	m, up := newMesh(t)
	l := addLink(t, m, "c1", "n1", up)
	const timeout = 2 * time.Second
	pooled := client(t, l.Addr(), timeout)
	ctx := context.Background()
	if err := pooled.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	fresh := client(t, l.Addr(), timeout)

	if err := l.Apply(Fault{Mode: Reject}); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*redis.Client{"pooled": pooled, "fresh": fresh} {
		elapsed, err := timed(func() error { return c.Ping(ctx).Err() })
		if err == nil {
			t.Fatalf("%s connection: PING through rejecting link succeeded", name)
		}
		if isTimeout(err) || elapsed > timeout/4 {
			t.Fatalf("%s connection: PING failed after %v with %v, want a prompt connection error", name, elapsed, err)
		}
		if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.EOF) && !errors.Is(err, syscall.EPIPE) {
			t.Fatalf("%s connection: %v is not a connection error", name, err)
		}
		t.Logf("%s connection: %v after %v", name, err, elapsed)
	}
	healWithin(t, l, time.Second)
	eventually(t, 2*time.Second, func() error { return pooled.Ping(ctx).Err() })
}

func TestLatencyAndHeal(t *testing.T) {
	t.Parallel()
	m, up := newMesh(t)
	l := addLink(t, m, "c1", "n1", up)
	c := client(t, l.Addr(), time.Second)
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Apply(Fault{Mode: Latency, Latency: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		elapsed, err := timed(func() error { return c.Ping(ctx).Err() })
		if err != nil {
			t.Fatal(err)
		}
		if elapsed < 100*time.Millisecond {
			t.Fatalf("PING under 100ms latency took %v", elapsed)
		}
	}
	// Replacing the fault takes effect on the open connection.
	if err := l.Apply(Fault{Mode: Latency, Latency: 200 * time.Millisecond, Jitter: 10 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if elapsed, err := timed(func() error { return c.Ping(ctx).Err() }); err != nil || elapsed < 190*time.Millisecond {
		t.Fatalf("PING under 200ms±10ms latency: %v after %v", err, elapsed)
	}
	healWithin(t, l, time.Second)
	eventually(t, 2*time.Second, func() error {
		elapsed, err := timed(func() error { return c.Ping(ctx).Err() })
		if err == nil && elapsed >= 50*time.Millisecond {
			return errors.New("PING still slow: " + elapsed.String())
		}
		return err
	})
}

func TestSlowLimitsBandwidth(t *testing.T) {
	t.Parallel()
	srv, direct := redistest.Start(t)
	m := NewMesh()
	t.Cleanup(func() { m.Close() })
	l := addLink(t, m, "c1", "n1", srv.Addr())
	ctx := context.Background()
	value := strings.Repeat("x", 100_000)
	if err := direct.Set(ctx, "big", value, 0).Err(); err != nil {
		t.Fatal(err)
	}
	c := client(t, l.Addr(), 10*time.Second)
	get := func() error {
		v, err := c.Get(ctx, "big").Result()
		if err == nil && v != value {
			return errors.New("GET big returned a different value")
		}
		return err
	}
	fast, err := timed(get)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Apply(Fault{Mode: Slow, RateKBps: 50}); err != nil {
		t.Fatal(err)
	}
	slow, err := timed(get)
	if err != nil {
		t.Fatal(err)
	}
	// 100 KB at 50 KB/s is 2s.
	if slow < 1500*time.Millisecond {
		t.Fatalf("GET of 100KB at 50KB/s took %v (healthy: %v)", slow, fast)
	}
	t.Logf("GET of 100KB: healthy %v, at 50KB/s %v", fast, slow)
	healWithin(t, l, time.Second)
	if again, err := timed(get); err != nil || again > 500*time.Millisecond {
		t.Fatalf("GET after heal: %v after %v", err, again)
	}
}

// TestHealUnderTraffic is Shopify/toxiproxy#558: with traffic flowing, and
// clients giving up on replies a fault held back, removing a toxic can hang.
// Heal must still return by its deadline every time and leave a working link.
func TestHealUnderTraffic(t *testing.T) {
	t.Parallel()
	m, up := newMesh(t)
	l := addLink(t, m, "c1", "n1", up)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var ok, failed atomic.Int64
	for i := range 6 {
		// Read timeouts shorter than the latency make clients close
		// connections with replies still inside the toxic: the #558 trigger.
		c := client(t, l.Addr(), 40*time.Millisecond)
		wg.Go(func() {
			key := "k" + string(rune('a'+i))
			for ctx.Err() == nil {
				if err := c.Set(ctx, key, strings.Repeat("v", 2000), 0).Err(); err != nil {
					failed.Add(1)
					continue
				}
				if err := c.Get(ctx, key).Err(); err != nil {
					failed.Add(1)
					continue
				}
				ok.Add(1)
			}
		})
	}
	faults := []Fault{
		{Mode: Partition},
		{Mode: Latency, Latency: 60 * time.Millisecond, Jitter: 30 * time.Millisecond},
		{Mode: Slow, RateKBps: 20},
		{Mode: Reject},
	}
	const rounds = 12
	const deadline = 300 * time.Millisecond
	for i := range rounds {
		f := faults[i%len(faults)]
		if err := l.Apply(f); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		time.Sleep(80 * time.Millisecond) // let traffic pile up inside the fault
		hctx, cancel := context.WithTimeout(context.Background(), deadline)
		elapsed, err := timed(func() error { return l.Heal(hctx) })
		cancel()
		if err != nil {
			t.Fatalf("round %d: heal %s: %v", i, f, err)
		}
		if elapsed > deadline+20*time.Millisecond {
			t.Fatalf("round %d: heal %s took %v, deadline %v", i, f, elapsed, deadline)
		}
		time.Sleep(30 * time.Millisecond)
	}
	stop()
	wg.Wait()
	t.Logf("%d ok / %d failed requests, %d fallbacks to reset", ok.Load(), failed.Load(), l.Resets())
	c := client(t, l.Addr(), time.Second)
	eventually(t, 2*time.Second, func() error { return c.Ping(context.Background()).Err() })
}

// TestHealFallsBackWhenRemoveToxicHangs builds a #558 wedge on purpose: a
// client that sends requests but does not read their replies backs the
// reply stream up into the latency toxic, which then blocks handing on a
// chunk and cannot be interrupted, so RemoveToxic hangs for as long as the
// client keeps not reading.
func TestHealFallsBackWhenRemoveToxicHangs(t *testing.T) {
	t.Parallel()
	srv, direct := redistest.Start(t)
	m := NewMesh()
	t.Cleanup(func() { m.Close() })
	l := addLink(t, m, "c1", "n1", srv.Addr())
	ctx := context.Background()
	if err := direct.Set(ctx, "big", strings.Repeat("x", 1<<20), 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Apply(Fault{Mode: Latency, Latency: 10 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	stuck, err := net.Dial("tcp", l.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	// 30 MB of replies: far more than the socket buffers on the way hold.
	if _, err := stuck.Write(bytes.Repeat([]byte("GET big\r\n"), 30)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // let the replies back up into the toxic

	hctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	elapsed, err := timed(func() error { return l.Heal(hctx) })
	if err != nil {
		t.Fatal(err)
	}
	if elapsed > 320*time.Millisecond {
		t.Fatalf("heal took %v", elapsed)
	}
	if l.Resets() != 1 {
		t.Fatalf("resets = %d: toxiproxy removed the toxic although the reply stream was stuck; the test no longer reproduces #558", l.Resets())
	}
	// The fallback closed the stuck client's connection.
	stuck.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.Copy(io.Discard, stuck); isTimeout(err) {
		t.Fatal("stuck connection still open after the fallback")
	}
	c := client(t, l.Addr(), time.Second)
	if d, err := timed(func() error { return c.Ping(ctx).Err() }); err != nil || d > 100*time.Millisecond {
		t.Fatalf("PING after heal: %v after %v", err, d)
	}
	// A fault applied after the fallback works on the fresh proxy.
	if err := l.Apply(Fault{Mode: Latency, Latency: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if d, err := timed(func() error { return c.Ping(ctx).Err() }); err != nil || d < 50*time.Millisecond {
		t.Fatalf("PING under latency after fallback: %v after %v", err, d)
	}
}

func TestCloseLeavesNoListener(t *testing.T) {
	t.Parallel()
	m, up := newMesh(t)
	a := addLink(t, m, "c1", "n1", up)
	b := addLink(t, m, "c2", "n1", up)
	if got := m.Links(); len(got) != 2 || got[0] != a || got[1] != b {
		t.Fatalf("Links() = %v, want creation order", got)
	}
	open, err := net.Dial("tcp", a.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if _, err := open.Write([]byte("PING\r\n")); err != nil {
		t.Fatal(err)
	}
	if reply, err := bufio.NewReader(open).ReadString('\n'); err != nil || reply != "+PONG\r\n" {
		t.Fatalf("PING: %q, %v", reply, err)
	}
	if err := b.Apply(Fault{Mode: Partition}); err != nil {
		t.Fatal(err)
	}
	// Force a fallback so that an abandoned toxiproxy proxy exists too.
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Heal(expired); err != nil {
		t.Fatal(err)
	}
	if b.Resets() != 1 {
		t.Fatalf("heal with an expired context did not fall back: resets %d", b.Resets())
	}
	addrs := []string{a.Addr(), b.Addr(), a.backend, b.backend}

	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for _, addr := range addrs {
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conn.Close()
			t.Fatalf("%s still accepts connections after Close", addr)
		}
	}
	open.SetReadDeadline(time.Now().Add(time.Second))
	if n, err := open.Read(make([]byte, 1)); isTimeout(err) || n > 0 {
		t.Fatalf("connection through a closed mesh still open: %d, %v", n, err)
	}
	if err := a.Apply(Fault{Mode: Partition}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Apply after Close: %v, want ErrClosed", err)
	}
	if err := a.Heal(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Heal after Close: %v, want ErrClosed", err)
	}
	if _, err := m.Add("c3", "n1", up, ""); !errors.Is(err, ErrClosed) {
		t.Fatalf("Add after Close: %v, want ErrClosed", err)
	}
}

func TestHealAllAndDuplicates(t *testing.T) {
	t.Parallel()
	m, up := newMesh(t)
	a := addLink(t, m, "c1", "n1", up)
	b := addLink(t, m, "c2", "n1", up)
	if _, err := m.Add("c1", "n1", up, ""); err == nil {
		t.Fatal("duplicate link accepted")
	}
	if _, err := m.Add("c3", "n1", "no-port", ""); err == nil {
		t.Fatal("upstream without port accepted")
	}
	for _, l := range []*Link{a, b} {
		if err := l.Apply(Fault{Mode: Partition}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := m.HealAll(ctx); err != nil {
		t.Fatal(err)
	}
	for _, l := range m.Links() {
		if f, ok := l.Fault(); ok {
			t.Fatalf("%s still has %s", l, f)
		}
		c := client(t, l.Addr(), time.Second)
		eventually(t, 2*time.Second, func() error { return c.Ping(context.Background()).Err() })
	}
}

func TestFaultValidateAndString(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	for _, tc := range []struct {
		f    Fault
		str  string
		want string // substring of the error; "" means valid
	}{
		{Fault{Mode: Partition}, "partition", ""},
		{Fault{Mode: Reject}, "reject", ""},
		{Fault{Mode: Latency, Latency: 200 * ms, Jitter: 50 * ms}, "latency 200ms±50ms", ""},
		{Fault{Mode: Latency, Latency: 100 * ms}, "latency 100ms", ""},
		{Fault{Mode: Slow, RateKBps: 50}, "slow 50KB/s", ""},
		{Fault{Mode: "flaky"}, `"flaky"`, "unknown fault mode"},
		{Fault{}, `""`, "unknown fault mode"},
		{Fault{Mode: Latency, Latency: -ms}, "latency -1ms", "negative"},
		{Fault{Mode: Latency, Latency: 10 * ms, Jitter: -ms}, "latency 10ms±-1ms", "negative"},
		{Fault{Mode: Latency}, "latency 0s", "at least 1ms"},
		{Fault{Mode: Latency, Latency: 10 * ms, Jitter: 20 * ms}, "latency 10ms±20ms", "jitter must not exceed"},
		{Fault{Mode: Latency, Latency: 10 * ms, RateKBps: 5}, "latency 10ms", "takes no rate"},
		{Fault{Mode: Slow}, "slow 0KB/s", "rate must be positive"},
		{Fault{Mode: Slow, RateKBps: -1}, "slow -1KB/s", "negative rate"},
		{Fault{Mode: Slow, RateKBps: 5, Latency: ms}, "slow 5KB/s", "takes no latency"},
		{Fault{Mode: Partition, Latency: ms}, "partition", "takes no latency"},
	} {
		if got := tc.f.String(); got != tc.str {
			t.Errorf("%#v.String() = %q, want %q", tc.f, got, tc.str)
		}
		err := tc.f.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: unexpected error %v", tc.f, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want one containing %q", tc.f, err, tc.want)
		}
	}
}

func TestApplyRejectsInvalidFault(t *testing.T) {
	t.Parallel()
	m, up := newMesh(t)
	l := addLink(t, m, "c1", "n1", up)
	err := l.Apply(Fault{Mode: Slow})
	if err == nil || !strings.Contains(err.Error(), "c1->n1") {
		t.Fatalf("Apply(invalid) = %v, want an error naming the link", err)
	}
	if _, ok := l.Fault(); ok {
		t.Fatal("invalid fault recorded")
	}
}

// TestSilent checks that toxiproxy's logging cannot leak through the
// process-wide zerolog loggers, even when a user turned them up to trace.
// It changes zerolog globals, so it is not parallel (parallel tests start
// only after it has finished and restored them).
func TestSilent(t *testing.T) {
	var buf safeBuffer
	sink := zerolog.New(&buf).Level(zerolog.TraceLevel)
	oldCtx, oldGlobal, oldLevel := zerolog.DefaultContextLogger, zlog.Logger, zerolog.GlobalLevel()
	zerolog.DefaultContextLogger, zlog.Logger = &sink, sink
	zerolog.SetGlobalLevel(zerolog.TraceLevel)
	t.Cleanup(func() {
		zerolog.DefaultContextLogger, zlog.Logger = oldCtx, oldGlobal
		zerolog.SetGlobalLevel(oldLevel)
	})

	m, up := newMesh(t)
	l := addLink(t, m, "c1", "n1", up)
	c := client(t, l.Addr(), time.Second)
	for _, f := range []Fault{{Mode: Slow, RateKBps: 100}, {Mode: Latency, Latency: 5 * time.Millisecond}, {Mode: Partition}} {
		if err := l.Apply(f); err != nil {
			t.Fatal(err)
		}
		_ = c.Ping(context.Background()).Err()
		healWithin(t, l, time.Second)
		eventually(t, 2*time.Second, func() error { return c.Ping(context.Background()).Err() })
	}
	m.Close()
	if buf.Len() != 0 {
		t.Fatalf("toxiproxy logged through zerolog globals:\n%s", buf.String())
	}
}

type safeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *safeBuffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}

func (s *safeBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Drop loses what is in flight and closes the link's connections, but the
// link's fault stays for new connections.
func TestDropLosesInFlightBytesAndKeepsTheFault(t *testing.T) {
	t.Parallel()
	m, up := newMesh(t)
	l := addLink(t, m, "net", "n1", up)
	c := client(t, l.Addr(), 2*time.Second)
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Apply(Fault{Mode: Latency, Latency: 500 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	// A reply is held in the latency toxic when the link is dropped.
	res := make(chan error, 1)
	go func() { res <- c.Ping(ctx).Err() }()
	time.Sleep(100 * time.Millisecond) // let the reply reach the toxic
	if err := l.Drop(); err != nil {
		t.Fatal(err)
	}
	if err := <-res; err == nil {
		t.Fatal("a reply in flight was delivered after Drop")
	}
	if f, ok := l.Fault(); !ok || f.Mode != Latency {
		t.Fatalf("fault after Drop: %v %v", f, ok)
	}
	if elapsed, err := timed(func() error { return c.Ping(ctx).Err() }); err != nil || elapsed < 500*time.Millisecond {
		t.Fatalf("a new connection after Drop: %v after %v, want the latency still in force", err, elapsed)
	}
}
