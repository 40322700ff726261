// Package sshtest holds the test hosts of the ssh backend's tests, for
// contrib/ssh's own tests and the CLI's: containers of the image
// docker/build-host-image.sh builds, on a Docker network of their own,
// with NET_ADMIN and their SSH and server ports published on 127.0.0.1.
// They are started once per test binary, by the first test that needs
// them, and removed by Main. Only these containers are ever targets.
package sshtest

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	gossh "golang.org/x/crypto/ssh"

	dockerbackend "github.com/lockjepsen/lockjepsen/contrib/docker"
	"github.com/lockjepsen/lockjepsen/contrib/ssh"
)

// FixtureLabel (=1) marks the hosts' containers and network; DirLabel
// names, on the network, the directory of the hosts' keys.
const (
	FixtureLabel = "io.lockjepsen.sshtest"
	DirLabel     = "io.lockjepsen.sshtest.dir"
)

// Hosts is how many test hosts there are.
const Hosts = 3

// RedisPorts are the redis ports each host publishes: redis node i of a
// hosts file runs on host i%Hosts at port RedisPorts[i/Hosts], so that
// Redlock's five independent nodes fit on three hosts, two on some of
// them, as a team's own deployment may have them.
var RedisPorts = []int{6379, 6380}

// SentinelPort is the sentinels' port (one per host).
const SentinelPort = 26379

// ResourcePort is the port of the protected resource's store, which every
// hosts file lists on host 1 (a run starts it only when it asks for it).
const ResourcePort = 6390

// Dir is the processes' directory on every test host.
const Dir = "/var/lib/lockjepsen"

// Fixture is the running test hosts.
type Fixture struct {
	id, dir string
	// SSH are the published SSH addresses, Addrs the hosts' addresses on
	// the test network.
	SSH, Addrs []string
	// Image is the hosts' image.
	Image string
	// pub maps "host port" to the published address of that port.
	pub map[string]string
	err error
}

var (
	once sync.Once
	fix  = Fixture{pub: map[string]string{}}
)

