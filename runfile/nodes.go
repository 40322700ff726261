package runfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/lockjepsen/lockjepsen/cluster"
)

// WriteNodes records a run's server processes in dir/nodes.json, whole or
// not at all, so that a later run can find the servers of a harness that
// was killed.
func WriteNodes(dir string, nodes []cluster.Node) error {
	if err := WriteJSON(filepath.Join(dir, NodesFile), nodes); err != nil {
		return fmt.Errorf("record node processes: %w", err)
	}
	return nil
}

// ReadNodes reads dir/nodes.json; a run that started no server has none
// (nil, nil).
func ReadNodes(dir string) ([]cluster.Node, error) {
	var nodes []cluster.Node
	err := ReadJSON(filepath.Join(dir, NodesFile), &nodes)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return nodes, err
}
