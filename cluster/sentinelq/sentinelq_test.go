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

// When the poll's end cuts its last check short, that check fails only
// with a context error: the error also gives what the last answered check
// said, or that no check was answered. (A fresh machine's CI once failed
// with no more than "n1: info replication: context deadline exceeded".)
func TestPollSaysWhatTheLastAnswerWas(t *testing.T) {
	timedOut := fmt.Errorf("n1: info replication: %w", context.DeadlineExceeded)
	cases := []struct {
		name    string
		answers []error // one per check; the context ends on the last
		want    []string
		notWant []string
	}{
		{"an answer, then timeouts", []error{errors.New("n1 does not list n2 as an online replica"), timedOut, timedOut},
			[]string{"3 checks", "context deadline exceeded", "the last check that got an answer: n1 does not list n2"}, []string{"every one"}},
		{"timeouts only", []error{timedOut, timedOut, timedOut},
			[]string{"3 checks, every one of them out of time", "n1: info replication: context deadline exceeded"}, []string{"got an answer"}},
		{"an answer last", []error{timedOut, errors.New("n2: role master")},
			[]string{"2 checks: n2: role master"}, []string{"got an answer", "every one"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			n := 0
			err := Poll(ctx, "replicas", func(context.Context) error {
				n++
				if n == len(tc.answers) {
					cancel()
				}
				return tc.answers[n-1]
			})
			if err == nil {
				t.Fatal("Poll succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(err.Error(), w) {
					t.Errorf("error %q has %q", err, w)
				}
			}
		})
	}
}

// The replies of a real redis-sentinel 7.0.15 (INFO sentinel, its CRLF
// line ends kept): before and just after a SIGSTOP of 3 s, which put it in
// TILT mode. The local backend's TestSentinelWaitHealthyWaitsOutTilt
// provokes TILT in real sentinels the same way; these cases pin down the
// parsing, and what an older or foreign reply gives.
const (
	infoSteady = "# Sentinel\r\nsentinel_masters:1\r\nsentinel_tilt:0\r\nsentinel_tilt_since_seconds:-1\r\n" +
		"sentinel_running_scripts:0\r\nsentinel_scripts_queue_length:0\r\nsentinel_simulate_failure_flags:0\r\n" +
		"master0:name=m,status=ok,address=127.0.0.77:27001,slaves=0,sentinels=1\r\n"
	infoTilted = "# Sentinel\r\nsentinel_masters:1\r\nsentinel_tilt:1\r\nsentinel_tilt_since_seconds:1\r\n" +
		"sentinel_running_scripts:0\r\nsentinel_scripts_queue_length:0\r\nsentinel_simulate_failure_flags:0\r\n" +
		"master0:name=m,status=ok,address=127.0.0.77:27001,slaves=0,sentinels=1\r\n"
)

func TestTilt(t *testing.T) {
	for _, c := range []struct {
		name, info string
		on         bool
		since      time.Duration
		err        string
	}{
		{name: "steady", info: infoSteady, since: -1},
		{name: "tilted", info: infoTilted, on: true, since: time.Second},
		{name: "before Redis 7 (no since)", info: "# Sentinel\r\nsentinel_masters:1\r\nsentinel_tilt:1\r\n", on: true, since: -1},
		{name: "a redis-server's INFO", info: "# Server\r\nredis_version:7.0.15\r\n", err: "no sentinel_tilt field"},
		{name: "garbled", info: "sentinel_tilt:yes\r\n", err: "want 0 or 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			on, since, err := Tilt(c.info)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("Tilt: %v; want an error with %q", err, c.err)
				}
				return
			}
			if err != nil || on != c.on || since != c.since {
				t.Fatalf("Tilt: %v %v %v; want %v %v", on, since, err, c.on, c.since)
			}
		})
	}
}
