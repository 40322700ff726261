// Package registry is the one list of named things that this module
// declares and other modules add to: the locks, the scenarios and the
// review's mitigations. The library adapters and the etcd baseline live
// in contrib, whose dependencies a user of the core must not inherit, so
// they register at start-up instead of being listed here.
package registry

import (
	"fmt"
	"slices"
	"sync"
)

// List holds items in the order they were added, each under a name no
// other item has. It is safe for concurrent use.
type List[T any] struct {
	kind string
	name func(T) string

	mu    sync.RWMutex
	items []T
}

// New returns a list of kind ("lock", "scenario": for errors) that names
// an item with name and starts with builtin.
func New[T any](kind string, name func(T) string, builtin ...T) *List[T] {
	return &List[T]{kind: kind, name: name, items: slices.Clone(builtin)}
}

// Add appends items in order. An item whose name is taken stops it with
// an error; the items before it stay added.
func (l *List[T]) Add(items ...T) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, it := range items {
		if l.indexLocked(l.name(it)) >= 0 {
			return fmt.Errorf("register %s %q: the name is taken", l.kind, l.name(it))
		}
		l.items = append(l.items, it)
	}
	return nil
}

// All is every item, in the order added.
func (l *List[T]) All() []T {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return slices.Clone(l.items)
}

// Get finds the item called name.
func (l *List[T]) Get(name string) (T, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if i := l.indexLocked(name); i >= 0 {
		return l.items[i], true
	}
	var none T
	return none, false
}

func (l *List[T]) indexLocked(name string) int {
	return slices.IndexFunc(l.items, func(it T) bool { return l.name(it) == name })
}
