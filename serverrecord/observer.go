package serverrecord

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lockjepsen/lockjepsen/internal/ctxsleep"
)

// Node is a Redis node to observe: its name in the run, and the address
// the observer dials. That must be the node itself, not a link the
// nemesis cuts: the record is of what the node did, whatever its clients
// could reach.
type Node struct {
	Name string
	Addr string
}

// Clock gives the current time on the history's clock (history.Recorder's
// Now).
type Clock func() int64

// Timings of an observer. A PING every heartbeat tells that everything the
// node did before it was sent has been received; one unanswered for
// stallAfter opens a gap (a paused node, or a machine too loaded to tell).
const (
	heartbeat   = 100 * time.Millisecond
	stallAfter  = time.Second
	dialTimeout = time.Second
	retryEvery  = 100 * time.Millisecond
	// readyWithin bounds how long Start waits for every node's first
	// subscription; a node not subscribed by then has a gap from the start.
	readyWithin = 10 * time.Second
	// drainWithin bounds how long Stop waits for the replies in flight
	// (tokens being read) before it closes the connections.
	drainWithin = 5 * time.Second
	// flushEvery bounds what a harness that dies loses of the record.
	flushEvery = 200 * time.Millisecond
)

// maxToken is the longest value read as a token; GETRANGE asks for one
// byte more, to tell a longer value.
const maxToken = 1024

// notifyClasses are the keyspace events a node is asked to publish: K
// (on the key's channel), $ (string commands: set), g (generic: del,
// expire, rename), x (expired), e (evicted).
const notifyClasses = "K$gxe"

// Observers record what a set of nodes do, one observer each.
type Observers struct {
	cancel context.CancelFunc
	nodes  []*observer
	wg     sync.WaitGroup
}

// Start observes each node until Stop, writing to w with times from now.
// It returns once every node's notifications are subscribed to, or
// readyWithin has passed (a node not subscribed by then has a gap from
// the start, which its observer closes when it subscribes).
func Start(ctx context.Context, nodes []Node, w *Writer, now Clock) *Observers {
	ctx, cancel := context.WithCancel(ctx)
	obs := &Observers{cancel: cancel}
	for _, n := range nodes {
		o := &observer{node: n, w: w, now: now, ready: make(chan struct{}),
			gapStart: now(), gapWhy: "not yet subscribed to the node's notifications", gapOpen: true}
		obs.nodes = append(obs.nodes, o)
		obs.wg.Add(1)
		go func() {
			defer obs.wg.Done()
			o.run(ctx)
		}()
	}
	obs.wg.Add(1)
	go func() {
		// A harness that dies leaves the record up to its last flush.
		defer obs.wg.Done()
		t := time.NewTicker(flushEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				w.Flush()
			}
		}
	}()
	deadline := time.NewTimer(readyWithin)
	defer deadline.Stop()
	for _, o := range obs.nodes {
		select {
		case <-o.ready:
		case <-deadline.C:
		case <-ctx.Done():
		}
	}
	// A node's record begins at its first subscription, before the run's
	// clients start; one that comes later leaves a gap from here.
	for _, o := range obs.nodes {
		o.mu.Lock()
		o.started = true
		o.mu.Unlock()
	}
	return obs
}

// Stop waits briefly for the replies in flight, stops every observer,
// closes the gaps still open at the current time and returns the first
// error writing the record.
func (obs *Observers) Stop() error {
	var wg sync.WaitGroup
	for _, o := range obs.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o.drain()
		}()
	}
	wg.Wait()
	obs.cancel()
	obs.wg.Wait()
	var errs []error
	for _, o := range obs.nodes {
		errs = append(errs, o.err)
	}
	return errors.Join(errs...)
}

// pending is a command whose reply has not come yet.
type pending struct {
	ping    bool
	sent    int64         // for a PING: when it was sent
	answer  chan struct{} // for a PING: closed when answered (nil: nobody waits)
	ev      *queued       // for a GETRANGE: the set it reads for
	getsTTL bool
}

// queued is an event waiting for the replies that complete it.
type queued struct {
	ev      Event
	waiting int    // replies still to come
	dirty   string // why its token cannot be the set's: the key changed first
}

type observer struct {
	node  Node
	w     *Writer
	now   Clock
	ready chan struct{}
	once  sync.Once

	mu        sync.Mutex
	conn      net.Conn
	out       []byte
	pending   []pending
	queue     []*queued
	lastToken map[string]string // the value of each key's last set, while the record is whole
	confirmed int64             // everything the node did before this instant has been received
	// started is set once Start has returned: a gap open before then is
	// the time before the first subscription, not part of the record.
	started  bool
	gapOpen  bool
	gapStart int64
	gapWhy   string
	stalled  bool
	err      error
}

