package harness_test

import (
	"testing"

	"github.com/lockjepsen/lockjepsen/internal/harnesstest"
)

func TestMain(m *testing.M) { harnesstest.Main(m) }
