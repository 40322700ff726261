package nemesis

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
)

// nodeFault is what the faults that change nodes one by one (pause, kill,
// clocks) share: it remembers the nodes changed and not yet restored, so
// that Stop restores only its own action's nodes and Heal whatever is
// left, each once, and a node the fault never reached is not "restored".
// Its lock is held while a fault acts, so that a stop cannot pass a start
// on the same node.
type nodeFault struct {
	// restore undoes the change on one node; called with mu held.
	restore func(ctx context.Context, env *Env, node string) error

	mu      sync.Mutex
	changed map[string]bool
}

// change calls do on each node. do says whether the node is now changed:
// a change that failed half-way must still be restored.
func (f *nodeFault) change(nodes []string, do func(node string) (bool, error)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.changed == nil {
		f.changed = map[string]bool{}
	}
	var errs []error
	for _, n := range nodes {
		changed, err := do(n)
		if changed {
			f.changed[n] = true
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// isChanged is for do, which runs with mu held.
func (f *nodeFault) isChanged(node string) bool { return f.changed[node] }

func (f *nodeFault) Stop(ctx context.Context, env *Env, a *Action) error {
	return f.restoreNodes(ctx, env, a.Nodes)
}

func (f *nodeFault) Heal(ctx context.Context, env *Env) error {
	f.mu.Lock()
	nodes := slices.Sorted(maps.Keys(f.changed))
	f.mu.Unlock()
	return f.restoreNodes(ctx, env, nodes)
}

// restoreNodes restores those of nodes that are changed; a node whose
// restore failed stays changed, for Heal to try again.
func (f *nodeFault) restoreNodes(ctx context.Context, env *Env, nodes []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return errors.Join(undoEach(f.changed, nodes, func(n string) error { return f.restore(ctx, env, n) })...)
}

// undoEach undoes those of items that done holds and forgets each one
// undone; one whose undo failed stays in done, for a later heal to try
// again, and an item never done is left alone.
func undoEach[K comparable](done map[K]bool, items []K, undo func(K) error) []error {
	var errs []error
	for _, k := range items {
		if !done[k] {
			continue
		}
		if err := undo(k); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(done, k)
	}
	return errs
}

// nodeErr says what failed on which node; nil for no error.
func nodeErr(what, node string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s %s: %w", what, node, err)
}