// run keeps a session with the node until ctx ends, reconnecting after
// each lost connection; the time between is a gap.
func (o *observer) run(ctx context.Context) {
	for {
		err := o.session(ctx)
		o.mu.Lock()
		o.lostLocked(err, ctx.Err() != nil)
		o.mu.Unlock()
		if ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(retryEvery):
		}
		if ctx.Err() != nil {
			break
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.gapOpen {
		o.writeLocked(Event{T: o.gapStart, Node: o.node.Name, Kind: Gap, End: o.now(),
			Why: o.gapWhy + "; the run ended before the observer was back"})
		o.gapOpen = false
	}
	o.once.Do(func() { close(o.ready) })
}

// lostLocked ends a session: events still waiting for their token are
// written without it, and a gap opens where the record stops being known
// whole (unless one is open already, or the observer is being stopped:
// the record ends there).
func (o *observer) lostLocked(err error, stopping bool) {
	for _, q := range o.queue {
		if q.waiting > 0 {
			q.waiting, q.ev.TokenUnread = 0, "the observer's connection ended before it read the token"
		}
	}
	o.flushLocked()
	o.queue, o.pending, o.lastToken, o.stalled = nil, nil, nil, false
	if o.conn != nil {
		o.conn.Close()
		o.conn = nil
	}
	if !o.gapOpen && !stopping {
		o.gapOpen, o.gapStart = true, o.confirmed
		o.gapWhy = "lost the connection to the node"
		if err != nil {
			o.gapWhy += " (" + err.Error() + ")"
		}
	}
}

// session connects, subscribes and records until the connection fails or
// ctx ends.
func (o *observer) session(ctx context.Context) error {
	d := net.Dialer{Timeout: dialTimeout}
	conn, err := d.DialContext(ctx, "tcp", o.node.Addr)
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	r := bufio.NewReaderSize(conn, 64<<10)
	if err := subscribe(conn, r); err != nil {
		conn.Close()
		return fmt.Errorf("subscribe to %s's notifications: %w", o.node.Name, err)
	}
	now := o.now()
	o.mu.Lock()
	o.conn, o.confirmed, o.lastToken = conn, now, map[string]string{}
	if o.gapOpen && o.started {
		o.writeLocked(Event{T: o.gapStart, Node: o.node.Name, Kind: Gap, End: now, Why: o.gapWhy})
	}
	o.gapOpen = false
	o.mu.Unlock()
	o.once.Do(func() { close(o.ready) })
	hbDone := make(chan struct{})
	defer close(hbDone)
	go o.heartbeat(hbDone)
	for {
		v, err := readValue(r)
		if err != nil {
			return err
		}
		o.mu.Lock()
		if v.kind == '>' {
			o.pushLocked(v)
		} else {
			err = o.replyLocked(v)
		}
		o.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

// subscribe switches the connection to RESP3, turns on the node's
// keyspace notifications and subscribes to every key's channel. A node
// restarted after a kill starts with its configured classes, so this is
// done on every connection.
func subscribe(conn net.Conn, r *bufio.Reader) error {
	var b []byte
	b = appendCommand(b, "HELLO", "3")
	b = appendCommand(b, "CLIENT", "SETNAME", "lockjepsen-server-record")
	b = appendCommand(b, "CONFIG", "SET", "notify-keyspace-events", notifyClasses)
	// A Redis Cluster replica answers reads only in READONLY mode (else
	// MOVED); elsewhere the command is refused, which does no harm.
	b = appendCommand(b, "READONLY")
	b = appendCommand(b, "PSUBSCRIBE", "__keyspace@*__:*")
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	defer conn.SetDeadline(time.Time{})
	if _, err := conn.Write(b); err != nil {
		return err
	}
	for _, what := range []string{"HELLO 3", "CLIENT SETNAME", "CONFIG SET notify-keyspace-events", "READONLY", "PSUBSCRIBE"} {
		v, err := readValue(r)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if v.isError() && what != "READONLY" {
			return fmt.Errorf("%s: %s", what, v.str)
		}
		if what == "PSUBSCRIBE" && (v.kind != '>' || len(v.arr) < 1 || !strings.EqualFold(v.arr[0].str, "psubscribe")) {
			return fmt.Errorf("%s: unexpected reply %q", what, v.kind)
		}
	}
	return nil
}

// pushLocked records one keyspace notification: ["pmessage", pattern,
// "__keyspace@0__:KEY", EVENT]. A set asks the node for the key's value
// (GETRANGE) on the same connection: their replies come after every
// notification the node sent before it ran them, so if none of those
// changed the key, the value read is the one the set wrote.
func (o *observer) pushLocked(v value) {
	if len(v.arr) != 4 || v.arr[0].str != "pmessage" {
		return // a subscription's confirmation, or something not a notification
	}
	channel, kind := v.arr[2].str, v.arr[3].str
	i := strings.Index(channel, "__:")
	if i < 0 {
		return
	}
	key := channel[i+3:]
	if changesValue(kind) {
		for _, q := range o.queue {
			if q.ev.Key == key && q.ev.Kind == Set && q.dirty == "" {
				q.dirty = fmt.Sprintf("the key was changed (%s) before the observer read it", kind)
			}
		}
	}
	q := &queued{ev: Event{T: o.now(), Node: o.node.Name, Kind: kind, Key: key}}
	o.queue = append(o.queue, q)
	if kind == Set {
		// A lock's token is short; a cache's value may not be, and
		// reading it whole would cost the node and the observer.
		q.waiting = 1
		o.sendLocked(pending{ev: q}, "GETRANGE", key, "0", strconv.Itoa(maxToken))
	}
	o.flushLocked()
}

// changesValue reports whether a keyspace event may change a key's value
// (a TTL change does not).
func changesValue(kind string) bool { return kind != Expire && kind != "persist" }

// replyLocked takes the reply to the oldest command in flight.
func (o *observer) replyLocked(v value) error {
	if len(o.pending) == 0 {
		return fmt.Errorf("a reply from %s to no command (%q %s)", o.node.Name, v.kind, v.str)
	}
	p := o.pending[0]
	o.pending = o.pending[1:]
	if p.ping {
		o.confirmed = p.sent
		if o.stalled {
			o.stalled = false
			o.writeLocked(Event{T: o.gapStart, Node: o.node.Name, Kind: Gap, End: o.now(), Why: o.gapWhy})
			o.gapOpen = false
		}
		if p.answer != nil {
			close(p.answer)
		}
		return nil
	}
	q := p.ev
	q.waiting--
	switch {
	case q.dirty != "":
		q.ev.TokenUnread = q.dirty
	case v.null || v.str == "":
		q.ev.TokenUnread = "the key was gone (or empty) when the observer read it"
	case v.isError():
		q.ev.TokenUnread = "reading the key failed: " + v.str
	case len(v.str) > maxToken:
		q.ev.TokenUnread = fmt.Sprintf("the value is longer than %d bytes: not a lock's token", maxToken)
	default:
		q.ev.Token = v.str
	}
	o.flushLocked()
	return nil
}

// flushLocked writes the events at the head of the queue whose replies
// have all come, in the order received, giving TTL changes and removals
// the token of the key's last set.
func (o *observer) flushLocked() {
	for len(o.queue) > 0 && o.queue[0].waiting == 0 {
		q := o.queue[0]
		o.queue = o.queue[1:]
		e := &q.ev
		switch {
		case e.Kind == Set:
			if e.Token != "" {
				o.lastToken[e.Key] = e.Token
			} else {
				delete(o.lastToken, e.Key)
			}
		case !changesValue(e.Kind):
			e.Token = o.lastToken[e.Key]
		case e.Kind == Del || e.Kind == Expired || e.Kind == Evicted:
			e.Token = o.lastToken[e.Key]
			delete(o.lastToken, e.Key)
		default: // another write: the value is no longer the set's
			delete(o.lastToken, e.Key)
		}
		o.writeLocked(*e)
	}
}

// sendLocked writes a command and remembers it, so that its reply finds
// it. Replies come in the order the commands were sent.
func (o *observer) sendLocked(p pending, args ...string) {
	if o.conn == nil {
		return
	}
	o.out = appendCommand(o.out[:0], args...)
	o.conn.SetWriteDeadline(time.Now().Add(time.Second))
	if _, err := o.conn.Write(o.out); err != nil {
		o.conn.Close() // the reader sees it and ends the session
		return
	}
	o.pending = append(o.pending, p)
}

// heartbeat sends a PING every heartbeat while none is in flight, and
// opens a gap when one stays unanswered for stallAfter.
func (o *observer) heartbeat(done <-chan struct{}) {
	ctxsleep.Every(done, heartbeat, o.beat)
}

// beat is one heartbeat: a PING if none is in flight, or a gap if the
// oldest has waited longer than stallAfter.
func (o *observer) beat() {
	o.mu.Lock()
	defer o.mu.Unlock()
	var oldest *pending
	for i := range o.pending {
		if o.pending[i].ping {
			oldest = &o.pending[i]
			break
		}
	}
	now := o.now()
	switch {
	case oldest == nil:
		o.sendLocked(pending{ping: true, sent: now}, "PING")
	case !o.stalled && !o.gapOpen && time.Duration(now-oldest.sent) > stallAfter:
		o.stalled, o.gapOpen, o.gapStart = true, true, o.confirmed
		o.gapWhy = fmt.Sprintf("the node did not answer a PING for %v (paused, or too loaded to tell)", stallAfter)
	}
}

// drain waits, up to drainWithin in all, until every event the node
// sent before Stop is complete. A PING's answer comes after every reply
// and notification sent before it, but a notification read just before
// that answer may have sent its token read (GETRANGE) after the PING: so
// while an event still waits for a reply, it pings again. Stopped after
// one round trip, a CI run's last set was recorded without its token
// ("the observer's connection ended before it read the token").
func (o *observer) drain() {
	deadline := time.NewTimer(drainWithin)
	defer deadline.Stop()
	for {
		answer := make(chan struct{})
		o.mu.Lock()
		if o.conn == nil {
			o.mu.Unlock()
			return
		}
		o.sendLocked(pending{ping: true, sent: o.now(), answer: answer}, "PING")
		o.mu.Unlock()
		select {
		case <-answer:
		case <-deadline.C:
			return
		}
		o.mu.Lock()
		waiting := len(o.queue) > 0
		o.mu.Unlock()
		if !waiting {
			return
		}
	}
}

func (o *observer) writeLocked(e Event) {
	if err := o.w.Write(e); err != nil && o.err == nil {
		o.err = err
	}
}
