package nemesis

import (
	"context"
	"fmt"
	"time"

	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/locks"
)

// defaultCallTime is what an in-op kill takes a lock call to last before
// any call of its kind has been timed.
const defaultCallTime = 5 * time.Millisecond

// StartCall is called by a client just before a lock call (acquire,
// extend, release) sends its request. When the worker is armed with an
// InOp fault, the fault takes the arm, and its process is killed
// (SIGKILL) after a delay drawn from the seeded Rng, uniform in [0, the
// recent duration of such calls], halved for half the kills: with latency
// on the link, between two commands of a call that makes several with
// good odds. StartCall then
// returns what the client calls once the call has returned: it kills at
// once if the delay has not yet passed, and returns when the process is
// dead and the kill recorded. nil when nothing is armed, or the client
// has no process of its own (Available refuses such runs).
func (c *ClientFaults) StartCall(ctx context.Context, worker, process int, f, key string, target locks.ClientProcess) (killed func()) {
	if !c.timesCalls.Load() {
		return nil // no InOp fault in this run: the clients' hot path takes no lock
	}
	c.mu.Lock()
	name, ok := c.armed[worker]
	if !ok || !inOp(name) || target == nil {
		c.mu.Unlock()
		return nil
	}
	delete(c.armed, worker)
	span := c.took[f]
	if span <= 0 {
		span = defaultCallTime
	}
	delay := time.Duration(c.Rng.Int63n(int64(span) + 1))
	if c.Rng.Intn(2) == 0 {
		// Half the kills in the call's first half: a call of two round
		// trips (SETNX, then PEXPIRE) dies after its first command was
		// applied and before its second was sent. Uniform over the whole
		// call, a kill of a one-client SETNX-then-PEXPIRE run missed that
		// moment 11 times in a row on a CI run.
		delay /= 2
	}
	c.mu.Unlock()

	sent := time.Now()
	returned := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTimer(delay)
		defer t.Stop()
		inFlight := true
		select {
		case <-t.C:
		case <-returned:
			inFlight = false
		}
		err := target.KillProcess()
		detail := fmt.Sprintf("SIGKILL %s after sending %s of %s (a delay of %s drawn from [0, %s], the latest %s's duration); ",
			time.Since(sent).Round(time.Microsecond), f, key, delay.Round(time.Microsecond), span.Round(time.Microsecond), f)
		if inFlight {
			detail += "no reply had come"
		} else {
			detail += "its reply had come, but the client had not yet acted on it"
		}
		op := history.Op{Process: history.NemesisProcess, Type: history.Info, F: name, Key: key,
			Value: &history.Value{Phase: "start", Clients: []int{process}, Targets: []string{fmt.Sprintf("client %d", process)}, Detail: detail}}
		if err != nil {
			op.Error = fmt.Sprintf("kill client %d: %v", process, err)
		}
		c.Rec.Record(op)
	}()
	return func() {
		close(returned)
		<-done
	}
}

// EndCall is told how long each lock call took: the latest duration of a
// kind of call bounds the next in-op kill's delay. Only runs with an InOp
// fault keep it (the armed map's lock is the clients' hot path).
func (c *ClientFaults) EndCall(f string, took time.Duration) {
	if !c.timesCalls.Load() {
		return
	}
	c.mu.Lock()
	c.took[f] = took
	c.mu.Unlock()
}

// inOp reports whether the named fault strikes inside a lock call.
func inOp(name string) bool {
	d, err := Lookup(name)
	return err == nil && d.InOp
}
