package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"

	"github.com/lockjepsen/lockjepsen/cluster/internal/accept"
)

const (
	// applyStepTimeout bounds each toxiproxy call Apply makes (remove the
	// old fault, add the new one). Apply has no context, and toxiproxy calls
	// can wedge (see Heal), so Apply falls back to a reset after this long.
	applyStepTimeout = time.Second
	// defaultHealTimeout is Heal's budget when its context has no deadline:
	// waiting forever on a wedged toxiproxy is never what a nemesis wants.
	defaultHealTimeout = 2 * time.Second
	// maxHealMargin caps the part of Heal's deadline kept for the fallback;
	// the fallback (listen on a fresh port, close sockets) takes well under
	// a millisecond, the rest is slack for a loaded test machine.
	maxHealMargin = 100 * time.Millisecond
	// dialTimeout bounds the front layer's dial of its own toxiproxy proxy
	// on loopback; it only matters if that proxy is being torn down.
	dialTimeout = time.Second
	// stopWait bounds how long Close waits for toxiproxy's Proxy.Stop. A
	// wedged Stop has already closed its listener (toxiproxy closes it
	// before waiting for its accept loop), so giving up leaks goroutines,
	// not listeners.
	stopWait = time.Second
)

// Link is one directed link (client→node or node→node) with its own proxy.
type Link struct {
	From, To string

	server   *toxiproxy.ApiServer
	upstream string
	ln       net.Listener
	addr     string

	// ops serialises Apply and Heal. It is a channel rather than a mutex so
	// that Heal can give up waiting when its context ends.
	ops chan struct{}

	// wg counts the accept loop and the connection handlers.
	wg sync.WaitGroup

	mu       sync.Mutex
	px       *toxiproxy.Proxy
	backend  string // px's listen address, what the front layer dials
	gen      int
	fault    *Fault
	conns    map[*pipe]struct{}
	closed   bool
	resets   int
	stopping []chan struct{} // Stops of abandoned toxiproxy proxies
}

func newLink(server *toxiproxy.ApiServer, from, to, upstream, host string) (*Link, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	l := &Link{
		From:     from,
		To:       to,
		server:   server,
		upstream: upstream,
		ln:       ln,
		addr:     ln.Addr().String(),
		ops:      make(chan struct{}, 1),
		conns:    make(map[*pipe]struct{}),
	}
	px, err := l.startProxy()
	if err != nil {
		ln.Close()
		return nil, err
	}
	l.px, l.backend = px, px.Listen
	l.wg.Add(1)
	go l.serve()
	return l, nil
}

func (l *Link) String() string { return l.From + "->" + l.To }

// Addr is the host:port clients dial. It stays the same for the link's
// whole life, across faults, heals and fallbacks.
func (l *Link) Addr() string { return l.addr }

// Fault returns the fault the link currently suffers, if any.
func (l *Link) Fault() (Fault, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fault == nil {
		return Fault{}, false
	}
	return *l.fault, true
}

// Resets counts the times toxiproxy did not respond in time and the link
// fell back to dropping its connections behind a fresh toxiproxy proxy.
// Clients saw those connections close, which a history may want to explain.
func (l *Link) Resets() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.resets
}

