package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// ErrClosed is returned by operations on a closed Mesh or Link.
var ErrClosed = errors.New("proxy mesh closed")

// quietLogger goes into the contexts handed to toxiproxy. RemoveToxic logs
// through zerolog.Ctx(ctx), which falls back to the process-wide
// zerolog.DefaultContextLogger when the context carries no logger; a
// disabled logger would not be stored by WithContext, so this one is enabled
// but discards everything and filters below panic.
var quietLogger = zerolog.New(io.Discard).Level(zerolog.PanicLevel)

func quiet(ctx context.Context) context.Context { return quietLogger.WithContext(ctx) }

// Mesh is the set of links of one test run.
type Mesh struct {
	server *toxiproxy.ApiServer

	mu     sync.Mutex
	links  []*Link
	closed bool
}

// NewMesh returns an empty mesh. Nothing is listening until Add.
func NewMesh() *Mesh {
	// The ApiServer is only a carrier for the logger and metrics toxiproxy's
	// proxies consult; its HTTP API is never started. Proxies are started
	// directly rather than through server.Collection because abandoned
	// proxies (see Link.Heal) would stay in the collection, and
	// Collection.Remove holds the collection lock while calling a Stop that
	// may never return.
	return &Mesh{server: toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())}
}

// Add creates and starts the link from `from` to `to` (names such as "c3"
// and "n1"). It listens on listenHost:0 ("" means 127.0.0.1) and forwards to
// upstream (host:port). Upstream is dialled per connection, so it need not
// be up yet.
func (m *Mesh) Add(from, to, upstream, listenHost string) (*Link, error) {
	if from == "" || to == "" {
		return nil, fmt.Errorf("add link %q->%q: empty endpoint name", from, to)
	}
	if _, _, err := net.SplitHostPort(upstream); err != nil {
		return nil, fmt.Errorf("add link %s->%s: upstream: %w", from, to, err)
	}
	if listenHost == "" {
		listenHost = "127.0.0.1"
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, fmt.Errorf("add link %s->%s: %w", from, to, ErrClosed)
	}
	for _, l := range m.links {
		if l.From == from && l.To == to {
			return nil, fmt.Errorf("add link %s->%s: already exists (%s)", from, to, l.Addr())
		}
	}
	l, err := newLink(m.server, from, to, upstream, listenHost)
	if err != nil {
		return nil, fmt.Errorf("add link %s->%s: %w", from, to, err)
	}
	m.links = append(m.links, l)
	return l, nil
}

// Links returns the links in creation order.
func (m *Mesh) Links() []*Link {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*Link(nil), m.links...)
}

// Find returns the link from `from` to `to`, or nil.
func (m *Mesh) Find(from, to string) *Link {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, l := range m.links {
		if l.From == from && l.To == to {
			return l
		}
	}
	return nil
}

// HealAll heals every link concurrently, so that one link whose toxiproxy
// is stuck cannot eat the others' share of ctx's deadline.
func (m *Mesh) HealAll(ctx context.Context) error {
	links := m.Links()
	errs := make([]error, len(links))
	var wg sync.WaitGroup
	for i, l := range links {
		wg.Go(func() { errs[i] = l.Heal(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Close stops every link: their listeners are closed and every connection
// through them is closed. It is idempotent; links stay in Links() but every
// further Apply or Heal fails with ErrClosed.
func (m *Mesh) Close() error {
	m.mu.Lock()
	m.closed = true
	links := append([]*Link(nil), m.links...)
	m.mu.Unlock()
	var errs []error
	for _, l := range links {
		errs = append(errs, l.close())
	}
	return errors.Join(errs...)
}
