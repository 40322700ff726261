package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/testkit/opsbench"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

// cliBenchArgs is the CLI run: the default 10 clients and no
// faults, 16 keys, zero hold and retry backoff; a 5 s clock and no
// recovery keep the benchmark short.
var cliBenchArgs = []string{"test", "--keys", "16", "--hold", "0", "--retry-backoff", "0", "--time-limit", "5s", "--recovery", "0"}

// BenchmarkCLIOps runs the CLI's test command as a user would (its
// progress reporter included) for 5 s between two 2.5 s runs of a bare
// go-redis loop with the same clients and keys, so that a change in the
// machine's load weighs on both sides alike, and reports both rates,
// their ratio and this process's CPU per cycle for each. Only the
// clients' running time is measured: starting the server, the check and
// the report are not.
func BenchmarkCLIOps(b *testing.B) {
	s, _ := redistest.Start(b)
	clients := harness.DefaultConfig().Clients
	var bare, cli opsbench.Result
	barePart := func() {
		r, err := opsbench.BareLoop(s.Addr(), clients, 16, 2500*time.Millisecond)
		if err != nil {
			b.Fatal(err)
		}
		bare = bare.Add(r)
	}
	for i := 0; i < b.N; i++ {
		barePart()
		r, err := runCLIBench(b)
		if err != nil {
			b.Fatal(err)
		}
		cli = cli.Add(r)
		barePart()
	}
	b.ReportMetric(cli.PerSecond(), "cli-cycles/s")
	b.ReportMetric(bare.PerSecond(), "bare-cycles/s")
	b.ReportMetric(cli.PerSecond()/bare.PerSecond(), "ratio")
	b.ReportMetric(cli.CPUPerCycle(), "cli-cpu-ns/op")
	b.ReportMetric(bare.CPUPerCycle(), "bare-cpu-ns/op")
}

// runCLIBench runs cliBenchArgs through the CLI's entry point and reads
// the rate from the run's results.
func runCLIBench(b *testing.B) (opsbench.Result, error) {
	var stdout bytes.Buffer
	w := &opsbench.Window{}
	args := append(cliBenchArgs[:len(cliBenchArgs):len(cliBenchArgs)], "--store", b.TempDir(), "--json")
	if code := run(args, &stdout, w); code != exitMet {
		return opsbench.Result{}, fmt.Errorf("lockjepsen %v: exit %d", args, code)
	}
	var out struct {
		Dir string `json:"dir"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		return opsbench.Result{}, fmt.Errorf("read the CLI's --json output: %w", err)
	}
	raw, err := os.ReadFile(filepath.Join(out.Dir, harness.ResultsFile))
	if err != nil {
		return opsbench.Result{}, fmt.Errorf("read results: %w", err)
	}
	var res harness.Results
	if err := json.Unmarshal(raw, &res); err != nil {
		return opsbench.Result{}, fmt.Errorf("read results: %w", err)
	}
	cpu, err := w.CPU()
	if err != nil {
		return opsbench.Result{}, err
	}
	return opsbench.Result{
		Cycles:  int64(res.Liveness.AcquireAttempts),
		Grants:  int64(res.Liveness.AcquireOK),
		Elapsed: time.Duration(res.Stats.Duration),
		CPU:     cpu,
	}, nil
}
