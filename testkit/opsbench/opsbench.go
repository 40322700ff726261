// Package opsbench measures what the harness costs next to a bare go-redis
// loop: acquire cycles per second and this process's CPU time per cycle.
// On a 2-core machine every nanosecond the harness spends is taken from
// redis-server, so CPU per cycle, not only throughput, is the figure to
// compare. It is shared by the harness's and the CLI's benchmarks.
package opsbench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand"
	"regexp"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/locks"
)

// CPU is the user plus system time this process has used (not its
// children's: redis-server is not counted).
func CPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Result is one measured loop. A cycle is one acquire attempt, plus its
// release when it was granted.
type Result struct {
	Cycles, Grants int64
	Elapsed        time.Duration // the clients' running time
	CPU            time.Duration // this process's CPU over the same window
	// Server is the CPU of this process's child processes (redis-server)
	// over the same window.
	Server time.Duration
}

// Add sums two results, for benchmarks that run several iterations.
func (r Result) Add(o Result) Result {
	return Result{r.Cycles + o.Cycles, r.Grants + o.Grants, r.Elapsed + o.Elapsed, r.CPU + o.CPU, r.Server + o.Server}
}

// PerSecond is cycles per second.
func (r Result) PerSecond() float64 { return float64(r.Cycles) / r.Elapsed.Seconds() }

// GrantsPerSecond is granted acquires per second.
func (r Result) GrantsPerSecond() float64 { return float64(r.Grants) / r.Elapsed.Seconds() }

// CPUPerCycle is this process's CPU nanoseconds per cycle.
func (r Result) CPUPerCycle() float64 { return float64(r.CPU) / float64(r.Cycles) }

// ServerPerCycle is the child processes' (redis-server's) CPU nanoseconds
// per cycle.
func (r Result) ServerPerCycle() float64 { return float64(r.Server) / float64(r.Cycles) }

// TotalPerCycle is the CPU nanoseconds per cycle of this process and
// redis-server together: on 2 cores, the figure that decides how many
// cycles a run makes.
func (r Result) TotalPerCycle() float64 { return float64(r.CPU+r.Server) / float64(r.Cycles) }

// Keys are the lock names the harness uses for n keys.
func Keys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("lock-%d", i)
	}
	return keys
}

// BareLoop does what the harness's clients do, with go-redis alone: per
// client, SET NX PX on a random key and, if granted, the Lua
// compare-and-delete, for d against the server at addr (a loopback test
// server). Nothing is recorded.
func BareLoop(addr string, clients, nkeys int, d time.Duration) (Result, error) {
	keys := Keys(nkeys)
	lks := make([]locks.Locker, clients)
	for c := range lks {
		rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DisableIdentity: true, PoolSize: 2})
		defer rdb.Close()
		l, err := locks.NewRedisLock(rdb, locks.Token, fmt.Sprintf("p%d", c))
		if err != nil {
			return Result{}, fmt.Errorf("bare loop client %d: %w", c, err)
		}
		lks[c] = l
	}
	var cycles, grants atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	srv0, err := ChildrenCPU()
	if err != nil {
		return Result{}, err
	}
	cpu0, t0 := CPU(), time.Now()
	for c, l := range lks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewSource(int64(c)))
			for ctx.Err() == nil {
				lease, err := l.TryAcquire(ctx, keys[r.Intn(len(keys))], 500*time.Millisecond)
				cycles.Add(1)
				if err == nil {
					grants.Add(1)
					lease.Release(ctx)
				}
			}
		}()
	}
	wg.Wait()
	cpu, elapsed := CPU()-cpu0, time.Since(t0)
	srv1, err := ChildrenCPU()
	if err != nil {
		return Result{}, err
	}
	return Result{cycles.Load(), grants.Load(), elapsed, cpu, srv1 - srv0}, nil
}

// Window is the harness's progress writer for a benchmark: it notes this
// process's CPU when the harness says the clients start ("running ...")
// and when they stop, so that the CPU of starting servers, and of a check
// after the run, is left out (a check alongside the run is counted), and passes every line on to Next.
type Window struct {
	Next       io.Writer
	mu         sync.Mutex
	start, end time.Duration
	// The children's CPU at the same two lines, and the first error
	// reading it.
	srvStart, srvEnd time.Duration
	srvErr           error
}

// Write notes the window's edges. The children are read before this
// process at the start and after it at the end, so that reading /proc is
// not counted as the harness's CPU.
func (w *Window) Write(p []byte) (int, error) {
	w.mu.Lock()
	switch {
	case w.start == 0 && bytes.Contains(p, []byte("running ")):
		var err error
		w.srvStart, err = ChildrenCPU()
		w.start = CPU()
		w.noteErr(err)
	case w.end == 0 && checkLine.Match(p):
		w.end = CPU()
		var err error
		w.srvEnd, err = ChildrenCPU()
		w.noteErr(err)
	}
	w.mu.Unlock()
	if w.Next == nil {
		return len(p), nil
	}
	return w.Next.Write(p)
}

// checkLine is the harness's line as its clients stop: the check ran
// alongside them, or starts now.
var checkLine = regexp.MustCompile(`check(ed|ing) the (stored )?history`)

// CPU is the CPU used between the two lines; an error if either was not
// seen.
func (w *Window) CPU() (time.Duration, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.start == 0 || w.end == 0 {
		return 0, fmt.Errorf("the harness did not say when its clients ran (start %v, end %v)", w.start, w.end)
	}
	return w.end - w.start, nil
}

// ServerCPU is the child processes' CPU between the two lines: the
// harness's redis-server, which has stopped by the second one (then
// getrusage counts it), plus whatever other children ran.
func (w *Window) ServerCPU() (time.Duration, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.srvErr != nil {
		return 0, w.srvErr
	}
	return w.srvEnd - w.srvStart, nil
}

func (w *Window) noteErr(err error) {
	if w.srvErr == nil {
		w.srvErr = err
	}
}
