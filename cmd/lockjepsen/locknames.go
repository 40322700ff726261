package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/locks"
)

// The CLI names no lock itself: help, the grid and its checks come from
// the lock descriptors, so that a lock registered later (contrib, or a
// user's own) shows up everywhere with no edit here.

// lockNodes is how many nodes a lock sees on the system at its default
// size: a Sentinel system presents only its primary.
func lockNodes(system string) int { return harness.LockNodes(system) }

// fittingLocks lists the locks that run on the system at its default size,
// in the order of locks.All.
func fittingLocks(system string) []string {
	var names []string
	for _, d := range locks.All() {
		if d.Fits(system, lockNodes(system)) {
			names = append(names, d.Name)
		}
	}
	return names
}

// systemsOf lists the systems the lock runs on at their default sizes. A
// lock that fits none of them (one that needs --nodes) gets the systems
// it declares.
func systemsOf(d locks.Descriptor) []string {
	var systems []string
	for _, sys := range cluster.Systems {
		if d.Fits(sys, lockNodes(sys)) {
			systems = append(systems, sys)
		}
	}
	if len(systems) == 0 {
		return d.Systems
	}
	return systems
}

// lockHelp is the --lock help: every lock, grouped by the systems it runs
// on ("token, fenced on --system single or sentinel; wait on sentinel").
func lockHelp() string {
	type group struct{ systems, names []string }
	var groups []*group
	for _, d := range locks.All() {
		systems := systemsOf(d)
		i := slices.IndexFunc(groups, func(g *group) bool { return slices.Equal(g.systems, systems) })
		if i < 0 {
			groups = append(groups, &group{systems: systems})
			i = len(groups) - 1
		}
		groups[i].names = append(groups[i].names, d.Name)
	}
	parts := make([]string, len(groups))
	for i, g := range groups {
		on := "on "
		if i == 0 {
			on = "on --system "
		}
		parts[i] = strings.Join(g.names, ", ") + " " + on + orList(g.systems)
	}
	return "lock under test: " + strings.Join(parts, "; ")
}

// gridLocksHelp is the --locks help of the matrix: each system's own
// locks, the grid's default.
func gridLocksHelp() string {
	var parts []string
	for _, sys := range cluster.Systems {
		if own := fittingLocks(sys); len(own) > 0 {
			parts = append(parts, sys+" "+strings.Join(own, ","))
		}
	}
	return fmt.Sprintf("grid: locks (default: each system's own: %s)", strings.Join(parts, "; "))
}

// orList is "a", "a or b", "a, b or c".
func orList(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}
