package serverrecord_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/cluster/local"
	"github.com/lockjepsen/lockjepsen/serverrecord"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

// release is the token lock's compare-and-delete.
var release = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)

// want is one expected line of the record: a gap, or an event of a kind
// on lock-0 with the key's token.
type want struct{ kind, token string }

// TestObserverRecordsWhatTheNodeDid drives a real redis-server through
// each case and checks the record the observer wrote, read back from the
// compressed file: kinds, tokens and order. The faults wait for the
// observer to see them (a gap open) rather than for a guessed while.
func TestObserverRecordsWhatTheNodeDid(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		args []string // redis-server's
		act  func(t *testing.T, s *local.Server, c *redis.Client, obs *serverrecord.Observers, now serverrecord.Clock)
		want []want
	}{{
		name: "set, TTL changed, deleted by a release, set again and expired",
		act: func(t *testing.T, s *local.Server, c *redis.Client, obs *serverrecord.Observers, now serverrecord.Clock) {
			must(t, c.SetNX(ctx, "lock-0", "p1.1", time.Minute).Err())
			// The release waits until the token is read: a key that
			// changes first has its token unread (the next case).
			caught(t, obs, now)
			must(t, c.SetNX(ctx, "lock-0", "p2.1", time.Minute).Err()) // refused: not in the record
			must(t, c.PExpire(ctx, "lock-0", 30*time.Second).Err())
			must(t, release.Run(ctx, c, []string{"lock-0"}, "p1.1").Err())
			must(t, c.SetNX(ctx, "lock-0", "p2.2", 50*time.Millisecond).Err())
			waitFor(t, "lock-0 to expire", func() bool { return c.Exists(ctx, "lock-0").Val() == 0 })
		},
		want: []want{{"set", "p1.1"}, {"expire", "p1.1"}, {"expire", "p1.1"}, {"del", "p1.1"},
			{"set", "p2.2"}, {"expire", "p2.2"}, {"expired", "p2.2"}},
	}, {
		name: "a set whose key changed before the observer read it has no token",
		act: func(t *testing.T, s *local.Server, c *redis.Client, _ *serverrecord.Observers, _ serverrecord.Clock) {
			// One transaction: the node deletes the key before any read
			// of the observer's can run.
			_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.SetNX(ctx, "lock-0", "p1.1", time.Minute)
				p.Del(ctx, "lock-0")
				return nil
			})
			must(t, err)
		},
		want: []want{{"set", ""}, {"expire", ""}, {"del", ""}},
	}, {
		name: "a lock key evicted by a cache that fills the node's memory",
		args: []string{"--maxmemory", "4mb", "--maxmemory-policy", "allkeys-lru"},
		act: func(t *testing.T, s *local.Server, c *redis.Client, obs *serverrecord.Observers, now serverrecord.Clock) {
			must(t, c.SetNX(ctx, "lock-0", "p1.1", time.Minute).Err())
			caught(t, obs, now)
			value := strings.Repeat("x", 10<<10)
			for i := 0; c.Exists(ctx, "lock-0").Val() == 1; i++ {
				if i >= 10_000 { // 100 MB through a 4 MB node
					t.Fatal("the cache never evicted lock-0")
				}
				must(t, c.Set(ctx, fmt.Sprintf("cache-%d", i), value, 0).Err())
			}
		},
		want: []want{{"set", "p1.1"}, {"expire", "p1.1"}, {"evicted", "p1.1"}},
	}, {
		name: "a killed node is a gap",
		act: func(t *testing.T, s *local.Server, c *redis.Client, obs *serverrecord.Observers, now serverrecord.Clock) {
			must(t, c.SetNX(ctx, "lock-0", "p1.1", time.Minute).Err())
			// The kill comes once the set's token is read: killed
			// before, the record would rightly say it never was.
			caught(t, obs, now)
			must(t, s.Kill())
			waitFor(t, "the observer to see the kill", func() bool { return obs.GapOpen("n1") })
			must(t, s.Restart(ctx))
			waitFor(t, "the observer to be back", func() bool { return !obs.GapOpen("n1") })
			must(t, c.SetNX(ctx, "lock-0", "p3.1", time.Minute).Err())
		},
		want: []want{{"set", "p1.1"}, {"expire", "p1.1"}, {"gap", ""}, {"set", "p3.1"}, {"expire", "p3.1"}},
	}, {
		name: "a paused node is a gap",
		act: func(t *testing.T, s *local.Server, c *redis.Client, obs *serverrecord.Observers, now serverrecord.Clock) {
			must(t, s.Pause())
			waitFor(t, "the observer to see the pause", func() bool { return obs.GapOpen("n1") })
			must(t, s.Resume())
			waitFor(t, "the observer to be back", func() bool { return !obs.GapOpen("n1") })
			must(t, c.SetNX(ctx, "lock-0", "p1.1", time.Minute).Err())
		},
		want: []want{{"gap", ""}, {"set", "p1.1"}, {"expire", "p1.1"}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, c := redistest.Start(t, tc.args...)
			path := filepath.Join(t.TempDir(), "server-record.jsonl.zst")
			w, err := serverrecord.Create(path)
			must(t, err)
			start := time.Now()
			now := func() int64 { return int64(time.Since(start)) }
			obs := serverrecord.Start(ctx, []serverrecord.Node{{Name: "n1", Addr: s.Addr()}}, w, now)
			tc.act(t, s, c, obs, now)
			must(t, obs.Stop())
			must(t, w.Close())
			events, sum, err := serverrecord.Read(path)
			must(t, err)
			var got []want
			var shown []serverrecord.Event // not the cache's keys
			slices.SortStableFunc(events, func(a, b serverrecord.Event) int { return int(at(a) - at(b)) })
			for _, e := range events {
				if e.Node != "n1" {
					t.Errorf("event of another node: %+v", e)
				}
				if e.Kind == serverrecord.Gap || e.Key == "lock-0" {
					got = append(got, want{e.Kind, e.Token})
					shown = append(shown, e)
				}
			}
			for _, e := range events {
				if e.Kind == serverrecord.Set && e.Token == "" && e.TokenUnread == "" {
					t.Errorf("a set with neither a token nor why: %+v", e)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("record:\n got %v\nwant %v\nevents: %+v", got, tc.want, shown)
			}
			gaps := 0
			for _, w := range tc.want {
				if w.kind == "gap" {
					gaps++
				}
			}
			if sum.Gaps != gaps || sum.Events < len(tc.want)-gaps {
				t.Errorf("summary %+v, want %d gaps and %d events", sum, gaps, len(tc.want)-gaps)
			}
		})
	}
}

