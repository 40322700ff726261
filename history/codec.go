package history

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// AppendJSON appends op as one JSON object (no newline) to b. It is written
// by hand because the recorder is on the clients' hot path.
func AppendJSON(b []byte, op *Op) []byte {
	b = append(b, `{"index":`...)
	b = strconv.AppendInt(b, op.Index, 10)
	b = append(b, `,"time":`...)
	b = strconv.AppendInt(b, op.Time, 10)
	b = append(b, `,"process":`...)
	if op.Process == NemesisProcess {
		b = append(b, `"nemesis"`...)
	} else {
		b = strconv.AppendInt(b, int64(op.Process), 10)
	}
	b = append(b, `,"type":`...)
	b = appendType(b, op.Type)
	b = append(b, `,"f":`...)
	b = appendString(b, op.F)
	if op.Key != "" {
		b = append(b, `,"key":`...)
		b = appendString(b, op.Key)
	}
	if v := op.Value; v != nil {
		b = append(b, `,"value":`...)
		b = appendValue(b, v)
	}
	if op.Error != "" {
		b = append(b, `,"error":`...)
		b = appendString(b, op.Error)
	}
	return append(b, '}')
}

// appendType writes the four types as constants, skipping strconv's
// quoting on the hot path; anything else is quoted as before.
func appendType(b []byte, t Type) []byte {
	switch t {
	case Invoke:
		return append(b, `"invoke"`...)
	case OK:
		return append(b, `"ok"`...)
	case Fail:
		return append(b, `"fail"`...)
	case Info:
		return append(b, `"info"`...)
	}
	return strconv.AppendQuote(b, string(t))
}

func appendValue(b []byte, v *Value) []byte {
	b = append(b, '{')
	first := true
	field := func(name string) {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, `":`...)
	}
	if v.TTL != 0 {
		field("ttl")
		b = strconv.AppendInt(b, v.TTL, 10)
	}
	if v.Token != "" {
		field("token")
		b = appendString(b, v.Token)
	}
	number := func(name string, n *int64) {
		if n != nil {
			field(name)
			b = strconv.AppendInt(b, *n, 10)
		}
	}
	number("valid_until", v.ValidUntil)
	number("started", v.Started)
	number("fence", v.Fence)
	number("n", v.N)
	if v.Count != 0 {
		field("count")
		b = strconv.AppendInt(b, v.Count, 10)
	}
	number("from", v.From)
	number("to", v.To)
	if len(v.Nodes) > 0 {
		field("nodes")
		b = appendStrings(b, v.Nodes)
	}
	if v.Outcome != "" {
		field("outcome")
		b = appendString(b, string(v.Outcome))
	}
	if v.Context {
		field("context")
		b = append(b, "true"...)
	}
	if v.Ended != "" {
		field("ended")
		b = appendString(b, v.Ended)
	}
	if v.Phase != "" {
		field("phase")
		b = appendString(b, v.Phase)
	}
	if len(v.Targets) > 0 {
		field("targets")
		b = appendStrings(b, v.Targets)
	}
	if len(v.Clients) > 0 {
		field("clients")
		b = append(b, '[')
		for i, c := range v.Clients {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(c), 10)
		}
		b = append(b, ']')
	}
	if v.Detail != "" {
		field("detail")
		b = appendString(b, v.Detail)
	}
	return append(b, '}')
}

func appendStrings(b []byte, list []string) []byte {
	b = append(b, '[')
	for i, t := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, t)
	}
	return append(b, ']')
}

