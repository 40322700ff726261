// Package boundedread reads the small files a user hands lockjepsen (a
// --config file, a hosts file) with a bound: `--config /dev/zero` once
// read 17.5 GB before it was killed.
package boundedread

import (
	"fmt"
	"io"
	"os"
)

// MaxConfig is the most a configuration file may hold: a real one is a
// few kilobytes.
const MaxConfig = 1 << 20

// File reads path whole when it holds at most max bytes, and refuses it,
// having read max+1 bytes, when it holds more (or never ends).
func File(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is larger than %d bytes: not a configuration file", path, max)
	}
	return b, nil
}
