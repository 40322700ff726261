// Package ssh is the ssh backend: it runs the systems under test on real
// hosts that lockjepsen reaches over SSH (golang.org/x/crypto/ssh, host
// keys checked against a known_hosts file), as Jepsen's control node
// does. A hosts file (hosts.yaml) lists every process: which host it runs
// on, its role, and how lockjepsen starts it there. Faults are applied on
// the hosts themselves: signals to the server's process (pid file),
// iptables rules in a chain of lockjepsen's own, tc netem, and
// libfaketime where lockjepsen starts the server. Nothing is ever run on
// a host the file does not list.
package ssh

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/lockjepsen/lockjepsen/internal/boundedread"
	"io"
	"net"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/lockjepsen/lockjepsen/cluster"
)

// Roles of a process in the hosts file.
const (
	RoleRedis    = "redis"    // a redis-server node under test
	RoleSentinel = "sentinel" // a redis-sentinel
	// RoleResource is the redis-server that holds the protected resource
	// of the counter workload (the review's default): not under test,
	// never faulted, started only by runs that ask for it.
	RoleResource = "resource"
)

// Run modes of a process.
const (
	// RunStart: lockjepsen writes the configuration, starts the server
	// with the given binary, and stops it at the end. Clock faults work
	// (libfaketime, when the host has it).
	RunStart = "start"
)

// Hosts is a parsed hosts file.
type Hosts struct {
	// Path is the file's path, for messages.
	Path string `yaml:"-"`
	// KnownHosts is the known_hosts file host keys are checked against
	// (default ~/.ssh/known_hosts); relative to the hosts file.
	KnownHosts string `yaml:"known_hosts"`
	// Defaults apply to every process that does not set the field.
	Defaults Process   `yaml:"defaults"`
	Nodes    []Process `yaml:"nodes"`
}

// Process is one server process on one host.
type Process struct {
	Name string `yaml:"name"`
	Role string `yaml:"role"`
	// SSH is host:port of the host's SSH server (port 22 if absent).
	SSH  string `yaml:"ssh"`
	User string `yaml:"user"`
	// Key is a private key file; Agent uses $SSH_AUTH_SOCK instead.
	Key   string `yaml:"key"`
	Agent bool   `yaml:"agent"`
	// Address is the host's address on the network the cluster's
	// processes use between them (replicaof, sentinel monitor, iptables
	// peers); default the SSH host.
	Address string `yaml:"address"`
	// Port is the server's port on the host.
	Port int `yaml:"port"`
	// Client is the host:port clients on the control machine dial;
	// default Address:Port.
	Client string `yaml:"client"`
	// Interface is the host's network interface for tc netem (default
	// eth0).
	Interface string `yaml:"interface"`

	Run      string `yaml:"run"`    // RunStart
	Binary   string `yaml:"binary"` // the server binary (redis-server or redis-sentinel)
	Dir      string `yaml:"dir"`    // the process's directory on the host: config, pid file, log, data
	Faketime string `yaml:"faketime_preload"`
	Primary  bool   `yaml:"primary"` // the sentinel system's first primary (default: the first redis node)
	line     int
}

// Line is where the process is in the hosts file.
func (p Process) Line() int { return p.line }

// DefaultKnownHosts is ~/.ssh/known_hosts.
func DefaultKnownHosts() string {
	home, err := os.UserHomeDir()
	if err != nil {
		return ".ssh/known_hosts"
	}
	return path.Join(home, ".ssh", "known_hosts")
}

// LoadHosts reads and validates a hosts file. Errors name the file and,
// where the YAML parser or the field knows it, the line.
func LoadHosts(file string) (*Hosts, error) {
	data, err := boundedread.File(file, boundedread.MaxConfig)
	if err != nil {
		return nil, fmt.Errorf("hosts file: %w", err)
	}
	return ParseHosts(file, data)
}

// ParseHosts parses and validates the text of a hosts file.
func ParseHosts(file string, data []byte) (*Hosts, error) {
	h := &Hosts{Path: file}
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(h); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	var second yaml.Node
	if err := dec.Decode(&second); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s:%d: a second YAML document (after ---): a hosts file is one document", file, second.Line)
	}
	if err := yaml.Unmarshal(data, &root); err == nil {
		h.lines(&root)
	}
	if h.KnownHosts == "" {
		h.KnownHosts = DefaultKnownHosts()
	} else if !path.IsAbs(h.KnownHosts) {
		h.KnownHosts = path.Join(path.Dir(file), h.KnownHosts)
	}
	for i := range h.Nodes {
		h.Nodes[i].fill(h.Defaults, i)
	}
	if err := h.validate(); err != nil {
		return nil, err
	}
	return h, nil
}

