package harness_test

import (
	"os"
	"testing"

	"github.com/lockjepsen/lockjepsen/internal/harnesstest"
	"github.com/lockjepsen/lockjepsen/locks"
)

// go-redis logs every failed dial; under faults that is noise in test output.
func TestMain(m *testing.M) {
	locks.SilenceRedisLogs()
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
