package history

import (
	"fmt"
	"sync"
)

// chunk is one hand-off from the recorder to its writer.
type chunk struct {
	buf   []byte
	flush bool          // flush the file after writing buf
	done  chan struct{} // closed once buf is written and flushed (nil: nobody waits)
}

// batchWriter is the recorder's one writing goroutine: it takes batches of
// encoded events in the order they were handed off, writes them through
// the (compressing) Writer, and recycles their buffers.
type batchWriter struct {
	out    *Writer
	todo   chan chunk
	free   chan []byte
	made   int // buffers made so far; touched only under the recorder's lock
	exited chan struct{}

	mu  sync.Mutex
	err error
	// failed is closed at the first write error.
	failed chan struct{}
}

func newBatchWriter(out *Writer) *batchWriter {
	return &batchWriter{
		out:    out,
		todo:   make(chan chunk, maxBatches),
		free:   make(chan []byte, maxBatches+1),
		exited: make(chan struct{}),
		failed: make(chan struct{}),
	}
}

// buffer is an empty batch: a recycled one, a new one while fewer than
// maxBatches+1 exist, else the next one the writer frees. Called under the
// recorder's lock, so waiting here is the back-pressure on the clients.
func (w *batchWriter) buffer() []byte {
	select {
	case b := <-w.free:
		return b
	default:
	}
	if w.made <= maxBatches {
		w.made++
		return make([]byte, 0, batchSize+4<<10)
	}
	return <-w.free
}

func (w *batchWriter) run() {
	defer close(w.exited)
	for c := range w.todo {
		if w.firstErr() == nil {
			_, err := w.out.Write(c.buf)
			if err == nil && c.flush {
				err = w.out.Flush()
			}
			w.fail(err)
		}
		w.free <- c.buf[:0]
		if c.done != nil {
			close(c.done)
		}
	}
}

func (w *batchWriter) fail(err error) {
	if err == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = fmt.Errorf("write history %s: %w", w.out.f.Name(), err)
		close(w.failed)
	}
}

func (w *batchWriter) firstErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// close waits for every queued batch to be written, then ends the stream
// and syncs and closes the file. The caller has handed off the last batch
// and sends no more.
func (w *batchWriter) close() error {
	close(w.todo)
	<-w.exited
	if err := w.out.Close(); err != nil {
		w.mu.Lock()
		if w.err == nil {
			w.err = err // Close names the file already
			close(w.failed)
		}
		w.mu.Unlock()
	}
	return w.firstErr()
}
