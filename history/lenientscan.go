package history

import (
	"bytes"
	"io"
	"runtime"
	"sync"
)

// scanChunkSize is how much of the file a LenientScanner parses at once:
// small enough that the few chunks in flight cost a few MB, large enough
// that handing them between goroutines costs nothing.
var scanChunkSize = 256 << 10

// LenientScanner reads a history for display one event at a time: the
// same events, bad-line count and truncation as ReadLenient, in memory
// that does not grow with the history. A report of an hour-long run (18
// million events) cannot hold every event, and a report must still show
// what a damaged run recorded, where Scanner stops at the first bad line.
// Chunks are parsed in parallel, a few ahead of the reader.
type LenientScanner struct {
	f      *File
	chunks chan *scanChunk // in file order
	done   chan struct{}
	wg     sync.WaitGroup
	once   sync.Once
	cur    []Op
	events int
	bad    int
	first  string
	// Written by the reading goroutine before it closes chunks.
	truncated bool
	corrupt   string
	err       error
}

type scanChunk struct {
	data  []byte
	ops   []Op
	bad   []string
	ready chan struct{} // closed once parsed
}

// OpenLenient opens a history file of either format for lenient
// scanning; Close releases it and stops the parsing goroutines.
func OpenLenient(path string) (*LenientScanner, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	workers := max(1, runtime.GOMAXPROCS(0))
	s := &LenientScanner{f: f, chunks: make(chan *scanChunk, workers), done: make(chan struct{})}
	jobs := make(chan *scanChunk)
	for range workers {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			p := newLineParser()
			for c := range jobs {
				c.ops, c.bad, _ = p.parseChunk(c.data)
				c.data = nil
				close(c.ready)
			}
		}()
	}
	s.wg.Add(1)
	go s.read(jobs)
	return s, nil
}

// read cuts the file into chunks of whole lines, as ReadLenient does,
// queues each for the reader before a worker parses it, and ends with the
// last line when it has no newline: an event if it parses, else the mark
// of a truncated history.
func (s *LenientScanner) read(jobs chan<- *scanChunk) {
	defer s.wg.Done()
	defer close(s.chunks)
	defer close(jobs)
	var lines lineCutter
	buf := make([]byte, scanChunkSize)
	for {
		n, err := io.ReadFull(s.f, buf)
		if n > 0 {
			whole, dropped := lines.cut(buf[:n])
			if dropped && !s.queue(&scanChunk{bad: []string{longLine}, ready: closed()}, nil) {
				return
			}
			if whole != nil && !s.queue(&scanChunk{data: whole, ready: make(chan struct{})}, jobs) {
				return
			}
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			s.err = err
			return
		}
	}
	s.corrupt = s.f.Corrupt()
	s.truncated = s.f.Cut() || s.corrupt != ""
	if last := bytes.TrimSpace(lines.carry); len(last) > 0 {
		c := &scanChunk{ready: make(chan struct{})}
		var op Op
		if newLineParser().parse(last, &op) {
			c.ops = []Op{op}
		} else {
			s.truncated = true
		}
		close(c.ready)
		select {
		case s.chunks <- c:
		case <-s.done:
		}
	}
}

// Next returns the next event; false at the end of the history or when
// reading failed (see Err).
func (s *LenientScanner) Next() (Op, bool) {
	for len(s.cur) == 0 {
		c, ok := <-s.chunks
		if !ok {
			return Op{}, false
		}
		<-c.ready
		s.cur = c.ops
		for _, b := range c.bad {
			s.bad++
			if s.first == "" {
				s.first = b
			}
		}
	}
	op := s.cur[0]
	s.cur = s.cur[1:]
	s.events++
	return op, true
}

// Err is the read error that ended the scan early, nil at the end of the
// history. Unreadable lines are not errors: see Bad.
func (s *LenientScanner) Err() error { return s.err }

// Events counts the events returned so far.
func (s *LenientScanner) Events() int { return s.events }

// Bad counts the lines skipped so far as not events and describes the
// first, as LenientRead's Bad and FirstBad.
func (s *LenientScanner) Bad() (n int, first string) { return s.bad, s.first }

// Truncated reports, once Next has returned false, whether the last line
// is incomplete or a compressed stream ended early.
func (s *LenientScanner) Truncated() bool { return s.truncated }

// Corrupt describes, once Next has returned false, where the compressed
// data was found damaged; "" when it was not. Truncated is then set too.
func (s *LenientScanner) Corrupt() string { return s.corrupt }

// Close stops the parsing and closes the file; it may be called before
// the end, and more than once.
func (s *LenientScanner) Close() error {
	var err error
	s.once.Do(func() {
		close(s.done)
		for range s.chunks { // unblock the reader if the queue is full
		}
		s.wg.Wait()
		err = s.f.Close()
	})
	return err
}

// queue hands c to the reader, in file order, and then to a parser
// (jobs nil: c is parsed already); false when the scanner was closed.
func (s *LenientScanner) queue(c *scanChunk, jobs chan<- *scanChunk) bool {
	select {
	case s.chunks <- c:
	case <-s.done:
		return false
	}
	if jobs != nil {
		jobs <- c
	}
	return true
}

func closed() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}
