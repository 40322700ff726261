package ssh

import (
	"strings"
	"testing"

	"github.com/lockjepsen/lockjepsen/cluster"
)

const goodHosts = `known_hosts: kh
defaults:
  user: root
  key: id_ed25519
  dir: /var/lib/lockjepsen
nodes:
  - name: n1
    ssh: 10.0.0.1
  - name: n2
    ssh: 10.0.0.2:2222
    primary: true
  - name: s1
    role: sentinel
    ssh: 10.0.0.1
`

func TestParseHosts(t *testing.T) {
	h, err := ParseHosts("/etc/lj/hosts.yaml", []byte(goodHosts))
	if err != nil {
		t.Fatal(err)
	}
	n1, n2, s1 := h.Nodes[0], h.Nodes[1], h.Nodes[2]
	for _, c := range []struct{ got, want string }{
		{h.KnownHosts, "/etc/lj/kh"},
		{n1.SSH, "10.0.0.1:22"}, {n1.Client, "10.0.0.1:6379"}, {n1.Dir, "/var/lib/lockjepsen/n1"},
		{n1.Binary, "/usr/bin/redis-server"}, {n2.Address, "10.0.0.2"},
		{s1.Client, "10.0.0.1:26379"}, {s1.Binary, "/usr/bin/redis-sentinel"},
		{h.ByRole(RoleRedis)[0].Name, "n2"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	if n1.Line() != 7 || s1.Line() != 12 {
		t.Errorf("lines %d, %d; want 7, 12", n1.Line(), s1.Line())
	}
	spec := cluster.Spec{System: cluster.Sentinel, Nodes: 2, Sentinels: 1}
	if err := h.Fit(spec); err != nil {
		t.Errorf("Fit: %v", err)
	}
	spec.Nodes = 3
	if err := h.Fit(spec); err == nil || !strings.Contains(err.Error(), "--nodes 3") {
		t.Errorf("Fit with 3 nodes: %v", err)
	}
	spec.Nodes, spec.Resource = 2, true
	if err := h.Fit(spec); err == nil || !strings.Contains(err.Error(), "no process with role resource") {
		t.Errorf("Fit of the counter workload without a resource process: %v", err)
	}
	spec.Resource, spec.FakeClock = false, true
	if err := h.Fit(spec); err == nil || !strings.Contains(err.Error(), "node n2 (/etc/lj/hosts.yaml line 9) has no faketime_preload") {
		t.Errorf("Fit of clock faults without libfaketime: %v", err)
	}
	for _, sys := range []string{cluster.RedisCluster, cluster.Etcd} {
		if err := h.Fit(cluster.Spec{System: sys, Nodes: 2}); err == nil || !strings.Contains(err.Error(), "not "+sys) {
			t.Errorf("Fit of %s: %v", sys, err)
		}
	}
}

func TestParseHostsRefuses(t *testing.T) {
	for _, c := range []struct{ name, text, want string }{
		{"empty", "", "no nodes"},
		{"unknown field", "nodes:\n  - name: n1\n    hots: x\n", "line 3: field hots not found"},
		{"no ssh", "nodes:\n  - name: n1\n    key: k\n    dir: /d\n", "hosts.yaml:2: node n1: no ssh"},
		{"no key", "nodes:\n  - name: n1\n    ssh: h\n    dir: /d\n", "no key"},
		{"relative dir", "nodes:\n  - name: n1\n    ssh: h\n    key: k\n    dir: d\n", "absolute path"},
		{"bad role", "nodes:\n  - name: n1\n    ssh: h\n    key: k\n    dir: /d\n    role: etcd\n", `role "etcd"`},
		{"duplicate", "defaults: {ssh: h, key: k, dir: /d}\nnodes:\n  - name: n1\n  - name: n1\n    port: 7000\n", "used already (line 3)"},
		{"same port", "defaults: {ssh: h, key: k, dir: /d}\nnodes:\n  - name: n1\n  - name: n2\n", "port 6379 on h:22 is taken by node n1"},
		{"shell characters", "nodes:\n  - name: n1\n    ssh: h\n    key: k\n    dir: /d;rm\n", "will not put on a remote command line"},
		{"root dir", "nodes:\n  - name: n1\n    ssh: h\n    key: k\n    dir: /\n", "not /"},
		{"dir with ..", "nodes:\n  - name: n1\n    ssh: h\n    key: k\n    dir: /srv/lj/../..\n", "no .."},
		{"second document", "nodes:\n  - name: n1\n    ssh: h\n    key: k\n    dir: /d\n---\nnodes: []\n", "a second YAML document"},
		{"run mode", "nodes:\n  - name: n1\n    ssh: h\n    key: k\n    dir: /d\n    run: systemd\n", `run "systemd"`},
		{"two primaries", "defaults: {ssh: h, key: k, dir: /d}\nnodes:\n  - {name: n1, primary: true}\n  - {name: n2, primary: true, port: 7000}\n", "at most one"},
		{"two resources", "defaults: {ssh: h, key: k, dir: /d}\nnodes:\n  - {name: r1, role: resource}\n  - {name: r2, role: resource, port: 7000}\n", "2 processes have role resource"},
		{"address by name", "nodes:\n  - name: n1\n    ssh: 10.0.0.1\n    key: k\n    dir: /d\n    address: redis-a\n", `address "redis-a" is not an IP address`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseHosts("hosts.yaml", []byte(c.text))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
		})
	}
}