// at orders a record for comparison: a gap where it closed (events inside
// it were received before it closed; the later ones after).
func at(e serverrecord.Event) int64 {
	if e.Kind == serverrecord.Gap {
		return e.End
	}
	return e.T
}

// TestReadRefusesWhatIsNotARecord: bad input is an error that names the
// line, never a panic or a silent skip.
func TestReadRefusesWhatIsNotARecord(t *testing.T) {
	for _, tc := range []struct{ name, content, err string }{
		{"not JSON", "{\"t\":1,\"node\":\"n1\",\"kind\":\"set\"}\nnot json\n", "line 2"},
		{"no node", "{\"t\":1,\"kind\":\"set\"}\n", "line 1: an event needs a node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "server-record.jsonl")
			must(t, os.WriteFile(path, []byte(tc.content), 0o644))
			_, _, err := serverrecord.Read(path)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("Read: %v, want an error saying %q", err, tc.err)
			}
		})
	}
}

// caught waits until the observer has read everything the node did so far.
func caught(t *testing.T, obs *serverrecord.Observers, now serverrecord.Clock) {
	t.Helper()
	at := now()
	waitFor(t, "the observer to catch up", func() bool { return obs.Caught("n1", at) })
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond with a deadline sized for a loaded machine.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 30s for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
