package fakeclock

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestPrepareReusesTheCachedShim(t *testing.T) {
	kit(t) // skips without libfaketime or a compiler
	dir := t.TempDir()
	first, before := prepareShim(t, dir)
	second, after := prepareShim(t, dir)
	if first != second || !os.SameFile(before, after) || !before.ModTime().Equal(after.ModTime()) {
		t.Errorf("second Prepare rebuilt the shim: %s then %s", first, second)
	}
	assertOnlyShim(t, dir)
}

// prepareShim runs Prepare with the cache dir and returns the shim's path
// and what the file system says of it.
func prepareShim(t *testing.T, dir string) (string, os.FileInfo) {
	t.Helper()
	k, err := Prepare(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(k.Shim)
	if err != nil {
		t.Fatal(err)
	}
	return k.Shim, fi
}

// Parallel tests and several harness processes share one cache.
func TestConcurrentPrepareAgree(t *testing.T) {
	kit(t)
	dir := t.TempDir()
	var wg sync.WaitGroup
	kits := make([]*Kit, 6)
	errs := make([]error, len(kits))
	for i := range kits {
		wg.Go(func() { kits[i], errs[i] = Prepare(context.Background(), dir) })
	}
	wg.Wait()
	for i := range kits {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if kits[i].Shim != kits[0].Shim {
			t.Errorf("Prepare %d built %s, Prepare 0 %s", i, kits[i].Shim, kits[0].Shim)
		}
	}
	assertOnlyShim(t, dir)
}

func assertOnlyShim(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || !strings.HasSuffix(entries[0].Name(), ".so") {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("cache holds %v, want one shim and no build leftovers", names)
	}
}

func TestPrepareWithoutCompilerIsAClearError(t *testing.T) {
	if _, err := findLibfaketime(libfaketimeMT); err != nil {
		unavailable(t, "%v", err)
	}
	t.Setenv("CC", "/nonexistent")
	dir := t.TempDir()
	_, err := Prepare(context.Background(), dir)
	if !errors.Is(err, ErrNoCompiler) || !strings.Contains(err.Error(), "clock faults need a C compiler: apt-get install gcc") {
		t.Fatalf("Prepare with CC=/nonexistent = %v, want the install hint", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("failed Prepare left %v", entries)
	}
}

func TestPrepareWithoutLibfaketimeIsAClearError(t *testing.T) {
	t.Setenv("LOCKJEPSEN_LIBFAKETIME", filepath.Join(t.TempDir(), "missing.so"))
	_, err := Prepare(context.Background(), t.TempDir())
	if !errors.Is(err, ErrNoLibfaketime) || !strings.Contains(err.Error(), "apt-get install libfaketime") {
		t.Fatalf("Prepare without libfaketime = %v, want the install hint", err)
	}
}

func TestBrokenCompilerReportsItsOutput(t *testing.T) {
	if _, err := findLibfaketime(libfaketimeMT); err != nil {
		unavailable(t, "%v", err)
	}
	// A "compiler" that answers --version but cannot compile.
	fake := filepath.Join(t.TempDir(), "badcc")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\n[ \"$1\" = --version ] && { echo badcc 1; exit 0; }\necho 'badcc: no such luck' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CC", fake)
	dir := t.TempDir()
	_, err := Prepare(context.Background(), dir)
	if err == nil || !strings.Contains(err.Error(), "no such luck") {
		t.Fatalf("Prepare with a failing compiler = %v, want its stderr", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("failed build left %v in the cache", entries)
	}
}
