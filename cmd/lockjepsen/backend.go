package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/local"
	"github.com/lockjepsen/lockjepsen/contrib/docker"
	sshbackend "github.com/lockjepsen/lockjepsen/contrib/ssh"
	"github.com/lockjepsen/lockjepsen/harness"
)

// backendFlags choose where the system runs: local processes (the
// default), containers, or a docker compose deployment.
type backendFlags struct {
	name, image, topology string
	// The ssh backend: the hosts file, trust on first use, dry run.
	hosts         string
	trust, dryRun bool
}

func (b *backendFlags) flags(f *pflag.FlagSet) {
	f.StringVar(&b.name, "backend", "local", "where the system runs: local (redis-server processes), docker (containers, testcontainers-go), compose (a docker compose deployment) or ssh (hosts listed in --hosts, docs/remote.md)")
	f.StringVar(&b.image, "image", "", "docker: the Redis image (default $LOCKJEPSEN_REDIS_IMAGE, else "+docker.DefaultImage+", built by docker/build-image.sh; elsewhere "+docker.OfficialImage+")")
	f.StringVar(&b.topology, "topology", docker.DefaultTopologyFile, "compose: the topology file the compose setup provides")
	f.StringVar(&b.hosts, "hosts", "", "ssh: the hosts file (hosts.yaml) listing every process and the host it runs on (docs/remote.md)")
	f.BoolVar(&b.trust, "trust-on-first-use", false, "ssh: accept and record the key of a host the known_hosts file does not have (a changed key is always refused)")
	f.BoolVar(&b.dryRun, "dry-run", false, "ssh: print every command the run would execute on each host, and run none")
}

// backend returns the chosen backend. A dry
// run of the ssh backend prints its commands to stdout. A
// missing Docker engine is refused at once, before anything starts.
func (b *backendFlags) backend(ctx context.Context, stdout io.Writer) (cluster.Backend, error) {
	switch b.name {
	case "", "local":
		if b.image != "" {
			return nil, &harness.UsageError{Err: errors.New("--image is for --backend docker")}
		}
		return local.Backend{}, nil
	case "docker", "compose":
		if err := docker.Available(ctx); err != nil {
			return nil, &harness.UsageError{Err: fmt.Errorf("--backend %s: %w", b.name, err)}
		}
		if b.name == "compose" {
			return docker.ComposeBackend{TopologyFile: b.topology}, nil
		}
		return docker.Backend{Image: b.image}, nil
	case "ssh":
		if b.dryRun && b.trust {
			return nil, &harness.UsageError{Err: errors.New("--dry-run dials no host, so --trust-on-first-use has no key to record; run without --dry-run to trust a host")}
		}
		if b.hosts == "" {
			return nil, &harness.UsageError{Err: errors.New("--backend ssh needs --hosts hosts.yaml (docs/remote.md)")}
		}
		h, err := sshbackend.LoadHosts(b.hosts)
		if err != nil {
			return nil, &harness.UsageError{Err: err}
		}
		return sshbackend.New(h, sshbackend.NewRunner(h, b.trust, b.dryRun, stdout)), nil
	}
	return nil, &harness.UsageError{Err: fmt.Errorf("--backend %q is unknown; want local, docker, compose or ssh", b.name)}
}

// commandLine are the flags that choose this backend again, for a
// reproducing command line ("" for the local backend).
func (b *backendFlags) commandLine() []string {
	var out []string
	if b.name != "" && b.name != "local" {
		out = append(out, "--backend", b.name)
	}
	if b.image != "" {
		out = append(out, "--image", b.image)
	}
	if b.hosts != "" {
		out = append(out, "--hosts", b.hosts)
	}
	if b.name == "compose" && b.topology != docker.DefaultTopologyFile {
		out = append(out, "--topology", b.topology)
	}
	return out
}

// printDryRun prints every command the run would execute on each host
// and runs none; the run itself is not started (with no server up, its
// verdict would mean nothing). Only the ssh backend has one.
func (b *backendFlags) printDryRun(ctx context.Context, cfg harness.Config, stdout, stderr io.Writer) error {
	be, ok := cfg.Backend.(sshbackend.Backend)
	if !ok {
		return usageErr(stderr, fmt.Errorf("--dry-run is for --backend ssh, not --backend %s", b.name))
	}
	if err := cfg.Validate(); err != nil {
		return failure(stderr, err)
	}
	// The spec's directory would receive the nodes' logs; a dry run
	// collects none, and keeps nothing.
	dir, err := os.MkdirTemp("", "lockjepsen-dry-run-")
	if err != nil {
		return failure(stderr, fmt.Errorf("dry run: %w", err))
	}
	defer os.RemoveAll(dir)
	if err := be.DryRun(ctx, cfg.Spec(dir), stdout); err != nil {
		return failure(stderr, err)
	}
	return nil
}
