package sentinelq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// The queries themselves run against real redis-server and redis-sentinel
// processes in cluster/local's and cluster/docker's tests; these are the
// cases that need no server.

func TestNoSentinelsIsAnError(t *testing.T) {
	d := &Deployment{MasterName: "m", Nodes: []Proc{{Name: "n1", Announce: "h:1"}}}
	ctx := context.Background()
	if _, err := d.Primary(ctx); err == nil || !strings.Contains(err.Error(), "no sentinels") {
		t.Errorf("Primary: %v", err)
	}
	if err := d.WaitHealthy(ctx); err == nil || !strings.Contains(err.Error(), "no sentinels") {
		t.Errorf("WaitHealthy: %v", err)
	}
	if _, err := d.Failover(ctx); err == nil || !strings.Contains(err.Error(), "no sentinels") {
		t.Errorf("Failover: %v", err)
	}
	if err := d.CheckReplication(ctx, "n9"); err == nil || !strings.Contains(err.Error(), `no node "n9"`) {
		t.Errorf("CheckReplication of an unknown node: %v", err)
	}
}

func TestByAnnounce(t *testing.T) {
	d := &Deployment{Nodes: []Proc{{Name: "n1", Announce: "toxiproxy:10001"}, {Name: "n2", Announce: "toxiproxy:10002"}}}
	if n, ok := d.ByAnnounce("toxiproxy:10002"); !ok || n != "n2" {
		t.Errorf("ByAnnounce: %q %v", n, ok)
	}
	if _, ok := d.ByAnnounce("127.0.0.1:10002"); ok {
		t.Error("ByAnnounce matched another host")
	}
}

// Poll checks again until its context ends, and then says what was still
// wrong. The context ends on the third check, not after a time: how many
// checks fit in a time is up to the machine's load.
func TestPollSaysWhatWasWrong(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	err := Poll(ctx, "the thing", func(context.Context) error {
		if n++; n == 3 {
			cancel()
		}
		return fmt.Errorf("still wrong (check %d)", n)
	})
	if err == nil || !strings.Contains(err.Error(), "waiting for the thing") || !strings.Contains(err.Error(), "still wrong (check 3)") {
		t.Fatalf("Poll: %v", err)
	}
	if n != 3 {
		t.Errorf("checked %d times; the context ended on the third", n)
	}
	// A deadline that has passed: one check, and its error.
	past, cancelPast := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancelPast()
	n = 0
	err = Poll(past, "the other thing", func(context.Context) error {
		n++
		return errors.New("not there")
	})
	if err == nil || !strings.Contains(err.Error(), "waiting for the other thing") || !strings.Contains(err.Error(), "not there") || n != 1 {
		t.Fatalf("Poll past its deadline: %v after %d checks", err, n)
	}
	n = 0
	if err := Poll(context.Background(), "x", func(context.Context) error {
		if n++; n < 3 {
			return errors.New("not yet")
		}
		return nil
	}); err != nil || n != 3 {
		t.Errorf("Poll: %v after %d checks", err, n)
	}
}