func docker(args ...string) (string, error) {
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// Start starts the hosts, or skips the test when there is no Docker
// engine (unless LOCKJEPSEN_REQUIRE_DOCKER=1).
func Start(t *testing.T) *Fixture {
	t.Helper()
	if _, err := docker("version", "--format", "{{.Server.Version}}"); err != nil {
		if os.Getenv("LOCKJEPSEN_REQUIRE_DOCKER") == "1" {
			t.Fatalf("no Docker engine: %v", err)
		}
		t.Skipf("skipping: no Docker engine: %v", err)
	}
	once.Do(func() { fix.err = fix.start() })
	if fix.err != nil {
		t.Fatal(fix.err)
	}
	return &fix
}

// root is the repository's root, from this file's place in it.
func root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

func (f *Fixture) start() error {
	build := filepath.Join(root(), "docker", "build-host-image.sh")
	if out, err := exec.Command(build).CombinedOutput(); err != nil {
		return fmt.Errorf("build the host image: %w: %s", err, out)
	}
	image, _ := exec.Command(build, "--print-tag").Output()
	f.Image = strings.TrimSpace(string(image))
	ReapOrphans()
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
	if _, err := docker(append(append([]string{"network", "create"}, labelArgs(DirLabel+"="+f.dir)...), f.id)...); err != nil {
		return err
	}
	ports := []string{"22", fmt.Sprint(SentinelPort), fmt.Sprint(ResourcePort)}
	for _, p := range RedisPorts {
		ports = append(ports, fmt.Sprint(p))
	}
	for i := 0; i < Hosts; i++ {
		name := f.container(i)
		args := append([]string{"run", "-d", "--name", name}, labelArgs()...)
		args = append(args, "--network", f.id, "--cap-add", "NET_ADMIN")
		for _, p := range ports {
			args = append(args, "-p", "127.0.0.1::"+p)
		}
		args = append(args, "-v", filepath.Join(f.dir, "keys")+":/keys:ro", f.Image)
		if _, err := docker(args...); err != nil {
			return err
		}
		for _, p := range ports {
			out, err := docker("port", name, p)
			if err != nil {
				return err
			}
			f.pub[fmt.Sprint(i, " ", p)] = strings.Split(out, "\n")[0]
		}
		ip, err := docker("inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", name)
		if err != nil {
			return err
		}
		f.SSH = append(f.SSH, f.pub[fmt.Sprint(i, " 22")])
		f.Addrs = append(f.Addrs, ip)
	}
	return nil
}

func (f *Fixture) container(i int) string { return fmt.Sprintf("%s-h%d", f.id, i+1) }

// labelArgs are the --label flags of the hosts' containers and network:
// the fixture's mark, this process as their owner, and extra.
func labelArgs(extra ...string) []string {
	args := []string{"--label", FixtureLabel + "=1"}
	for k, v := range dockerbackend.OwnerLabels() {
		args = append(args, "--label", k+"="+v)
	}
	for _, l := range extra {
		args = append(args, "--label", l)
	}
	return args
}

// ReapOrphans removes the hosts, networks and key directories of test
// binaries that are gone without removing them: a panic or a test
// timeout ends a binary before Main's cleanup. Another binary's live
// hosts (cmd/lockjepsen's and contrib/ssh's run at once) are left alone.
// Start calls it before it starts hosts; it returns what it removed.
func ReapOrphans() []string {
	var removed []string
	for _, kind := range []string{"container", "network"} {
		list := []string{"network", "ls", "--format", "{{.Name}}\t{{.Labels}}"}
		if kind == "container" {
			list = []string{"container", "ls", "--all", "--format", "{{.Names}}\t{{.Labels}}"}
		}
		list = append(list, "--filter", "label="+FixtureLabel+"=1")
		out, err := docker(list...)
		if err != nil {
			fmt.Fprintf(os.Stderr, "sshtest: could not look for hosts left by killed test binaries: %v\n", err)
			return removed
		}
		for _, line := range strings.Split(out, "\n") {
			name, labels, ok := strings.Cut(line, "\t")
			if !ok || !dockerbackend.Orphaned(parseLabels(labels)) {
				continue
			}
			rm := []string{"rm", "-f", name}
			if kind == "network" {
				rm = []string{"network", "rm", name}
			}
			if _, err := docker(rm...); err != nil {
				fmt.Fprintf(os.Stderr, "sshtest: remove %s %s left by a killed test binary: %v\n", kind, name, err)
				continue
			}
			removed = append(removed, kind+" "+name)
			if dir := parseLabels(labels)[DirLabel]; kind == "network" && strings.HasPrefix(filepath.Base(dir), "lockjepsen-sshtest-") {
				os.RemoveAll(dir)
				removed = append(removed, "directory "+dir)
			}
		}
	}
	return removed
}

// parseLabels reads docker's "k=v,k=v" form of a container's labels.
func parseLabels(s string) map[string]string {
	m := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// keys writes the hosts' key and the client's key, and the authorized
// keys file.
func (f *Fixture) keys() error {
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

func (f *Fixture) hostPub() string {
	data, _ := os.ReadFile(filepath.Join(f.dir, "keys", "host_key"))
	signer, _ := gossh.ParsePrivateKey(data)
	return strings.TrimSpace(string(gossh.MarshalAuthorizedKey(signer.PublicKey())))
}

// KnownHosts writes a known_hosts file that knows every test host.
func (f *Fixture) KnownHosts(t *testing.T) string {
	var b strings.Builder
	for _, a := range f.SSH {
		host, port, _ := strings.Cut(a, ":")
		fmt.Fprintf(&b, "[%s]:%s %s\n", host, port, f.hostPub())
	}
	file := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// HostsFile writes a hosts file with `nodes` redis nodes n1.. (node i on
// host i%Hosts, see RedisPorts), `sentinels` sentinels s1.. on hosts
// 1..sentinels, and the resource store on host 1, and returns its path.
func (f *Fixture) HostsFile(t *testing.T, knownHosts string, nodes, sentinels int) string {
	t.Helper()
	if nodes > Hosts*len(RedisPorts) || sentinels > Hosts {
		t.Fatalf("the test hosts have room for %d redis nodes and %d sentinels", Hosts*len(RedisPorts), Hosts)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "known_hosts: %s\ndefaults:\n  user: root\n  key: %s\n  dir: %s\n  faketime_preload: /usr/lib/lockjepsen/fakeclock-shim.so:/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1\nnodes:\n",
		knownHosts, filepath.Join(f.dir, "keys", "client_key"), Dir)
	for i := 0; i < nodes; i++ {
		h, port := i%Hosts, RedisPorts[i/Hosts]
		fmt.Fprintf(&b, "  - {name: n%d, ssh: %q, address: %s, port: %d, client: %q}\n", i+1, f.SSH[h], f.Addrs[h], port, f.pub[fmt.Sprint(h, " ", port)])
	}
	for i := 0; i < sentinels; i++ {
		fmt.Fprintf(&b, "  - {name: s%d, role: sentinel, ssh: %q, address: %s, client: %q}\n", i+1, f.SSH[i], f.Addrs[i], f.pub[fmt.Sprint(i, " ", SentinelPort)])
	}
	fmt.Fprintf(&b, "  - {name: resource, role: resource, ssh: %q, address: %s, port: %d, client: %q}\n", f.SSH[0], f.Addrs[0], ResourcePort, f.pub[fmt.Sprint(0, " ", ResourcePort)])
	file := filepath.Join(t.TempDir(), "hosts.yaml")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// Load writes a hosts file (HostsFile) and parses it.
func (f *Fixture) Load(t *testing.T, knownHosts string, nodes, sentinels int) *ssh.Hosts {
	t.Helper()
	file := f.HostsFile(t, knownHosts, nodes, sentinels)
	h, err := ssh.LoadHosts(file)
	if err != nil {
		data, _ := os.ReadFile(file)
		t.Fatalf("%v\n%s", err, data)
	}
	return h
}

// OnHost runs a command on test host i through docker exec (not through
// the backend under test).
func (f *Fixture) OnHost(t *testing.T, i int, cmd string) string {
	t.Helper()
	out, _ := exec.Command("docker", "exec", f.container(i), "sh", "-c", cmd).CombinedOutput()
	return strings.TrimSpace(string(out))
}

// Unhealed lists, for every host, a rule in lockjepsen's chain, a netem
// qdisc, a marker, or a server process (running or stopped); "" when
// every host is healed.
func (f *Fixture) Unhealed(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for i := 0; i < Hosts; i++ {
		for what, cmd := range map[string]string{
			"rules in " + ssh.Chain: "iptables -S " + ssh.Chain + " 2>/dev/null | grep -- -A",
			"stopped processes":     `for p in /proc/[0-9]*; do grep -q '^State:.*T' $p/status 2>/dev/null && echo "$p"; done`,
			"a netem qdisc":         "tc qdisc show 2>/dev/null | grep netem",
			"markers":               "ls " + Dir + "/*/" + ssh.MarkerFile + " 2>/dev/null",
			"redis processes":       "grep -la '[r]edis-' /proc/[0-9]*/cmdline 2>/dev/null",
		} {
			if out := f.OnHost(t, i, cmd); out != "" {
				fmt.Fprintf(&b, "host %d still has %s:\n%s\n", i+1, what, out)
			}
		}
	}
	return b.String()
}

// NetemMissing says why tc netem (under a prio qdisc, as the backend
// puts it) does not work on the test hosts, "" when it does: some
// kernels (a CI virtual machine's) are built without sch_prio or
// sch_netem. It probes host 1's interface and removes what it added.
func (f *Fixture) NetemMissing(t *testing.T) string {
	t.Helper()
	out := f.OnHost(t, 0, "tc qdisc add dev eth0 root handle 9: prio bands 4 && tc qdisc add dev eth0 parent 9:4 handle 90: netem delay 1ms; rc=$?; tc qdisc del dev eth0 root 2>/dev/null; [ $rc = 0 ] && echo ok")
	if strings.HasSuffix(out, "ok") {
		return ""
	}
	return out
}

// Stopped lists host i's stopped (SIGSTOP) redis processes, "" for none.
func (f *Fixture) Stopped(t *testing.T, i int) string {
	t.Helper()
	return f.OnHost(t, i, `for p in /proc/[0-9]*; do grep -qa 'redis-' $p/cmdline 2>/dev/null && grep -q '^State:.*T' $p/status 2>/dev/null && echo "$p"; done`)
}

// Rules lists the rules in lockjepsen's chain on host i, "" for none.
func (f *Fixture) Rules(t *testing.T, i int) string {
	t.Helper()
	return f.OnHost(t, i, "iptables -S "+ssh.Chain+" 2>/dev/null | grep -- -A")
}

// RequireHealed fails the test unless every host is healed (Unhealed).
func (f *Fixture) RequireHealed(t *testing.T) {
	t.Helper()
	if u := f.Unhealed(t); u != "" {
		t.Error(u)
	}
}

// Main runs the tests and removes the hosts, their network and keys.
func Main(m *testing.M) {
	code := m.Run()
	if fix.id != "" {
		for i := 0; i < Hosts; i++ {
			_, _ = docker("rm", "-f", fix.container(i))
		}
		_, _ = docker("network", "rm", fix.id)
		os.RemoveAll(fix.dir)
	}
	os.Exit(code)
}
