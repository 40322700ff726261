package history

import (
	"bufio"
	"bytes"
	"fmt"
)

// MaxLine is the longest history line the readers accept. The recorder
// writes events of a few hundred bytes; a longer line is damage or a
// hostile file, and reading it whole cost 11.6 GB for a 34 KB compressed
// history holding one 1 GiB line. A client's protocol line has the same
// cap.
const MaxLine = 1 << 20

// longLine describes a line over MaxLine for the lenient readers' count
// of bad lines.
var longLine = fmt.Sprintf("(a line of more than %d bytes, skipped)", MaxLine)

// readLine reads one line, newline included, for the strict reader; a
// line longer than MaxLine is a FormatError before more of it is read.
func readLine(br *bufio.Reader, name string, n int) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		line = append(line, frag...)
		if len(line) > MaxLine {
			return nil, &FormatError{name, n, fmt.Sprintf("a line of more than %d bytes: not a history event", MaxLine)}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return line, err
	}
}

// lineCutter cuts a stream read in chunks into runs of whole lines, as
// both lenient readers do, holding at most MaxLine of an unfinished line:
// a longer one is dropped as it is read and counted.
type lineCutter struct {
	carry    []byte
	skipping bool // inside a dropped line, until its newline
}

// cut takes the next chunk read and returns the whole lines it completes,
// and whether it dropped a line for being too long.
func (c *lineCutter) cut(b []byte) (whole []byte, dropped bool) {
	if c.skipping {
		nl := bytes.IndexByte(b, '\n')
		if nl < 0 {
			return nil, false
		}
		c.skipping, b = false, b[nl+1:]
	}
	data := append(c.carry, b...)
	if cut := bytes.LastIndexByte(data, '\n'); cut >= 0 {
		whole, data = data[:cut+1], data[cut+1:]
	}
	c.carry = append([]byte(nil), data...)
	if len(c.carry) > MaxLine {
		c.carry, c.skipping, dropped = nil, true, true
	}
	return whole, dropped
}
