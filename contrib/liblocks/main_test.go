package liblocks_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/lockjepsen/lockjepsen/contrib/liblocks"
)

// The tests build every lock, this package's and the core's, by name.
func TestMain(m *testing.M) {
	if err := liblocks.Register(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	os.Exit(m.Run())
}