// lines records each node's line number from the YAML tree.
func (h *Hosts) lines(root *yaml.Node) {
	if len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return
	}
	m := root.Content[0].Content
	for i := 0; i+1 < len(m); i += 2 {
		if m[i].Value == "nodes" && m[i+1].Kind == yaml.SequenceNode {
			for j, n := range m[i+1].Content {
				if j < len(h.Nodes) {
					h.Nodes[j].line = n.Line
				}
			}
		}
	}
}

// fill applies the defaults to the fields the process leaves empty.
func (p *Process) fill(d Process, i int) {
	str := func(v *string, def, fallback string) {
		if *v == "" {
			*v = def
		}
		if *v == "" {
			*v = fallback
		}
	}
	str(&p.Role, d.Role, RoleRedis)
	str(&p.User, d.User, "root")
	str(&p.Key, d.Key, "")
	str(&p.Run, d.Run, RunStart)
	str(&p.Interface, d.Interface, "eth0")
	str(&p.Faketime, d.Faketime, "")
	p.Agent = p.Agent || d.Agent
	str(&p.SSH, d.SSH, "")
	if p.SSH != "" {
		if _, _, err := net.SplitHostPort(p.SSH); err != nil {
			p.SSH = net.JoinHostPort(p.SSH, "22")
		}
	}
	sshHost, _, _ := net.SplitHostPort(p.SSH)
	str(&p.Address, d.Address, sshHost)
	if p.Port == 0 {
		p.Port = map[string]int{RoleRedis: 6379, RoleSentinel: 26379, RoleResource: 6379}[p.Role]
	}
	if p.Client == "" && p.Address != "" && p.Port > 0 {
		p.Client = net.JoinHostPort(p.Address, strconv.Itoa(p.Port))
	}
	str(&p.Binary, d.Binary, map[string]string{RoleRedis: "/usr/bin/redis-server", RoleSentinel: "/usr/bin/redis-sentinel", RoleResource: "/usr/bin/redis-server"}[p.Role])
	if p.Dir == "" && d.Dir != "" {
		p.Dir = path.Join(d.Dir, p.Name)
	}
	if p.Name == "" {
		p.Name = fmt.Sprintf("node%d", i+1)
	}
}

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,30}$`)

// shellSafe are the characters a path or address may have: they go into
// shell command lines on the hosts unquoted-safe.
var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_./:@+-]+$`)

func (h *Hosts) validate() error {
	if len(h.Nodes) == 0 {
		return fmt.Errorf("%s: no nodes: list each process under nodes:", h.Path)
	}
	seen := map[string]int{}
	ports := map[string]string{}
	var errs []error
	for _, p := range h.Nodes {
		at := fmt.Sprintf("%s:%d: node %s", h.Path, p.line, p.Name)
		bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(at+": "+format, a...)) }
		if !nameRE.MatchString(p.Name) {
			bad("name must be lower-case letters, digits and dashes, starting with a letter")
		}
		if l, ok := seen[p.Name]; ok {
			bad("name is used already (line %d)", l)
		}
		seen[p.Name] = p.line
		if p.Role != RoleRedis && p.Role != RoleSentinel && p.Role != RoleResource {
			bad("role %q is not one of %s, %s, %s", p.Role, RoleRedis, RoleSentinel, RoleResource)
		}
		if p.SSH == "" {
			bad("no ssh: give the host's SSH address (host or host:port)")
		} else if _, port, err := net.SplitHostPort(p.SSH); err != nil || !validPort(port) {
			bad("ssh %q is not host:port", p.SSH)
		}
		if p.Key == "" && !p.Agent {
			bad("no key: give a private key file (key:) or agent: true")
		}
		if p.Port < 1 || p.Port > 65535 {
			bad("port %d is not a TCP port", p.Port)
		}
		if _, port, err := net.SplitHostPort(p.Client); p.SSH != "" && (err != nil || !validPort(port)) {
			bad("client %q is not host:port", p.Client)
		}
		if p.Run != RunStart {
			bad("run %q: only %q is supported (lockjepsen starts and stops the server)", p.Run, RunStart)
		}
		if p.Dir == "" || !path.IsAbs(p.Dir) {
			bad("dir %q must be an absolute path on the host (the process's config, pid file, log and data)", p.Dir)
		} else if p.Dir != path.Clean(p.Dir) || path.Clean(p.Dir) == "/" {
			// The backend removes its data files there (rm -rf DIR/appendonlydir):
			// a directory of its own, named plainly, never the root.
			bad("dir %q must be a directory of lockjepsen's own, named plainly: not /, and no .. or trailing /", p.Dir)
		}
		for field, v := range map[string]string{"dir": p.Dir, "binary": p.Binary, "address": p.Address, "user": p.User, "interface": p.Interface, "faketime_preload": p.Faketime} {
			if v != "" && !shellSafe.MatchString(v) {
				bad("%s %q has characters lockjepsen will not put on a remote command line", field, v)
			}
		}
		if p.Address != "" && net.ParseIP(p.Address) == nil {
			// Sentinel is configured without resolve-hostnames: it would
			// resolve names in its event loop, where a hung lookup stalls
			// it (cluster.SentinelConf).
			bad("address %q is not an IP address: the servers announce it to each other, so give the host's IP (address:)", p.Address)
		}
		if p.Primary && p.Role != RoleRedis {
			bad("primary: true is for a redis node")
		}
		key := p.SSH + " " + strconv.Itoa(p.Port)
		if other, ok := ports[key]; ok {
			bad("port %d on %s is taken by node %s", p.Port, p.SSH, other)
		}
		ports[key] = p.Name
	}
	primaries := 0
	for _, p := range h.Nodes {
		if p.Primary {
			primaries++
		}
	}
	if primaries > 1 {
		errs = append(errs, fmt.Errorf("%s: %d redis nodes say primary: true; at most one may", h.Path, primaries))
	}
	if n := len(h.ByRole(RoleResource)); n > 1 {
		errs = append(errs, fmt.Errorf("%s: %d processes have role %s; at most one may", h.Path, n, RoleResource))
	}
	return errors.Join(errs...)
}

