package workloads

import (
	"context"
	"errors"
	"testing"
	"time"
)

type ctxKey struct{}

// seen is what an operation's context shows, compared between
// context.WithTimeout and clientDeadlines.
// Its fields are exported so that %+v prints the errors' text.
type seen struct {
	Err, Cause         error
	DeadlineOK         bool
	ChildErr           error // of context.WithTimeout(op, an hour)
	Value              any
	DeadlineIsParent   bool // Deadline is the run's (earlier) one
	DoneClosed, IsDead bool // Done closed; errors.Is(err, DeadlineExceeded)
}

// opCase is one way an operation's context ends.
type opCase struct {
	name string
	// parent makes the client's run context, and what the operation is
	// given (the run, or a context made from it); cancel ends the run.
	parent  func() (run, given context.Context, cancel context.CancelCauseFunc)
	timeout time.Duration
	// act happens while the operation runs; wait: until op is done.
	act  func(op context.Context, cancelRun context.CancelCauseFunc)
	wait bool
}

var errRunStopped = errors.New("the history could not be written")

func runParent() (context.Context, context.Context, context.CancelCauseFunc) {
	run, cancel := context.WithCancelCause(context.WithValue(context.Background(), ctxKey{}, "v"))
	return run, run, cancel
}

var opCases = []opCase{
	{name: "returns before its deadline", parent: runParent, timeout: time.Hour,
		act: func(context.Context, context.CancelCauseFunc) {}},
	{name: "passes its deadline", parent: runParent, timeout: time.Millisecond, wait: true,
		act: func(context.Context, context.CancelCauseFunc) {}},
	{name: "the run is cancelled with a cause", parent: runParent, timeout: time.Hour, wait: true,
		act: func(_ context.Context, cancel context.CancelCauseFunc) { cancel(errRunStopped) }},
	{name: "the run was cancelled before", timeout: time.Hour, wait: true,
		parent: func() (context.Context, context.Context, context.CancelCauseFunc) {
			run, given, cancel := runParent()
			cancel(nil)
			return run, given, cancel
		}},
	{name: "the run's deadline comes first", timeout: time.Hour, wait: true,
		parent: func() (context.Context, context.Context, context.CancelCauseFunc) {
			run, cancel := context.WithTimeout(context.WithValue(context.Background(), ctxKey{}, "v"), 2*time.Millisecond)
			return run, run, func(error) { cancel() }
		}},
	{name: "a release's context without cancel", timeout: time.Millisecond, wait: true,
		parent: func() (context.Context, context.Context, context.CancelCauseFunc) {
			run, _, cancel := runParent()
			cancel(nil) // it must not reach the release
			return run, context.WithoutCancel(run), cancel
		}},
	{name: "another cancellable parent", timeout: time.Hour,
		parent: func() (context.Context, context.Context, context.CancelCauseFunc) {
			run, _, cancel := runParent()
			given, stop := context.WithCancel(run)
			return run, given, func(error) { stop(); cancel(nil) }
		}},
}

// observe runs one operation of case tc under withTimeout and reports
// what its context showed once the operation returned.
func observe(tc opCase, withTimeout func(run, given context.Context, d time.Duration) (context.Context, context.CancelFunc, func())) seen {
	run, given, cancelRun := tc.parent()
	defer cancelRun(nil)
	op, cancel, closeAll := withTimeout(run, given, tc.timeout)
	defer closeAll()
	child, stopChild := context.WithTimeout(op, time.Hour)
	defer stopChild()
	ran := make(chan struct{})
	context.AfterFunc(op, func() { close(ran) })
	if tc.act != nil {
		tc.act(op, cancelRun)
	}
	if tc.wait {
		<-op.Done()
	}
	_, runHasDeadline := run.Deadline()
	opDeadline, ok := op.Deadline()
	runDeadline, _ := run.Deadline()
	cancel() // the operation returns
	<-child.Done()
	<-ran // context.AfterFunc's function runs however it ended
	s := seen{Err: op.Err(), Cause: context.Cause(op), DeadlineOK: ok, ChildErr: child.Err(),
		Value: op.Value(ctxKey{}), DeadlineIsParent: runHasDeadline && opDeadline.Equal(runDeadline)}
	select {
	case <-op.Done():
		s.DoneClosed = true
	default:
	}
	s.IsDead = errors.Is(s.Err, context.DeadlineExceeded)
	return s
}

