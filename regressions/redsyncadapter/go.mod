// One adapter for every pinned redsync version of the regressions beside
// it; it requires no redsync itself.
module github.com/lockjepsen/lockjepsen/regressions/redsyncadapter

go 1.26.8

require github.com/lockjepsen/lockjepsen v0.0.0

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/redis/go-redis/v9 v9.23.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)

replace github.com/lockjepsen/lockjepsen => ../..
