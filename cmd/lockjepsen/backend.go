package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/contrib/docker"
	"github.com/lockjepsen/lockjepsen/harness"
)

// backendFlags choose where the system runs: local processes (the
// default), containers, or a docker compose deployment.
type backendFlags struct {
	name, image, topology string
}

func (b *backendFlags) flags(f *pflag.FlagSet) {
	f.StringVar(&b.name, "backend", "local", "where the system runs: local (redis-server processes), docker (containers, testcontainers-go) or compose (a docker compose deployment)")
	f.StringVar(&b.image, "image", "", "docker: the Redis image (default $LOCKJEPSEN_REDIS_IMAGE, else "+docker.DefaultImage+", built by docker/build-image.sh; elsewhere "+docker.OfficialImage+")")
	f.StringVar(&b.topology, "topology", docker.DefaultTopologyFile, "compose: the topology file the compose setup provides")
}

// backend returns nil for the local backend (the harness's default). A
// missing Docker engine is refused at once, before anything starts.
func (b *backendFlags) backend(ctx context.Context) (cluster.Backend, error) {
	switch b.name {
	case "", "local":
		if b.image != "" {
			return nil, &harness.UsageError{Err: errors.New("--image is for --backend docker")}
		}
		return nil, nil
	case "docker", "compose":
		if err := docker.Available(ctx); err != nil {
			return nil, &harness.UsageError{Err: fmt.Errorf("--backend %s: %w", b.name, err)}
		}
		if b.name == "compose" {
			return docker.ComposeBackend{TopologyFile: b.topology}, nil
		}
		return docker.Backend{Image: b.image}, nil
	}
	return nil, &harness.UsageError{Err: fmt.Errorf("--backend %q is unknown; want local, docker or compose", b.name)}
}
