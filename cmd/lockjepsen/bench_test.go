package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/testkit/opsbench"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

// cliBenchArgs is issue 57's CLI run: 16 clients on 16 keys, no faults,
// zero hold and retry backoff, a 1 s TTL; a 5 s clock and no recovery
// keep the benchmark short.
var cliBenchArgs = []string{"test", "--system", "single", "--lock", "token", "--workload", "mutex", "--nemesis", "none",
	"--clients", "16", "--keys", "16", "--hold", "0", "--retry-backoff", "0", "--recovery", "0s", "--ttl", "1s", "--time-limit", "5s"}

// cliViolationArgs is a violation-heavy run of the same shape: setnx-del
// (a release with a plain DEL) under client pauses every 100 ms on
// average, with holds of up to 1 ms and a 100 ms TTL, so that a paused
// client wakes past its lease and deletes the next holder's key (about a
// hundred overlaps in 5 s, and thousands of stale-holder moments).
var cliViolationArgs = []string{"test", "--system", "single", "--lock", "setnx-del", "--workload", "mutex",
	"--nemesis", "client-pause", "--nemesis-interval", "100ms", "--clients", "16", "--keys", "16",
	"--hold", "0..1ms", "--retry-backoff", "0", "--recovery", "0s", "--ttl", "100ms", "--time-limit", "5s", "--expect", "any"}

// cliBenchClients and cliBenchKeys are the bare loop's, as the runs'.
const cliBenchClients, cliBenchKeys = 16, 16

// BenchmarkCLIOps runs the CLI's test command as a user would (its
// progress reporter included) for 5 s between two 2.5 s runs of a bare
// go-redis loop with the same clients and keys, so that a change in the
// machine's load weighs on both sides alike. Each iteration is a round,
// logged; the metrics are the rounds' sums: both rates and their ratio,
// and CPU per cycle of this process plus redis-server while the clients
// ran (total-ns/op; cpu-ns/op is this process's alone), with the CLI's
// whole run (start, check and report included) beside it.
func BenchmarkCLIOps(b *testing.B) { benchCLI(b, cliBenchArgs) }

// BenchmarkCLIOpsViolations is BenchmarkCLIOps with cliViolationArgs: the
// cost of a run whose checkers find violations, against the same bare
// loop (which neither holds nor pauses).
func BenchmarkCLIOpsViolations(b *testing.B) { benchCLI(b, cliViolationArgs) }

func benchCLI(b *testing.B, args []string) {
	s, _ := redistest.Start(b)
	var bare, cli, whole opsbench.Result
	barePart := func() opsbench.Result {
		var r opsbench.Result
		var err error
		side("bare", func() { r, err = opsbench.BareLoop(s.Addr(), cliBenchClients, cliBenchKeys, 2500*time.Millisecond) })
		if err != nil {
			b.Fatal(err)
		}
		bare = bare.Add(r)
		return r
	}
	for i := 0; i < b.N; i++ {
		bareRound := barePart()
		r, w, err := runCLIBench(b, args)
		if err != nil {
			b.Fatal(err)
		}
		cli, whole = cli.Add(r), whole.Add(w)
		bareRound = bareRound.Add(barePart())
		b.Logf("round %d: bare %.0f cycles/s, %.1f µs CPU a cycle (%.1f client + %.1f server); CLI %.0f cycles/s, %.1f µs (%.1f + %.1f), whole run %.1f µs; CPU ratio %.2f, rate ratio %.2f",
			i+1, bareRound.PerSecond(), bareRound.TotalPerCycle()/1e3, bareRound.CPUPerCycle()/1e3, bareRound.ServerPerCycle()/1e3,
			r.PerSecond(), r.TotalPerCycle()/1e3, r.CPUPerCycle()/1e3, r.ServerPerCycle()/1e3, w.TotalPerCycle()/1e3,
			r.TotalPerCycle()/bareRound.TotalPerCycle(), r.PerSecond()/bareRound.PerSecond())
	}
	b.ReportMetric(cli.PerSecond(), "cli-cycles/s")
	b.ReportMetric(bare.PerSecond(), "bare-cycles/s")
	b.ReportMetric(cli.PerSecond()/bare.PerSecond(), "ratio")
	b.ReportMetric(cli.CPUPerCycle(), "cli-cpu-ns/op")
	b.ReportMetric(bare.CPUPerCycle(), "bare-cpu-ns/op")
	b.ReportMetric(cli.TotalPerCycle(), "cli-total-ns/op")
	b.ReportMetric(whole.TotalPerCycle(), "cli-whole-ns/op")
	b.ReportMetric(bare.TotalPerCycle(), "bare-total-ns/op")
	b.ReportMetric(cli.TotalPerCycle()/bare.TotalPerCycle(), "cpu-ratio")
}

// runCLIBench runs args through the CLI's entry point and reads the rate
// from the run's results: the window while the clients ran, and the
// whole run.
func runCLIBench(b *testing.B, args []string) (window, whole opsbench.Result, err error) {
	var stdout bytes.Buffer
	w := &opsbench.Window{}
	args = append(args[:len(args):len(args)], "--store", b.TempDir(), "--json")
	srv0, err := opsbench.ChildrenCPU()
	if err != nil {
		return window, whole, err
	}
	cpu0 := opsbench.CPU()
	var code int
	side("cli", func() { code = run(args, &stdout, w) })
	cpu := opsbench.CPU() - cpu0
	srv1, err := opsbench.ChildrenCPU()
	if err != nil {
		return window, whole, err
	}
	if code != exitMet {
		return window, whole, fmt.Errorf("lockjepsen %v: exit %d", args, code)
	}
	res, err := readCLIResults(stdout.Bytes())
	if err != nil {
		return window, whole, err
	}
	window = opsbench.Result{
		Cycles:  int64(res.Liveness.AcquireAttempts),
		Grants:  int64(res.Liveness.AcquireOK),
		Elapsed: time.Duration(res.Stats.Duration),
	}
	whole = window
	whole.CPU, whole.Server = cpu, srv1-srv0
	if window.CPU, err = w.CPU(); err != nil {
		return window, whole, err
	}
	if window.Server, err = w.ServerCPU(); err != nil {
		return window, whole, err
	}
	return window, whole, nil
}

// side runs f with the profiler's label side=name, which the goroutines
// it starts inherit: go tool pprof -tagfocus side=cli shows the CLI's part
// of a -cpuprofile alone.
func side(name string, f func()) {
	pprof.Do(context.Background(), pprof.Labels("side", name), func(context.Context) { f() })
}

// readCLIResults reads the results of the run that the CLI's --json
// output names.
func readCLIResults(stdout []byte) (*harness.Results, error) {
	var out struct {
		Dir string `json:"dir"`
	}
	if err := json.Unmarshal(stdout, &out); err != nil {
		return nil, fmt.Errorf("read the CLI's --json output: %w", err)
	}
	raw, err := os.ReadFile(filepath.Join(out.Dir, harness.ResultsFile))
	if err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	var res harness.Results
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	return &res, nil
}
