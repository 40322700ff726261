package docker_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/contrib/docker"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/nemesis"
	"github.com/lockjepsen/lockjepsen/testkit/testutil"
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
// it (toxiproxy in front, Docker pause on the containers), a sentinel run
// isolates the primary through the toxiproxy server's API (its internal
// proxy), and it is torn down again.
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
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	// Bringing up (or down) a dozen containers takes seconds on an idle
	// machine; composeTimeout leaves room for a loaded one.
	const composeTimeout = 3 * time.Minute
	composeRun := func(args ...string) error {
		return testutil.RunBounded(composeTimeout, "compose "+strings.Join(args, " "), root, compose[0],
			append(append(compose[1:], "-p", "lockjepsen", "-f", filepath.Join(root, "docker-compose.yml")), args...)...)
	}
	if labels, up := containerLabels(t, "lockjepsen-n1"); up {
		if !docker.Orphaned(labels) {
			t.Skip("a lockjepsen compose deployment is already up, not left by a killed test binary; not touching it")
		}
		t.Logf("taking down the compose deployment that a killed test binary (%s) left", labels[docker.LabelOwner])
		if stale := composeDown(t, composeRun); stale != "" {
			t.Fatalf("the deployment a killed test binary left could not be taken down (network %s)", stale)
		}
	}
	if err := testutil.RunBounded(imageBuildTimeout, "docker/build-image.sh --toxiproxy", root, "bash", filepath.Join(root, "docker", "build-image.sh"), "--toxiproxy"); err != nil {
		t.Fatal(err)
	}
	owned := ownedOverride(t, compose, root)
	t.Cleanup(func() {
		stale := composeDown(t, composeRun)
		// Nothing of the deployment is left: no container, network or
		// volume of the compose project or with the project's label.
		for _, kind := range [][]string{{"ps", "-aq"}, {"network", "ls", "-q"}, {"volume", "ls", "-q"}} {
			for _, label := range []string{docker.LabelBackend + "=compose", "com.docker.compose.project=lockjepsen"} {
				out, err := exec.Command("docker", append(kind, "--filter", "label="+label)...).CombinedOutput()
				left := strings.TrimSpace(strings.ReplaceAll(string(out), stale, ""))
				if err != nil {
					t.Errorf("docker %v: %v\n%s", kind, err, out)
				} else if left != "" {
					t.Errorf("after compose down, docker %s lists %s with label %s", kind[0], left, label)
				}
			}
		}
	})
	if err := composeRun("-f", owned, "up", "-d"); err != nil {
		t.Fatal(err)
	}

	cfg := harness.DefaultConfig()
	cfg.Backend = docker.ComposeBackend{TopologyFile: filepath.Join(root, docker.DefaultTopologyFile)}
	cfg.Store = t.TempDir()
	cfg.System, cfg.Lock, cfg.Clients = cluster.Redlock, locks.RedlockName, 3
	// Nodes get 500 ms to answer instead of the default 50 ms: a CI run on
	// loaded cores saw every container miss 50 ms, and the lock, though
	// safe, was judged stuck. This test is about the deployment, not
	// about timeouts.
	cfg.NodeTimeout = 500 * time.Millisecond
	cfg.Nemesis, cfg.Targets = []string{"pause"}, "minority"
	cfg.TimeLimit, cfg.Recovery = 4*time.Second, 1500*time.Millisecond
	cfg.NemesisInterval = 400 * time.Millisecond
	cfg.Expect = checker.VerdictSafe
	res, err := harness.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	// A safe verdict needs grants (none at all is "unknown"); how many a
	// loaded machine fits into the run is not what this test is about (a
	// CI run under load made 72 operations where 100 were required).
	r := res.Results
	if r.Verdict != checker.VerdictSafe || len(r.Errors) > 0 {
		t.Fatalf("verdict %s, %d ops, errors %v:\n%s", r.Verdict, r.Ops, r.Errors, strings.Join(r.Summary(), "\n"))
	}

	// The sentinel system: the primary is cut off from its replicas and
	// sentinels (its internal proxy net-<node> blackholed through the
	// toxiproxy API) while clients still reach it.
	cfg = harness.DefaultConfig()
	cfg.Backend = docker.ComposeBackend{TopologyFile: filepath.Join(root, docker.DefaultTopologyFile)}
	cfg.Store = t.TempDir()
	cfg.System, cfg.Lock = cluster.Sentinel, locks.Token
	cfg.Nemesis, cfg.Targets = []string{nemesis.Isolate}, nemesis.TargetPrimary
	cfg.NemesisInterval, cfg.FaultDuration = 500*time.Millisecond, 3*time.Second
	cfg.TimeLimit, cfg.Recovery = 5*time.Second, 2*time.Second
	cfg.Expect = harness.ExpectAny
	res, err = harness.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	r = res.Results
	if len(r.Errors) > 0 || r.Ops < 100 {
		t.Fatalf("sentinel on compose: verdict %s, %d ops, errors %v:\n%s", r.Verdict, r.Ops, r.Errors, strings.Join(r.Summary(), "\n"))
	}
	isolates := requireIsolatesStopped(t, res.Dir)
	t.Logf("sentinel on compose: verdict %s, %d ops, isolates %d", r.Verdict, r.Ops, isolates)
	// The deployment healed: a new start finds it healthy (whichever node
	// is primary now) and no toxic on any internal proxy.
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl, err := docker.ComposeBackend{TopologyFile: filepath.Join(root, docker.DefaultTopologyFile)}.Start(ctx,
		cluster.Spec{System: cluster.Sentinel, Nodes: 3, Dir: t.TempDir(), Persistence: cluster.PersistNone})
	if err != nil {
		t.Fatalf("the compose sentinel system after the run: %v", err)
	}
	cc := cl.(*docker.ComposeCluster)
	if left, err := cc.InternalToxics(ctx); err != nil || len(left) > 0 {
		t.Errorf("toxics on the internal proxies after the run: %v %v", left, err)
	}
	if p, err := cc.Primary(ctx); err != nil || p != cc.Nodes()[0].Name || cc.Nodes()[0].Role != cluster.RolePrimary {
		t.Errorf("primary %q (%v), but Nodes() starts with %+v", p, err, cc.Nodes()[0])
	}
	if err := cc.Close(ctx); err != nil {
		t.Error(err)
	}

	// A clock fault is refused before the run: the deployment has no
	// libfaketime.
	_, err = docker.ComposeBackend{TopologyFile: filepath.Join(root, docker.DefaultTopologyFile)}.Start(context.Background(),
		cluster.Spec{System: cluster.Redlock, Nodes: 5, Dir: t.TempDir(), Persistence: cluster.PersistNone, FakeClock: true})
	if err == nil || !strings.Contains(err.Error(), "libfaketime") {
		t.Errorf("FakeClock on compose: %v, want a refusal", err)
	}
}

