package workloads

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The lease model counts a lease's TTL from when its first request went
// to a server: no server can start the key's TTL before that. The
// invocation's stamp is earlier, by the time a loaded machine takes to
// get from the recorder into the lock (milliseconds under load, which a
// correct lock's margin does not cover). So the clients the harness makes
// carry SendHook, which stamps the first command an operation sends, and
// the operation records it as its ok value's started.

type sendStampKey struct{}

// stampBase is the origin of sendStamp's readings: a monotonic instant,
// so that a stamp is one int64 (no allocation on the clients' hot path)
// and still converts to the history's clock exactly.
var stampBase = time.Now()

// sendStamp is the first send of one operation. It is its own context
// (the operation's, with the stamp as a value), so that stamping an
// operation costs one allocation.
type sendStamp struct {
	context.Context
	first atomic.Int64 // ns since stampBase, plus one; 0 until the first send
}

func withSendStamp(ctx context.Context) (context.Context, *sendStamp) {
	s := &sendStamp{Context: ctx}
	return s, s
}

// Value answers for the stamp and passes every other key on.
func (s *sendStamp) Value(key any) any {
	if key == (sendStampKey{}) {
		return s
	}
	return s.Context.Value(key)
}

func (s *sendStamp) mark() {
	if s.first.Load() == 0 {
		s.first.CompareAndSwap(0, int64(time.Since(stampBase))+1)
	}
}

// at is the first send, or zero.
func (s *sendStamp) at() time.Time {
	if d := s.first.Load(); d != 0 {
		return stampBase.Add(time.Duration(d - 1))
	}
	return time.Time{}
}

// SendHook is a go-redis hook that stamps, in the context of the
// operation that sends them, the first command or pipeline sent. Add it
// to every client a lock under test uses (redis.Client.AddHook).
type SendHook struct{}

func (SendHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (SendHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if s, ok := ctx.Value(sendStampKey{}).(*sendStamp); ok {
			s.mark()
		}
		return next(ctx, cmd)
	}
}

func (SendHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if s, ok := ctx.Value(sendStampKey{}).(*sendStamp); ok {
			s.mark()
		}
		return next(ctx, cmds)
	}
}

var _ redis.Hook = SendHook{}
