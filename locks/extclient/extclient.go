package extclient

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lockjepsen/lockjepsen/locks"
)

// Options configure the clients of one run.
type Options struct {
	// Argv is the program and its arguments.
	Argv []string
	// TTL and OpTimeout are the lock's settings; OpTimeout also bounds how
	// long the harness waits for an answer (see replyTimeout).
	TTL, OpTimeout time.Duration
	// StartTimeout bounds the start and the init handshake (default 30s:
	// an interpreter on a cold, loaded machine is slow to start).
	StartTimeout time.Duration
	// StderrDir, when set, receives each client's stderr as
	// p<process>.stderr.
	StderrDir string
	// Fatal is told once per client when it can no longer be trusted (it
	// exited, broke the protocol, or stopped answering); the run must
	// stop. Its operations were recorded as unknown outcomes.
	Fatal func(error)
}

// hungAfter is how many answers in a row a client may miss before it is
// taken for hung.
const hungAfter = 3

// Factory starts one client process per client process number.
func Factory(o Options) func(nodes []locks.Conn, process int) (locks.Locker, error) {
	return func(nodes []locks.Conn, process int) (locks.Locker, error) {
		ns := make([]Node, len(nodes))
		for i, n := range nodes {
			ns[i] = Node{Name: n.Name, Addr: n.Addr}
		}
		ctx, cancel := context.WithTimeout(context.Background(), o.startTimeout())
		defer cancel()
		return Start(ctx, o, ns, process)
	}
}

func (o Options) startTimeout() time.Duration {
	if o.StartTimeout > 0 {
		return o.StartTimeout
	}
	return 30 * time.Second
}

// replyTimeout is how long the harness waits for an answer: the client's
// own operation timeout plus room for a slow runtime. Past it the outcome
// is unknown, as a Go lock's timeout is.
func (o Options) replyTimeout() time.Duration { return 4*o.OpTimeout + time.Second }

// Client is one running client process.
type Client struct {
	o       Options
	name    string // "client p3 (python3 lock.py)", for errors
	process int
	cmd     *exec.Cmd
	stdin   *os.File
	stderr  *tail
	caps    []string
	impl    string // what the client says it is

	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan *reply
	expired map[int64]bool // requests whose answer the harness stopped waiting for
	missed  int            // answers missed in a row
	killed  bool           // the harness killed it (a crash fault, or Close)
	cause   error          // why the harness killed it, when it failed
	failed  bool           // Fatal was told
	done    chan struct{}  // closed when the process has exited and its output is read
	exitErr error
}

// Start starts the client process and runs the init handshake.
func Start(ctx context.Context, o Options, nodes []Node, process int) (*Client, error) {
	if len(o.Argv) == 0 {
		return nil, errors.New("external client: no command")
	}
	c := &Client{o: o, process: process, pending: map[int64]chan *reply{}, expired: map[int64]bool{},
		done: make(chan struct{}), stderr: newTail(4096), nextID: 1,
		name: fmt.Sprintf("client p%d (%s)", process, strings.Join(o.Argv, " "))}
	if err := c.spawn(); err != nil {
		return nil, err
	}
	init := request{Type: typeInit, ID: 0, Protocol: ProtocolVersion, Process: process, Nodes: nodes,
		TokenPrefix: fmt.Sprintf("p%d", process), OpTimeoutMS: o.OpTimeout.Milliseconds(), TTLMS: o.TTL.Milliseconds()}
	r, err := c.call(ctx, init, 0)
	if err == nil && r.Type != typeInitOK {
		err = fmt.Errorf("answered init with %q (%s), want init_ok", r.Type, r.Error)
	}
	if err == nil && r.Protocol != ProtocolVersion {
		err = fmt.Errorf("speaks protocol %d; this harness speaks %d", r.Protocol, ProtocolVersion)
	}
	if err != nil {
		c.KillProcess()
		<-c.done
		return nil, fmt.Errorf("%s did not start: %w%s", c.name, err, c.stderrTail())
	}
	c.caps, c.impl = r.Capabilities, r.Name
	return c, nil
}

// spawn starts the process with its pipes and the goroutines that read
// its output; the done channel closes once it has exited.
func (c *Client) spawn() error {
	inR, inW, err := os.Pipe()
	if err != nil {
		return err
	}
	c.stdin = inW
	cmd := exec.Command(c.o.Argv[0], c.o.Argv[1:]...)
	cmd.Stdin = inR
	out, err := cmd.StdoutPipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return err
	}
	var stderrFile *cappedFile
	if c.o.StderrDir != "" {
		// A run without the file still runs: the harness keeps the end of
		// the client's stderr in memory for its errors.
		if err := os.MkdirAll(c.o.StderrDir, 0o755); err == nil {
			f, err := os.OpenFile(fmt.Sprintf("%s/p%d.stderr", c.o.StderrDir, c.process), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if err == nil {
				stderrFile = newCappedFile(f, stderrHead, stderrTail)
			}
		}
	}
	if stderrFile != nil {
		cmd.Stderr = io.MultiWriter(c.stderr, stderrFile)
	} else {
		cmd.Stderr = c.stderr
	}
	// The client dies with the harness, even when the harness is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		inR.Close()
		inW.Close()
		if stderrFile != nil {
			stderrFile.Close()
		}
		return fmt.Errorf("%s did not start: %w", c.name, err)
	}
	inR.Close()
	c.cmd = cmd
	go func() {
		c.read(out)
		err := cmd.Wait()
		if stderrFile != nil {
			stderrFile.Close()
		}
		c.exited(err)
	}()
	return nil
}

