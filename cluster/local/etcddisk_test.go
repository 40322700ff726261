package local_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/local"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

// diskUse is what du counts under root: allocated blocks (st_blocks * 512),
// not apparent sizes, per kind of file.
func diskUse(t *testing.T, root string) (total int64, byKind map[string]int64) {
	t.Helper()
	byKind = map[string]int64{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		st, err := os.Stat(path)
		if err != nil {
			return err
		}
		b := st.Sys().(*syscall.Stat_t).Blocks * 512
		total += b
		kind := filepath.Ext(path)
		switch {
		case strings.HasSuffix(path, string(filepath.Separator)+"db"):
			kind = "db"
		case kind == "":
			kind = filepath.Base(path)
		}
		byKind[kind] += b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return total, byKind
}

func mb(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/1e6) }

// TestTrimEtcdWAL: the zero tail of a preallocated segment loses its
// blocks but not its bytes; the spare preallocated segment goes.
func TestTrimEtcdWAL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data := make([]byte, 10_000)
	rand.Read(data)
	data[len(data)-1] = 1 // the data ends exactly here
	const size = 8 << 20
	seg := filepath.Join(dir, "0000000000000000-0000000000000000.wal")
	spare := filepath.Join(dir, "0.tmp")
	for _, p := range []string{seg, spare} {
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Fallocate(int(f.Fd()), 0, 0, size); err != nil {
			f.Close()
			t.Skipf("no fallocate on this file system: %v", err)
		}
		if p == seg {
			if _, err := f.WriteAt(data, 0); err != nil {
				t.Fatal(err)
			}
		}
		f.Close()
	}
	before, _ := diskUse(t, dir)
	freed, err := local.TrimEtcdWAL(dir)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := diskUse(t, dir)
	t.Logf("allocated %s before, %s after; freed %s", mb(before), mb(after), mb(freed))
	if after > 64<<10 {
		t.Errorf("%d bytes still allocated, want the 10 kB written (in whole blocks)", after)
	}
	if freed != before-after {
		t.Errorf("reported %d bytes freed, the disk says %d", freed, before-after)
	}
	if _, err := os.Stat(spare); !os.IsNotExist(err) {
		t.Errorf("the spare segment is still there: %v", err)
	}
	got, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != size || !bytes.Equal(got[:len(data)], data) || bytes.ContainsFunc(got[len(data):], func(r rune) bool { return r != 0 }) {
		t.Errorf("the segment does not read the same after the trim (size %d)", len(got))
	}
	if freed, err := local.TrimEtcdWAL(dir); err != nil || freed != 0 {
		t.Errorf("a second trim: freed %d, %v", freed, err)
	}
	if _, err := local.TrimEtcdWAL(filepath.Join(dir, "missing")); err != nil {
		t.Errorf("a missing directory: %v", err)
	}
}

// lockRounds takes and releases the lock name rounds times through etcd's
// lock service, writing key while it holds it. Its lease's TTL is long: a
// loaded machine must not expire it (nothing here tests expiry), and so
// no keep-alive is needed.
func lockRounds(ctx context.Context, c *gateway, name, key string, client, rounds int) (err error) {
	var lease struct {
		ID string `json:"ID"` // a uint64 the gateway quotes: passed back as is
	}
	if err := c.call(ctx, "/v3/lease/grant", map[string]any{"TTL": 300}, &lease); err != nil {
		return fmt.Errorf("client %d lease: %w", client, err)
	}
	defer func() {
		if rerr := c.call(ctx, "/v3/lease/revoke", map[string]any{"ID": lease.ID}, nil); rerr != nil && err == nil {
			err = fmt.Errorf("client %d revoke: %w", client, rerr)
		}
	}()
	for r := range rounds {
		var held struct {
			Key []byte `json:"key"`
		}
		if err := c.call(ctx, "/v3/lock/lock", map[string]any{"name": []byte(name), "lease": lease.ID}, &held); err != nil {
			return fmt.Errorf("client %d lock %d: %w", client, r, err)
		}
		if err := c.put(ctx, key, fmt.Sprintf("%d.%d", client, r)); err != nil {
			return fmt.Errorf("client %d write %d: %w", client, r, err)
		}
		if err := c.call(ctx, "/v3/lock/unlock", map[string]any{"key": held.Key}, nil); err != nil {
			return fmt.Errorf("client %d unlock %d: %w", client, r, err)
		}
	}
	return nil
}

// TestEtcdRunDirStaysSmall: the run directory of a short etcd run (start,
// lock traffic, a member killed and restarted on its trimmed log, close)
// takes under 50 MB of disk, as du counts it, although each member
// preallocates 64-128 MB of write-ahead log while it runs; the restarted
// member shows that a trimmed log is still one etcd reads.
func TestEtcdRunDirStaysSmall(t *testing.T) {
	// Not parallel (see TestEtcdStartsAndStops).
	redistest.RequireEtcd(t)
	dir := t.TempDir()
	cl, err := local.StartEtcd(within(t, startDeadline), cluster.Spec{System: cluster.Etcd, Nodes: 3, Dir: dir, Persistence: cluster.PersistNone})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close(context.Background()) })

	// Lock traffic: three clients take and release one lock in turn.
	ctx := within(t, 2*time.Minute)
	start := time.Now()
	const clients, rounds = 3, 20
	var wg sync.WaitGroup
	errs := make([]error, clients)
	for i := range clients {
		c := etcdClient(t, addrsOf(cl)...)
		wg.Go(func() { errs[i] = lockRounds(ctx, c, "lock", "resource", i, rounds) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	running, kinds := diskUse(t, dir)
	t.Logf("%d lock rounds in %v; while running: %s (%v)", clients*rounds, time.Since(start).Round(time.Millisecond), mb(running), kinds)

	// A member killed, trimmed and restarted reads its log back.
	if err := cl.Kill("n1", false); err != nil {
		t.Fatal(err)
	}
	n1 := cl.Members()[0]
	freed, err := local.TrimEtcdWAL(local.EtcdWALDir(n1.DataDir))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("trimming the killed n1 freed %s", mb(freed))
	c := etcdClient(t, addrsOf(cl, "n1")...)
	// n1 may have led: the others elect a leader first.
	eventually(t, waitDeadline, "a write with n1 killed", func() error { return put(c, "after-kill", "1") })
	if err := cl.Restart(within(t, waitDeadline), "n1"); err != nil {
		t.Fatal(err)
	}
	if err := cl.WaitHealthy(within(t, waitDeadline)); err != nil {
		t.Fatal(err)
	}
	only := etcdClient(t, addrsOf(cl, "n2", "n3")...)
	eventually(t, waitDeadline, "the restarted n1 has the data from before and after its kill", func() error {
		return only.hasKeys(context.Background(), "resource", "after-kill")
	})

	if err := cl.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	total, kinds := diskUse(t, dir)
	t.Logf("after Close: %s (%v)", mb(total), kinds)
	if total >= 50e6 {
		t.Fatalf("the run directory takes %s of disk after Close, want under 50 MB: %v", mb(total), kinds)
	}
	for _, m := range cl.Members() {
		segs, _ := filepath.Glob(filepath.Join(local.EtcdWALDir(m.DataDir), "*.wal"))
		if len(segs) == 0 {
			t.Errorf("%s has no write-ahead log left", m.Name)
		}
		if _, err := os.Stat(m.LogPath); err != nil {
			t.Errorf("%s: log: %v", m.Name, err)
		}
	}
}
