package harness

import (
	"context"
	"fmt"
	"sync"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/history"
)

// liveCheck runs the checkers alongside the run, on the events as the
// recorder stamps them, so that the verdict is ready when the clock stops:
// reading a one-hour history back and checking it took minutes. It never
// slows the clients: when it falls behind by liveQueue batches, or an
// event would be refused by the file's validator, it gives up, and the
// stored history is checked after the run as before. Either way the
// history file stays the record that `lockjepsen check` judges again.
type liveCheck struct {
	// Touched only by the recorder's observer, under its lock.
	batch    []history.Op
	valid    *history.Validator
	fed      int64
	given    bool // gave up: observe does nothing more
	finished bool // touched only by the run's goroutine, after the recorder closed
	todo     chan []history.Op
	free     chan []history.Op
	exited   chan struct{}
	cancel   context.CancelFunc
	st       *checker.Stream
	mu       sync.Mutex
	gaveUpOn string // why it gave up, "" while it keeps up
	// onCount is Config.LiveViolations: told the stream's violations
	// after each batch that changed them, and -1 when the check gives up.
	onCount func(int)
}

const (
	liveBatch = 1024 // events per hand-off
	liveQueue = 64   // batches queued before the check counts as behind
)

// startLiveCheck feeds every event rec records from now on to a checker
// stream in a goroutine of its own; finish or abandon stops it.
func startLiveCheck(ctx context.Context, rec *history.Recorder, opts checker.Options, onCount func(int)) *liveCheck {
	lc := newLiveCheck(ctx, rec.Path(), opts)
	lc.onCount = onCount
	go lc.run()
	rec.Observe(lc.observe)
	return lc
}

// newLiveCheck is a check whose goroutine is not started; name is the
// history file its events go to.
func newLiveCheck(ctx context.Context, name string, opts checker.Options) *liveCheck {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	return &liveCheck{
		batch:  make([]history.Op, 0, liveBatch),
		valid:  history.NewValidator(name),
		todo:   make(chan []history.Op, liveQueue),
		free:   make(chan []history.Op, liveQueue+1),
		exited: make(chan struct{}),
		cancel: cancel,
		st:     checker.NewStreamContext(ctx, opts),
	}
}

func (lc *liveCheck) run() {
	defer close(lc.exited)
	counted := 0
	for b := range lc.todo {
		if lc.reason() == "" {
			for _, op := range b {
				lc.st.Add(op)
			}
			if n := lc.st.Violations(); n != counted && lc.onCount != nil {
				counted = n
				lc.onCount(n)
			}
		}
		select {
		case lc.free <- b[:0]:
		default:
		}
	}
}

func (lc *liveCheck) observe(op history.Op) {
	if lc.given {
		return
	}
	if err := lc.valid.Check(&op); err != nil {
		lc.giveUp(fmt.Sprintf("event %d would be refused by the history's reader: %v", op.Index, err))
		return
	}
	lc.fed++
	lc.batch = append(lc.batch, op)
	if len(lc.batch) < liveBatch {
		return
	}
	select {
	case lc.todo <- lc.batch:
	default:
		lc.giveUp(fmt.Sprintf("the checkers fell %d events behind the run", liveQueue*liveBatch))
		return
	}
	select {
	case b := <-lc.free:
		lc.batch = b
	default:
		lc.batch = make([]history.Op, 0, liveBatch)
	}
}

// giveUp stops feeding the stream and lets its goroutine drop what it
// holds; called under the recorder's lock.
func (lc *liveCheck) giveUp(why string) {
	lc.given = true
	lc.batch = nil
	lc.mu.Lock()
	first := lc.gaveUpOn == ""
	if first {
		lc.gaveUpOn = why
	}
	lc.mu.Unlock()
	if first && lc.onCount != nil {
		lc.onCount(-1)
	}
	lc.cancel() // a porcupine segment being checked stops early
}

func (lc *liveCheck) reason() string {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.gaveUpOn
}

// finish hands off the last events and returns the checkers' results, or
// why there are none: the check gave up, or did not see exactly the
// written events. Call it once the recorder is closed and nothing more
// is recorded.
func (lc *liveCheck) finish(ctx context.Context, written int64) (*checker.Results, string) {
	if lc.finished {
		return nil, "it was finished already"
	}
	lc.finished = true
	defer lc.cancel()
	if !lc.given && len(lc.batch) > 0 {
		lc.todo <- lc.batch // the goroutine drains: this cannot block for long
	}
	lc.batch = nil
	close(lc.todo)
	<-lc.exited
	if why := lc.reason(); why != "" {
		return nil, why
	}
	if lc.fed != written {
		return nil, fmt.Sprintf("it saw %d events of the %d written", lc.fed, written)
	}
	res, err := lc.st.Finish(ctx)
	if err != nil {
		return nil, fmt.Sprintf("finish: %v", err)
	}
	return res, ""
}

// abandon stops the check without results, if finish has not: the run
// failed, and the stored history is what gets checked. Call it once the
// recorder is closed.
func (lc *liveCheck) abandon() {
	if !lc.finished {
		lc.giveUp("the run failed")
		lc.finish(context.Background(), -1)
	}
}
