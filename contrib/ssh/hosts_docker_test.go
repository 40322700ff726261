package ssh

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	gossh "golang.org/x/crypto/ssh"
)

// The tests with real SSH share one set of test hosts: containers of the
// image docker/build-host-image.sh builds, on a network of their own, with
// NET_ADMIN and their SSH port published on 127.0.0.1. They are started
// once, by the first test that needs them, and removed by TestMain.

const testHosts = 3

type fixture struct {
	id, dir string
	// ssh are the published SSH addresses, addrs the hosts' addresses on
	// the test network, redis/sentinel the published server ports.
	ssh, addrs            []string
	redisPub, sentinelPub []string
	err                   error
}

var (
	fixOnce sync.Once
	fix     fixture
)

func docker(args ...string) (string, error) {
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// hostsFixture starts the hosts, or skips the test when there is no Docker
// engine (unless LOCKJEPSEN_REQUIRE_DOCKER=1).
func hostsFixture(t *testing.T) *fixture {
	t.Helper()
	if _, err := docker("version", "--format", "{{.Server.Version}}"); err != nil {
		if os.Getenv("LOCKJEPSEN_REQUIRE_DOCKER") == "1" {
			t.Fatalf("no Docker engine: %v", err)
		}
		t.Skipf("skipping: no Docker engine: %v", err)
	}
	fixOnce.Do(func() { fix.err = fix.start() })
	if fix.err != nil {
		t.Fatal(fix.err)
	}
	return &fix
}

func (f *fixture) start() error {
	root, _ := filepath.Abs("../..")
	if out, err := exec.Command(filepath.Join(root, "docker", "build-host-image.sh")).CombinedOutput(); err != nil {
		return fmt.Errorf("build the host image: %w: %s", err, out)
	}
	image, _ := exec.Command(filepath.Join(root, "docker", "build-host-image.sh"), "--print-tag").Output()
	var err error
	if f.dir, err = os.MkdirTemp("", "lockjepsen-sshtest-"); err != nil {
		return err
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	f.id = fmt.Sprintf("lockjepsen-sshtest-%x", b)
	if err := f.keys(); err != nil {
		return err
	}
	if _, err := docker("network", "create", "--label", "io.lockjepsen.sshtest=1", f.id); err != nil {
		return err
	}
	for i := 1; i <= testHosts; i++ {
		name := fmt.Sprintf("%s-h%d", f.id, i)
		if _, err := docker("run", "-d", "--name", name, "--label", "io.lockjepsen.sshtest=1", "--network", f.id, "--cap-add", "NET_ADMIN",
			"-p", "127.0.0.1::22", "-p", "127.0.0.1::6379", "-p", "127.0.0.1::26379",
			"-v", filepath.Join(f.dir, "keys")+":/keys:ro", strings.TrimSpace(string(image))); err != nil {
			return err
		}
		port := func(p string) string {
			out, _ := docker("port", name, p)
			return strings.Split(out, "\n")[0]
		}
		ip, err := docker("inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", name)
		if err != nil {
			return err
		}
		f.ssh = append(f.ssh, port("22"))
		f.redisPub = append(f.redisPub, port("6379"))
		f.sentinelPub = append(f.sentinelPub, port("26379"))
		f.addrs = append(f.addrs, ip)
	}
	return nil
}

// keys writes the hosts' key and the client's key, and a known_hosts
// file with the host key for every published SSH address.
func (f *fixture) keys() error {
	dir := filepath.Join(f.dir, "keys")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	write := func(name string) (gossh.PublicKey, error) {
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, err
		}
		blk, err := gossh.MarshalPrivateKey(priv, "")
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(blk), 0o644); err != nil {
			return nil, err
		}
		return gossh.NewPublicKey(pub)
	}
	if _, err := write("host_key"); err != nil {
		return err
	}
	client, err := write("client_key")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "authorized_keys"), gossh.MarshalAuthorizedKey(client), 0o644)
}

func (f *fixture) hostPub() string {
	data, _ := os.ReadFile(filepath.Join(f.dir, "keys", "host_key"))
	signer, _ := gossh.ParsePrivateKey(data)
	return strings.TrimSpace(string(gossh.MarshalAuthorizedKey(signer.PublicKey())))
}

// knownHosts writes a known_hosts file that knows every test host.
func (f *fixture) knownHosts(t *testing.T) string {
	var b strings.Builder
	for _, a := range f.ssh {
		host, port, _ := strings.Cut(a, ":")
		fmt.Fprintf(&b, "[%s]:%s %s\n", host, port, f.hostPub())
	}
	file := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// hostsFile writes a hosts file with `nodes` redis nodes on hosts 1..n
// and `sentinels` sentinels on hosts 1..s (each host runs at most one of
// each).
func (f *fixture) hostsFile(t *testing.T, knownHosts string, nodes, sentinels int) *Hosts {
	var b strings.Builder
	fmt.Fprintf(&b, "known_hosts: %s\ndefaults:\n  user: root\n  key: %s\n  dir: /var/lib/lockjepsen\n  faketime_preload: /usr/lib/lockjepsen/fakeclock-shim.so:/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1\nnodes:\n",
		knownHosts, filepath.Join(f.dir, "keys", "client_key"))
	for i := 0; i < nodes; i++ {
		fmt.Fprintf(&b, "  - {name: n%d, ssh: %q, address: %s, client: %q}\n", i+1, f.ssh[i], f.addrs[i], f.redisPub[i])
	}
	for i := 0; i < sentinels; i++ {
		fmt.Fprintf(&b, "  - {name: s%d, role: sentinel, ssh: %q, address: %s, client: %q}\n", i+1, f.ssh[i], f.addrs[i], f.sentinelPub[i])
	}
	file := filepath.Join(t.TempDir(), "hosts.yaml")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	h, err := LoadHosts(file)
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	return h
}

// onHost runs a command on test host i through docker exec (not through
// the backend under test).
func (f *fixture) onHost(t *testing.T, i int, cmd string) string {
	t.Helper()
	out, _ := exec.Command("docker", "exec", fmt.Sprintf("%s-h%d", f.id, i+1), "sh", "-c", cmd).CombinedOutput()
	return strings.TrimSpace(string(out))
}

// healthyHosts fails unless no host has a rule in lockjepsen's chain, a
// marker, or a server process.
func (f *fixture) healthyHosts(t *testing.T) {
	t.Helper()
	for i := 0; i < testHosts; i++ {
		if out := f.onHost(t, i, "iptables -S "+Chain+" 2>/dev/null | grep -- -A"); out != "" {
			t.Errorf("host %d still has rules in %s:\n%s", i+1, Chain, out)
		}
		if out := f.onHost(t, i, "ls /var/lib/lockjepsen/*/"+markerFile+" 2>/dev/null"); out != "" {
			t.Errorf("host %d still has markers: %s", i+1, out)
		}
		if out := f.onHost(t, i, "grep -la '[r]edis-' /proc/[0-9]*/cmdline 2>/dev/null"); out != "" {
			t.Errorf("host %d still runs redis: %s", i+1, out)
		}
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if fix.id != "" {
		for i := 1; i <= testHosts; i++ {
			_, _ = docker("rm", "-f", fmt.Sprintf("%s-h%d", fix.id, i))
		}
		_, _ = docker("network", "rm", fix.id)
		os.RemoveAll(fix.dir)
	}
	os.Exit(code)
}

var _ = context.Background
