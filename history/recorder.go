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
	err    error
	closed bool

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
		start: start,
		f:     f,
		w:     bufio.NewWriterSize(f, 1<<20),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
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
	op.Time = int64(time.Since(r.start))
	r.buf = AppendJSON(r.buf[:0], &op)
	r.buf = append(r.buf, '\n')
	if r.err == nil && !r.closed {
		_, r.err = r.w.Write(r.buf)
	}
	r.mu.Unlock()
	return op
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
				r.err = r.w.Flush()
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
	for _, step := range []func() error{r.w.Flush, r.f.Sync, r.f.Close} {
		if err := step(); err != nil && r.err == nil {
			r.err = fmt.Errorf("write history: %w", err)
		}
	}
	return r.err
}
