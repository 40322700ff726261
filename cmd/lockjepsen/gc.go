package main

import (
	"os"
	"runtime/debug"
	"sync"
)

// runGCPercent is the garbage collector's target (GOGC) while a test
// runs, unless GOGC is set. A run allocates about 5 KB a lock cycle (the
// go-redis commands, the history's events, the checkers' calls and
// holds) over a live heap of 10-25 MB, so at GOGC=100 the collector ran
// ten times a second and took about a tenth of the client's CPU, which
// on two cores is taken from redis-server. At 400 it runs a quarter as
// often; the trade is memory: the heap may grow to five times the live
// heap instead of twice (peak RSS 92 → 185 MB for a 5 s run of 16
// clients; the live heap of a run does not grow with its length).
const runGCPercent = 400

// gcForRuns holds GOGC at runGCPercent while one or more runs go (the
// matrix may run several at once) and gives the previous value back
// when the last one ends.
var gcForRuns struct {
	sync.Mutex
	runs int
	old  int
}

// lessGC sets runGCPercent for a run, unless the user set GOGC; the
// function it returns ends the run's hold on it.
func lessGC() (restore func()) {
	if _, set := os.LookupEnv("GOGC"); set {
		return func() {}
	}
	g := &gcForRuns
	g.Lock()
	defer g.Unlock()
	if g.runs == 0 {
		g.old = debug.SetGCPercent(runGCPercent)
	}
	g.runs++
	return func() {
		g.Lock()
		defer g.Unlock()
		if g.runs--; g.runs == 0 {
			debug.SetGCPercent(g.old)
		}
	}
}
