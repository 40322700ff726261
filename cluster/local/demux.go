package local

import (
	"io"
	"net"
	"sync"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster/internal/accept"
)

// demux is the address a Redis Cluster node announces to its peers. A
// node announces one address for everyone, but a partition must cut the
// link from one peer and not another's, so each node binds its outgoing
// connections to a loopback address of its own (bind-source-addr) and the
// demux sends each connection on to the link from its source: node n2's
// connection to n1's bus goes through the link n2→n1. A source it does
// not know (a user's redis-cli) goes straight to fallback.
type demux struct {
	ln       net.Listener
	routes   map[string]string // source IP → where to forward
	fallback string

	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// demuxDialTimeout bounds the dial of a link on loopback.
const demuxDialTimeout = time.Second

func newDemux(host string, routes map[string]string, fallback string) (*demux, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, err
	}
	d := &demux{ln: ln, routes: routes, fallback: fallback, conns: map[net.Conn]struct{}{}}
	d.wg.Add(1)
	go d.serve()
	return d, nil
}

func (d *demux) addr() string { return d.ln.Addr().String() }

func (d *demux) serve() {
	defer d.wg.Done()
	accept.Each(d.ln, func(c net.Conn) bool {
		if !d.track(c) {
			return false
		}
		d.wg.Add(1)
		go d.forward(c)
		return true
	})
}

// track remembers a connection so that close can end it; false once the
// demux is closed.
func (d *demux) track(c net.Conn) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return false
	}
	d.conns[c] = struct{}{}
	return true
}

func (d *demux) untrack(c net.Conn) {
	d.mu.Lock()
	delete(d.conns, c)
	d.mu.Unlock()
	c.Close()
}

func (d *demux) forward(client net.Conn) {
	defer d.wg.Done()
	defer d.untrack(client)
	to := d.fallback
	if a, ok := client.RemoteAddr().(*net.TCPAddr); ok {
		if r, ok := d.routes[a.IP.String()]; ok {
			to = r
		}
	}
	server, err := net.DialTimeout("tcp", to, demuxDialTimeout)
	if err != nil {
		return
	}
	if !d.track(server) {
		server.Close()
		return
	}
	defer d.untrack(server)
	done := make(chan struct{}, 2)
	copyHalf := func(dst, src net.Conn) {
		io.Copy(dst, src)
		// Either side closing ends both, as a direct connection would.
		dst.Close()
		src.Close()
		done <- struct{}{}
	}
	go copyHalf(server, client)
	go copyHalf(client, server)
	<-done
	<-done
}

// close stops accepting, ends every connection and waits for the
// forwarders.
func (d *demux) close() {
	d.mu.Lock()
	d.closed = true
	for c := range d.conns {
		c.Close()
	}
	d.mu.Unlock()
	d.ln.Close()
	d.wg.Wait()
}