// ownedOverride writes a compose file that adds this test binary's owner
// labels (docker.OwnerLabels) to every service of docker-compose.yml and
// to its network: a deployment that a killed test binary left is then
// told from a user's own (which has none), and the next test binary takes
// it down rather than skipping. The file lives as long as the test.
func ownedOverride(t *testing.T, compose []string, root string) string {
	t.Helper()
	args := append(compose[1:len(compose):len(compose)], "-p", "lockjepsen", "-f", filepath.Join(root, "docker-compose.yml"), "config", "--services")
	out, err := exec.Command(compose[0], args...).Output()
	if err != nil {
		t.Fatalf("compose config --services: %v", err)
	}
	labels := docker.OwnerLabels()
	services := map[string]any{}
	for _, name := range strings.Fields(string(out)) {
		services[name] = map[string]any{"labels": labels}
	}
	doc, err := json.Marshal(map[string]any{"services": services,
		"networks": map[string]any{"lockjepsen": map[string]any{"labels": labels}}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "owner.json") // JSON is YAML to compose
	if err := os.WriteFile(path, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// containerLabels are a container's labels, and whether it exists.
func containerLabels(t *testing.T, name string) (map[string]string, bool) {
	t.Helper()
	out, err := exec.Command("docker", "inspect", "-f", "{{json .Config.Labels}}", name).Output()
	if err != nil {
		return nil, false
	}
	var labels map[string]string
	if err := json.Unmarshal(out, &labels); err != nil {
		t.Fatalf("docker inspect %s: labels %q: %v", name, out, err)
	}
	return labels, true
}

// composeDown takes the deployment down, asking again for up to 20 s when
// it fails. It returns the short ID of the project's network when only
// that is left, with no container on it, because the daemon still counts
// an endpoint there ("has active endpoints": Docker's stale endpoint count,
// moby/moby#17217, seen once in a CI run and persisting after it); nothing
// but a restart of the daemon removes such a network, and the harness did
// not make it, so the test says so and does not fail.
func composeDown(t *testing.T, composeRun func(args ...string) error) (stale string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	err := composeRun("down", "-v", "--remove-orphans")
	for err != nil && time.Now().Before(deadline) {
		time.Sleep(2 * time.Second)
		err = composeRun("down", "-v", "--remove-orphans")
	}
	if err == nil {
		return ""
	}
	if strings.Contains(err.Error(), "has active endpoints") {
		out, ierr := exec.Command("docker", "network", "inspect", "-f", "{{.Id}} {{len .Containers}}", "lockjepsen_lockjepsen").Output()
		if id, n, ok := strings.Cut(strings.TrimSpace(string(out)), " "); ierr == nil && ok && n == "0" && len(id) >= 12 {
			t.Logf("docker left network lockjepsen_lockjepsen (%s) with a stale endpoint count and no container "+
				"(moby/moby#17217); only restarting dockerd removes it", id[:12])
			return id[:12]
		}
	}
	t.Error(err)
	return ""
}
