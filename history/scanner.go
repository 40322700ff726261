package history

import (
	"fmt"
)

// Scanner reads a history file, plain or compressed, one validated event
// at a time, so that a checker can consume a history of any length in
// memory that does not grow with it. It validates exactly as ReadFile does
// (the same decoder): a malformed line is a *FormatError from Err, and a
// damaged last line ends the scan with Truncated set.
type Scanner struct {
	f   *File
	d   *lineDecoder
	op  Op
	err error
}

// OpenScanner opens a history file of either format for scanning; Close
// releases it.
func OpenScanner(path string) (*Scanner, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	return &Scanner{f: f, d: newLineDecoder(f, path)}, nil
}

// Next returns the next event; false at the end of the history or on an
// error (see Err).
func (s *Scanner) Next() (Op, bool) {
	if s.err != nil {
		return Op{}, false
	}
	op, ok, err := s.d.next()
	if err != nil {
		s.err = err
		return Op{}, false
	}
	return op, ok
}

// Err is the error that ended the scan, nil at a clean (or truncated) end.
func (s *Scanner) Err() error { return s.err }

// Events counts the events returned so far.
func (s *Scanner) Events() int { return s.d.events }

// Truncated reports, once Next has returned false without an error,
// whether the history ended early, and where: a damaged last line, a
// compressed stream cut before its frame ended, or compressed data found
// corrupt (the description then says so).
func (s *Scanner) Truncated() (bool, string) {
	if s.f.Corrupt() != "" {
		return true, corruptAt(s.f, s.d.events)
	}
	if s.d.truncated {
		return true, s.d.truncatedAt
	}
	if s.f.Cut() {
		return true, fmt.Sprintf("the compressed stream ends early; the %d events flushed before were read", s.d.events)
	}
	return false, ""
}

// Result is the truncation information of a finished scan as a
// ReadResult without its events, for code that reports on both kinds of
// reading alike.
func (s *Scanner) Result() *ReadResult {
	t, at := s.Truncated()
	return &ReadResult{Truncated: t, TruncatedAt: at, Corrupt: s.f.Corrupt() != ""}
}

// Close closes the file.
func (s *Scanner) Close() error { return s.f.Close() }
