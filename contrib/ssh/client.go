package ssh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"
)

// DialTimeout bounds connecting to one host and its SSH handshake.
const DialTimeout = 15 * time.Second

// ErrUnknownHost is returned for a host whose key the known_hosts file
// does not have (and trust on first use was not asked for).
var ErrUnknownHost = errors.New("host key unknown")

// Runner runs shell commands on the hosts of a hosts file, and only on
// those. Every command is recorded (Log), with its host and outcome; a
// dry runner prints each command instead of running it.
type Runner struct {
	hosts *Hosts
	// trust adds an unknown host's key to the known_hosts file (trust on
	// first use); a key that differs from a known one is always refused.
	trust bool
	// dry prints commands to out and runs none.
	dry bool
	out io.Writer

	mu      sync.Mutex
	clients map[string]*gossh.Client // by SSH address
	// unreachable remembers hosts whose dial failed on the network: the
	// clean-up after an interrupt dialed each again, for DialTimeout
	// each (56 s after a Ctrl-C during a dial to a silent host), although
	// nothing ran there to clean up.
	unreachable map[string]error
	log         []string
}

// NewRunner returns a runner for the hosts of h. With dry set, commands
// are printed to out and none is run (no host is even dialed).
func NewRunner(h *Hosts, trustOnFirstUse, dry bool, out io.Writer) *Runner {
	return &Runner{hosts: h, trust: trustOnFirstUse, dry: dry, out: out, clients: map[string]*gossh.Client{}, unreachable: map[string]error{}}
}

// Dry reports whether commands are only printed.
func (r *Runner) Dry() bool { return r.dry }

// Log is every command run (or printed), as "ssh-addr: command", with
// " # error: ..." after one that failed.
func (r *Runner) Log() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.log...)
}

// Run runs cmd with sh on the host of process p and returns its standard
// output. A command that exits non-zero is an error that carries its
// standard error.
func (r *Runner) Run(ctx context.Context, p Process, cmd string) (string, error) {
	if !r.listed(p) {
		return "", fmt.Errorf("refusing to run a command on %s: the hosts file does not list it", p.SSH)
	}
	entry := fmt.Sprintf("%s@%s (%s): %s", p.User, p.SSH, p.Name, cmd)
	if r.dry {
		r.record(entry)
		fmt.Fprintf(r.out, "%s\n", entry)
		return "", nil
	}
	out, err := r.run(ctx, p, cmd)
	if err != nil {
		entry += "  # error: " + strings.ReplaceAll(err.Error(), "\n", " ")
	}
	r.record(entry)
	return out, err
}

func (r *Runner) record(entry string) {
	r.mu.Lock()
	r.log = append(r.log, entry)
	r.mu.Unlock()
}

// listed reports whether p's host and user are in the hosts file.
func (r *Runner) listed(p Process) bool {
	for _, q := range r.hosts.Nodes {
		if q.SSH == p.SSH && q.User == p.User {
			return true
		}
	}
	return false
}

func (r *Runner) run(ctx context.Context, p Process, cmd string) (string, error) {
	c, err := r.client(ctx, p)
	if err != nil {
		return "", err
	}
	s, err := c.NewSession()
	if err != nil {
		r.drop(p.SSH, c)
		return "", fmt.Errorf("%s: new session: %w", p.SSH, err)
	}
	defer s.Close()
	var stdout, stderr bytes.Buffer
	s.Stdout, s.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	go func() { done <- s.Run(cmd) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = s.Signal(gossh.SIGKILL)
		s.Close()
		return "", fmt.Errorf("%s: %s: %w", p.SSH, cmd, ctx.Err())
	}
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		return stdout.String(), fmt.Errorf("%s: %s: %w: %s", p.SSH, firstLine(cmd), err, msg)
	}
	return stdout.String(), nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}

func (r *Runner) drop(addr string, c *gossh.Client) {
	r.mu.Lock()
	if r.clients[addr] == c {
		delete(r.clients, addr)
	}
	r.mu.Unlock()
	c.Close()
}

