package history

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"sync"
)

// LenientRead is what ReadLenient could read.
type LenientRead struct {
	Ops []Op
	// Bad counts unreadable lines; FirstBad describes the first.
	Bad      int
	FirstBad string
	// Truncated is set when the last line is incomplete.
	Truncated bool
	// Corrupt describes damaged compressed data, after which nothing
	// could be read; Truncated is then set too.
	Corrupt string
}

const chunkSize = 4 << 20

// ReadLenient reads a history for display. It is lenient where ReadFile
// validates: a report must show what a damaged run recorded, so an
// unreadable line is skipped and counted, not fatal. It is also fast: a
// million-operation history (two million lines) must be read in a few
// seconds, so lines in the format the recorder writes are parsed by hand,
// in parallel, and only unusual ones go through encoding/json.
func ReadLenient(path string) (*LenientRead, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	chunks, carry, err := parseChunks(f)
	if err != nil {
		return nil, err
	}
	hr := joinChunks(chunks)
	hr.Corrupt = f.Corrupt()
	hr.Truncated = f.Cut() || hr.Corrupt != ""
	if len(bytes.TrimSpace(carry)) > 0 {
		// A last line without a newline: complete if it parses.
		p := newLineParser()
		var op Op
		if p.parse(bytes.TrimSpace(carry), &op) {
			hr.Ops = append(hr.Ops, op)
		} else {
			hr.Truncated = true
		}
	}
	return hr, nil
}

// lenientChunk is a run of whole lines of the history and what its
// parse found.
type lenientChunk struct {
	data  []byte
	ops   []Op
	bad   []string
	lines int
}

// parseChunks cuts r into chunks of whole lines, parses them on every
// core, and returns them in order, with what followed the last newline.
func parseChunks(r io.Reader) (chunks []*lenientChunk, carry []byte, err error) {
	workers := max(1, runtime.GOMAXPROCS(0))
	jobs := make(chan *lenientChunk, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			p := newLineParser()
			for c := range jobs {
				c.ops, c.bad, c.lines = p.parseChunk(c.data)
			}
		})
	}
	buf := make([]byte, chunkSize)
	var lines lineCutter
	for {
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			whole, dropped := lines.cut(buf[:n])
			if dropped {
				chunks = append(chunks, &lenientChunk{bad: []string{longLine}})
			}
			if whole != nil {
				c := &lenientChunk{data: whole}
				chunks = append(chunks, c)
				jobs <- c
			}
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			err = rerr
			break
		}
	}
	close(jobs)
	wg.Wait()
	if err != nil {
		return nil, nil, err
	}
	return chunks, lines.carry, nil
}

// joinChunks puts the chunks' operations together in order and counts
// their bad lines.
func joinChunks(chunks []*lenientChunk) *LenientRead {
	hr := &LenientRead{}
	total := 0
	for _, c := range chunks {
		total += len(c.ops)
	}
	hr.Ops = make([]Op, 0, total+1)
	for _, c := range chunks {
		hr.Ops = append(hr.Ops, c.ops...)
		for _, b := range c.bad {
			hr.Bad++
			if hr.FirstBad == "" {
				hr.FirstBad = b
			}
		}
	}
	return hr
}

// lineParser parses the recorder's own output. Anything it does not
// expect (escapes, unknown fields, other spacing) makes it fall back to
// encoding/json for that line.
type lineParser struct {
	b      []byte
	i      int
	strs   map[string]string
	ttls   map[int64]*Value
	values []Value // allocated in blocks
}

func newLineParser() *lineParser {
	return &lineParser{strs: map[string]string{}, ttls: map[int64]*Value{}}
}

func (p *lineParser) parseChunk(data []byte) (ops []Op, bad []string, lines int) {
	ops = make([]Op, 0, len(data)/110+1)
	for len(data) > 0 {
		nl := bytes.IndexByte(data, '\n')
		line := data
		if nl >= 0 {
			line, data = data[:nl], data[nl+1:]
		} else {
			data = nil
		}
		lines++
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		var op Op
		if len(line) > MaxLine {
			bad = append(bad, longLine)
		} else if p.parse(line, &op) {
			ops = append(ops, op)
		} else if len(bad) < 1 {
			bad = append(bad, fmt.Sprintf("%.80s", line))
		} else {
			bad = append(bad, "")
		}
	}
	return ops, bad, lines
}

// parse fills op from one line; false when the line is not an event.
func (p *lineParser) parse(line []byte, op *Op) bool {
	p.b, p.i = line, 0
	if p.fast(op) {
		return true
	}
	*op = Op{}
	if err := json.Unmarshal(line, op); err != nil {
		return false
	}
	return true
}

func (p *lineParser) intern(b []byte) string {
	if len(b) > 64 {
		return string(b)
	}
	if s, ok := p.strs[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(p.strs) < 4096 {
		p.strs[s] = s
	}
	return s
}

func (p *lineParser) newValue() *Value {
	if len(p.values) == 0 {
		p.values = make([]Value, 256)
	}
	v := &p.values[0]
	p.values = p.values[1:]
	return v
}

func (p *lineParser) eat(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// str reads a string without escapes.
func (p *lineParser) str() ([]byte, bool) {
	if !p.eat('"') {
		return nil, false
	}
	start := p.i
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case '"':
			s := p.b[start:p.i]
			p.i++
			return s, true
		case '\\':
			return nil, false
		}
		p.i++
	}
	return nil, false
}

