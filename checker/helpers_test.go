package checker

import (
	"bytes"
	"context"
	"sort"
	"strings"
	"testing"

	"github.com/lockjepsen/lockjepsen/history"
)

// ms converts milliseconds to the history's ns clock; tests think in ms.
func ms(x int64) int64 { return x * 1e6 }

func vu(x int64) *int64 { return history.I64(ms(x)) }

// hb builds small histories event by event; build sorts them by time (stably,
// so events at one instant keep the order they were added in) and runs them
// through history.Decode so that every test history is a valid one.
type hb struct {
	events []history.Op
	// generated marks a history drawn by a random generator, of which
	// TestMain re-checks only a sample (keepBuilt).
	generated bool
}

func (b *hb) ev(t int64, p int, typ history.Type, f, key string, v *history.Value) *hb {
	b.events = append(b.events, history.Op{Time: ms(t), Process: p, Type: typ, F: f, Key: key, Value: v})
	return b
}

// acquire adds an acquire by p on key invoked at inv and completed at comp
// with typ (comp < 0: never completed). vuMs < 0 means no valid_until.
func (b *hb) acquire(p int, key string, inv, comp int64, typ history.Type, token string, vuMs int64) *hb {
	b.ev(inv, p, history.Invoke, history.Acquire, key, &history.Value{TTL: ms(1000)})
	if comp < 0 {
		return b
	}
	var v *history.Value
	if typ == history.OK {
		v = &history.Value{Token: token}
		if vuMs >= 0 {
			v.ValidUntil = vu(vuMs)
		}
	}
	return b.ev(comp, p, typ, history.Acquire, key, v)
}

func (b *hb) release(p int, key string, inv, comp int64, typ history.Type, token string) *hb {
	b.ev(inv, p, history.Invoke, history.Release, key, &history.Value{Token: token})
	if comp < 0 {
		return b
	}
	return b.ev(comp, p, typ, history.Release, key, nil)
}

func (b *hb) extend(p int, key string, inv, comp int64, typ history.Type, token string, vuMs int64) *hb {
	b.ev(inv, p, history.Invoke, history.Extend, key, &history.Value{Token: token, TTL: ms(1000)})
	if comp < 0 {
		return b
	}
	var v *history.Value
	if typ == history.OK {
		v = &history.Value{ValidUntil: vu(vuMs)}
	}
	return b.ev(comp, p, typ, history.Extend, key, v)
}

func (b *hb) crash(t int64, procs ...int) *hb {
	return b.ev(t, history.NemesisProcess, history.Info, "client-crash", "", &history.Value{Phase: "start", Clients: procs})
}

func (b *hb) fault(t int64, f, phase string, targets ...string) *hb {
	return b.ev(t, history.NemesisProcess, history.Info, f, "", &history.Value{Phase: phase, Targets: targets})
}

func (b *hb) write(p int, key string, inv, comp int64, typ history.Type, n int64, fence *int64) *hb {
	b.ev(inv, p, history.Invoke, history.Write, key, &history.Value{N: history.I64(n), Fence: fence})
	if comp < 0 {
		return b
	}
	return b.ev(comp, p, typ, history.Write, key, nil)
}

func (b *hb) read(p int, key string, inv, comp int64, typ history.Type, n int64) *hb {
	b.ev(inv, p, history.Invoke, history.Read, key, nil)
	var v *history.Value
	if typ == history.OK {
		v = &history.Value{N: history.I64(n)}
	}
	return b.ev(comp, p, typ, history.Read, key, v)
}

// streamAll feeds ops to a new Stream and finishes it, failing tb on an
// error; the Stream is returned for a test of what follows Finish.
func streamAll(tb testing.TB, ops []history.Op, opts Options) (*Stream, *Results) {
	tb.Helper()
	s := NewStream(opts)
	for _, op := range ops {
		s.Add(op)
	}
	r, err := s.Finish(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return s, r
}

// checkStory fails t unless story says each of has and none of lacks.
func checkStory(t *testing.T, story string, has, lacks []string) {
	t.Helper()
	for _, want := range has {
		if !strings.Contains(story, want) {
			t.Errorf("story lacks %q:\n%s", want, story)
		}
	}
	for _, bad := range lacks {
		if strings.Contains(story, bad) {
			t.Errorf("story has %q:\n%s", bad, story)
		}
	}
}

func (b *hb) build(tb testing.TB) []history.Op {
	tb.Helper()
	ops := b.buildRaw()
	var buf []byte
	for i := range ops {
		buf = history.AppendJSON(buf, &ops[i])
		buf = append(buf, '\n')
	}
	res, err := history.Decode(bytes.NewReader(buf), "test")
	if err != nil {
		tb.Fatalf("invalid test history: %v", err)
	}
	keepBuilt(res.Ops, b.generated)
	return res.Ops
}

// buildRaw orders and numbers the events without validating them: Check is
// exported, and a caller may hand it events that never went through Decode.
func (b *hb) buildRaw() []history.Op {
	ops := append([]history.Op(nil), b.events...)
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Time < ops[j].Time })
	for i := range ops {
		ops[i].Index = int64(i)
	}
	return ops
}
