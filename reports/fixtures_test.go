package reports_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

// scratch is a directory for the whole test binary: the real runs are
// made once and shared by every test that looks at them.
var scratch string

func TestMain(m *testing.M) {
	var err error
	scratch, err = os.MkdirTemp("", "lockjepsen-reports-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(scratch)
	os.Exit(code)
}

// realRun is a run made by the real harness on real redis-server.
type realRun struct {
	name string
	dir  string
	res  *harness.Results
}

var (
	realOnce sync.Once
	realList []realRun
	realErr  error
)

// realStore is the store of the real runs.
func realStore() string { return filepath.Join(scratch, "store") }

// realRuns makes, once, the runs a reviewer would look at: a lock that
// breaks (DEL release under client and server pauses), a lock that looks
// fine while the data does not (counter under token with GC pauses), and a
// lock that gets stuck (no TTL, crashed holder). They run in parallel for
// about four seconds.
func realRuns(t *testing.T) []realRun {
	t.Helper()
	redistest.RequireBinary(t)
	realOnce.Do(func() {
		cases := []struct {
			name string
			edit func(*harness.Config)
		}{
			{"unsafe", func(c *harness.Config) {
				c.Lock = locks.SetnxDel
				c.Nemesis = []string{"client-pause", "pause"}
				c.LongHoldRate = 0.05 // holds past the TTL: violations for sure
			}},
			{"resource", func(c *harness.Config) {
				c.Workload = "counter"
				c.Nemesis = []string{"client-pause"}
			}},
			{"stuck", func(c *harness.Config) {
				c.Lock = locks.SetnxNoTTL
				c.Nemesis = []string{"client-crash"}
			}},
		}
		realList = make([]realRun, len(cases))
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i, tc := range cases {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cfg := harness.DefaultConfig()
				// One store each: harness runs sharing a store race on store/latest.
				cfg.Store = filepath.Join(realStore(), tc.name)
				cfg.TimeLimit, cfg.Recovery = 2500*time.Millisecond, 1500*time.Millisecond
				cfg.NemesisInterval = 400 * time.Millisecond
				cfg.Expect = harness.ExpectAny
				cfg.Command = []string{"lockjepsen", "test", "--name", tc.name}
				cfg.Name = tc.name
				tc.edit(&cfg)
				out, err := harness.Run(context.Background(), cfg)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					realErr = fmt.Errorf("%s: %w", tc.name, err)
					return
				}
				realList[i] = realRun{name: tc.name, dir: out.Dir, res: out.Results}
			}()
		}
		wg.Wait()
	})
	if realErr != nil {
		t.Fatal(realErr)
	}
	return realList
}

