package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/lockjepsen/lockjepsen/runfile"
)

// Files of a run directory.
const (
	HistoryFile = runfile.HistoryFile
	ResultsFile = runfile.ResultsFile
	ConfigFile  = runfile.ConfigFile
)

// newRunDir creates store/<test>/<timestamp>/. store/latest is pointed at
// it only once the run has finished (runfile.PointLatest), so that latest
// always names a run that can be checked.
func newRunDir(store, test string, now time.Time) (string, error) {
	base := filepath.Join(store, test)
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", fmt.Errorf("create store: %w", err)
	}
	stamp := now.UTC().Format("20060102T150405.000Z")
	dir := filepath.Join(base, stamp)
	for i := 1; ; i++ {
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			break
		}
		if !os.IsExist(err) || i > 100 {
			return "", fmt.Errorf("create run directory: %w", err)
		}
		dir = filepath.Join(base, fmt.Sprintf("%s-%d", stamp, i))
	}
	return dir, nil
}

func writeJSON(path string, v any) error { return runfile.WriteJSON(path, v) }

func readJSON(path string, v any) error { return runfile.ReadJSON(path, v) }
