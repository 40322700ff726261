package history

import (
	"bufio"
	"fmt"
	"os"
	"sync"
	"time"
)

// Recorder appends events to a history file as the run goes. It is safe for
// concurrent use; indices and times are assigned under one lock so that the
// file is ordered by both. The file is flushed periodically so that a harness
// that dies leaves a readable prefix.
type Recorder struct {
	start time.Time

	mu     sync.Mutex
	f      *os.File
	w      *bufio.Writer
	buf    []byte
	next   int64
	last   int64 // the latest event's time
	err    error
	closed bool
	// failed is closed at the first write error.
	failed  chan struct{}
	observe []func(Op)

	stop chan struct{}
	done chan struct{}
}

// FlushInterval bounds how much history a crashed harness can lose.
const FlushInterval = 200 * time.Millisecond

// Create starts a history file at path; times are measured from start.
func Create(path string, start time.Time) (*Recorder, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create history: %w", err)
	}
	r := &Recorder{
		start:  start,
		f:      f,
		w:      bufio.NewWriterSize(f, 1<<20),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
		failed: make(chan struct{}),
	}
	go r.flushLoop()
	return r, nil
}

// Path is the history file's path.
func (r *Recorder) Path() string { return r.f.Name() }

// Start is the instant that time 0 of the history stands for.
func (r *Recorder) Start() time.Time { return r.start }

// Now is the current time on the history's clock.
func (r *Recorder) Now() int64 { return int64(time.Since(r.start)) }

// At converts an instant (with its monotonic reading) to the history's clock.
func (r *Recorder) At(t time.Time) int64 { return int64(t.Sub(r.start)) }

// Record stamps op with the next index and the current time, writes it and
// returns the stamped event.
func (r *Recorder) Record(op Op) Op {
	r.mu.Lock()
	op.Index = r.next
	r.next++
	// Strictly increasing: two events never share an instant, so an
	// observer knows that whatever it sees next happened later.
	op.Time = max(int64(time.Since(r.start)), r.last+1)
	r.last = op.Time
	r.buf = AppendJSON(r.buf[:0], &op)
	r.buf = append(r.buf, '\n')
	if r.err == nil && !r.closed {
		_, err := r.w.Write(r.buf)
		r.failLocked(err)
	}
	for _, f := range r.observe {
		f(op)
	}
	r.mu.Unlock()
	return op
}

// Observe calls f with every event recorded from now on, in the history's
// order (times strictly increasing), under the recorder's lock: f must be
// quick and must not record.
func (r *Recorder) Observe(f func(Op)) {
	r.mu.Lock()
	r.observe = append(r.observe, f)
	r.mu.Unlock()
}

// Failed is closed at the first error writing the history (a full disk):
// what the run records from then on is lost, so it should stop at once.
func (r *Recorder) Failed() <-chan struct{} { return r.failed }

// Err is the first error writing the history, if any.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

func (r *Recorder) failLocked(err error) {
	if err == nil || r.err != nil {
		return
	}
	r.err = fmt.Errorf("write history %s: %w", r.f.Name(), err)
	close(r.failed)
}

// Count is the number of events recorded so far.
func (r *Recorder) Count() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.next
}

func (r *Recorder) flushLoop() {
	defer close(r.done)
	t := time.NewTicker(FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			r.mu.Lock()
			if r.err == nil && !r.closed {
				r.failLocked(r.w.Flush())
			}
			r.mu.Unlock()
		}
	}
}

// Close flushes and syncs the file and returns the first write error, if
// any. Events recorded after Close are dropped. Close is idempotent.
func (r *Recorder) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return r.err
	}
	r.closed = true
	r.mu.Unlock()
	close(r.stop)
	<-r.done

	r.mu.Lock()
	defer r.mu.Unlock()
	for _, step := range []func() error{r.w.Flush, r.f.Sync} {
		if r.err == nil {
			r.failLocked(step())
		}
	}
	if err := r.f.Close(); r.err == nil {
		r.failLocked(err)
	}
	return r.err
}
