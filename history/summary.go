package history

import (
	"cmp"
	"slices"
	"time"
)

// SummaryBucket is the span of one summary: failed acquires are counted
// per process, key and second.
const SummaryBucket = time.Second

// maxHeld is how long an acquire's invoke may wait for its outcome before
// it is written as it is: everything recorded after it waits with it, so
// this bounds the memory held and how far the file lags. An acquire that
// takes longer (a timeout, a paused node) is recorded in full.
const maxHeld = time.Second

// failSummary is a recorder's state when failed acquires are summarised.
// An invoke is written before its outcome is known, so an acquire's invoke
// is held back until it is: a fail drops the pair and counts it, anything
// else writes both. Events are stamped when recorded and written in that
// order, so the file's times still increase, and numbered as written, so
// its indices have no holes.
type failSummary struct {
	// queue holds the stamped events not yet written, oldest first;
	// base is the position of queue[0] among all events ever queued.
	queue []queuedOp
	base  int64
	// spare is where an emptied queue starts again, so that the queue's
	// array is not allocated anew each time it drains (nearly every event).
	spare []queuedOp
	held  map[int]int64 // process -> position of its held acquire invoke
	// counts are the current second's failed acquires; bucketEnd is when
	// that second ends on the history's clock.
	counts    map[summaryKey]*summaryCount
	bucketEnd int64
}

type queuedOp struct {
	op            Op
	held, dropped bool
}

type summaryKey struct {
	process int
	key     string
}

type summaryCount struct{ n, from, to int64 }

// SummarizeFailedAcquires makes the recorder write failed acquires as
// summary events (one per process, key and SummaryBucket) instead of one
// invoke and one fail each. Call it before recording anything.
func (r *Recorder) SummarizeFailedAcquires() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sum = &failSummary{held: map[int]int64{}, counts: map[summaryKey]*summaryCount{},
		bucketEnd: int64(SummaryBucket), spare: make([]queuedOp, 0, 256)}
	r.sum.queue = r.sum.spare
}

// queueLocked takes a stamped event in summary mode and writes what no
// held invoke holds back any more. The caller has queued the summaries of
// a second that ended before op was stamped.
func (r *Recorder) queueLocked(op Op) {
	s := r.sum
	isAcquire := op.Process >= 0 && op.F == Acquire
	switch {
	case isAcquire && op.Type == Invoke:
		s.held[op.Process] = s.base + int64(len(s.queue))
		s.queue = append(s.queue, queuedOp{op: op, held: true})
	case isAcquire && op.Type != Summary:
		if pos, ok := s.held[op.Process]; ok {
			delete(s.held, op.Process)
			inv := &s.queue[pos-s.base]
			inv.held = false
			if op.Type == Fail {
				inv.dropped = true
				s.count(op.Process, op.Key, inv.op.Time, op.Time)
				break
			}
		}
		s.queue = append(s.queue, queuedOp{op: op})
	default:
		s.queue = append(s.queue, queuedOp{op: op})
	}
	r.drainLocked(op.Time)
}

func (s *failSummary) count(process int, key string, from, to int64) {
	k := summaryKey{process, key}
	c := s.counts[k]
	if c == nil {
		c = &summaryCount{from: from}
		s.counts[k] = c
	}
	c.n++
	c.from, c.to = min(c.from, from), max(c.to, to)
}

// summarizeLocked queues the summaries of the second that ended before
// now, stamped now, and starts now's second.
func (r *Recorder) summarizeLocked(now int64) {
	s := r.sum
	keys := make([]summaryKey, 0, len(s.counts))
	for k := range s.counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b summaryKey) int {
		return cmp.Or(cmp.Compare(a.process, b.process), cmp.Compare(a.key, b.key))
	})
	for _, k := range keys {
		c := s.counts[k]
		s.queue = append(s.queue, queuedOp{op: Op{Time: r.stamp(), Process: k.process, Type: Summary, F: Acquire,
			Key: k.key, Value: &Value{Count: c.n, From: I64(c.from), To: I64(c.to)}}})
	}
	clear(s.counts)
	b := int64(SummaryBucket)
	s.bucketEnd = (now/b + 1) * b
}

// drainLocked writes the queued events up to the first one still held,
// letting go of a hold older than maxHeld at now.
func (r *Recorder) drainLocked(now int64) {
	s := r.sum
	n := 0
	for ; n < len(s.queue); n++ {
		q := &s.queue[n]
		if q.held {
			if now-q.op.Time < int64(maxHeld) {
				break
			}
			q.held = false
			if s.held[q.op.Process] == s.base+int64(n) {
				delete(s.held, q.op.Process)
			}
		}
		if !q.dropped {
			r.writeLocked(q.op)
		}
	}
	if n == 0 {
		return
	}
	clear(s.queue[:n]) // let the written events' values go
	s.queue = s.queue[n:]
	s.base += int64(n)
	if len(s.queue) == 0 {
		s.queue = s.spare[:0]
	}
}

// flushSummaryLocked writes the summaries of the second that has ended and
// what no longer waits; at the end (final), everything, held or not.
func (r *Recorder) flushSummaryLocked(final bool) {
	now := r.Now()
	if final || now >= r.sum.bucketEnd {
		r.summarizeLocked(now)
	}
	if final {
		for i := range r.sum.queue {
			r.sum.queue[i].held = false
		}
		clear(r.sum.held)
	}
	r.drainLocked(now)
}
