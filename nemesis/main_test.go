package nemesis_test

import (
	"testing"

	"github.com/lockjepsen/lockjepsen/testkit/harnesstest"
)

func TestMain(m *testing.M) { harnesstest.Main(m) }
