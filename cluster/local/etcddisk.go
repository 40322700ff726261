package local

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// The disk an etcd member uses.
//
// etcd preallocates every write-ahead-log segment at its full size, 64 MB
// (fallocate: real blocks, not a sparse file), and keeps the next segment
// preallocated beside it as wal/<n>.tmp while it runs. A member of a 10 s
// run writes about 2 MB of log and a bbolt database of under 1 MB, yet its
// directory holds 64-128 MB, and a run's three members 200-400 MB. No flag
// of etcd changes this: the segment size is a package variable
// (wal.SegmentSizeBytes), and etcd's maintainers declined to make the
// preallocation configurable (etcd-io/etcd#9422, #14833 closed).
// --snapshot-count, --max-wals and --max-snapshots only govern what is
// purged once segments rotate, and --quota-backend-bytes only raises an
// alarm; none of them shrinks the first segment.
//
// So the members run as etcd wants, and once a member has exited (Close,
// or a later run's orphan clean-up for a killed one) TrimEtcdWAL gives
// back the blocks it preallocated and never wrote: it punches a hole in
// the zero-filled tail of each segment (the file keeps its size and reads
// back byte for byte the same, so the data directory is still a valid one
// that etcd or etcd-dump-logs can open; ls still shows 64 MB, du what is
// on disk) and removes the spare
// preallocated segment (all zeros; etcd removes it itself when it shuts
// down cleanly and ignores it otherwise). Keeping the data outside the
// store instead would lose it for diagnosis, and deleting it would lose
// the write-ahead log that says what each member committed; the logs,
// which are what a run is diagnosed from, are untouched.

const (
	fallocKeepSize  = 0x01 // FALLOC_FL_KEEP_SIZE
	fallocPunchHole = 0x02 // FALLOC_FL_PUNCH_HOLE
	trimAlign       = 4096 // holes start on a block boundary
	trimChunk       = 1 << 20
)

// EtcdWALDir is the write-ahead-log directory of a member's data directory.
func EtcdWALDir(dataDir string) string { return filepath.Join(dataDir, "member", "wal") }

// TrimEtcdWAL frees the disk blocks etcd preallocated and never wrote in
// the write-ahead-log directory walDir, and returns how many bytes of
// allocated disk that gave back. The member must have exited: a running
// one writes into the space this frees. A missing directory is no error.
func TrimEtcdWAL(walDir string) (freed int64, err error) {
	entries, err := os.ReadDir(walDir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("trim etcd WAL: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		path := filepath.Join(walDir, e.Name())
		before := allocated(path)
		switch {
		case strings.HasSuffix(e.Name(), ".tmp"):
			// The next segment, preallocated and never written.
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
				continue
			}
			freed += before
		case strings.HasSuffix(e.Name(), ".wal"):
			if st, err := os.Stat(path); err != nil || before < st.Size() {
				// Fewer blocks than bytes: trimmed already, or never
				// preallocated (etcd writes a segment front to back,
				// so its only hole is its tail). Nothing to give back,
				// and no need to read it again.
				continue
			}
			if err := punchZeroTail(path); err != nil {
				errs = append(errs, err)
				continue
			}
			freed += max(0, before-allocated(path))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return freed, fmt.Errorf("trim etcd WAL: %w", err)
	}
	return freed, nil
}

// TrimEtcdRun trims the write-ahead logs of every etcd member of the run
// directory runDir (runDir/nodes/*/data). Every member must have exited.
func TrimEtcdRun(runDir string) (freed int64, err error) {
	dirs, _ := filepath.Glob(filepath.Join(runDir, "nodes", "*", "data"))
	var errs []error
	for _, d := range dirs {
		f, err := TrimEtcdWAL(EtcdWALDir(d))
		freed += f
		errs = append(errs, err)
	}
	return freed, errors.Join(errs...)
}

// punchZeroTail deallocates the part of path after its last non-zero byte
// (rounded up to a block), keeping the file's size, so that it reads the
// same. Not truncation: the last record may end in zero bytes of its own,
// which a cut would lose. Where the file system cannot punch holes
// (rare: ext4, xfs, btrfs and tmpfs can), the file is left as it is.
func punchZeroTail(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	size := st.Size()
	end, err := dataEnd(f, size)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	from := (end + trimAlign - 1) / trimAlign * trimAlign
	if from >= size {
		return nil
	}
	err = syscall.Fallocate(int(f.Fd()), fallocPunchHole|fallocKeepSize, from, size-from)
	if errors.Is(err, syscall.EOPNOTSUPP) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: free the preallocated tail: %w", path, err)
	}
	return nil
}

// dataEnd is the offset just past the last non-zero byte of f, read from
// the end backwards.
func dataEnd(f *os.File, size int64) (int64, error) {
	buf, zeros := make([]byte, trimChunk), make([]byte, trimChunk)
	for off := size; off > 0; {
		n := min(int64(len(buf)), off)
		off -= n
		b := buf[:n]
		if _, err := f.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		if bytes.Equal(b, zeros[:n]) {
			continue
		}
		for j := len(b) - 1; j >= 0; j-- {
			if b[j] != 0 {
				return off + int64(j) + 1, nil
			}
		}
	}
	return 0, nil
}

// allocated is the disk space path occupies (st_blocks, in 512-byte
// units), as du counts it; 0 if it cannot be read.
func allocated(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return sys.Blocks * 512
	}
	return 0
}
