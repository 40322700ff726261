package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/runfile"
	"github.com/lockjepsen/lockjepsen/serverrecord"
)

// recordServers starts the server record of the run (Config.ServerRecord):
// an observer per Redis node, dialing the node's own address, never a
// link of the mesh, so that the faults it watches do not cut it. It
// returns once every node is observed; stop ends the record, before the
// servers stop (their shutdown is not part of the run). Only Redis nodes
// have such a record (the system's descriptor names its server): etcd's
// members do not speak RESP or send keyspace notifications.
func (r *runner) recordServers(ctx context.Context, rec *history.Recorder, sys *system) (stop func(), err error) {
	if !r.cfg.ServerRecord || r.cfg.system().Server != cluster.ServerRedis {
		return func() {}, nil
	}
	w, err := serverrecord.Create(filepath.Join(r.dir, runfile.ServerRecordFile))
	if err != nil {
		return nil, err
	}
	var nodes []serverrecord.Node
	for _, n := range sys.cl.Nodes() {
		nodes = append(nodes, serverrecord.Node{Name: n.Name, Addr: n.Addr})
	}
	obs := serverrecord.Start(ctx, nodes, w, rec.Now)
	return func() {
		err := obs.Stop()
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			r.info.Errors = append(r.info.Errors, fmt.Sprintf("the server record is incomplete: %v", err))
		}
	}, nil
}

// readServerRecord reads a stored run's server record back, for
// results.json; nil for a run that kept none. A damaged record is bad
// input, as a damaged history is.
func readServerRecord(dir string) (*serverrecord.Summary, error) {
	path := filepath.Join(dir, runfile.ServerRecordFile)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	sum, err := serverrecord.Scan(path, func(serverrecord.Event) {})
	if err != nil {
		return nil, usage("%v", err)
	}
	return &sum, nil
}
