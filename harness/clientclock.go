package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster/fakeclock"
	"github.com/lockjepsen/lockjepsen/nemesis"
)

// clientClocks gives each client worker's protocol client an offset file
// of its own, which libfaketime in the client's process reads on every
// clock read (nemesis.ClientClocks). A client replaced after a crash
// runs for the same worker, so it reads the same file, and keeps the
// fault its predecessor had.
type clientClocks struct {
	dir     string // run directory's clients folder
	lib     string // the plain libfaketime
	clients int

	mu    sync.Mutex
	procs map[int]int // worker -> latest process
}

// newClientClocks prepares the offset files, all at real time, when a
// fault of the run moves a protocol client's clock; nil otherwise.
func (r *runner) newClientClocks() (*clientClocks, error) {
	if len(r.cfg.Client) == 0 || !nemesis.MovesClientClocks(r.cfg.faultsUsed()) {
		return nil, nil
	}
	lib, err := fakeclock.ClientLib()
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(filepath.Join(r.dir, ClientsDir))
	if err != nil {
		return nil, fmt.Errorf("client clocks: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("client clocks: %w", err)
	}
	cc := &clientClocks{dir: dir, lib: lib, clients: r.cfg.Clients, procs: map[int]int{}}
	for w := range r.cfg.Clients {
		if err := fakeclock.Set(cc.file(w), 0, 1); err != nil {
			return nil, fmt.Errorf("client clocks: %w", err)
		}
		cc.procs[w] = w
	}
	return cc, nil
}

// file is worker w's offset file.
func (c *clientClocks) file(w int) string { return filepath.Join(c.dir, fmt.Sprintf("w%d.clock", w)) }

// env is the environment process's client starts with; it notes the
// process as its worker's latest.
func (c *clientClocks) env(process int) []string {
	w := process % c.clients
	c.mu.Lock()
	c.procs[w] = process
	c.mu.Unlock()
	return fakeclock.ClientEnv(c.lib, c.file(w))
}

func (c *clientClocks) SetClientClock(worker int, offset time.Duration) error {
	if worker < 0 || worker >= c.clients {
		return fmt.Errorf("no client worker %d", worker)
	}
	return fakeclock.Set(c.file(worker), offset, 1)
}

func (c *clientClocks) ClientProcess(worker int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.procs[worker]
}
