package harness_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/runfile"
	"github.com/lockjepsen/lockjepsen/serverrecord"
	"github.com/lockjepsen/lockjepsen/testkit/harnesstest"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

// TestServerRecordOfARun runs the harness with and without the server
// record and checks what it kept against the history: every token the
// record read is one a client was granted, set no earlier than that
// acquire was invoked (the two are on one clock), and every release the
// record saw deleting a key was invoked by its holder first. A killed node
// leaves a gap; `check` of the stored run counts the same.
func TestServerRecordOfARun(t *testing.T) {
	redistest.RequireBinary(t)
	cases := []struct {
		name    string
		record  bool
		system  string
		lock    string
		nemesis []string
		// wantGaps: the kill cuts the observer's connection at least
		// once (the fault phase is several nemesis intervals long).
		wantGaps bool
		// nodes with events in the record (0: the system's one node).
		nodes int
		// partial: a lock that sets its key on some nodes and then
		// gives up (Redlock without a majority) sets tokens no client
		// was granted.
		partial bool
	}{
		{name: "off", record: false},
		{name: "fault-free", record: true},
		{name: "a node killed", record: true, nemesis: []string{"kill"}, wantGaps: true},
		{name: "redlock", record: true, system: "redlock", lock: "redlock", nodes: 5, partial: true},
		{name: "sentinel: the replicas' record too", record: true, system: "sentinel", nodes: 3},
		// The key's slot lives on one primary and its replica.
		{name: "Redis Cluster: the slot's primary and replica", record: true, system: "cluster", nodes: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := harnesstest.ShortConfig(t)
			cfg.TimeLimit, cfg.Recovery = 2*time.Second, 500*time.Millisecond
			cfg.ServerRecord, cfg.Nemesis, cfg.Expect = tc.record, tc.nemesis, harness.ExpectAny
			if tc.system != "" {
				cfg.System = tc.system
			}
			if tc.lock != "" {
				cfg.Lock = tc.lock
			}
			out, err := harness.Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(out.Dir, runfile.ServerRecordFile)
			if !tc.record {
				if _, err := os.Stat(path); !os.IsNotExist(err) || out.Results.ServerRecord != nil {
					t.Fatalf("a record without asking: %v, %+v", err, out.Results.ServerRecord)
				}
				return
			}
			events, sum, err := serverrecord.Read(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := out.Results.ServerRecord; got == nil || got.Events != sum.Events || got.Gaps != sum.Gaps {
				t.Fatalf("results.json's server_record %+v, the file's %+v", got, sum)
			}
			if sum.Events == 0 || (sum.Gaps > 0) != tc.wantGaps {
				t.Fatalf("record %+v; want events, and gaps: %v", sum, tc.wantGaps)
			}
			if want := max(tc.nodes, 1); len(sum.Nodes) != want {
				t.Errorf("the record has nodes %v, want %d", sum.Nodes, want)
			}
			checkAgainstHistory(t, out.Dir, events, tc.partial)
			again, err := harness.Check(out.Dir)
			if err != nil {
				t.Fatal(err)
			}
			if g := again.ServerRecord; g == nil || g.Events != sum.Events || g.Gaps != sum.Gaps {
				t.Errorf("check of the stored run counts %+v, the run %+v", g, sum)
			}
			// A damaged record is bad input (exit 2), as a damaged
			// history is.
			if err := os.WriteFile(path, []byte("not json\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := harness.Check(out.Dir); !harness.IsUsage(err) {
				t.Errorf("check of a run with a damaged record: %v, want a usage error", err)
			}
		})
	}
}

// checkAgainstHistory holds the record's sets and deletes to the clients'
// grants and releases.
func checkAgainstHistory(t *testing.T, dir string, events []serverrecord.Event, partial bool) {
	t.Helper()
	sc, err := history.OpenScanner(filepath.Join(dir, runfile.CompressedHistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	invoked := map[int]int64{}     // process → its open acquire's invocation
	acquired := map[string]int64{} // token → its acquire's invocation
	released := map[string]int64{} // token → its release's invocation
	for op, ok := sc.Next(); ok; op, ok = sc.Next() {
		switch {
		case op.F == history.Acquire && op.Type == history.Invoke:
			invoked[op.Process] = op.Time
		case op.F == history.Acquire && op.Type == history.OK && op.Value != nil:
			acquired[op.Value.Token] = invoked[op.Process]
		case op.F == history.Release && op.Type == history.Invoke && op.Value != nil:
			released[op.Value.Token] = op.Time
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	var read, unread int
	for _, e := range events {
		switch {
		case e.Kind == serverrecord.Set && e.Token == "":
			unread++
			// A key changed first is the method's limit; a failed
			// read (a cluster replica's MOVED) is the observer's bug.
			if strings.HasPrefix(e.TokenUnread, "reading the key failed") {
				t.Errorf("%s could not read %s: %s", e.Node, e.Key, e.TokenUnread)
			}
		case e.Kind == serverrecord.Set:
			read++
			inv, ok := acquired[e.Token]
			if !ok && !partial {
				t.Errorf("the record sets token %s, which no client was granted", e.Token)
			} else if ok && e.T < inv {
				t.Errorf("the record sets %s at %d, before its acquire was invoked at %d", e.Token, e.T, inv)
			}
		case e.Kind == serverrecord.Del && e.Token != "":
			inv, ok := released[e.Token]
			_, granted := acquired[e.Token]
			// A partial grant's undo is no release of the history's.
			if (ok && e.T < inv) || (!ok && (granted || !partial)) {
				t.Errorf("the record deletes %s's key at %d; its release invoked at %d (%v)", e.Token, e.T, inv, ok)
			}
		}
	}
	if read == 0 {
		t.Errorf("no set in the record has its token (%d without)", unread)
	}
	t.Logf("%d sets with their token, %d without; %d events", read, unread, len(events))
}
