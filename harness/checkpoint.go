package harness

import (
	"context"
	"path/filepath"
	"sync"
	"time"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/internal/ctxsleep"
	"github.com/lockjepsen/lockjepsen/runfile"
)

// checkpointer keeps checkpoint.json up to date during a long run: a
// watcher (bounded by the clients, not the history's length) counts
// violations as the events are recorded, and a ticker writes what it has
// seen. The history itself is flushed every FlushInterval, so a run killed
// at any point leaves a checkable prefix and, with this, what it had found.
type checkpointer struct {
	r   *runner
	rec *history.Recorder

	mu    sync.Mutex
	watch *checker.Watcher
	first *checker.WatchViolation
}

// startCheckpoints writes a checkpoint every CheckpointEvery until ctx is
// done; the returned function waits for the writer and writes the final
// checkpoint. Without CheckpointEvery it does nothing.
func (r *runner) startCheckpoints(ctx context.Context, rec *history.Recorder) (finish func()) {
	if r.cfg.CheckpointEvery <= 0 {
		return func() {}
	}
	c := &checkpointer{r: r, rec: rec, watch: checker.NewWatcherWith(faultMeanings())}
	rec.Observe(c.observe)
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctxsleep.Every(ctx.Done(), r.cfg.CheckpointEvery, func() { c.write(false) })
	}()
	return func() {
		<-done
		c.write(true)
	}
}

func (c *checkpointer) observe(op history.Op) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v := c.watch.Observe(op); v != nil && c.first == nil {
		c.first = v
	}
	// The recorder's times strictly increase: what is pending is settled.
	if v := c.watch.Done(); v != nil && c.first == nil {
		c.first = v
	}
}

// write stores the checkpoint; a failure to write it is said, not fatal:
// the history, not the checkpoint, is the run's record.
func (c *checkpointer) write(final bool) {
	c.r.mu.Lock()
	phase := c.r.phase
	c.r.mu.Unlock()
	// Asked of the recorder before c.mu is taken: observe runs under the
	// recorder's lock and takes c.mu, so the other order could deadlock.
	elapsed, events := c.rec.Now(), c.rec.Count()
	c.mu.Lock()
	cp := runfile.Checkpoint{
		WrittenAt: time.Now().UTC(), Elapsed: elapsed, Phase: phase,
		Events: events, Violations: c.watch.Count(), Final: final,
	}
	if v := c.first; v != nil {
		cp.FirstViolation = &runfile.CheckpointViolation{Key: v.Key, First: v.First, Second: v.Second, At: v.At}
	}
	c.mu.Unlock()
	if err := runfile.WriteJSON(filepath.Join(c.r.dir, runfile.CheckpointFile), cp); err != nil {
		c.r.say("warning: checkpoint: %v", err)
	}
}
