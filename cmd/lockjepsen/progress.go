package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/internal/ctxsleep"
)

// isTerminal reports whether w is a character device (a terminal), so that
// progress can redraw one line; anything else (a pipe, a file, CI's log)
// gets plain lines.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progress shows a running test: elapsed/limit, operations, the faults in
// force and the violations so far. The harness hands it every event as it
// is recorded (Config.Observer), to count operations and faults, and the
// exclusion checker's count from its check alongside the run
// (Config.LiveViolations), so "violations so far" is the checker's count
// up to a batch of events ago. Judging every event again here, under the
// recorder's lock that every client takes, cost a microsecond of the
// clients' CPU per lock cycle (issue 57). Resource damage (the counter
// workload) is judged at the end only.
type progress struct {
	w      io.Writer
	tty    bool
	prefix string        // "[2/10 del-release] " in a matrix
	limit  time.Duration // fault phase + recovery
	every  time.Duration // plain mode: one line this often

	mu       sync.Mutex
	drawn    bool // a status line is on screen (tty)
	started  time.Time
	lastLine time.Time
	ops      int
	faults   map[string]string // fault id -> "kill n1"
	// violations is the check alongside the run's count, -1 once it gave
	// up (then the run's check counts them at the end).
	violations atomic.Int64

	stop chan struct{}
	done chan struct{}
}

func newProgress(w io.Writer, cfg harness.Config, prefix string) *progress {
	p := &progress{
		w: w, tty: isTerminal(w), prefix: prefix, limit: cfg.TimeLimit + cfg.Recovery,
		// About a hundred lines for a long run (one every 30 s for an
		// hour's soak), one every 5 s for a short one.
		every:  min(max((cfg.TimeLimit+cfg.Recovery)/100, 5*time.Second), 30*time.Second),
		faults: map[string]string{},
		stop:   make(chan struct{}), done: make(chan struct{}),
	}
	if v := os.Getenv("LOCKJEPSEN_PROGRESS_EVERY"); v != "" {
		if d, err := time.ParseDuration(v); err == nil && d > 0 {
			p.every = d
		}
	}
	return p
}

func (p *progress) start() {
	go p.loop()
}

// finish stops the display and clears the status line.
func (p *progress) finish() {
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
		p.drawn = false
	}
}

func (p *progress) loop() {
	defer close(p.done)
	tick := 250 * time.Millisecond
	if !p.tty {
		tick = 500 * time.Millisecond
	}
	ctxsleep.Every(p.stop, tick, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.started.IsZero() {
			return
		}
		if p.tty {
			fmt.Fprintf(p.w, "\r\033[K%s", p.statusLocked())
			p.drawn = true
		} else if time.Since(p.lastLine) >= p.every {
			fmt.Fprintln(p.w, p.statusLocked())
			p.lastLine = time.Now()
		}
	})
}

// observe takes one event of the history as it is recorded (the harness's
// Config.Observer): it only counts, under its own lock, and never prints.
func (p *progress) observe(op history.Op) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started.IsZero() {
		p.started = time.Now()
		p.lastLine = p.started
	}
	if op.Process != history.NemesisProcess {
		switch {
		case op.Type == history.Invoke:
			p.ops++
		case op.Type == history.Summary:
			p.ops += int(op.Value.Count)
		}
		return
	}
	if op.Value == nil {
		return
	}
	id := op.F + " " + strings.Join(op.Value.Targets, ",")
	switch op.Value.Phase {
	case "start":
		if op.F != "primary" {
			p.faults[id] = id
		}
	case "stop", "error":
		delete(p.faults, id)
	}
}

func (p *progress) statusLocked() string {
	elapsed := time.Since(p.started).Truncate(time.Second)
	faults := "none"
	if len(p.faults) > 0 {
		var fs []string
		for _, f := range p.faults {
			fs = append(fs, f)
		}
		sort.Strings(fs)
		faults = strings.Join(fs, "; ")
	}
	// Past the planned time the clients are finishing their last
	// operations and the servers stopping: say so rather than overshoot.
	clock := fmt.Sprintf("%s/%s", elapsed, p.limit.Round(time.Second))
	if limit := p.limit.Round(time.Second); p.limit > 0 && elapsed > limit {
		clock = fmt.Sprintf("%s, finishing", limit)
	}
	s := fmt.Sprintf("%s[%s] %d ops, faults: %s, violations so far: %s",
		p.prefix, clock, p.ops, faults, p.violationsSoFar())
	if p.tty && len(s) > 160 {
		s = s[:157] + "..."
	}
	return s
}

// liveViolations takes the check alongside the run's count
// (Config.LiveViolations); -1: it gave up.
func (p *progress) liveViolations(n int) { p.violations.Store(int64(n)) }

// violationsSoFar is the status line's count of violations.
func (p *progress) violationsSoFar() string {
	n := p.violations.Load()
	if n < 0 {
		return "counted after the run (the check alongside it stopped)"
	}
	return strconv.FormatInt(n, 10)
}

// harnessLines is the writer given to harness.Config.Progress: the
// harness's own messages (starting, running, healed) as plain lines, without
// its periodic event counts, which the progress line replaces. On a
// terminal the status line is cleared first and redrawn by the next tick.
type harnessLines struct {
	p   *progress
	mu  sync.Mutex // the harness writes from several goroutines
	buf []byte
}

var eventCountLine = regexp.MustCompile(`^\[[^\]]+\] \d+ events recorded$`)

func (h *harnessLines) Write(b []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.buf = append(h.buf, b...)
	for {
		i := bytes.IndexByte(h.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := string(h.buf[:i])
		h.buf = h.buf[i+1:]
		if eventCountLine.MatchString(line) {
			continue
		}
		h.p.mu.Lock()
		if h.p.drawn {
			fmt.Fprint(h.p.w, "\r\033[K")
			h.p.drawn = false
		}
		fmt.Fprintf(h.p.w, "%s%s\n", h.p.prefix, line)
		h.p.mu.Unlock()
	}
}
