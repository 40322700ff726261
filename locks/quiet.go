package locks

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// SilenceRedisLogs stops go-redis logging every failed dial to stderr:
// under faults that is noise, and every outcome is in the history anyway.
// It sets go-redis's process-wide logger.
func SilenceRedisLogs() { redis.SetLogger(discardLogger{}) }

type discardLogger struct{}

func (discardLogger) Printf(context.Context, string, ...any) {}
