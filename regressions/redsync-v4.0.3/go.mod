// The track record's regression for redsync v4.0.3, pinned: one module
// per version, since one go.mod holds one version.
module github.com/lockjepsen/lockjepsen/regressions/redsync-v4.0.3

go 1.26.8

require (
	github.com/go-redis/redis/v8 v8.1.1
	github.com/go-redsync/redsync/v4 v4.0.3
	github.com/lockjepsen/lockjepsen v0.0.0
	github.com/lockjepsen/lockjepsen/regressions/redsyncadapter v0.0.0
)

require (
	github.com/Shopify/toxiproxy/v2 v2.5.0 // indirect
	github.com/anishathalye/porcupine v1.3.1 // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dgryski/go-rendezvous v0.0.0-20200823014737-9f7001d12a5f // indirect
	github.com/gorilla/mux v1.8.0 // indirect
	github.com/hashicorp/errwrap v1.0.0 // indirect
	github.com/hashicorp/go-multierror v1.1.0 // indirect
	github.com/klauspost/compress v1.18.7 // indirect
	github.com/mattn/go-colorable v0.1.13 // indirect
	github.com/mattn/go-isatty v0.0.16 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/client_golang v1.23.2 // indirect
	github.com/prometheus/client_model v0.6.2 // indirect
	github.com/prometheus/common v0.67.5 // indirect
	github.com/prometheus/procfs v0.16.1 // indirect
	github.com/redis/go-redis/v9 v9.23.0 // indirect
	github.com/rs/xid v1.4.0 // indirect
	github.com/rs/zerolog v1.28.0 // indirect
	go.opentelemetry.io/otel v0.11.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.yaml.in/yaml/v2 v2.4.3 // indirect
	golang.org/x/sys v0.49.0 // indirect
	google.golang.org/protobuf v1.36.11 // indirect
	gopkg.in/tomb.v1 v1.0.0-20141024135613-dd632973f1e7 // indirect
)

replace (
	github.com/lockjepsen/lockjepsen => ../..
	github.com/lockjepsen/lockjepsen/regressions/redsyncadapter => ../redsyncadapter
)
