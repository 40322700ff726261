package examples_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/locks/extclient"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

// The cost of a lock client in another language, side by side in one run
// (go test ./examples -run x -bench Cycle): one client's acquire+release
// cycles on one redis-server, the Go token lock against the same lock in
// Python and Node over the client protocol, and the protocol alone (a
// client that answers without Redis), which is the harness's share.
func BenchmarkCycle(b *testing.B) {
	_, rdb := redistest.Start(b)
	addr := rdb.Options().Addr
	abs := func(p string) string { a, _ := filepath.Abs(p); return a }
	b.Run("go-token", func(b *testing.B) {
		l, err := locks.NewRedisLock(rdb, locks.Token, "g")
		if err != nil {
			b.Fatal(err)
		}
		cycles(b, l)
	})
	for _, c := range []struct {
		name string
		argv []string
	}{
		{"python-token", []string{"/usr/bin/python3", abs("python/token_lock.py")}},
		{"node-token", []string{"node", abs("node/token_lock.js")}},
		{"python-redispy", []string{"/usr/bin/python3", abs("python/redispy_lock.py")}},
		{"php-symfony", []string{"php", abs("php/symfony_lock.php")}},
		{"php-laravel", []string{"php", abs("php/laravel_lock.php")}},
		{"php-malkusch", []string{"php", abs("php/malkusch_lock.php")}},
		{"protocol-only", []string{"/usr/bin/python3", abs("../locks/extclient/testdata/badclient.py"), "noop"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			cl, err := extclient.Start(context.Background(), extclient.Options{Argv: c.argv, TTL: time.Second, OpTimeout: time.Second},
				[]extclient.Node{{Name: "n1", Addr: addr}}, 1)
			if err != nil {
				b.Skip(err) // the runtime or its redis library is missing: scripts/deps
			}
			defer cl.Close()
			cycles(b, cl)
		})
	}
}

// cycles runs b.N acquire+release cycles and reports them per second; a
// client that answers not-acquired (the protocol-only one) counts its
// acquire as the cycle.
func cycles(b *testing.B, l locks.Locker) {
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		lease, err := l.TryAcquire(ctx, fmt.Sprintf("bench-%d", i%8), time.Second)
		if errors.Is(err, locks.ErrNotAcquired) {
			continue
		}
		if err != nil {
			b.Fatal(err)
		}
		if err := lease.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cycles/s")
}
