package docker_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/docker"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/locks"
)

// composeCmd finds docker-compose v1 or the compose plugin.
func composeCmd() []string {
	if p, err := exec.LookPath("docker-compose"); err == nil {
		return []string{p}
	}
	if exec.Command("docker", "compose", "version").Run() == nil {
		return []string{"docker", "compose"}
	}
	return nil
}

// The compose topology comes up, a redlock run with pauses goes through
// it (toxiproxy in front, Docker pause on the containers), and it is torn
// down again.
func TestComposeTopology(t *testing.T) {
	requireDocker(t)
	t.Parallel()
	compose := composeCmd()
	if compose == nil {
		if os.Getenv("LOCKJEPSEN_REQUIRE_DOCKER") != "" {
			t.Fatal("neither docker-compose nor the docker compose plugin is installed")
		}
		t.Skip("neither docker-compose nor the docker compose plugin is installed")
	}
	if exec.Command("docker", "inspect", "lockjepsen-n1").Run() == nil {
		t.Skip("a lockjepsen compose deployment is already up; not touching it")
	}
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	out, err := exec.Command("bash", filepath.Join(root, "docker", "build-image.sh"), "--toxiproxy").CombinedOutput()
	if err != nil {
		t.Fatalf("build-image.sh --toxiproxy: %v\n%s", err, out)
	}
	run := func(args ...string) ([]byte, error) {
		cmd := exec.Command(compose[0], append(append(compose[1:], "-p", "lockjepsen", "-f", filepath.Join(root, "docker-compose.yml")), args...)...)
		cmd.Dir = root
		return cmd.CombinedOutput()
	}
	t.Cleanup(func() {
		if out, err := run("down", "-v", "--remove-orphans"); err != nil {
			t.Errorf("compose down: %v\n%s", err, out)
		}
		if exec.Command("docker", "inspect", "lockjepsen-n1").Run() == nil {
			t.Error("container lockjepsen-n1 still exists after compose down")
		}
	})
	if out, err := run("up", "-d"); err != nil {
		t.Fatalf("compose up: %v\n%s", err, out)
	}

	cfg := harness.DefaultConfig()
	cfg.Backend = docker.ComposeBackend{TopologyFile: filepath.Join(root, docker.DefaultTopologyFile)}
	cfg.Store = t.TempDir()
	cfg.System, cfg.Lock, cfg.Clients = cluster.Redlock, locks.RedlockName, 3
	cfg.Nemesis, cfg.Targets = []string{"pause"}, "minority"
	cfg.TimeLimit, cfg.Recovery = 4*time.Second, 1500*time.Millisecond
	cfg.NemesisInterval = 400 * time.Millisecond
	cfg.Expect = checker.VerdictSafe
	res, err := harness.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := res.Results
	if r.Verdict != checker.VerdictSafe || len(r.Errors) > 0 || r.Ops < 100 {
		t.Fatalf("verdict %s, %d ops, errors %v:\n%s", r.Verdict, r.Ops, r.Errors, strings.Join(r.Summary(), "\n"))
	}
	// A clock fault is refused before the run: the deployment has no
	// libfaketime.
	_, err = docker.ComposeBackend{TopologyFile: filepath.Join(root, docker.DefaultTopologyFile)}.Start(context.Background(),
		cluster.Spec{System: cluster.Redlock, Nodes: 5, Dir: t.TempDir(), Persistence: cluster.PersistNone, FakeClock: true})
	if err == nil || !strings.Contains(err.Error(), "libfaketime") {
		t.Errorf("FakeClock on compose: %v, want a refusal", err)
	}
}
