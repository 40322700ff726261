package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/history"
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
// force and the violations so far. It reads the run's history.jsonl as the
// harness writes it (the file is flushed every 200 ms), so it needs nothing
// from the harness but the public file format.
//
// "Violations so far" is an approximation of the exclusion checker: an
// acquire that completes while another process's lease on the key is still
// believed valid (by its valid_until, until its release is invoked, a
// release or extend fails, or the holder crashes). The final verdict is the
// checkers'; resource damage (the counter workload) is not counted here.
type progress struct {
	w      io.Writer
	tty    bool
	prefix string        // "[2/10 del-release] " in a matrix
	limit  time.Duration // fault phase + recovery
	every  time.Duration // plain mode: one line this often

	store, test string
	before      map[string]bool // run directories that existed before the run

	mu       sync.Mutex
	drawn    bool // a status line is on screen (tty)
	started  time.Time
	lastLine time.Time

	// What the tail has read.
	file    *os.File
	reader  *bufio.Reader
	partial []byte
	ops     int
	faults  map[string]string // fault id -> "kill n1"
	holders map[string]map[int]int64
	viol    int

	stop chan struct{}
	done chan struct{}
}

func newProgress(w io.Writer, cfg harness.Config, prefix string) *progress {
	p := &progress{
		w: w, tty: isTerminal(w), prefix: prefix, limit: cfg.TimeLimit + cfg.Recovery, every: 5 * time.Second,
		store: cfg.Store, test: cfg.TestName(), before: map[string]bool{},
		faults: map[string]string{}, holders: map[string]map[int]int64{},
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	if v := os.Getenv("LOCKJEPSEN_PROGRESS_EVERY"); v != "" {
		if d, err := time.ParseDuration(v); err == nil && d > 0 {
			p.every = d
		}
	}
	entries, _ := os.ReadDir(filepath.Join(p.store, p.test))
	for _, e := range entries {
		p.before[e.Name()] = true
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
	if p.file != nil {
		p.file.Close()
	}
}

func (p *progress) loop() {
	defer close(p.done)
	tick := 250 * time.Millisecond
	if !p.tty {
		tick = 500 * time.Millisecond
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		p.poll()
		p.mu.Lock()
		if !p.started.IsZero() {
			if p.tty {
				fmt.Fprintf(p.w, "\r\033[K%s", p.statusLocked())
				p.drawn = true
			} else if time.Since(p.lastLine) >= p.every {
				fmt.Fprintln(p.w, p.statusLocked())
				p.lastLine = time.Now()
			}
		}
		p.mu.Unlock()
	}
}

// poll finds the run's history once it exists and reads what was added.
func (p *progress) poll() {
	if p.file == nil {
		dir := p.findRunDir()
		if dir == "" {
			return
		}
		f, err := os.Open(filepath.Join(dir, harness.HistoryFile))
		if err != nil {
			return
		}
		p.mu.Lock()
		p.file, p.reader = f, bufio.NewReaderSize(f, 1<<16)
		p.started = time.Now()
		p.lastLine = p.started
		p.mu.Unlock()
	}
	for {
		line, err := p.reader.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			p.partial = append(p.partial, line...)
			continue
		}
		if err != nil {
			// An incomplete last line: keep it for the next poll.
			p.partial = append(p.partial, line...)
			return
		}
		if len(p.partial) > 0 {
			line = append(p.partial, line...)
			p.partial = p.partial[:0]
		}
		p.mu.Lock()
		p.consume(line)
		p.mu.Unlock()
	}
}

func (p *progress) findRunDir() string {
	entries, err := os.ReadDir(filepath.Join(p.store, p.test))
	if err != nil {
		return ""
	}
	var fresh []string
	for _, e := range entries {
		if e.IsDir() && !p.before[e.Name()] {
			fresh = append(fresh, e.Name())
		}
	}
	if len(fresh) == 0 {
		return ""
	}
	sort.Strings(fresh)
	return filepath.Join(p.store, p.test, fresh[len(fresh)-1])
}

var (
	markNemesis     = []byte(`"process":"nemesis"`)
	markInvoke      = []byte(`"type":"invoke"`)
	markOKAcquire   = []byte(`"type":"ok","f":"acquire"`)
	markOKExtend    = []byte(`"type":"ok","f":"extend"`)
	markRelease     = []byte(`"type":"invoke","f":"release"`)
	markFailRelease = []byte(`"type":"fail","f":"release"`)
	markFailExtend  = []byte(`"type":"fail","f":"extend"`)
)

// consume takes one history line; only the few kinds of line progress needs
// are decoded.
func (p *progress) consume(line []byte) {
	switch {
	case bytes.Contains(line, markNemesis):
		var op history.Op
		if json.Unmarshal(line, &op) != nil || op.Value == nil {
			return
		}
		id := op.F + " " + strings.Join(op.Value.Targets, ",")
		switch op.Value.Phase {
		case "start":
			if op.F != "primary" {
				p.faults[id] = id
			}
			if op.F == "client-crash" {
				for _, c := range op.Value.Clients {
					for _, hs := range p.holders {
						delete(hs, c)
					}
				}
			}
		case "stop", "error":
			delete(p.faults, id)
		}
	case bytes.Contains(line, markOKAcquire), bytes.Contains(line, markOKExtend):
		var op history.Op
		if json.Unmarshal(line, &op) != nil {
			return
		}
		until := int64(math.MaxInt64)
		if op.Value != nil && op.Value.ValidUntil != nil {
			until = *op.Value.ValidUntil
		}
		hs := p.holders[op.Key]
		if hs == nil {
			hs = map[int]int64{}
			p.holders[op.Key] = hs
		}
		if op.F == history.Acquire {
			for q, end := range hs {
				if q != op.Process && end > op.Time {
					p.viol++
					break
				}
			}
		}
		hs[op.Process] = until
	case bytes.Contains(line, markRelease), bytes.Contains(line, markFailRelease), bytes.Contains(line, markFailExtend):
		var op history.Op
		if json.Unmarshal(line, &op) != nil {
			return
		}
		delete(p.holders[op.Key], op.Process)
	}
	if bytes.Contains(line, markInvoke) && !bytes.Contains(line, markNemesis) {
		p.ops++
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
	s := fmt.Sprintf("%s[%s] %d ops, faults: %s, violations so far: ~%d",
		p.prefix, clock, p.ops, faults, p.viol)
	if p.tty && len(s) > 160 {
		s = s[:157] + "..."
	}
	return s
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
