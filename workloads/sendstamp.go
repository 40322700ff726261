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

// sendStamp is the first send of one operation.
type sendStamp struct{ first atomic.Pointer[time.Time] }

func withSendStamp(ctx context.Context) (context.Context, *sendStamp) {
	s := &sendStamp{}
	return context.WithValue(ctx, sendStampKey{}, s), s
}

func (s *sendStamp) mark() {
	if s.first.Load() == nil {
		now := time.Now()
		s.first.CompareAndSwap(nil, &now)
	}
}

// at is the first send, or zero.
func (s *sendStamp) at() time.Time {
	if t := s.first.Load(); t != nil {
		return *t
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
