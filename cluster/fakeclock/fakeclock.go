// Package fakeclock gives real redis-server processes a clock the harness can
// move at run time, for clock-fault nemeses.
//
// Each node runs under libfaketime (preloaded) and reads its offset from a
// file that Set rewrites. Only CLOCK_REALTIME is faked, as a real NTP step
// would do: redis's event loop runs on CLOCK_MONOTONIC and would stall after
// a backward step otherwise, so SIGTERM would never finish shutting it down.
//
// Debian's redis-server links jemalloc, whose start-up deadlocks against
// libfaketime's; a small shim (shim/shim.c, built by Prepare) preloaded ahead of
// libfaketime routes all allocation to glibc instead.
package fakeclock

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// shim.c lives in a subdirectory because the go tool refuses C files in a
// package that does not use cgo.
//
//go:embed shim/shim.c
var shimSource []byte

// ErrNoLibfaketime means libfaketime is not installed.
var ErrNoLibfaketime = errors.New("clock faults need libfaketime: apt-get install libfaketime")

// ErrNoCompiler means there is no C compiler to build the shim with.
var ErrNoCompiler = errors.New("clock faults need a C compiler: apt-get install gcc")

// libfaketimeDirs are where distributions put libfaketime.
var libfaketimeDirs = []string{
	"/usr/lib/x86_64-linux-gnu/faketime",
	"/usr/lib/*-linux-gnu*/faketime",
	"/usr/lib/faketime",
	"/usr/lib64/faketime",
	"/usr/local/lib/faketime",
}

// The two variants: nodes take the multithreaded one, since redis runs
// background threads and the plain variant does no locking around its
// shared state; protocol clients take the plain one (ClientEnv).
const (
	libfaketimeMT    = "libfaketimeMT.so.1"
	libfaketimePlain = "libfaketime.so.1"
)

// shimFlags are part of the cache key, so changing them rebuilds the shim.
// -fno-builtin stops the compiler from turning the wrappers back into calls
// to malloc/memset that it "knows"; -ldl is needed for dlopen before glibc
// 2.34 and harmless after.
var shimFlags = []string{"-shared", "-fPIC", "-O2", "-fno-builtin", "-fvisibility=hidden", "-Wall"}

// Kit is what a node needs to run with a fake clock.
type Kit struct {
	Shim        string // path of the built allocator shim
	Libfaketime string // path of libfaketimeMT.so.1
}

// Prepare finds libfaketime and builds the shim into cacheDir, reusing a
// previous build of the same source with the same compiler.
func Prepare(ctx context.Context, cacheDir string) (*Kit, error) {
	lib, err := findLibfaketime(libfaketimeMT)
	if err != nil {
		return nil, err
	}
	cc, err := compiler()
	if err != nil {
		return nil, err
	}
	shim, err := buildShim(ctx, cc, cacheDir)
	if err != nil {
		return nil, err
	}
	return &Kit{Shim: shim, Libfaketime: lib}, nil
}

// Env returns the variables to append to a node's environment. They come
// last so that they override any LD_PRELOAD inherited from the harness.
// offsetFile is made absolute because redis-server changes directory to its
// --dir and libfaketime reopens the file on every clock read.
func (k *Kit) Env(offsetFile string) []string {
	if abs, err := filepath.Abs(offsetFile); err == nil {
		offsetFile = abs
	}
	// The shim must come first: it has to win symbol resolution for
	// malloc over both libfaketime's callers and jemalloc.
	return preloadEnv(k.Shim+":"+k.Libfaketime, offsetFile)
}

// preloadEnv preloads libs and points libfaketime at offsetFile, faking
// the wall clock only.
func preloadEnv(libs, offsetFile string) []string {
	return []string{
		"LD_PRELOAD=" + libs,
		"FAKETIME_TIMESTAMP_FILE=" + offsetFile,
		// Without it libfaketime caches the file for 10 s, and a fault
		// would land whenever the cache happened to expire.
		"FAKETIME_NO_CACHE=1",
		"FAKETIME_DONT_FAKE_MONOTONIC=1",
	}
}

// ClientLib finds the libfaketime that protocol clients (Python, PHP,
// Node processes) are started under for client clock faults: the plain
// variant, which needs no allocator shim in them (their start-up does
// not read the clock from inside malloc, as jemalloc's does in
// redis-server; measured with Debian's python3, php and node).
func ClientLib() (string, error) { return findLibfaketime(libfaketimePlain) }

