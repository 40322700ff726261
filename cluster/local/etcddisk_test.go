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

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/local"
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

// TestEtcdRunDirStaysSmall: the run directory of a short etcd run (start,
// lock traffic, a member killed and restarted on its trimmed log, close)
// takes under 50 MB of disk, as du counts it, although each member
// preallocates 64-128 MB of write-ahead log while it runs; the restarted
// member shows that a trimmed log is still one etcd reads.
func TestEtcdRunDirStaysSmall(t *testing.T) {
	// Not parallel (see TestEtcdStartsAndStops).
	requireEtcd(t)
	dir := t.TempDir()
	cl, err := local.StartEtcd(within(t, startDeadline), cluster.Spec{System: cluster.Etcd, Nodes: 3, Dir: dir, Persistence: cluster.PersistNone})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close(context.Background()) })

	// Lock traffic: three clients take and release one lock in turn. The
	// sessions' TTL is long: a keep-alive that a loaded machine delays
	// must not expire a session (nothing here tests expiry).
	ctx := within(t, 2*time.Minute)
	start := time.Now()
	const clients, rounds = 3, 20
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		c := etcdClient(t, addrsOf(cl)...)
		wg.Go(func() {
			s, err := concurrency.NewSession(c, concurrency.WithTTL(60), concurrency.WithContext(ctx))
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			m := concurrency.NewMutex(s, "lock")
			for r := range rounds {
				if err := m.Lock(ctx); err != nil {
					errs <- fmt.Errorf("client %d lock %d: %w", i, r, err)
					return
				}
				if _, err := c.Put(ctx, "resource", fmt.Sprintf("%d.%d", i, r)); err != nil {
					errs <- fmt.Errorf("client %d write %d: %w", i, r, err)
					return // one error a client: errs holds that many
				}
				if err := m.Unlock(ctx); err != nil {
					errs <- fmt.Errorf("client %d unlock %d: %w", i, r, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
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
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, k := range []string{"resource", "after-kill"} {
			r, err := only.Get(ctx, k, clientv3.WithSerializable())
			if err != nil {
				return err
			}
			if len(r.Kvs) != 1 {
				return fmt.Errorf("n1 has no %s", k)
			}
		}
		return nil
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
