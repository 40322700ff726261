package harness

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/history"
)

// The check alongside the run gives way rather than slow the clients or
// judge events the history's reader would refuse: the stored history is
// then checked after the run, as before. Each case must end without
// results and say why.
func TestLiveCheckGivesWay(t *testing.T) {
	acquire := func(i int64, p int, typ history.Type, token string) history.Op {
		op := history.Op{Index: i, Time: i + 1, Process: p, Type: typ, F: history.Acquire, Key: "k"}
		if typ == history.OK {
			op.Value = &history.Value{Token: token}
		}
		return op
	}
	cases := []struct {
		name    string
		stalled bool // the checkers' goroutine starts only at the end
		events  func(feed func(history.Op))
		written int64
		want    string
	}{
		{"an event the reader would refuse", false, func(feed func(history.Op)) {
			feed(acquire(0, 1, history.Invoke, ""))
			feed(acquire(1, 1, history.OK, "")) // a grant without a token
		}, 2, "would be refused"},
		{"checkers that fall behind", true, func(feed func(history.Op)) {
			for i := int64(0); i < (liveQueue+2)*liveBatch; i += 2 {
				feed(acquire(i, 1, history.Invoke, ""))
				feed(acquire(i+1, 1, history.Fail, ""))
			}
		}, (liveQueue + 2) * liveBatch, "fell"},
		{"events the file does not hold", false, func(feed func(history.Op)) {
			feed(acquire(0, 1, history.Invoke, ""))
		}, 2, "saw 1 events of the 2 written"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lc := newLiveCheck(context.Background(), "test", checker.Options{TTL: time.Second})
			if !tc.stalled {
				go lc.run()
			}
			tc.events(lc.observe)
			if tc.stalled {
				go lc.run()
			}
			res, why := lc.finish(context.Background(), tc.written)
			if res != nil || !strings.Contains(why, tc.want) {
				t.Fatalf("results %v, reason %q; want none, because %q", res != nil, why, tc.want)
			}
		})
	}
}

// The check alongside the run tells Config.LiveViolations the exclusion
// checker's count as it goes (the progress line's "violations so far"):
// an overlap of two believed holds is told, holds one after the other
// are not, and a check that gives up says so with -1. The last count
// told is the one its results give.
func TestLiveCheckTellsItsViolations(t *testing.T) {
	var i int64
	ev := func(p int, typ history.Type, f string, v *history.Value) history.Op {
		i++
		return history.Op{Index: i - 1, Time: i, Process: p, Type: typ, F: f, Key: "k", Value: v}
	}
	grant := func(p int, token string) []history.Op {
		return []history.Op{ev(p, history.Invoke, history.Acquire, nil),
			ev(p, history.OK, history.Acquire, &history.Value{Token: token, ValidUntil: history.I64(1_000_000)})}
	}
	release := func(p int, token string) []history.Op {
		return []history.Op{ev(p, history.Invoke, history.Release, &history.Value{Token: token}),
			ev(p, history.OK, history.Release, nil)}
	}
	cases := []struct {
		name   string
		events func() []history.Op
		told   []int
	}{
		{"an overlap", func() []history.Op {
			return slices.Concat(grant(1, "a"), grant(2, "b"), release(1, "a"), release(2, "b"))
		}, []int{1}},
		{"one hold after the other", func() []history.Op {
			return slices.Concat(grant(1, "a"), release(1, "a"), grant(2, "b"), release(2, "b"))
		}, nil},
		{"an event the reader would refuse", func() []history.Op {
			return slices.Concat(grant(1, "a"), []history.Op{ev(2, history.OK, history.Acquire, &history.Value{Token: "b"})})
		}, []int{-1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			i = 0
			events := tc.events()
			lc := newLiveCheck(context.Background(), "test", checker.Options{TTL: time.Second})
			var mu sync.Mutex
			var told []int
			lc.onCount = func(n int) { mu.Lock(); told = append(told, n); mu.Unlock() }
			go lc.run()
			for _, op := range events {
				lc.observe(op)
			}
			res, why := lc.finish(context.Background(), int64(len(events)))
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(told, tc.told) {
				t.Fatalf("told %v, want %v (%s)", told, tc.told, why)
			}
			if res != nil && res.Exclusion.Count != max(0, last(told)) {
				t.Errorf("results count %d violations, the last told %v", res.Exclusion.Count, told)
			}
		})
	}
}

func last(told []int) int {
	if len(told) == 0 {
		return 0
	}
	return told[len(told)-1]
}