// ClientEnv returns the variables to append to a protocol client's
// environment so that its wall clock reads real time plus the offset in
// offsetFile (an absolute path), while CLOCK_MONOTONIC, on which the
// client reports its beliefs, stays real.
func ClientEnv(lib, offsetFile string) []string { return preloadEnv(lib, offsetFile) }

// findLibfaketime finds the named variant: LOCKJEPSEN_LIBFAKETIME (a
// path to either variant) first, else the distributions' directories.
func findLibfaketime(variant string) (string, error) {
	if p := os.Getenv("LOCKJEPSEN_LIBFAKETIME"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w (LOCKJEPSEN_LIBFAKETIME=%s: %v)", ErrNoLibfaketime, p, err)
		}
		return p, nil
	}
	for _, dir := range libfaketimeDirs {
		matches, _ := filepath.Glob(filepath.Join(dir, variant))
		for _, m := range matches {
			if fi, err := os.Stat(m); err == nil && fi.Mode().IsRegular() {
				return m, nil
			}
		}
	}
	return "", fmt.Errorf("%w (%s not found in %s)", ErrNoLibfaketime, variant, strings.Join(libfaketimeDirs, ", "))
}

// compiler returns $CC split into program and arguments (CC may be "gcc
// -m64"), else cc, with the program resolved on PATH.
func compiler() ([]string, error) {
	cc := strings.Fields(os.Getenv("CC"))
	if len(cc) == 0 {
		cc = []string{"cc"}
	}
	path, err := exec.LookPath(cc[0])
	if err != nil {
		return nil, fmt.Errorf("%w (%s: %v)", ErrNoCompiler, cc[0], err)
	}
	cc[0] = path
	return cc, nil
}

// buildShim compiles shim.c into cacheDir unless a build with the same key
// is already there. Concurrent builders each compile in a private temporary
// directory and rename into place; the rename is atomic and the contents
// are identical, so the last one winning is harmless.
func buildShim(ctx context.Context, cc []string, cacheDir string) (string, error) {
	key, err := cacheKey(ctx, cc)
	if err != nil {
		return "", err
	}
	final := filepath.Join(cacheDir, "fakeclock-shim-"+key+".so")
	if fi, err := os.Stat(final); err == nil && fi.Mode().IsRegular() && fi.Size() > 0 {
		return final, nil
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("fakeclock: creating shim cache: %w", err)
	}
	tmp, err := os.MkdirTemp(cacheDir, ".fakeclock-build-")
	if err != nil {
		return "", fmt.Errorf("fakeclock: creating shim build directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, "shim.c")
	if err := os.WriteFile(src, shimSource, 0o644); err != nil {
		return "", fmt.Errorf("fakeclock: writing shim source: %w", err)
	}
	out := filepath.Join(tmp, "shim.so")
	args := append(append(append([]string{}, cc[1:]...), shimFlags...), "-o", out, src, "-ldl")
	cmd := exec.CommandContext(ctx, cc[0], args...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("fakeclock: building clock-fault shim with %s: %w\n%s", strings.Join(cc, " "), err, strings.TrimSpace(stderr.String()))
	}
	if err := os.Chmod(out, 0o755); err != nil {
		return "", fmt.Errorf("fakeclock: shim permissions: %w", err)
	}
	if err := os.Rename(out, final); err != nil {
		return "", fmt.Errorf("fakeclock: installing shim: %w", err)
	}
	return final, nil
}

// cacheKey hashes the source, the flags and the compiler's identity, so an
// upgraded or different compiler gets its own build.
func cacheKey(ctx context.Context, cc []string) (string, error) {
	version, err := exec.CommandContext(ctx, cc[0], append(append([]string{}, cc[1:]...), "--version")...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("fakeclock: running %s --version: %w: %s", strings.Join(cc, " "), err, bytes.TrimSpace(version))
	}
	h := sha256.New()
	for _, part := range [][]byte{shimSource, []byte(strings.Join(cc, "\x00")), []byte(strings.Join(shimFlags, "\x00")), version} {
		fmt.Fprintf(h, "%d:", len(part))
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}