// writeRunFiles writes a run directory from parts: a config, a run.json
// (nil: none, as a run the harness never finished) and events.
func writeRunFiles(t testing.TB, dir string, cfg harness.Config, info *harness.RunInfo, ops []history.Op) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeJSON(t, filepath.Join(dir, harness.ConfigFile), cfg)
	if info != nil {
		writeJSON(t, filepath.Join(dir, harness.RunInfoFile), info)
	}
	f, err := os.Create(filepath.Join(dir, harness.HistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var b []byte
	for i := range ops {
		ops[i].Index = int64(i)
		b = history.AppendJSON(b[:0], &ops[i])
		b = append(b, '\n')
		w.Write(b)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func writeJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func fixtureConfig(name string) harness.Config {
	cfg := harness.DefaultConfig()
	cfg.TTL = cfg.TTLOrDefault() // as a run records it
	cfg.Name = name
	cfg.Clients = 3
	cfg.TimeLimit, cfg.Recovery = 2*time.Second, time.Second
	cfg.Command = []string{"lockjepsen", "test", "--name", name}
	return cfg
}

func fixtureInfo() *harness.RunInfo {
	return &harness.RunInfo{Started: time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC), Ended: time.Date(2026, 11, 29, 9, 0, 3, 0, time.UTC),
		RedisVersion: "7.0.15", Backend: "local"}
}

// oddRuns writes runs that are not whole, under dir: each must still
// render, and say what is wrong.
func oddRuns(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	acq := func(t int64, p int, typ history.Type, v *history.Value) history.Op {
		return history.Op{Time: t, Process: p, Type: typ, F: history.Acquire, Key: "lock-0", Value: v}
	}
	// A run that never finished and was never checked: no run.json, no
	// results.json, a history whose last line is cut.
	{
		d := filepath.Join(dir, "unchecked", "20261129T090000.000Z")
		ops := []history.Op{
			acq(1000, 0, history.Invoke, &history.Value{TTL: 5e8}),
			acq(200000, 0, history.OK, &history.Value{Token: "p0.1", ValidUntil: history.I64(4e8)}),
		}
		writeRunFiles(t, d, fixtureConfig("unchecked"), nil, ops)
		f, _ := os.OpenFile(filepath.Join(d, harness.HistoryFile), os.O_APPEND|os.O_WRONLY, 0)
		f.WriteString(`{"index":2,"time":3000`)
		f.Close()
		out["unchecked"] = d
	}
	// An interrupted run with a harness error, checked.
	{
		d := filepath.Join(dir, "interrupted", "20261129T090001.000Z")
		info := fixtureInfo()
		info.Interrupted = true
		info.Errors = []string{"heal pause on n1: process did not continue"}
		info.Nodes = nil
		var ops []history.Op
		tm := int64(0)
		for i := 0; i < 20; i++ {
			p := i % 3
			ops = append(ops, acq(tm, p, history.Invoke, &history.Value{TTL: 5e8}))
			tm += 300_000
			ops = append(ops, acq(tm, p, history.OK, &history.Value{Token: fmt.Sprintf("p%d.%d", p, i), ValidUntil: history.I64(tm + 4e8)}))
			tm += 5_000_000
			ops = append(ops, history.Op{Time: tm, Process: p, Type: history.Invoke, F: history.Release, Key: "lock-0", Value: &history.Value{Token: fmt.Sprintf("p%d.%d", p, i)}})
			tm += 200_000
			ops = append(ops, history.Op{Time: tm, Process: p, Type: history.OK, F: history.Release, Key: "lock-0"})
			tm += 1_000_000
			if i == 5 {
				ops = append(ops, history.Op{Time: tm, Process: history.NemesisProcess, Type: history.Info, F: "pause", Value: &history.Value{Phase: "start", Targets: []string{"n1"}, Detail: "SIGSTOP for 1s"}})
			}
		}
		writeRunFiles(t, d, fixtureConfig("interrupted"), info, ops)
		if _, err := harness.Check(d); err != nil {
			t.Fatal(err)
		}
		out["interrupted"] = d
	}
	// A run that recorded nothing.
	{
		d := filepath.Join(dir, "empty", "20261129T090002.000Z")
		writeRunFiles(t, d, fixtureConfig("empty"), fixtureInfo(), nil)
		if _, err := harness.Check(d); err != nil {
			t.Fatal(err)
		}
		out["empty"] = d
	}
	// A run where no acquire ever succeeded (a dead server).
	{
		d := filepath.Join(dir, "noholds", "20261129T090003.000Z")
		var ops []history.Op
		for k := int64(0); k < 10; k++ {
			for p := 0; p < 3; p++ {
				at := k*260_000_000 + int64(p)*5_000_000
				ops = append(ops, acq(at, p, history.Invoke, &history.Value{TTL: 5e8}))
				ops = append(ops, history.Op{Time: at + 250_000_000, Process: p, Type: history.Info, F: history.Acquire, Key: "lock-0", Error: "i/o timeout"})
			}
		}
		// Keep times ordered: completions of different processes interleave.
		sortOps(ops)
		writeRunFiles(t, d, fixtureConfig("noholds"), fixtureInfo(), ops)
		if _, err := harness.Check(d); err != nil {
			t.Fatal(err)
		}
		out["noholds"] = d
	}
	return out
}

func sortOps(ops []history.Op) {
	// Insertion sort by time keeps each process's invoke before its
	// completion (equal times keep their order).
	for i := 1; i < len(ops); i++ {
		for j := i; j > 0 && ops[j].Time < ops[j-1].Time; j-- {
			ops[j], ops[j-1] = ops[j-1], ops[j]
		}
	}
}

// genRounds makes the events of genLarge's run of about nOps client
// operations, in order, and returns the time of the last one: rounds in
// which one of clients holds the lock while the others try tries times.
func genRounds(nOps, violateEvery, clients, tries int, emit func(history.Op)) (tm int64) {
	rng := rand.New(rand.NewSource(1))
	// Simulate in rounds: each round one client holds for a few ms while
	// the others fail; every violateEvery-th round a second client also
	// gets it.
	n := 0
	round := 0
	holdSeq := 0
	for n < nOps {
		holder := rng.Intn(clients)
		tok := fmt.Sprintf("p%d.%d", holder, holdSeq)
		holdSeq++
		emit(history.Op{Time: tm, Process: holder, Type: history.Invoke, F: history.Acquire, Key: "lock-0", Value: &history.Value{TTL: 5e8}})
		tm += 300_000
		emit(history.Op{Time: tm, Process: holder, Type: history.OK, F: history.Acquire, Key: "lock-0", Value: &history.Value{Token: tok, ValidUntil: history.I64(tm + 490_000_000)}})
		n++
		violate := violateEvery > 0 && round%violateEvery == violateEvery-1
		other := (holder + 1 + rng.Intn(clients-1)) % clients
		otok := fmt.Sprintf("p%d.%d", other, holdSeq)
		if violate {
			holdSeq++
			emit(history.Op{Time: tm + 1000, Process: other, Type: history.Invoke, F: history.Acquire, Key: "lock-0", Value: &history.Value{TTL: 5e8}})
			emit(history.Op{Time: tm + 200_000, Process: other, Type: history.OK, F: history.Acquire, Key: "lock-0", Value: &history.Value{Token: otok, ValidUntil: history.I64(tm + 490_000_000)}})
			n++
		}
		tm += 250_000
		// The others fail to acquire meanwhile, one after another.
		for k := 0; k < tries && n < nOps; k++ {
			p := (holder + 1 + k%(clients-1)) % clients
			if violate && p == other {
				continue
			}
			kind := history.Fail
			lat := int64(100_000 + rng.Intn(400_000))
			errText := "not acquired"
			if rng.Intn(500) == 0 {
				kind, lat, errText = history.Info, 250_000_000, "i/o timeout"
			}
			emit(history.Op{Time: tm, Process: p, Type: history.Invoke, F: history.Acquire, Key: "lock-0", Value: &history.Value{TTL: 5e8}})
			emit(history.Op{Time: tm + min(lat, 150_000), Process: p, Type: kind, F: history.Acquire, Key: "lock-0", Error: errText})
			tm += 160_000
			n++
		}
		emit(history.Op{Time: tm, Process: holder, Type: history.Invoke, F: history.Release, Key: "lock-0", Value: &history.Value{Token: tok}})
		tm += 200_000
		emit(history.Op{Time: tm, Process: holder, Type: history.OK, F: history.Release, Key: "lock-0"})
		n++
		if violate {
			emit(history.Op{Time: tm, Process: other, Type: history.Invoke, F: history.Release, Key: "lock-0", Value: &history.Value{Token: otok}})
			tm += 100_000
			emit(history.Op{Time: tm, Process: other, Type: history.OK, F: history.Release, Key: "lock-0"})
			n++
		}
		tm += 100_000
		if round%2000 == 1000 {
			emit(history.Op{Time: tm, Process: history.NemesisProcess, Type: history.Info, F: "pause", Value: &history.Value{Phase: "start", Targets: []string{"n1"}, Detail: "SIGSTOP for 300ms"}})
		}
		if round%2000 == 1400 {
			emit(history.Op{Time: tm, Process: history.NemesisProcess, Type: history.Info, F: "pause", Value: &history.Value{Phase: "stop", Targets: []string{"n1"}}})
		}
		round++
	}
	return tm
}

// genLarge writes a synthetic run of about nOps client operations (2×nOps
// events): 10 clients of a mutex workload with mostly failing acquires,
// holds of a few ms, a fault every second, and a mutual-exclusion
// violation every violateEvery holds. Its results.json is computed by the
// checkers except porcupine, whose time on a million operations is not
// what is measured here.
func genLarge(t testing.TB, dir string, nOps, violateEvery int) (violations int) {
	t.Helper()
	const clients = 10
	ops := make([]history.Op, 0, 2*nOps+100)
	tm := genRounds(nOps, violateEvery, clients, 14, func(op history.Op) { ops = append(ops, op) })
	// The info outcomes above complete later than their invoke's
	// successors in real life; here every completion is at most 150µs
	// after its invoke, so times are already in order.
	cfg := harness.DefaultConfig()
	cfg.TTL = cfg.TTLOrDefault() // as a run records it
	cfg.Name = "large"
	cfg.Clients = clients
	cfg.TimeLimit = time.Duration(tm) - 3*time.Second
	cfg.Recovery = 3 * time.Second
	cfg.Nemesis = []string{"pause"}
	cfg.Command = []string{"lockjepsen", "test", "--nemesis", "pause", "--time-limit", cfg.TimeLimit.String()}
	info := fixtureInfo()
	info.Nodes = nil
	writeRunFiles(t, dir, cfg, info, ops)
	r := checkWithoutPorcupine(ops, cfg.TTL)
	res := &checker.Results{
		Exclusion:       r.Exclusion,
		Linearizability: &checker.LinearizabilityResult{Valid: checker.ValidUnknown},
		Resource:        r.Resource,
		Liveness:        r.Liveness,
		Stats:           r.Stats,
	}
	res.Violations, res.Incidents, res.Ops = res.Exclusion.Count, res.Exclusion.Incidents, res.Stats.Ops
	res.Verdict, res.Valid = checker.VerdictUnsafe, checker.ValidFalse
	if res.Violations == 0 {
		res.Verdict, res.Valid = checker.VerdictSafe, checker.ValidTrue
	}
	writeJSON(t, filepath.Join(dir, harness.ResultsFile), &harness.Results{Results: res, Test: "large", Expect: "any", MetExpectation: true})
	return res.Violations
}

// checkWithoutPorcupine is the check of a fixture's history with a
// linearizability budget too small to start porcupine: the report draws
// the other checkers' results, and large fixtures would wait on it.
func checkWithoutPorcupine(ops []history.Op, ttl time.Duration) *checker.Results {
	return checker.Check(ops, checker.Options{TTL: ttl, LinearizabilityBudget: time.Nanosecond})
}
