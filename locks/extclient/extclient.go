package extclient

import (
	"bufio"
	"bytes"
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

	"github.com/lockjepsen/lockjepsen/cluster/fakeclock"
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
	// Clock, when set, is the environment that moves a client process's
	// wall clock (fakeclock.ClientEnv: libfaketime and the offset file
	// its process reads), for client clock faults. The files libfaketime
	// leaves in /dev/shm are removed once the process has exited.
	Clock func(process int) []string
	// Fatal is told once per client when it can no longer be trusted (it
	// exited, broke the protocol, or stopped answering); the run must
	// stop. Its operations were recorded as unknown outcomes.
	Fatal func(error)
}

// hungAfter is how many answers a client may owe past their reply
// timeout before it is taken for hung. A late answer pays its debt: a
// client that was slow once is not hung, and one that never answers a
// release, while it answers everything else, is.
const hungAfter = 3

// maxLine is the longest line a client may print on stdout.
const maxLine = 1 << 20

// Factory starts one client process per client process number.
func Factory(o Options) func(nodes []locks.Conn, process int) (locks.Locker, error) {
	return func(nodes []locks.Conn, process int) (locks.Locker, error) {
		ns := make([]Node, len(nodes))
		for i, n := range nodes {
			ns[i] = Node{Name: n.Name, Addr: n.Addr}
		}
		return Launch(o, Topology{Nodes: ns}, process)
	}
}

// Launch starts one client on a system within the start timeout.
func Launch(o Options, topo Topology, process int) (*Client, error) {
	return LaunchContext(context.Background(), o, topo, process)
}

// LaunchContext is Launch that also gives up when ctx ends (the run is
// interrupted while a client is slow to answer its handshake).
func LaunchContext(ctx context.Context, o Options, topo Topology, process int) (*Client, error) {
	if err, ok := silent.Load(strings.Join(o.Argv, "\x00")); ok {
		return nil, fmt.Errorf("not started again: %w", err.(error))
	}
	ctx, cancel := context.WithTimeout(ctx, o.startTimeout())
	defer cancel()
	return StartOn(ctx, o, topo, process)
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
	systems []string // the systems it declares (none: single and redlock)
	topo    Topology // what it was handed
	impl    string   // what the client says it is

	mu       sync.Mutex
	nextID   int64
	reqs     map[int64]*pending // sent and not answered yet
	answered chan struct{}      // signalled on each answer, for Close's wait
	stopped  bool               // the harness stopped it (SIGSTOP)
	resumed  time.Time          // when the harness last continued it
	killed   bool               // the harness killed it (a crash fault, or Close)
	exiting  bool               // it has exited and is being reaped: signal it alone
	cause    error              // why the harness killed it, when it failed
	failed   bool               // Fatal was told
	done     chan struct{}      // closed when the process has exited and its output is read
	exitErr  error
}

// pending is a request that has not been answered. The harness may have
// stopped waiting for it (its outcome is then unknown), but the client
// still owes the answer; a late one is dropped.
type pending struct {
	id      int64
	typ     string
	sent    time.Time
	ch      chan *reply // nil once the caller stopped waiting
	watched bool        // it has a reply timeout (every request but init)
	overdue bool        // its reply timeout passed without an answer
}

func (p *pending) String() string { return fmt.Sprintf("%s (request %d)", p.typ, p.id) }

// Start starts the client process and runs the init handshake, handing
// it nodes only (a client on a single Redis or on Redlock).
func Start(ctx context.Context, o Options, nodes []Node, process int) (*Client, error) {
	return StartOn(ctx, o, Topology{Nodes: nodes}, process)
}

// StartOn starts the client process on a system and runs the init
// handshake. A client that declares the systems it runs on and not this
// one is refused (ErrUnsupportedSystem).
func StartOn(ctx context.Context, o Options, topo Topology, process int) (*Client, error) {
	if len(o.Argv) == 0 {
		return nil, errors.New("external client: no command")
	}
	c := &Client{o: o, process: process, topo: topo, reqs: map[int64]*pending{}, answered: make(chan struct{}, 1),
		done: make(chan struct{}), stderr: newTail(4096), nextID: 1,
		name: fmt.Sprintf("client p%d (%s)", process, strings.Join(o.Argv, " "))}
	if err := c.spawn(); err != nil {
		return nil, err
	}
	init := request{Type: typeInit, ID: 0, Protocol: ProtocolVersion, Process: process, Nodes: topo.Nodes,
		TokenPrefix: fmt.Sprintf("p%d", process), OpTimeoutMS: o.OpTimeout.Milliseconds(), TTLMS: o.TTL.Milliseconds(),
		System: topo.System, Sentinels: topo.Sentinels, MasterName: topo.MasterName, AddressMap: topo.AddressMap}
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
	c.caps, c.impl, c.systems = r.Capabilities, r.Name, r.Systems
	if topo.System != "" && !RunsOn(c.systems, topo.System) {
		c.Close()
		return nil, fmt.Errorf("%s: %w %s; it runs on %s", c.name, ErrUnsupportedSystem, topo.System, strings.Join(Systems(c.systems), ", "))
	}
	return c, nil
}

