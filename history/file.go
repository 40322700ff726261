package history

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// CompressedSuffix ends the name of a history written as one zstd stream
// of the JSON Lines format. The recorder compresses when the path it is
// given ends so; every reader here detects the format by its content, so
// a renamed file still reads.
const CompressedSuffix = ".zst"

// zstdMagic opens every zstd frame (RFC 8878, section 3.1.1).
var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// ErrCorrupt is the error of a compressed history damaged before anything
// could be read from it: there is no prefix to check, and the file is bad
// input rather than a failure of the reader.
var ErrCorrupt = errors.New("the compressed data is corrupt")

// File is a history file opened for reading, plain or compressed: Read
// always yields JSON Lines.
type File struct {
	f   *os.File
	r   io.Reader
	dec *zstd.Decoder
	// cut is set when a compressed stream ended before its frame did (a
	// harness that died mid-run): what was flushed before is read, and
	// Read then reports io.EOF.
	cut bool
	// src counts what the decoder took from the file, so that a stream
	// that ends early (the file ran out) can be told from a corrupt one
	// (the decoder gave up with bytes still to read): the decoder reports
	// both as io.ErrUnexpectedEOF at times.
	src *countingReader
	// corrupt describes where the compressed data turned out damaged;
	// what was decoded before is read, and Read then reports io.EOF.
	corrupt string
	decoded int64 // bytes of JSON Lines returned so far
}

// countingReader counts the bytes read through it and remembers how the
// underlying reader stopped.
type countingReader struct {
	r   io.Reader
	n   int64
	err error
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if err != nil {
		c.err = err
	}
	return n, err
}

// Open opens a history file of either format.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open history: %w", err)
	}
	br := bufio.NewReaderSize(f, 1<<20)
	head, err := br.Peek(len(zstdMagic))
	if err != nil && err != io.EOF {
		f.Close()
		return nil, fmt.Errorf("read history %s: %w", path, err)
	}
	h := &File{f: f, r: br}
	if bytes.Equal(head, zstdMagic) {
		h.src = &countingReader{r: br}
		dec, err := zstd.NewReader(h.src, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("read history %s: %w", path, err)
		}
		h.r, h.dec = dec, dec
	}
	return h, nil
}

// Compressed reports whether the file is zstd.
func (h *File) Compressed() bool { return h.dec != nil }

// Cut reports whether a compressed stream ended early; only meaningful
// once Read has returned io.EOF.
func (h *File) Cut() bool { return h.cut }

// Corrupt describes, once Read has returned io.EOF, where the compressed
// data was found damaged; "" when it was not.
func (h *File) Corrupt() string { return h.corrupt }

func (h *File) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	h.decoded += int64(n)
	if h.dec != nil && err != nil && err != io.EOF {
		err = h.decodeError(err)
	}
	if err != nil && err != io.EOF {
		err = fmt.Errorf("read history %s: %w", h.f.Name(), err)
	}
	return n, err
}

// decodeError sorts the decoder's error: a stream whose file ran out in
// the middle of a block was cut (a harness killed mid-run), one the
// decoder rejected with data still to come is corrupt. Both end the
// reading with io.EOF, so that the prefix before is read; an error of the
// file itself, or damage before anything decoded (no prefix: not a
// history at all), stays an error.
func (h *File) decodeError(err error) error {
	if h.src.err != nil && h.src.err != io.EOF {
		return err
	}
	if h.src.err == io.EOF && errors.Is(err, io.ErrUnexpectedEOF) {
		h.cut = true
		return io.EOF
	}
	if h.decoded == 0 {
		return fmt.Errorf("%w from its start: %w", ErrCorrupt, err)
	}
	size := "?"
	if st, serr := h.f.Stat(); serr == nil {
		size = fmt.Sprint(st.Size())
	}
	h.corrupt = fmt.Sprintf("the compressed data is corrupt (%v) near byte %d of %s", err, h.src.n, size)
	return io.EOF
}

// Close closes the file.
func (h *File) Close() error {
	if h.dec != nil {
		h.dec.Close()
	}
	return h.f.Close()
}

// compressedWriter is the recorder's sink for a .zst path: Flush ends a
// zstd block, so that what was flushed can be read back even if the
// process dies before Close ends the frame.
type compressedWriter struct{ enc *zstd.Encoder }

func newSink(f *os.File) (sink, error) {
	if !strings.HasSuffix(f.Name(), CompressedSuffix) {
		return plainSink{f}, nil
	}
	// The fastest level already shrinks a history about sevenfold, and a
	// single goroutine keeps the recorder's CPU off the cores the servers
	// under test need. A history's repeats are between nearby lines, so a
	// 128 KiB window compresses as well as the default 8 MiB (better: its
	// offsets are shorter) and the encoder's history buffer stays small:
	// with the default window and WithLowerEncoderMem the encoder moved
	// 8 MiB down for every 128 KiB block, which cost more CPU than the
	// compression itself once a run passed 8 MiB.
	enc, err := zstd.NewWriter(f, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(128<<10))
	if err != nil {
		return nil, fmt.Errorf("create history %s: %w", f.Name(), err)
	}
	return compressedWriter{enc}, nil
}

// sink is where the recorder's buffer drains.
type sink interface {
	io.Writer
	Flush() error
	Close() error // ends the stream; the file stays open
}

type plainSink struct{ *os.File }

func (plainSink) Flush() error { return nil }
func (plainSink) Close() error { return nil }

func (c compressedWriter) Write(p []byte) (int, error) { return c.enc.Write(p) }
func (c compressedWriter) Flush() error                { return c.enc.Flush() }
func (c compressedWriter) Close() error                { return c.enc.Close() }

// Writer writes JSON Lines bytes to a history file, compressed when its
// path ends in CompressedSuffix: the recorder's format, for tools that
// convert a history rather than record one.
type Writer struct {
	f    *os.File
	sink sink
	w    *bufio.Writer
}

// CreateWriter creates path, which must not exist.
func CreateWriter(path string) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create history: %w", err)
	}
	s, err := newSink(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &Writer{f: f, sink: s, w: bufio.NewWriterSize(s, 1<<20)}, nil
}

func (w *Writer) Write(p []byte) (int, error) { return w.w.Write(p) }

// Flush writes out what is buffered; a compressed stream ends a block, so
// that what was flushed reads back even if the process dies next.
func (w *Writer) Flush() error {
	if err := w.w.Flush(); err != nil {
		return err
	}
	return w.sink.Flush()
}

// Close ends the stream and syncs and closes the file.
func (w *Writer) Close() error {
	err := w.w.Flush()
	for _, step := range []func() error{w.sink.Close, w.f.Sync, w.f.Close} {
		if e := step(); err == nil && e != nil {
			err = fmt.Errorf("write history %s: %w", w.f.Name(), e)
		}
	}
	return err
}