// client returns the connection to p's host, dialing it once.
func (r *Runner) client(ctx context.Context, p Process) (*gossh.Client, error) {
	r.mu.Lock()
	c := r.clients[p.SSH]
	r.mu.Unlock()
	if c != nil {
		return c, nil
	}
	r.mu.Lock()
	gone := r.unreachable[p.SSH]
	r.mu.Unlock()
	if gone != nil {
		return nil, fmt.Errorf("not dialed again: %w", gone)
	}
	c, err := r.dial(ctx, p)
	if err != nil {
		if unreachable(err) {
			r.mu.Lock()
			r.unreachable[p.SSH] = err
			r.mu.Unlock()
		}
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if old := r.clients[p.SSH]; old != nil {
		c.Close()
		return old, nil
	}
	r.clients[p.SSH] = c
	return c, nil
}

func (r *Runner) dial(ctx context.Context, p Process) (*gossh.Client, error) {
	auth, err := authOf(p, r.hosts.Path)
	if err != nil {
		return nil, err
	}
	cb, err := r.hostKeyCallback()
	if err != nil {
		return nil, err
	}
	cfg := &gossh.ClientConfig{User: p.User, Auth: auth, HostKeyCallback: cb, Timeout: DialTimeout}
	dctx, cancel := context.WithTimeout(ctx, DialTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(dctx, "tcp", p.SSH)
	if err != nil {
		return nil, fmt.Errorf("connect to %s (node %s): %w", p.SSH, p.Name, err)
	}
	_ = conn.SetDeadline(time.Now().Add(DialTimeout))
	// The handshake does not watch ctx: an interrupt closes the
	// connection under it, rather than waiting out DialTimeout.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	cc, chans, reqs, err := gossh.NewClientConn(conn, p.SSH, cfg)
	if !stop() {
		// ctx ended during the handshake: the connection is closed.
		if err == nil {
			cc.Close()
			err = ctx.Err()
		} else {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("ssh to %s@%s (node %s): %w", p.User, p.SSH, p.Name, err)
	}
	_ = conn.SetDeadline(time.Time{})
	return gossh.NewClient(cc, chans, reqs), nil
}

// unreachable reports whether a dial failed on the network (no answer,
// refused, cut short), not on keys or host keys.
func unreachable(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.EOF)
}

// CheckFiles refuses, before anything is dialed, a hosts file whose key
// files or known_hosts file are missing: they were found only at the
// first dial, as a harness failure after the work had started.
func (h *Hosts) CheckFiles(trustOnFirstUse bool) error {
	for _, p := range h.Nodes {
		if p.Agent {
			continue
		}
		key := p.Key
		if !filepath.IsAbs(key) {
			key = filepath.Join(filepath.Dir(h.Path), key)
		}
		if _, err := os.Stat(key); err != nil {
			return fmt.Errorf("%s:%d: node %s: key: %w", h.Path, p.Line(), p.Name, err)
		}
	}
	if _, err := os.Stat(h.KnownHosts); err != nil && !trustOnFirstUse {
		return fmt.Errorf("known_hosts file %s: %w: add the hosts' keys to it (ssh-keyscan, checked by hand), or pass --trust-on-first-use", h.KnownHosts, err)
	}
	return nil
}

// authOf is the key file's signer, or the agent's.
func authOf(p Process, hostsFile string) ([]gossh.AuthMethod, error) {
	if p.Agent {
		sock := os.Getenv("SSH_AUTH_SOCK")
		if sock == "" {
			return nil, fmt.Errorf("node %s: agent: true but $SSH_AUTH_SOCK is not set", p.Name)
		}
		conn, err := net.Dial("unix", sock)
		if err != nil {
			return nil, fmt.Errorf("node %s: the SSH agent: %w", p.Name, err)
		}
		return []gossh.AuthMethod{gossh.PublicKeysCallback(agent.NewClient(conn).Signers)}, nil
	}
	key := p.Key
	if !filepath.IsAbs(key) {
		key = filepath.Join(filepath.Dir(hostsFile), key)
	}
	pem, err := os.ReadFile(key)
	if err != nil {
		return nil, fmt.Errorf("node %s: key: %w", p.Name, err)
	}
	signer, err := gossh.ParsePrivateKey(pem)
	if err != nil {
		return nil, fmt.Errorf("node %s: key %s: %w (a passphrase-protected key needs agent: true)", p.Name, key, err)
	}
	return []gossh.AuthMethod{gossh.PublicKeys(signer)}, nil
}

// hostKeyCallback checks host keys against the known_hosts file. An
// unknown host is refused unless trust on first use was asked for, in
// which case its key is appended to the file; a changed key is refused
// always.
func (r *Runner) hostKeyCallback() (gossh.HostKeyCallback, error) {
	file := r.hosts.KnownHosts
	if _, err := os.Stat(file); errors.Is(err, os.ErrNotExist) {
		if !r.trust {
			return nil, fmt.Errorf("known_hosts file %s does not exist: add the hosts' keys to it (ssh-keyscan, checked by hand), or pass --trust-on-first-use", file)
		}
		if err := os.WriteFile(file, nil, 0o600); err != nil {
			return nil, fmt.Errorf("create known_hosts file: %w", err)
		}
	}
	check, err := knownhosts.New(file)
	if err != nil {
		return nil, fmt.Errorf("known_hosts file %s: %w", file, err)
	}
	return func(host string, remote net.Addr, key gossh.PublicKey) error {
		err := check(host, remote, key)
		var ke *knownhosts.KeyError
		if !errors.As(err, &ke) {
			return err
		}
		if len(ke.Want) > 0 {
			return fmt.Errorf("host key of %s CHANGED (known_hosts %s line %d has another): refusing; someone may be in the middle, or the host was rebuilt: %w",
				host, ke.Want[0].Filename, ke.Want[0].Line, err)
		}
		if !r.trust {
			return fmt.Errorf("%w: %s (%s %s) is not in %s; check its fingerprint and add it, or pass --trust-on-first-use",
				ErrUnknownHost, host, key.Type(), gossh.FingerprintSHA256(key), file)
		}
		return appendKnownHost(file, host, key)
	}, nil
}

var knownHostsMu sync.Mutex

func appendKnownHost(file, host string, key gossh.PublicKey) error {
	knownHostsMu.Lock()
	defer knownHostsMu.Unlock()
	f, err := os.OpenFile(file, os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("trust on first use: %w", err)
	}
	defer f.Close()
	_, err = fmt.Fprintln(f, knownhosts.Line([]string{knownhosts.Normalize(host)}, key))
	return err
}

// Close closes every connection.
func (r *Runner) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for addr, c := range r.clients {
		c.Close()
		delete(r.clients, addr)
	}
}