// ErrUnsupportedSystem is a client started on a system it does not
// declare.
var ErrUnsupportedSystem = errors.New("does not run on")

// Systems is what a client's declared systems mean: the systems of
// protocol 1's first clients when it declares none.
func Systems(declared []string) []string {
	if len(declared) == 0 {
		return []string{"single", "redlock"}
	}
	return declared
}

// RunsOn reports whether a client that declared systems runs on system.
func RunsOn(declared []string, system string) bool {
	return slices.Contains(Systems(declared), system)
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
	// Our own pipe rather than StdoutPipe: Wait would close it once the
	// client exits, losing its last lines, and a helper it left holding
	// the pipe would keep the reader waiting for ever (see reap).
	out, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return err
	}
	cmd.Stdout = outW
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
	// It leads a process group of its own, so that what it starts (a
	// helper, a fork) is stopped, continued and killed with it, and a
	// terminal's Ctrl-C, which the harness handles, does not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	// Wait copies stderr until every holder of the pipe closes it: a
	// helper that keeps it open must not hold the run.
	cmd.WaitDelay = stragglerWait
	if c.o.Clock != nil {
		cmd.Env = append(os.Environ(), c.o.Clock(c.process)...)
	}
	launched := time.Now()
	if err := cmd.Start(); err != nil {
		inR.Close()
		inW.Close()
		out.Close()
		outW.Close()
		if stderrFile != nil {
			stderrFile.Close()
		}
		return fmt.Errorf("%s did not start: %w", c.name, err)
	}
	inR.Close()
	outW.Close()
	c.cmd = cmd
	go c.reap(out, stderrFile, launched)
	return nil
}

// stragglerWait is how long the harness waits, once a client has exited,
// for its stdout and stderr to close before it closes them itself.
const stragglerWait = time.Second

// reap reads the client's stdout to its end and records its exit. When
// the client exits, whatever it started in its process group is killed
// before the client is reaped (its pid, and so the group's id, stays
// reserved until then), and a reader still held by a helper that left the
// group is cut after stragglerWait.
func (c *Client) reap(out *os.File, stderrFile *cappedFile, launched time.Time) {
	read := make(chan struct{})
	go func() {
		c.read(out)
		close(read)
	}()
	pid := c.cmd.Process.Pid
	var info unix.Siginfo
	for unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
	}
	syscall.Kill(-pid, syscall.SIGKILL)
	syscall.Kill(-pid, syscall.SIGCONT)
	c.mu.Lock()
	c.exiting = true
	c.mu.Unlock()
	err := c.cmd.Wait()
	select {
	case <-read:
	case <-time.After(stragglerWait):
		out.Close()
		<-read
	}
	out.Close()
	if stderrFile != nil {
		stderrFile.Close()
	}
	if c.o.Clock != nil {
		c.cleanupShm(launched)
	}
	c.exited(err)
}

// signal sends sig to the client's process group while its leader is not
// yet reaped (the group's id cannot be reused before then), and to the
// client alone after.
func (c *Client) signal(sig syscall.Signal) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.exiting {
		return c.cmd.Process.Signal(sig)
	}
	return syscall.Kill(-c.cmd.Process.Pid, sig)
}

// cleanupShm removes the files libfaketime left in /dev/shm for the
// exited (reaped) process: a killed one leaves them, and php leaves them
// even when it exits cleanly. A failure goes to the client's stderr tail.
func (c *Client) cleanupShm(launched time.Time) {
	err := errors.Join(fakeclock.CleanupShm(c.cmd.Process.Pid), fakeclock.RemoveHalfMadeSems(launched))
	if err != nil {
		fmt.Fprintf(c.stderr, "\nlockjepsen: %v\n", err)
	}
}

// read delivers each line of the client's stdout to the request it
// answers. A line that is not an answer, or longer than maxLine, is a
// protocol error; the rest of the output is then drained, so that the
// client is not blocked on a full pipe while it is killed.
func (c *Client) read(out io.Reader) {
	br := bufio.NewReaderSize(out, 64<<10)
	defer io.Copy(io.Discard, br)
	for {
		line, err := readLine(br, maxLine)
		if errors.Is(err, errLongLine) {
			c.kill(&ProtocolError{Line: string(line), Reason: fmt.Sprintf("a line of more than %d bytes on stdout, with no newline", maxLine)})
			return
		}
		if len(bytes.TrimSpace(line)) > 0 {
			r, perr := parseReply(line)
			if perr == nil {
				perr = c.deliver(r, line)
			}
			if perr != nil {
				c.kill(perr)
				return
			}
		}
		if err != nil {
			if err != io.EOF && !errors.Is(err, os.ErrClosed) && !c.ending() {
				c.kill(fmt.Errorf("could not read its stdout: %w", err))
			}
			return
		}
	}
}