// Apply replaces the link's fault (if any) with f, for existing and new
// connections. Replacing a partition closes the connections it held (see
// Partition). If toxiproxy wedges, Apply resets the link (drops its
// connections) and applies f to a fresh toxiproxy proxy, so it returns
// within a few seconds in every case.
func (l *Link) Apply(f Fault) error {
	if err := f.Validate(); err != nil {
		return fmt.Errorf("apply to link %s: %w", l, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*applyStepTimeout)
	defer cancel()
	px, cur, err := l.begin(ctx, fmt.Sprintf("apply %s to", f))
	if err != nil {
		return err
	}
	defer l.release()
	if cur != nil {
		// Each call gets its own copy of px: a call abandoned by within
		// still runs while reset replaces px (a race a loaded CI run hit).
		old := px
		if done, err := within(applyStepTimeout, func() error { return removeToxics(old, *cur) }); !done || err != nil {
			if px, err = l.reset(); err != nil {
				return fmt.Errorf("apply %s to link %s: removing %s failed, then: %w", f, l, cur, err)
			}
		}
		l.setFault(nil)
	}
	for attempt := 0; ; attempt++ {
		target := px
		done, err := within(applyStepTimeout, func() error { return addToxics(target, f) })
		if done && err == nil {
			l.setFault(&f)
			return nil
		}
		// Some toxics may be in place: reset so that the link is known
		// healthy rather than half-faulty.
		var rerr error
		if px, rerr = l.reset(); rerr != nil {
			return fmt.Errorf("apply %s to link %s: %w", f, l, errors.Join(err, rerr))
		}
		if err != nil {
			return fmt.Errorf("apply %s to link %s (link reset, no fault applied): %w", f, l, err)
		}
		if attempt > 0 {
			return fmt.Errorf("apply %s to link %s: toxiproxy did not respond within %v twice; link reset, no fault applied", f, l, applyStepTimeout)
		}
	}
}

// Heal removes the link's fault. It returns within ctx's deadline (or
// defaultHealTimeout if ctx has none) even when toxiproxy's RemoveToxic
// hangs under traffic (Shopify/toxiproxy#558): shortly before the deadline
// it gives up on toxiproxy, closes the link's connections and puts a fresh
// toxiproxy proxy behind the same address, so clients reconnect to a healthy
// link. That fallback counts in Resets and is not an error.
func (l *Link) Heal(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultHealTimeout)
		defer cancel()
	}
	px, cur, err := l.begin(ctx, "heal")
	if err != nil {
		return err
	}
	defer l.release()
	if cur == nil {
		return nil
	}
	deadline, _ := ctx.Deadline()
	budget := time.Until(deadline)
	budget -= min(budget/5, maxHealMargin)
	if ctx.Err() == nil && budget > 0 {
		if done, err := within(budget, func() error { return removeToxics(px, *cur) }); done && err == nil {
			l.setFault(nil)
			return nil
		}
	}
	if _, err := l.reset(); err != nil {
		return fmt.Errorf("heal link %s: removing %s did not finish, then: %w", l, cur, err)
	}
	return nil
}

// Drop closes every connection of the link at once and loses the bytes in
// flight inside the proxy, as a crashed machine loses what it had not yet
// delivered (a delayed replication stream, say). The link's fault, if any,
// stays in force for new connections.
func (l *Link) Drop() error {
	ctx, cancel := context.WithTimeout(context.Background(), defaultHealTimeout)
	defer cancel()
	_, cur, err := l.begin(ctx, "drop")
	if err != nil {
		return err
	}
	defer l.release()
	px, err := l.reset()
	if err != nil {
		return fmt.Errorf("drop link %s: %w", l, err)
	}
	if cur != nil {
		f := *cur
		if done, err := within(applyStepTimeout, func() error { return addToxics(px, f) }); !done || err != nil {
			return fmt.Errorf("drop link %s: could not restore %s: %v", l, f, err)
		}
		l.setFault(&f)
	}
	return nil
}

func (l *Link) acquire(ctx context.Context) error {
	// Try first without ctx, so that an expired ctx still gets a free link
	// (whose Heal then falls back at once).
	select {
	case l.ops <- struct{}{}:
		return nil
	default:
	}
	select {
	case l.ops <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *Link) release() { <-l.ops }

// begin is the start of every operation that changes the link's fault:
// it takes the operation lock (the caller releases it) and reads the
// current proxy and fault. op is how errors name the operation ("heal"
// gives "heal link <l>: ...").
func (l *Link) begin(ctx context.Context, op string) (*toxiproxy.Proxy, *Fault, error) {
	if err := l.acquire(ctx); err != nil {
		return nil, nil, fmt.Errorf("%s link %s: waiting for another operation: %w", op, l, err)
	}
	px, cur, err := l.current()
	if err != nil {
		l.release()
		return nil, nil, fmt.Errorf("%s link %s: %w", op, l, err)
	}
	return px, cur, nil
}

func (l *Link) current() (*toxiproxy.Proxy, *Fault, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, nil, ErrClosed
	}
	return l.px, l.fault, nil
}

func (l *Link) setFault(f *Fault) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fault = f
}

// within runs f on its own goroutine and waits at most d for it. A
// toxiproxy call that wedges is abandoned, still running: it holds only the
// abandoned proxy's locks.
func within(d time.Duration, f func() error) (done bool, err error) {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case err := <-ch:
		return true, err
	case <-t.C:
		return false, nil
	}
}

func addToxics(px *toxiproxy.Proxy, f Fault) error {
	for _, t := range f.toxics() {
		body, err := json.Marshal(map[string]any{
			"name": t.name, "type": t.typ, "stream": t.stream, "toxicity": 1.0, "attributes": t.attrs,
		})
		if err != nil {
			return fmt.Errorf("encode toxic %s: %w", t.name, err)
		}
		if _, err := px.Toxics.AddToxicJson(strings.NewReader(string(body))); err != nil {
			return fmt.Errorf("add toxic %s (%s %s): %w", t.name, t.typ, t.stream, err)
		}
	}
	return nil
}