// TestOpContextActsAsWithTimeout: an operation's context from the
// client's deadlines shows what context.WithTimeout's showed, however the
// operation ends.
func TestOpContextActsAsWithTimeout(t *testing.T) {
	for _, tc := range opCases {
		t.Run(tc.name, func(t *testing.T) {
			want := observe(tc, func(_, given context.Context, d time.Duration) (context.Context, context.CancelFunc, func()) {
				ctx, cancel := context.WithTimeout(given, d)
				return ctx, cancel, func() {}
			})
			got := observe(tc, func(run, given context.Context, d time.Duration) (context.Context, context.CancelFunc, func()) {
				cd := newClientDeadlines(run)
				ctx, end := cd.start(given, d)
				return ctx, end.end, cd.close
			})
			if got != want {
				t.Errorf("client deadlines: %+v\ncontext.WithTimeout: %+v", got, want)
			}
		})
	}
}

// TestOpContextsOneAfterAnother: a client's operations one after another
// each get their own deadline from its one timer, whether the timer was
// set for an earlier operation with a later deadline (reset), with an
// earlier one that returned in time (the firing finds the next operation
// and sets the timer again) or not at all; an earlier operation's context
// stays as it ended.
func TestOpContextsOneAfterAnother(t *testing.T) {
	steps := []struct {
		timeout time.Duration
		wait    bool // until its deadline; else it returns at once
		want    error
	}{
		{time.Hour, false, context.Canceled},
		{time.Millisecond, true, context.DeadlineExceeded}, // before the timer's hour
		{3 * time.Millisecond, false, context.Canceled},    // the timer stays set for it
		{3 * time.Millisecond, true, context.DeadlineExceeded},
		{time.Hour, false, context.Canceled},
		{2 * time.Millisecond, false, context.Canceled},
		{time.Hour, false, context.Canceled},
		{5 * time.Millisecond, true, context.DeadlineExceeded},
	}
	run, cancel := context.WithCancel(context.Background())
	defer cancel()
	cd := newClientDeadlines(run)
	defer cd.close()
	var ops []context.Context
	for round := range 3 {
		for i, st := range steps {
			op, e := cd.start(run, st.timeout)
			if st.wait {
				<-op.Done()
			} else if err := op.Err(); err != nil {
				t.Fatalf("round %d, operation %d is done at its start: %v", round, i, err)
			}
			e.end()
			ops = append(ops, op)
		}
	}
	for i, op := range ops {
		if want := steps[i%len(steps)].want; op.Err() != want {
			t.Errorf("operation %d ended with %v, want %v", i, op.Err(), want)
		}
	}
}

// BenchmarkOpContext is one operation's context made, asked for Done (as
// go-redis does before every command) and ended, by 16 clients on one
// run's context, both ways.
func BenchmarkOpContext(b *testing.B) {
	ways := []struct {
		name  string
		start func(cd *clientDeadlines, run context.Context) (context.Context, func())
	}{
		{"context.WithTimeout", func(_ *clientDeadlines, run context.Context) (context.Context, func()) {
			ctx, cancel := context.WithTimeout(run, time.Second)
			return ctx, cancel
		}},
		{"clientDeadlines", func(cd *clientDeadlines, run context.Context) (context.Context, func()) {
			ctx, e := cd.start(run, time.Second)
			return ctx, e.end
		}},
	}
	for _, w := range ways {
		b.Run(w.name, func(b *testing.B) {
			run, cancel := context.WithCancel(context.Background())
			defer cancel()
			b.ReportAllocs()
			b.SetParallelism(8) // 16 clients on 2 cores
			b.RunParallel(func(pb *testing.PB) {
				cd := newClientDeadlines(run)
				defer cd.close()
				for pb.Next() {
					op, end := w.start(cd, run)
					select {
					case <-op.Done():
					default:
					}
					end()
				}
			})
		})
	}
}
