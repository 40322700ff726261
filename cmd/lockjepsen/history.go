package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/runfile"
)

func newHistoryCmd(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "history",
		Short: "Print or convert a run's history file",
		Long: `A run writes its history as history.jsonl.zst: the JSON Lines format of
docs/formats.md ("History format"), compressed with zstd. Runs of earlier versions
wrote it plain, as history.jsonl; check, report and serve read both.`,
		// Without it an unknown subcommand printed the help and exited 0.
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newHistoryCatCmd(stdout, stderr), newHistoryCompressCmd(stdout, stderr))
	return cmd
}

func newHistoryCatCmd(stdout, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "cat RUN_DIR|FILE",
		Short: "Print a history as JSON Lines, whichever format it is stored in",
		Long: `cat prints the history of a run directory (or a history file) as JSON Lines on
standard output. A compressed history whose run died before closing it is
printed up to its last flush (at most 200 ms before the end), with a warning.`,
		Example: "  lockjepsen history cat store/latest | jq -c 'select(.type == \"fail\")'",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := historyArg(args[0])
			if err != nil {
				return usageErr(stderr, err)
			}
			f, err := history.Open(path)
			if err != nil {
				return usageErr(stderr, err)
			}
			defer f.Close()
			if _, err := io.Copy(stdout, f); err != nil {
				if errors.Is(err, syscall.EPIPE) {
					return nil // `| head` closed the pipe: it has what it wanted
				}
				return usageErr(stderr, err)
			}
			if c := f.Corrupt(); c != "" {
				return usageErr(stderr, fmt.Errorf("%s is corrupt (%s): printed the part before the damage only", path, c))
			}
			if f.Cut() {
				fmt.Fprintf(stderr, "warning: %s ends early (its run died before closing it): printed what was flushed\n", path)
			}
			return nil
		},
	}
}

func newHistoryCompressCmd(stdout, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "compress RUN_DIR",
		Short: "Replace a run's plain history.jsonl with history.jsonl.zst",
		Long: `compress rewrites RUN_DIR/history.jsonl as RUN_DIR/history.jsonl.zst and removes
the plain file once the compressed one reads back to the same bytes. The
verdict does not change; check and report read either.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			plain := filepath.Join(dir, runfile.HistoryFile)
			if _, err := os.Stat(plain); err != nil {
				return usageErr(stderr, fmt.Errorf("%s has no plain %s to compress", dir, runfile.HistoryFile))
			}
			dst := filepath.Join(dir, runfile.CompressedHistoryFile)
			if _, err := os.Lstat(dst); err == nil {
				return usageErr(stderr, fmt.Errorf("%s has both %s and %s: compare them and remove one; compress replaces neither", dir, runfile.HistoryFile, runfile.CompressedHistoryFile))
			}
			before, after, err := compressHistory(plain, dst)
			if err != nil {
				return failure(stderr, err)
			}
			fmt.Fprintf(stdout, "%s: %.1f MB → %.1f MB (%.1f×)\n", dst, float64(before)/1e6, float64(after)/1e6, float64(before)/float64(max(after, 1)))
			return nil
		},
	}
}

// compressHistory writes src compressed to dst through the recorder's own
// writer, checks it reads back to src's bytes, and only then removes src.
func compressHistory(src, dst string) (before, after int64, err error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, 0, err
	}
	defer in.Close()
	w, err := history.CreateWriter(dst)
	if err != nil {
		return 0, 0, err
	}
	if _, err := io.Copy(w, in); err != nil {
		w.Close()
		os.Remove(dst)
		return 0, 0, fmt.Errorf("compress %s: %w", src, err)
	}
	if err := w.Close(); err != nil {
		os.Remove(dst)
		return 0, 0, err
	}
	if err := sameContent(src, dst); err != nil {
		os.Remove(dst)
		return 0, 0, err
	}
	st, _ := in.Stat()
	dt, _ := os.Stat(dst)
	if err := os.Remove(src); err != nil {
		return 0, 0, err
	}
	// The run's report is drawn from its files' times; keep the history's.
	_ = os.Chtimes(dst, time.Time{}, st.ModTime())
	return st.Size(), dt.Size(), nil
}

func sameContent(plain, compressed string) error {
	a, err := os.Open(plain)
	if err != nil {
		return err
	}
	defer a.Close()
	b, err := history.Open(compressed)
	if err != nil {
		return err
	}
	defer b.Close()
	bufA, bufB := make([]byte, 1<<16), make([]byte, 1<<16)
	for {
		na, ea := io.ReadFull(a, bufA)
		nb, eb := io.ReadFull(b, bufB)
		if na != nb || string(bufA[:na]) != string(bufB[:nb]) {
			return fmt.Errorf("compress %s: %s does not read back the same; the plain file is kept", plain, compressed)
		}
		if ea != nil || eb != nil {
			if (ea == io.EOF || ea == io.ErrUnexpectedEOF) && (eb == io.EOF || eb == io.ErrUnexpectedEOF) && !b.Cut() {
				return nil
			}
			return fmt.Errorf("compress %s: read back: %v / %v", plain, ea, eb)
		}
	}
}

// historyArg is the history file a `history` subcommand reads: the
// argument itself, or a run directory's history.
func historyArg(arg string) (string, error) {
	st, err := os.Stat(arg)
	if err != nil {
		return "", err
	}
	if !st.IsDir() {
		return arg, nil
	}
	return runfile.FindHistory(arg)
}