var errLongLine = errors.New("line too long")

// readLine reads one line without its newline (the last may have none).
// A line longer than max returns its first max bytes and errLongLine,
// before the rest is read: a client that prints without end must not
// fill the harness's memory.
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		line = append(line, frag...)
		if len(line) > max {
			return line[:max], errLongLine
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return bytes.TrimSuffix(line, []byte("\n")), err
	}
}

// ending reports whether the harness is ending the client itself.
func (c *Client) ending() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.killed
}

// deliver hands a reply to its waiting request. A late answer to a
// request the harness gave up on pays the client's debt and is dropped;
// an answer to a request never sent is a protocol error.
func (c *Client) deliver(r *reply, line []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := *r.InReplyTo
	p, ok := c.reqs[id]
	if !ok {
		return &ProtocolError{Line: string(line), Reason: fmt.Sprintf("an answer to request %d, which was never sent or was already answered", id)}
	}
	delete(c.reqs, id)
	if p.ch != nil {
		p.ch <- r
	}
	select {
	case c.answered <- struct{}{}:
	default:
	}
	return nil
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

// call sends one request and waits for its answer, for at most timeout
// when it is positive. id 0 is the handshake's; others get the next id.
// A request with a timeout is watched until it is answered (see overdue),
// whether or not the caller still waits.
func (c *Client) call(ctx context.Context, req request, timeout time.Duration) (*reply, error) {
	p, err := c.send(req, timeout > 0)
	if err != nil {
		return nil, err
	}
	var timer <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timer = t.C
	}
	select {
	case r := <-p.ch:
		return r, nil
	case <-ctx.Done():
		c.giveUp(p)
		return nil, fmt.Errorf("external client: no answer to %s yet: %w", p, ctx.Err())
	case <-c.done:
		c.giveUp(p)
		return nil, c.goneBefore(p)
	case <-timer:
		c.giveUp(p)
		return nil, fmt.Errorf("external client did not answer %s within %s", p, timeout)
	}
}

// send writes one request and records it as owed.
func (c *Client) send(req request, watched bool) (*pending, error) {
	c.mu.Lock()
	if req.Type != typeInit {
		req.ID = c.nextID
		c.nextID++
	}
	p := &pending{id: req.ID, typ: req.Type, sent: time.Now(), ch: make(chan *reply, 1), watched: watched}
	c.reqs[p.id] = p
	c.mu.Unlock()
	b, err := json.Marshal(req)
	if err == nil {
		c.stdin.SetWriteDeadline(time.Now().Add(c.o.replyTimeout()))
		_, err = c.stdin.Write(append(b, '\n'))
	}
	if err != nil {
		c.mu.Lock()
		delete(c.reqs, p.id)
		c.mu.Unlock()
		return nil, fmt.Errorf("external client: could not send %s: %w", p, err)
	}
	if watched {
		time.AfterFunc(c.o.replyTimeout(), func() { c.overdue(p) })
	}
	return p, nil
}

// giveUp stops waiting for p; its late answer is dropped.
func (c *Client) giveUp(p *pending) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p.ch = nil
}

// goneBefore says why the client is gone before it answered p: the
// protocol error or hang it was killed for, or its exit.
func (c *Client) goneBefore(p *pending) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.cause != nil:
		return fmt.Errorf("external client failed before it answered %s: %w", p, c.cause)
	case c.exitErr != nil:
		return fmt.Errorf("external client exited before it answered %s: %w", p, c.exitErr)
	}
	return fmt.Errorf("external client exited before it answered %s", p)
}

// deadline is when p's reply timeout ends. Time the harness kept the
// client stopped (a client-pause fault) does not count: the timeout
// starts again when the client is continued.
func (c *Client) deadline(p *pending) time.Time {
	from := p.sent
	if c.resumed.After(from) {
		from = c.resumed
	}
	return from.Add(c.o.replyTimeout())
}