// text reads a string (see str) into a string of its own.
func (p *lineParser) text() (string, bool) {
	s, ok := p.str()
	return string(s), ok
}

// interned reads a string (see str) as intern shares it.
func (p *lineParser) interned() (string, bool) {
	s, ok := p.str()
	if !ok {
		return "", false
	}
	return p.intern(s), true
}

// intPtr reads a number as a Value's optional field holds it.
func (p *lineParser) intPtr() (*int64, bool) {
	n, ok := p.int()
	if !ok {
		return nil, false
	}
	return I64(n), true
}

// list reads an array whose elements elem reads, appending them to dst.
func list[T any](p *lineParser, dst *[]T, elem func() (T, bool)) bool {
	if !p.eat('[') {
		return false
	}
	for !p.eat(']') {
		x, ok := elem()
		if !ok {
			return false
		}
		*dst = append(*dst, x)
		p.eat(',')
	}
	return true
}

// boolean reads true or false.
func (p *lineParser) boolean() (bool, bool) {
	for _, w := range []string{"true", "false"} {
		if p.i+len(w) <= len(p.b) && string(p.b[p.i:p.i+len(w)]) == w {
			p.i += len(w)
			return w == "true", true
		}
	}
	return false, false
}

func (p *lineParser) int() (int64, bool) {
	start := p.i
	if p.i < len(p.b) && p.b[p.i] == '-' {
		p.i++
	}
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	if p.i == start {
		return 0, false
	}
	n, err := strconv.ParseInt(string(p.b[start:p.i]), 10, 64)
	return n, err == nil
}

func (p *lineParser) fast(op *Op) bool {
	seen := 0
	ok := p.eat('{') && p.fields(func(k []byte) bool {
		var ok bool
		switch string(k) {
		case "index":
			op.Index, ok = p.int()
			seen |= 1
		case "time":
			op.Time, ok = p.int()
			seen |= 2
		case "process":
			ok = p.process(op)
			seen |= 4
		case "type":
			var s string
			s, ok = p.interned()
			op.Type = Type(s)
		case "f":
			op.F, ok = p.interned()
		case "key":
			op.Key, ok = p.interned()
		case "error":
			op.Error, ok = p.interned()
		case "value":
			ok = p.value(op)
		}
		return ok
	})
	return ok && seen == 7 && p.i == len(p.b)
}

// fields reads an object's members, from after its '{' through its '}',
// handing each key to field, which reads the value: false when a member
// is not one field takes.
func (p *lineParser) fields(field func(k []byte) bool) bool {
	for {
		k, ok := p.str()
		if !ok || !p.eat(':') || !field(k) {
			return false
		}
		if p.eat('}') {
			return true
		}
		if !p.eat(',') {
			return false
		}
	}
}

// process reads an event's process: "nemesis" or a client's number.
func (p *lineParser) process(op *Op) bool {
	if p.i < len(p.b) && p.b[p.i] == '"' {
		s, ok := p.str()
		op.Process = NemesisProcess
		return ok && string(s) == "nemesis"
	}
	n, ok := p.int()
	op.Process = int(n)
	return ok && n >= 0 && n <= MaxProcess
}

func (p *lineParser) value(op *Op) bool {
	if !p.eat('{') {
		return false
	}
	if p.eat('}') {
		op.Value = p.newValue()
		return true
	}
	var v Value
	set := false
	ok := p.fields(func(k []byte) bool {
		var ok bool
		switch string(k) {
		case "ttl":
			v.TTL, ok = p.int()
			return ok
		case "count":
			v.Count, ok = p.int()
		case "valid_until":
			v.ValidUntil, ok = p.intPtr()
		case "started":
			v.Started, ok = p.intPtr()
		case "fence":
			v.Fence, ok = p.intPtr()
		case "n":
			v.N, ok = p.intPtr()
		case "from":
			v.From, ok = p.intPtr()
		case "to":
			v.To, ok = p.intPtr()
		case "token":
			v.Token, ok = p.text()
		case "phase":
			v.Phase, ok = p.interned()
		case "outcome":
			var s string
			s, ok = p.interned()
			v.Outcome = Type(s)
		case "ended":
			v.Ended, ok = p.interned()
		case "context":
			v.Context, ok = p.boolean()
		case "detail":
			v.Detail, ok = p.text()
		case "targets":
			ok = list(p, &v.Targets, p.text)
		case "clients":
			ok = list(p, &v.Clients, func() (int, bool) { n, ok := p.int(); return int(n), ok })
		default:
			return false
		}
		set = true
		return ok
	})
	if !ok {
		return false
	}
	if !set {
		// Only a TTL (every acquire invoke): share one value per TTL.
		if sv, ok := p.ttls[v.TTL]; ok {
			op.Value = sv
			return true
		}
		sv := &Value{TTL: v.TTL}
		p.ttls[v.TTL] = sv
		op.Value = sv
		return true
	}
	nv := p.newValue()
	*nv = v
	op.Value = nv
	return true
}
