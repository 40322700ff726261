package harness_test

import (
	"context"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/internal/harnesstest"
)

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// go-redis logs every failed dial; under faults that is noise in test output.
func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{})
	os.Exit(m.Run())
}

// The helpers of whole-run tests, shared with contrib's.
var (
	shortConfig      = harnesstest.ShortConfig
	run              = harnesstest.Run
	untilViolation   = harnesstest.UntilViolation
	nodesOf          = harnesstest.NodePIDs
	pidsIn           = harnesstest.PIDsIn
	processAlive     = harnesstest.ProcessAlive
	requireNoServers = harnesstest.RequireNoServers
	requireNoShm     = harnesstest.RequireNoShm
)

const unsafeTimeLimit = harnesstest.UnsafeTimeLimit
