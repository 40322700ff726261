package serverrecord_test

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/serverrecord"
	"github.com/lockjepsen/lockjepsen/testkit/opsbench"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

// BenchmarkMeans compares what each way of watching a node costs the
// lock's traffic: the bare acquire/release loop of 16 clients on 16 keys
// (opsbench.BareLoop) against one redis-server with nobody watching, with
// this package's observer (keyspace notifications, a GET and PTTL per
// set), and with a MONITOR client draining every command. Each iteration
// runs the three in turn, so that they share the machine's moment; the
// metrics are each one's cycles/s and redis-server's CPU per cycle.
func BenchmarkMeans(b *testing.B) {
	const d = 3 * time.Second
	means := []struct {
		name  string
		watch func(b *testing.B, addr string) (stop func())
	}{
		{"none", func(*testing.B, string) func() { return func() {} }},
		{"notify", watchNotify},
		{"monitor", watchMonitor},
	}
	sums := make([]opsbench.Result, len(means))
	for i := 0; i < b.N; i++ {
		for m, mean := range means {
			s, _ := redistest.Start(b)
			stop := mean.watch(b, s.Addr())
			res, err := opsbench.BareLoop(s.Addr(), 16, 16, d)
			stop()
			s.Stop()
			if err != nil {
				b.Fatal(err)
			}
			sums[m] = sums[m].Add(res)
		}
	}
	for m, mean := range means {
		b.ReportMetric(sums[m].PerSecond(), mean.name+"-cycles/s")
		b.ReportMetric(sums[m].ServerPerCycle(), mean.name+"-server-ns/op")
	}
}

func watchNotify(b *testing.B, addr string) func() {
	w, err := serverrecord.Create(filepath.Join(b.TempDir(), "server-record.jsonl.zst"))
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	obs := serverrecord.Start(context.Background(), []serverrecord.Node{{Name: "n1", Addr: addr}}, w,
		func() int64 { return int64(time.Since(start)) })
	return func() {
		if err := obs.Stop(); err != nil {
			b.Error(err)
		}
		if err := w.Close(); err != nil {
			b.Error(err)
		}
	}
}

func watchMonitor(b *testing.B, addr string) func() {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		io.Copy(io.Discard, conn)
	}()
	return func() {
		conn.Close()
		<-done
	}
}