func removeToxics(px *toxiproxy.Proxy, f Fault) error {
	for _, t := range f.toxics() {
		err := px.Toxics.RemoveToxic(quiet(context.Background()), t.name)
		if err != nil && !errors.Is(err, toxiproxy.ErrToxicNotFound) {
			return fmt.Errorf("remove toxic %s: %w", t.name, err)
		}
	}
	return nil
}

func (l *Link) startProxy() (*toxiproxy.Proxy, error) {
	l.mu.Lock()
	l.gen++
	name := fmt.Sprintf("%s#%d", l, l.gen)
	l.mu.Unlock()
	px := toxiproxy.NewProxy(l.server, name, "127.0.0.1:0", l.upstream)
	if err := px.Start(); err != nil {
		return nil, fmt.Errorf("start toxiproxy proxy %s: %w", name, err)
	}
	return px, nil
}

// reset abandons the current toxiproxy proxy, which may be wedged, for a
// fresh one without toxics, and closes every connection of the link so that
// clients reconnect through the fresh one.
func (l *Link) reset() (*toxiproxy.Proxy, error) {
	np, err := l.startProxy()
	if err != nil {
		return nil, fmt.Errorf("reset: %w", err)
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		np.Stop()
		return nil, ErrClosed
	}
	old := l.px
	l.px, l.backend = np, np.Listen
	l.fault = nil
	l.resets++
	conns := l.conns
	l.conns = make(map[*pipe]struct{})
	l.mu.Unlock()
	for p := range conns {
		p.close(false)
	}
	l.abandon(old)
	return np, nil
}

// abandon stops px in the background: Stop waits for toxiproxy's accept loop,
// which a wedged ToxicCollection can block forever.
func (l *Link) abandon(px *toxiproxy.Proxy) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		px.Stop()
	}()
	l.mu.Lock()
	defer l.mu.Unlock()
	live := l.stopping[:0]
	for _, d := range l.stopping {
		select {
		case <-d:
		default:
			live = append(live, d)
		}
	}
	l.stopping = append(live, done)
}

func (l *Link) close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	px := l.px
	conns := l.conns
	l.conns = make(map[*pipe]struct{})
	l.mu.Unlock()

	err := l.ln.Close()
	for p := range conns {
		p.close(false)
	}
	l.abandon(px)
	l.wg.Wait()

	l.mu.Lock()
	stopping := l.stopping
	l.mu.Unlock()
	t := time.NewTimer(stopWait)
	defer t.Stop()
wait:
	for _, d := range stopping {
		select {
		case <-d:
		case <-t.C:
			break wait
		}
	}
	if err != nil {
		return fmt.Errorf("close link %s: %w", l, err)
	}
	return nil
}

// serve is the front layer's accept loop.
func (l *Link) serve() {
	defer l.wg.Done()
	accept.Each(l.ln, func(c net.Conn) bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.closed {
			return false
		}
		l.wg.Add(1)
		go l.handle(c)
		return true
	})
}

// handle connects one client to the current toxiproxy proxy and copies
// until either side closes.
func (l *Link) handle(client net.Conn) {
	defer l.wg.Done()
	for {
		l.mu.Lock()
		backend, closed := l.backend, l.closed
		l.mu.Unlock()
		if closed {
			client.Close()
			return
		}
		server, err := net.DialTimeout("tcp", backend, dialTimeout)
		if err != nil {
			// Only a reset or Close races with this dial: retry against
			// the fresh proxy, or give up if the link is gone.
			l.mu.Lock()
			retry := !l.closed && l.backend != backend
			l.mu.Unlock()
			if retry {
				continue
			}
			abort(client)
			return
		}
		p := &pipe{client: client, server: server}
		l.mu.Lock()
		if l.closed || l.backend != backend {
			l.mu.Unlock()
			server.Close()
			continue
		}
		l.conns[p] = struct{}{}
		l.mu.Unlock()
		p.run()
		l.mu.Lock()
		delete(l.conns, p)
		l.mu.Unlock()
		return
	}
}

// pipe is one client connection through the front layer.
type pipe struct {
	client, server net.Conn
	once           sync.Once
}

func (p *pipe) run() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.copy(p.server, p.client)
	}()
	p.copy(p.client, p.server)
	<-done
}

func (p *pipe) copy(dst, src net.Conn) {
	_, err := io.Copy(dst, src)
	// A reset toxic resets our inner connection; pass the reset on (best
	// effort: clients may still see EOF) rather than turn it into a clean
	// close.
	p.close(errors.Is(err, syscall.ECONNRESET))
}

func (p *pipe) close(reset bool) {
	p.once.Do(func() {
		if reset {
			abort(p.client)
		}
		p.client.Close()
		p.server.Close()
	})
}

// abort closes c with a TCP reset rather than a FIN.
func abort(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
}