// overdue runs when p's reply timeout may have passed. A request still
// unanswered then is owed past its timeout; a client that owes hungAfter
// such answers has stopped answering and is killed, naming them. The
// operation's own context usually ends long before (the workload's op
// timeout), so this is the only place a missing answer is counted.
func (c *Client) overdue(p *pending) {
	select {
	case <-c.done:
		return // it exited, and that is its failure
	default:
	}
	c.mu.Lock()
	if c.reqs[p.id] != p || c.killed {
		c.mu.Unlock()
		return
	}
	if wait := time.Until(c.deadline(p)); wait > 0 || c.stopped {
		if c.stopped {
			wait = c.o.replyTimeout()
		}
		c.mu.Unlock()
		time.AfterFunc(wait, func() { c.overdue(p) })
		return
	}
	p.overdue = true
	owed := c.owedLocked()
	c.mu.Unlock()
	if len(owed) >= hungAfter {
		c.kill(fmt.Errorf("stopped answering: it owes answers to %s, each past its reply timeout of %s (4 × op timeout + 1 s); it is taken for hung",
			list(owed), c.o.replyTimeout()))
	}
}

// owedLocked lists the overdue requests, oldest first.
func (c *Client) owedLocked() []*pending {
	var owed []*pending
	for _, p := range c.reqs {
		if p.overdue {
			owed = append(owed, p)
		}
	}
	slices.SortFunc(owed, func(a, b *pending) int { return int(a.id - b.id) })
	return owed
}

func list(ps []*pending) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}

// StopProcess freezes the client process (SIGSTOP). Its requests' reply
// timeouts are suspended (see deadline).
func (c *Client) StopProcess() error {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	return c.signal(syscall.SIGSTOP)
}

// ContinueProcess resumes it (SIGCONT).
func (c *Client) ContinueProcess() error {
	c.mu.Lock()
	c.stopped, c.resumed = false, time.Now()
	c.mu.Unlock()
	return c.signal(syscall.SIGCONT)
}

// KillProcess kills it at once (SIGKILL), as a crash would.
func (c *Client) KillProcess() error {
	c.mu.Lock()
	c.killed = true
	c.mu.Unlock()
	c.signal(syscall.SIGCONT) // a stopped process must not outlive the run
	return c.signal(syscall.SIGKILL)
}

// Close ends the client. It first waits, up to their reply timeouts, for
// the answers the client still owes: a client that owes one when the run
// ends has stopped answering, however short the run, and fails it. Then
// its stdin closes, which a client takes as the end; one that does not
// exit within a second is killed. It waits for the process to be gone.
func (c *Client) Close() error {
	c.mu.Lock()
	stopped := c.stopped
	c.mu.Unlock()
	if stopped {
		c.ContinueProcess() // its owed answers get their time after it
	}
	if owed := c.awaitOwed(); len(owed) > 0 {
		c.kill(fmt.Errorf("stopped answering: when the run ended it still owed answers to %s, past their reply timeout of %s (4 × op timeout + 1 s)",
			list(owed), c.o.replyTimeout()))
	}
	c.mu.Lock()
	c.killed = true
	c.mu.Unlock()
	c.signal(syscall.SIGCONT)
	c.stdin.Close()
	select {
	case <-c.done:
	case <-time.After(time.Second):
		c.signal(syscall.SIGKILL)
		<-c.done
	}
	return nil
}

// awaitOwed waits until the client has answered every watched request or
// the last reply timeout has passed, and returns those still unanswered.
// A client the harness killed owes nothing.
func (c *Client) awaitOwed() []*pending {
	for {
		c.mu.Lock()
		var last time.Time
		var owed []*pending
		for _, p := range c.reqs {
			if p.watched && !c.killed {
				owed = append(owed, p)
				if d := c.deadline(p); d.After(last) {
					last = d
				}
			}
		}
		c.mu.Unlock()
		wait := time.Until(last)
		if len(owed) == 0 || wait <= 0 {
			slices.SortFunc(owed, func(a, b *pending) int { return int(a.id - b.id) })
			return owed
		}
		t := time.NewTimer(wait)
		select {
		case <-c.answered:
		case <-t.C:
		case <-c.done:
			t.Stop()
			return nil
		}
		t.Stop()
	}
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
		// The reply as JSON, as the client sent it: a Go struct's print
		// showed its pointers' addresses.
		line, _ := json.Marshal(r)
		c.kill(&ProtocolError{Line: string(line), Reason: "an ok to acquire without a token"})
		return nil, errors.New("external client: an ok to acquire without a token")
	}
	if r.Fence == nil && c.Has(CapFence) {
		// Recorded without one, the grant would read as a lock without
		// fencing, and the resource would take its stale writes.
		c.kill(&ProtocolError{Line: "token " + r.Token, Reason: "an ok to acquire without a fence, from a client that declared the fence capability"})
		return nil, errors.New("external client: an ok to acquire without the fence it declared")
	}
	return &lease{c: c, key: key, token: r.Token, fence: r.Fence, times: timesOf(r), nodes: c.topo.nodeNames(r.GrantedBy)}, nil
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
	nodes      []string // the nodes the client says granted; nil when it does not say

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

// GrantedBy names the nodes the client said granted the lease (its
// optional granted_by), nil when it did not say.
func (l *lease) GrantedBy() []string { return l.nodes }

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
