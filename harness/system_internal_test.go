package harness

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/nemesis"
)

// The systems' TTL rules, asked by the CLI, the matrix and the review:
// etcd's leases are whole seconds and default to 1s; the Redis systems
// default to 500ms and take any duration.
func TestTTLRules(t *testing.T) {
	cases := []struct {
		system string
		ttl    time.Duration
		ok     bool
		def    time.Duration
	}{
		{cluster.Etcd, time.Second, true, time.Second},
		{cluster.Etcd, 3 * time.Second, true, time.Second},
		{cluster.Etcd, 1500 * time.Millisecond, false, time.Second},
		{cluster.Etcd, 500 * time.Millisecond, false, time.Second},
		{cluster.Single, 500 * time.Millisecond, true, 500 * time.Millisecond},
		{cluster.Single, 1500 * time.Millisecond, true, 500 * time.Millisecond},
		{cluster.Sentinel, 200 * time.Millisecond, true, 500 * time.Millisecond},
		{cluster.RedisCluster, 1500 * time.Millisecond, true, 500 * time.Millisecond},
	}
	for _, tc := range cases {
		d, err := lookupSystem(tc.system)
		if err != nil {
			t.Fatal(err)
		}
		err = checkTTL(d, tc.ttl)
		if (err == nil) != tc.ok {
			t.Errorf("%s --ttl %s: %v, want ok %v", tc.system, tc.ttl, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "whole seconds") {
			t.Errorf("%s --ttl %s: %v does not say why", tc.system, tc.ttl, err)
		}
		if got := DefaultTTL(tc.system); got != tc.def {
			t.Errorf("DefaultTTL(%s) = %s, want %s", tc.system, got, tc.def)
		}
	}
	if got, want := TTLHelp(), "0: the system's default, 500ms; on etcd 1s, and only whole seconds"; got != want {
		t.Errorf("TTLHelp() = %q, want %q", got, want)
	}
}

// The TTL default is applied once, where the configuration is completed
// (Validate), and only to the TTL not chosen, 0: a Go API user who starts
// from DefaultConfig and picks etcd gets etcd's 1s, and so does --ttl 0;
// a TTL given is kept, and refused, naming --ttl and what the system
// counts, when the system cannot count it (--ttl 500ms on etcd is not
// turned into 1s).
func TestTTLDefaultAppliedOnValidate(t *testing.T) {
	const unset = -1 // the case leaves DefaultConfig's TTL
	cases := []struct {
		system   string
		ttl, got time.Duration
		ok       bool
	}{
		{cluster.Etcd, unset, time.Second, true},
		{cluster.Etcd, 0, time.Second, true},
		{cluster.Etcd, 500 * time.Millisecond, 500 * time.Millisecond, false},
		{cluster.Etcd, 3 * time.Second, 3 * time.Second, true},
		{cluster.Etcd, 1500 * time.Millisecond, 1500 * time.Millisecond, false},
		{cluster.Single, unset, 500 * time.Millisecond, true},
		{cluster.Single, 0, 500 * time.Millisecond, true},
		{cluster.Single, 500 * time.Millisecond, 500 * time.Millisecond, true},
		{cluster.Sentinel, 200 * time.Millisecond, 200 * time.Millisecond, true},
	}
	for _, tc := range cases {
		cfg := DefaultConfig()
		cfg.System, cfg.CustomLock = tc.system, true
		if tc.ttl != unset {
			cfg.TTL = tc.ttl
		}
		before := cfg.TTLOrDefault()
		cfg.complete()
		if cfg.TTL != tc.got || before != tc.got {
			t.Errorf("%s --ttl %s: completed to %s (TTLOrDefault before: %s), want %s", tc.system, tc.ttl, cfg.TTL, before, tc.got)
		}
		err := cfg.validateSystem()
		if (err == nil) != tc.ok {
			t.Errorf("%s --ttl %s: %v, want ok %v", tc.system, tc.ttl, err, tc.ok)
		}
		if err != nil && (!IsUsage(err) || !strings.Contains(err.Error(), "--ttl "+tc.ttl.String()+" on etcd: leases are whole seconds")) {
			t.Errorf("%s --ttl %s: %v does not name --ttl and what etcd takes", tc.system, tc.ttl, err)
		}
	}
	if ttl := DefaultConfig().TTL; ttl != 0 {
		t.Errorf("DefaultConfig().TTL = %s, want 0: the system's default, filled in by Validate", ttl)
	}
}

// The facts the review and the matrix ask of a system instead of its
// name: where a server fault hurts, whether it fails over, whether
// Redis's persistence options apply.
func TestSystemFacts(t *testing.T) {
	cases := []struct {
		system, target string
		failsOver      bool
		ownPersistence bool
	}{
		{cluster.Single, nemesis.TargetOne, false, false},
		{cluster.Sentinel, nemesis.TargetPrimary, true, false},
		{cluster.Redlock, nemesis.TargetHolder, false, false},
		{cluster.Etcd, nemesis.TargetOne, false, true},
		{cluster.RedisCluster, nemesis.TargetPrimary, true, false},
	}
	for _, tc := range cases {
		if got := FaultTarget(tc.system); got != tc.target {
			t.Errorf("FaultTarget(%s) = %s, want %s", tc.system, got, tc.target)
		}
		if got := slices.Contains(FailoverSystems(), tc.system); got != tc.failsOver {
			t.Errorf("%s fails over: %v, want %v", tc.system, got, tc.failsOver)
		}
		if got := OwnPersistence(tc.system) != ""; got != tc.ownPersistence {
			t.Errorf("OwnPersistence(%s) = %q", tc.system, OwnPersistence(tc.system))
		}
		cfg := DefaultConfig()
		cfg.System, cfg.Persistence, cfg.CustomLock = tc.system, cluster.PersistAlways, true
		if err := cfg.validateSystem(); (err != nil && strings.Contains(err.Error(), "--persistence")) != tc.ownPersistence {
			t.Errorf("%s --persistence always: %v", tc.system, err)
		}
	}
}
