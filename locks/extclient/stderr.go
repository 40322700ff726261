package extclient

import (
	"fmt"
	"os"
	"sync"
)

// A client's stderr file keeps its first stderrHead bytes and its last
// stderrTail bytes: a client that logged in a loop wrote 518 MB in a 2 s
// run. The beginning says how it started; the end is what it said before
// it failed, which the harness quotes.
const (
	stderrHead = 2 << 20
	stderrTail = 2 << 20
)

// tail keeps the last max bytes written to it, in a ring, so that a
// client writing gigabytes costs a copy of each byte and nothing more.
type tail struct {
	mu      sync.Mutex
	buf     []byte
	pos     int   // where the next byte goes
	full    bool  // buf has wrapped: the oldest byte is at pos
	dropped int64 // bytes pushed out
}

func newTail(max int) *tail { return &tail{buf: make([]byte, max)} }

// Write never fails: the client's stderr is a log, and an error here
// would stop the copy and block the client on its next write.
func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, max := len(p), len(t.buf)
	if n >= max {
		t.dropped += int64(t.len() + n - max)
		copy(t.buf, p[n-max:])
		t.pos, t.full = 0, true
		return n, nil
	}
	if over := t.len() + n - max; over > 0 {
		t.dropped += int64(over)
	}
	k := copy(t.buf[t.pos:], p)
	if k < n {
		copy(t.buf, p[k:])
		t.full = true
	}
	t.pos = (t.pos + n) % max
	if t.pos == 0 && n > 0 {
		t.full = true
	}
	return n, nil
}

func (t *tail) len() int {
	if t.full {
		return len(t.buf)
	}
	return t.pos
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.full {
		return string(t.buf[:t.pos])
	}
	return string(t.buf[t.pos:]) + string(t.buf[:t.pos])
}

// cappedFile is a client's stderr file: the first stderrHead bytes are
// written as they come (a live run can be followed with tail -f until
// then), the rest is kept in a tail and written when the client has
// exited, after a note of how many bytes were dropped between the two.
type cappedFile struct {
	f        *os.File
	headSize int
	head     int // bytes still to write straight to the file
	end      *tail
	err      error // the first write error, reported in the file's note if it can be
}

func newCappedFile(f *os.File, head, tailSize int) *cappedFile {
	return &cappedFile{f: f, headSize: head, head: head, end: newTail(tailSize)}
}

// Write never fails, for the reason tail.Write does not.
func (c *cappedFile) Write(p []byte) (int, error) {
	n := len(p)
	if c.head > 0 {
		k := min(c.head, len(p))
		if _, err := c.f.Write(p[:k]); err != nil && c.err == nil {
			c.err = err
		}
		c.head -= k
		p = p[k:]
	}
	if len(p) > 0 {
		c.end.Write(p)
	}
	return n, nil
}

// Close writes the kept end, after the note of what was dropped, and
// closes the file.
func (c *cappedFile) Close() error {
	end := c.end.String()
	if c.end.dropped > 0 {
		end = fmt.Sprintf("\n[lockjepsen: %d bytes of this client's stderr dropped here; the file keeps the first %d and the last %d]\n",
			c.end.dropped, c.headSize, len(c.end.buf)) + end
	}
	if end != "" {
		if _, err := c.f.WriteString(end); err != nil && c.err == nil {
			c.err = err
		}
	}
	if err := c.f.Close(); err != nil && c.err == nil {
		c.err = err
	}
	if c.err != nil {
		return fmt.Errorf("client stderr file %s: %w", c.f.Name(), c.err)
	}
	return nil
}
