package harness

import (
	"encoding/json"
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

// newRunDir creates store/<test>/<timestamp>/ and points store/latest at it.
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
	rel, err := filepath.Rel(store, dir)
	if err != nil {
		return "", err
	}
	latest := filepath.Join(store, "latest")
	// A temporary name of its own, so that runs started at once in one
	// store do not race on it; the rename is atomic.
	tmp := fmt.Sprintf("%s.tmp-%d-%d", latest, os.Getpid(), now.UnixNano())
	if err := os.Symlink(rel, tmp); err != nil {
		return "", fmt.Errorf("link store/latest: %w", err)
	}
	if err := os.Rename(tmp, latest); err != nil {
		return "", fmt.Errorf("link store/latest: %w", err)
	}
	return dir, nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", filepath.Base(path), err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	return os.Rename(tmp, path)
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