func validPort(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n > 0 && n < 65536
}

// ByRole returns the processes of a role, in file order; for redis nodes
// the primary (primary: true, else the first) comes first.
func (h *Hosts) ByRole(role string) []Process {
	var out []Process
	for _, p := range h.Nodes {
		if p.Role != role {
			continue
		}
		if p.Primary {
			out = append([]Process{p}, out...)
		} else {
			out = append(out, p)
		}
	}
	return out
}

// Fit checks that the file has the processes the spec asks for, saying
// what to change when it has not.
func (h *Hosts) Fit(spec cluster.Spec) error {
	redis, sentinels := len(h.ByRole(RoleRedis)), len(h.ByRole(RoleSentinel))
	// Redis Cluster and etcd members on hosts are not built yet
	// (docs/remote.md says so): independent Redis nodes and Sentinel are.
	if !sshRuns(spec.Descriptor()) {
		var runs []string
		for _, d := range cluster.AllSystems() {
			if sshRuns(d) {
				runs = append(runs, d.Name)
			}
		}
		return fmt.Errorf("the ssh backend runs the %s and %s systems so far, not %s", strings.Join(runs[:len(runs)-1], ", "), runs[len(runs)-1], spec.System)
	}
	if spec.Resource && len(h.ByRole(RoleResource)) == 0 {
		return fmt.Errorf("%s lists no process with role %s: the counter workload (the review's default) writes a protected resource there; add one (a redis-server lockjepsen starts and never faults), or use a workload without one (--workload mutex)", h.Path, RoleResource)
	}
	if redis != spec.Nodes {
		return fmt.Errorf("%s lists %d redis nodes; the run asks for --nodes %d", h.Path, redis, spec.Nodes)
	}
	want := 0
	if spec.Descriptor().HasSentinels() {
		want = spec.Sentinels
	}
	if sentinels != want {
		return fmt.Errorf("%s lists %d sentinels; system %s with these options has %d", h.Path, sentinels, spec.System, want)
	}
	if spec.FakeClock {
		for _, n := range h.ByRole(RoleRedis) {
			if n.Faketime == "" {
				return fmt.Errorf("clock faults on the ssh backend need libfaketime where lockjepsen starts the server: node %s (%s line %d) has no faketime_preload; lockjepsen never sets a host's system clock", n.Name, h.Path, n.Line())
			}
		}
	}
	return nil
}

// sshRuns reports whether the ssh backend starts a system: redis-servers
// that are independent or follow a Sentinel-monitored primary.
func sshRuns(d cluster.System) bool {
	return d.Server == cluster.ServerRedis && (d.Reach == cluster.ReachEveryNode || d.Reach == cluster.ReachSentinels)
}
