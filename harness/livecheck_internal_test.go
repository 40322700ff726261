package harness

import (
	"context"
	"strings"
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