// read delivers each line of the client's stdout to the request it
// answers.
func (c *Client) read(out io.Reader) {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		r, err := parseReply(line)
		if err == nil {
			err = c.deliver(r, line)
		}
		if err != nil {
			c.kill(err)
			io.Copy(io.Discard, out)
			return
		}
	}
}

// deliver hands a reply to its waiting request. A late answer to a
// request the harness gave up on is dropped; an answer to a request never
// sent is a protocol error.
func (c *Client) deliver(r *reply, line []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := *r.InReplyTo
	if ch, ok := c.pending[id]; ok {
		delete(c.pending, id)
		c.missed = 0
		ch <- r
		return nil
	}
	if c.expired[id] {
		delete(c.expired, id)
		return nil
	}
	return &ProtocolError{Line: string(line), Reason: fmt.Sprintf("an answer to request %d, which was never sent or was already answered", id)}
}

// exited records the process's end, once its stdout and stderr are read
// to the end, so that the failure reported carries all of its stderr. A
// client the harness killed for a failure reports that failure; one that
// exited by itself during the run failed by exiting.
func (c *Client) exited(err error) {
	c.mu.Lock()
	c.exitErr = err
	killed, cause := c.killed, c.cause
	c.mu.Unlock()
	switch {
	case cause != nil:
		c.fail(cause)
	case !killed:
		why := "exited"
		if err != nil {
			why = "exited: " + err.Error()
		}
		c.fail(errors.New(why))
	}
	close(c.done)
}

// kill ends a client that can no longer be trusted; its failure is
// reported once the process is gone.
func (c *Client) kill(cause error) {
	c.mu.Lock()
	if c.cause == nil {
		c.cause = cause
	}
	c.mu.Unlock()
	c.KillProcess()
}

// fail tells Options.Fatal, once, that the client can no longer be trusted.
func (c *Client) fail(err error) {
	c.mu.Lock()
	first := !c.failed
	c.failed = true
	c.mu.Unlock()
	if first && c.o.Fatal != nil {
		c.o.Fatal(fmt.Errorf("%s %w%s", c.name, err, c.stderrTail()))
	}
}

func (c *Client) stderrTail() string {
	t := strings.TrimSpace(c.stderr.String())
	if t == "" {
		return " (its stderr was empty)"
	}
	return "\n--- the end of its stderr:\n" + t
}

// call sends one request and waits for its answer. id 0 is the
// handshake's; others get the next id.
func (c *Client) call(ctx context.Context, req request, timeout time.Duration) (*reply, error) {
	ch := make(chan *reply, 1)
	c.mu.Lock()
	if req.Type != typeInit {
		req.ID = c.nextID
		c.nextID++
	}
	c.pending[req.ID] = ch
	c.mu.Unlock()
	b, _ := json.Marshal(req)
	c.stdin.SetWriteDeadline(time.Now().Add(c.o.replyTimeout()))
	if _, err := c.stdin.Write(append(b, '\n')); err != nil {
		c.forget(req.ID)
		return nil, fmt.Errorf("external client: could not send %s: %w", req.Type, err)
	}
	var timer <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timer = t.C
	}
	select {
	case r := <-ch:
		return r, nil
	case <-ctx.Done():
		c.forget(req.ID)
		return nil, ctx.Err()
	case <-c.done:
		c.forget(req.ID)
		return nil, fmt.Errorf("external client exited before it answered %s", req.Type)
	case <-timer:
		if c.forget(req.ID) >= hungAfter {
			c.kill(fmt.Errorf("missed %d answers in a row (each waited %s): it is hung", hungAfter, timeout))
		}
		return nil, fmt.Errorf("external client did not answer %s within %s", req.Type, timeout)
	}
}

// forget stops waiting for request id, so that its late answer is
// dropped, and returns how many answers in a row were missed.
func (c *Client) forget(id int64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.pending[id]; ok {
		delete(c.pending, id)
		c.expired[id] = true
		c.missed++
	}
	return c.missed
}

// StopProcess freezes the client process (SIGSTOP).
func (c *Client) StopProcess() error { return c.cmd.Process.Signal(syscall.SIGSTOP) }

// ContinueProcess resumes it (SIGCONT).
func (c *Client) ContinueProcess() error { return c.cmd.Process.Signal(syscall.SIGCONT) }