// appendString writes s as a JSON string. Tokens and keys are plain ASCII
// almost always; anything else goes through encoding/json for correct escaping.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			enc, _ := json.Marshal(s)
			return append(b, enc...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// MarshalJSON writes the file format.
func (op Op) MarshalJSON() ([]byte, error) { return AppendJSON(nil, &op), nil }

// UnmarshalJSON reads the file format; process is a number or "nemesis".
func (op *Op) UnmarshalJSON(data []byte) error {
	type plain Op
	var aux struct {
		plain
		Process json.RawMessage `json:"process"`
	}
	if err := json.Unmarshal(data, &aux); err != nil {
		return err
	}
	*op = Op(aux.plain)
	switch {
	case len(aux.Process) == 0:
		return errors.New(`missing "process"`)
	case string(aux.Process) == `"nemesis"`:
		op.Process = NemesisProcess
	default:
		p, err := strconv.Atoi(string(aux.Process))
		if err != nil || p < 0 {
			return fmt.Errorf(`"process" must be a non-negative integer or "nemesis", got %s`, aux.Process)
		}
		op.Process = p
	}
	return nil
}

// FormatError is a problem in a history file, located by line.
type FormatError struct {
	Path string
	Line int
	Msg  string
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("%s:%d: %s", e.Path, e.Line, e.Msg)
}

// ReadResult is what ReadFile could read.
type ReadResult struct {
	Ops []Op
	// Truncated is set when the file's last line is incomplete (a harness
	// that died mid-write); Ops then holds the readable prefix.
	Truncated bool
	// TruncatedAt describes where the readable prefix ends.
	TruncatedAt string
	// Corrupt is set, with Truncated, when the prefix ends not because
	// the file does but at compressed data found damaged: the events
	// after the damage are lost, not merely never written.
	Corrupt bool
}

// ReadFile reads and validates a history file, plain or compressed. A damaged last line (no
// trailing newline) is tolerated and reported through ReadResult.Truncated;
// any other malformed line is a *FormatError.
func ReadFile(path string) (*ReadResult, error) {
	return ReadFileContext(context.Background(), path)
}

// ReadFileContext is ReadFile that gives up with ctx's error when ctx is
// done: a large history takes seconds to read.
func ReadFileContext(ctx context.Context, path string) (*ReadResult, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	res, err := decode(ctx, f, path)
	if err == nil && f.Corrupt() != "" {
		res.Truncated, res.Corrupt = true, true
		res.TruncatedAt = corruptAt(f, len(res.Ops))
	} else if err == nil && f.Cut() && !res.Truncated {
		res.Truncated = true
		res.TruncatedAt = fmt.Sprintf("the compressed stream ends early; the %d events flushed before were read", len(res.Ops))
	}
	return res, err
}

// corruptAt says where a corrupt history's readable prefix ends, in its
// events and in the file's bytes.
func corruptAt(f *File, events int) string {
	return fmt.Sprintf("%s; only the %d events before the damage were read, the rest is lost", f.Corrupt(), events)
}

// Decode is ReadFile on any reader; name is used in errors.
func Decode(r io.Reader, name string) (*ReadResult, error) {
	return decode(context.Background(), r, name)
}

func decode(ctx context.Context, r io.Reader, name string) (*ReadResult, error) {
	d := newLineDecoder(r, name)
	res := &ReadResult{}
	for {
		if d.line%4096 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		op, ok, err := d.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		res.Ops = append(res.Ops, op)
	}
	res.Truncated, res.TruncatedAt = d.truncated, d.truncatedAt
	return res, nil
}

// lineDecoder reads and validates a history one event at a time: the
// in-memory reader (decode) and the streaming one (Scanner) share it, so
// that both accept and reject exactly the same files.
type lineDecoder struct {
	br          *bufio.Reader
	name        string
	v           *validator
	line        int // lines read so far
	events      int
	done        bool
	truncated   bool
	truncatedAt string
}

func newLineDecoder(r io.Reader, name string) *lineDecoder {
	return &lineDecoder{br: bufio.NewReaderSize(r, 1<<20), name: name, v: newValidator(name)}
}

// next returns the next valid event; ok is false at the end, which a
// damaged last line also is (it sets truncated).
func (d *lineDecoder) next() (op Op, ok bool, err error) {
	for !d.done {
		d.line++
		raw, rerr := readLine(d.br, d.name, d.line)
		var ferr *FormatError
		if errors.As(rerr, &ferr) {
			return Op{}, false, rerr
		}
		if rerr != nil && rerr != io.EOF {
			return Op{}, false, fmt.Errorf("read %s: %w", d.name, rerr)
		}
		last := rerr == io.EOF
		d.done = last
		text := bytes.TrimSpace(raw)
		if len(text) == 0 {
			continue
		}
		var op Op
		if perr := json.Unmarshal(text, &op); perr != nil {
			if last {
				d.truncated = true
				d.truncatedAt = fmt.Sprintf("line %d is incomplete (%s); the %d events before it were read", d.line, perr, d.events)
				return Op{}, false, nil
			}
			return Op{}, false, &FormatError{d.name, d.line, fmt.Sprintf("not a history event: %v", perr)}
		}
		if verr := d.v.check(&op, d.line); verr != nil {
			return Op{}, false, verr
		}
		d.events++
		return op, true, nil
	}
	return Op{}, false, nil
}

// MaxProcess is the largest client process number a history may use. The
// harness numbers a crashed client's replacement number + clients and the
// counter workload's final reads clients×1,000,000, so the limit must stay
// well above both; 1<<31-1 keeps every number an int32 for other tools.
const MaxProcess = 1<<31 - 1

// validator checks the invariants other tools may rely on.
type validator struct {
	name     string
	next     int64
	lastTime int64
	open     pendings // process -> its pending invoke
}

type pending struct {
	f, key string
	set    bool
}

// pendings is the pending invoke of each process: the usual small
// process numbers in a slice (a map's hashing was a third of the
// validator's time on the harness's every event), others in a map.
type pendings struct {
	small []pending
	big   map[int]pending
}

// smallProcs bounds the process numbers kept in the slice.
const smallProcs = 1 << 16

func (ps *pendings) get(p int) (pending, bool) {
	if p < smallProcs {
		if p < len(ps.small) {
			return ps.small[p], ps.small[p].set
		}
		return pending{}, false
	}
	x, ok := ps.big[p]
	return x, ok
}

func (ps *pendings) put(p int, x pending) {
	x.set = true
	if p < smallProcs {
		if p >= len(ps.small) {
			ps.small = append(ps.small, make([]pending, p+1-len(ps.small))...)
		}
		ps.small[p] = x
		return
	}
	if ps.big == nil {
		ps.big = map[int]pending{}
	}
	ps.big[p] = x
}

func (ps *pendings) del(p int) {
	if p < smallProcs {
		if p < len(ps.small) {
			ps.small[p] = pending{}
		}
		return
	}
	delete(ps.big, p)
}

func newValidator(name string) *validator {
	return &validator{name: name}
}

func (v *validator) check(op *Op, line int) error {
	bad := func(format string, a ...any) error {
		return &FormatError{v.name, line, fmt.Sprintf(format, a...)}
	}
	if !op.Type.valid() {
		return bad("type %q is not one of invoke, ok, fail, info, summary, background", op.Type)
	}
	if op.F == "" {
		return bad(`missing "f"`)
	}
	if op.Index != v.next {
		return bad("index %d, expected %d (events must be numbered from 0 in order)", op.Index, v.next)
	}
	if op.Time < v.lastTime {
		return bad("time %d goes back from %d", op.Time, v.lastTime)
	}
	v.next++
	v.lastTime = op.Time
	if op.Process == NemesisProcess {
		return v.checkNemesis(op, bad)
	}
	if op.Process < 0 || op.Process > MaxProcess {
		return bad("process %d is out of range (0..%d, or \"nemesis\")", op.Process, MaxProcess)
	}
	if !clientF(op.F) {
		return bad("f %q is not one of acquire, release, extend, read, write", op.F)
	}
	switch op.Type {
	case Summary:
		return checkSummary(op, v.lastTime, bad)
	case Background:
		return checkBackground(op, bad)
	}
	p, isPending := v.open.get(op.Process)
	switch {
	case op.Type == Invoke && isPending:
		return bad("process %d invokes %s while its %s has not completed", op.Process, op.F, p.f)
	case op.Type == Invoke:
		v.open.put(op.Process, pending{f: op.F, key: op.Key})
	case !isPending:
		return bad("%s %s for process %d, which has no pending invoke", op.Type, op.F, op.Process)
	case p.f != op.F:
		return bad("%s %s for process %d, whose pending invoke is %s", op.Type, op.F, op.Process, p.f)
	default:
		v.open.del(op.Process)
	}
	if op.Key == "" {
		return bad(`%s %s by process %d has no "key"`, op.Type, op.F, op.Process)
	}
	if op.Type != Invoke && op.Key != p.key {
		return bad("%s %s for process %d names key %q, its invoke %q", op.Type, op.F, op.Process, op.Key, p.key)
	}
	return v.checkValue(op, bad)
}

// checkValue rejects the values the checkers would otherwise have to guess
// about: a grant without a token cannot be matched to its release, and a
// write without its value cannot be checked against the counter.
func (v *validator) checkValue(op *Op, bad func(string, ...any) error) error {
	val := op.Value
	switch {
	case op.Type == OK && op.F == Acquire:
		if val == nil || val.Token == "" {
			return bad(`ok acquire by process %d has no value.token`, op.Process)
		}
		if val.ValidUntil != nil && *val.ValidUntil < 0 {
			return bad("ok acquire by process %d has valid_until %d < 0", op.Process, *val.ValidUntil)
		}
	case op.Type == Invoke && op.F == Write:
		if val == nil || val.N == nil {
			return bad(`invoke write by process %d has no value.n`, op.Process)
		}
	}
	return nil
}

// checkSummary: a summary stands for failed acquires of its process and
// key that were all over by its time, so the checkers can count them.
func checkSummary(op *Op, now int64, bad func(string, ...any) error) error {
	val := op.Value
	switch {
	case op.F != Acquire:
		return bad("summary of %s by process %d: only failed acquires are summarised", op.F, op.Process)
	case op.Key == "":
		return bad(`summary by process %d has no "key"`, op.Process)
	case val == nil || val.Count <= 0 || val.From == nil || val.To == nil:
		return bad("summary by process %d needs value.count > 0, value.from and value.to", op.Process)
	case *val.From < 0 || *val.From > *val.To || *val.To > now:
		return bad("summary by process %d spans %d..%d, which is not within 0..%d", op.Process, *val.From, *val.To, now)
	}
	return nil
}

// checkBackground: a background event is a renewal (f extend) of a key,
// whole, with its outcome and its send no later than its completion.
func checkBackground(op *Op, bad func(string, ...any) error) error {
	val := op.Value
	switch {
	case op.F != Extend:
		return bad("background %s by process %d: only renewals (extend) are recorded in the background", op.F, op.Process)
	case op.Key == "":
		return bad(`background extend by process %d has no "key"`, op.Process)
	case val == nil || val.From == nil:
		return bad("background extend by process %d has no value.from", op.Process)
	case *val.From < 0 || *val.From > op.Time:
		return bad("background extend by process %d was sent at %d, not within 0..%d", op.Process, *val.From, op.Time)
	case val.Outcome != OK && val.Outcome != Fail && val.Outcome != Info:
		return bad("background extend by process %d has value.outcome %q, want ok, fail or info", op.Process, val.Outcome)
	case val.Ended != "" && val.Outcome == OK:
		return bad("background extend by process %d ended the belief (value.ended %q) but has outcome ok", op.Process, val.Ended)
	case val.Ended != "" && val.Ended != EndedNotification && val.Ended != EndedDeadline && val.Ended != EndedError:
		return bad("background extend by process %d has value.ended %q, want notification, deadline or error", op.Process, val.Ended)
	}
	return nil
}

// checkNemesis: nemesis events are single markers whose phase says what
// happened to the fault; without it the checkers cannot tell when a fault
// was active. "error" (the fault could not be applied) and "skipped" (a
// client fault drawn for a client already armed) mark faults that never
// took effect.
func (v *validator) checkNemesis(op *Op, bad func(string, ...any) error) error {
	if op.Type != Info {
		return bad("nemesis event %s has type %q, want info", op.F, op.Type)
	}
	if op.Value == nil || op.Value.Phase == "" {
		return bad("nemesis event %s has no value.phase", op.F)
	}
	switch op.Value.Phase {
	case "start", "stop", "error", "skipped":
		return nil
	}
	return bad("nemesis event %s has phase %q, want start, stop, error or skipped", op.F, op.Value.Phase)
}

func clientF(f string) bool {
	switch f {
	case Acquire, Release, Extend, Read, Write:
		return true
	}
	return false
}

// Validator checks events one at a time as the decoder does, for code that
// holds events in memory rather than reading them from a file (the
// harness's check alongside the run): what the file would be refused for,
// the events are refused for too.
type Validator struct{ v *validator }

// NewValidator returns a Validator that has seen nothing; name is what its
// errors say the events came from.
func NewValidator(name string) *Validator { return &Validator{newValidator(name)} }

// Check validates the next event; the error is a *FormatError naming the
// event's line in the file it would be written to.
func (v *Validator) Check(op *Op) error { return v.v.check(op, int(op.Index)+1) }
