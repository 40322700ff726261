package history

import (
	"sync"
	"time"

	"github.com/lockjepsen/lockjepsen/internal/ctxsleep"
)

// Recorder appends events to a history file as the run goes. It is safe for
// concurrent use; indices and times are assigned under one lock so that the
// file is ordered by both. The file is flushed periodically so that a harness
// that dies leaves a readable prefix.
//
// The clients' hot path only stamps and encodes an event into a batch in
// memory. Compressing and writing happen in one goroutine of the
// recorder's own, which takes full batches over a bounded queue: a client
// never waits on zstd or the disk while holding the lock the others need,
// and the memory held is bounded (a client waits only when the writer is
// maxBatches behind).
type Recorder struct {
	start time.Time

	mu      sync.Mutex
	batch   []byte // events encoded since the last hand-off
	dirty   bool   // something was handed off since the last flush
	next    int64
	last    int64 // the latest event's time
	closed  bool
	observe []func(Op)
	sum     *failSummary // nil: every event is written as recorded

	w    *batchWriter
	stop chan struct{}
	done chan struct{}
}

// FlushInterval bounds how much history a crashed harness can lose.
const FlushInterval = 200 * time.Millisecond

// batchSize is when a batch is handed to the writer: the zstd encoder's
// block size, so that each hand-off is compressed whole.
const batchSize = 128 << 10

// maxBatches bounds the batches queued or being written.
const maxBatches = 8

// Create starts a history file at path; times are measured from start. A
// path ending in CompressedSuffix is written as a zstd stream.
func Create(path string, start time.Time) (*Recorder, error) {
	out, err := CreateWriter(path)
	if err != nil {
		return nil, err
	}
	r := &Recorder{
		start: start,
		w:     newBatchWriter(out),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	r.batch = r.w.buffer()
	go r.w.run()
	go r.flushLoop()
	return r, nil
}

// Path is the history file's path.
func (r *Recorder) Path() string { return r.w.out.f.Name() }

// Start is the instant that time 0 of the history stands for.
func (r *Recorder) Start() time.Time { return r.start }

// Now is the current time on the history's clock.
func (r *Recorder) Now() int64 { return int64(time.Since(r.start)) }

// At converts an instant (with its monotonic reading) to the history's clock.
func (r *Recorder) At(t time.Time) int64 { return int64(t.Sub(r.start)) }

// Record stamps op with the next index and the current time, writes it and
// returns the stamped event. With failed acquires summarised, an event may
// be written later than it is recorded, and the index returned is 0.
func (r *Recorder) Record(op Op) Op {
	r.mu.Lock()
	if r.closed {
		// Not in the history, so neither numbered nor shown to
		// observers: the harness's check alongside the run counts on
		// seeing exactly the written events.
		r.mu.Unlock()
		op.Time = int64(time.Since(r.start))
		return op
	}
	if r.sum != nil {
		if now := r.Now(); now >= r.sum.bucketEnd {
			r.summarizeLocked(now)
		}
		op.Time = r.stamp()
		r.queueLocked(op)
	} else {
		op.Time = r.stamp()
		op = r.writeLocked(op)
	}
	r.mu.Unlock()
	return op
}

// stamp is the time of the next event. Strictly increasing: two events
// never share an instant, so an observer knows that whatever it sees
// next happened later.
func (r *Recorder) stamp() int64 {
	r.last = max(int64(time.Since(r.start)), r.last+1)
	return r.last
}

// writeLocked numbers a stamped event, encodes it into the batch and shows
// it to the observers.
func (r *Recorder) writeLocked(op Op) Op {
	op.Index = r.next
	r.next++
	r.batch = AppendJSON(r.batch, &op)
	r.batch = append(r.batch, '\n')
	if len(r.batch) >= batchSize {
		r.handOffLocked(false, nil)
	}
	for _, f := range r.observe {
		f(op)
	}
	return op
}

// handOffLocked queues the batch for the writer, flushing the file after
// it when flush is set, and closes done once that is written.
func (r *Recorder) handOffLocked(flush bool, done chan struct{}) {
	if len(r.batch) == 0 && done == nil && (!flush || !r.dirty) {
		return
	}
	r.w.todo <- chunk{buf: r.batch, flush: flush, done: done}
	r.dirty = !flush
	r.batch = r.w.buffer()
}

// Observe calls f with every event recorded from now on until Close, in
// the history's order (times strictly increasing), under the recorder's
// lock: f must be quick and must not record.
func (r *Recorder) Observe(f func(Op)) {
	r.mu.Lock()
	r.observe = append(r.observe, f)
	r.mu.Unlock()
}

// Failed is closed at the first error writing the history (a full disk):
// what the run records from then on is lost, so it should stop at once.
func (r *Recorder) Failed() <-chan struct{} { return r.w.failed }

// Err is the first error writing the history, if any.
func (r *Recorder) Err() error { return r.w.firstErr() }

// Count is the number of events recorded so far; after Close, the number
// in the history.
func (r *Recorder) Count() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.next
}

func (r *Recorder) flushLoop() {
	defer close(r.done)
	ctxsleep.Every(r.stop, FlushInterval, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if !r.closed {
			r.flushLocked(false, true, nil)
		}
	})
}

// flushLocked is handOffLocked preceded by writing out what summarising
// holds back (everything when final): a hand-off alone would leave those
// events out of what it flushes.
func (r *Recorder) flushLocked(final, flush bool, done chan struct{}) {
	if r.sum != nil {
		r.flushSummaryLocked(final)
	}
	r.handOffLocked(flush, done)
}

// flushNow writes and flushes every event recorded so far and waits for
// it: what the flush loop does, synchronously, for tests.
func (r *Recorder) flushNow() error {
	done := make(chan struct{})
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return r.Err()
	}
	r.flushLocked(false, true, done)
	r.mu.Unlock()
	<-done
	return r.Err()
}

// Close flushes and syncs the file and returns the first write error, if
// any. Events recorded after Close are dropped. Close is idempotent.
func (r *Recorder) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return r.Err()
	}
	r.flushLocked(true, false, nil)
	r.closed = true
	r.mu.Unlock()
	close(r.stop)
	<-r.done
	return r.w.close()
}