// KillProcess kills it at once (SIGKILL), as a crash would.
func (c *Client) KillProcess() error {
	c.mu.Lock()
	c.killed = true
	c.mu.Unlock()
	c.cmd.Process.Signal(syscall.SIGCONT) // a stopped process must not outlive the run
	return c.cmd.Process.Kill()
}

// Close ends the client: its stdin closes, which a client takes as the
// end; one that does not exit within a second is killed. It waits for the
// process to be gone.
func (c *Client) Close() error {
	c.mu.Lock()
	c.killed = true
	c.mu.Unlock()
	c.cmd.Process.Signal(syscall.SIGCONT)
	c.stdin.Close()
	select {
	case <-c.done:
	case <-time.After(time.Second):
		c.cmd.Process.Kill()
		<-c.done
	}
	return nil
}

// PID is the client process's id.
func (c *Client) PID() int { return c.cmd.Process.Pid }

// Name is what the client said it is in its handshake.
func (c *Client) Name() string { return c.impl }

// Has reports whether the client declared a capability.
func (c *Client) Has(capability string) bool { return slices.Contains(c.caps, capability) }

// TryAcquire asks the client to take the lock once.
func (c *Client) TryAcquire(ctx context.Context, key string, ttl time.Duration) (locks.Lease, error) {
	r, err := c.call(ctx, request{Type: typeAcquire, Key: key, TTLMS: ttl.Milliseconds()}, c.o.replyTimeout())
	if err := outcome(r, err, locks.ErrNotAcquired); err != nil {
		return nil, err
	}
	if r.Token == "" {
		c.kill(&ProtocolError{Line: fmt.Sprintf("%+v", *r), Reason: "an ok to acquire without a token"})
		return nil, errors.New("external client: an ok to acquire without a token")
	}
	return &lease{c: c, key: key, token: r.Token, fence: r.Fence, times: timesOf(r)}, nil
}

// outcome maps a reply to the locks package's answers: nil for ok, the
// definite error for fail, an unknown outcome for info or no answer.
func outcome(r *reply, err error, definite error) error {
	switch {
	case err != nil:
		return err
	case r.Type == typeOK:
		return nil
	case r.Type == typeFail:
		return fmt.Errorf("%w: %s", definite, r.Error)
	default:
		return fmt.Errorf("external client: outcome unknown: %s", r.Error)
	}
}

// fromMonotonic converts an absolute CLOCK_MONOTONIC time to a time.Time
// with Go's monotonic reading. The wall clock is read before the
// monotonic one, so the result is never later than what the client said.
func fromMonotonic(ns *int64) time.Time {
	if ns == nil {
		return time.Time{}
	}
	now := time.Now()
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return now // cannot convert: the belief ends now, never later
	}
	return now.Add(time.Duration(*ns - ts.Nano()))
}

type lease struct {
	c          *Client
	key, token string
	fence      *int64

	mu    sync.Mutex
	times leaseTimes
}

// leaseTimes are what an ok to a grant or an extend says of the lease's
// time, replaced together so that a reader never mixes two replies.
type leaseTimes struct {
	validUntil time.Time
	// started is the client's own stamp of when it began the grant or the
	// latest extend (zero when it reports none).
	started time.Time
}

func timesOf(r *reply) leaseTimes {
	return leaseTimes{validUntil: fromMonotonic(r.ValidUntilMonoNS), started: fromMonotonic(r.StartedMonoNS)}
}

func (l *lease) current() leaseTimes {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.times
}

func (l *lease) Token() string { return l.token }

func (l *lease) ValidUntil() time.Time { return l.current().validUntil }

// StartedAt is the client's own stamp (see leaseTimes).
func (l *lease) StartedAt() time.Time { return l.current().started }

func (l *lease) Fence() (int64, bool) {
	if l.fence == nil {
		return 0, false
	}
	return *l.fence, true
}

func (l *lease) Extend(ctx context.Context, ttl time.Duration) error {
	if !l.c.Has(CapExtend) {
		return errors.New("external client: it did not declare the extend capability")
	}
	r, err := l.c.call(ctx, request{Type: typeExtend, Key: l.key, Token: l.token, TTLMS: ttl.Milliseconds()}, l.c.o.replyTimeout())
	if err := outcome(r, err, locks.ErrNotHeld); err != nil {
		return err
	}
	l.mu.Lock()
	l.times = timesOf(r)
	l.mu.Unlock()
	return nil
}

func (l *lease) Release(ctx context.Context) error {
	r, err := l.c.call(ctx, request{Type: typeRelease, Key: l.key, Token: l.token}, l.c.o.replyTimeout())
	return outcome(r, err, locks.ErrNotHeld)
}

// The lease's client is a process of its own: client faults act on it.
func (l *lease) StopProcess() error     { return l.c.StopProcess() }
func (l *lease) ContinueProcess() error { return l.c.ContinueProcess() }
func (l *lease) KillProcess() error     { return l.c.KillProcess() }
