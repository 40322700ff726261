package liblocks_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/lockjepsen/lockjepsen/contrib/liblocks"
	"github.com/lockjepsen/lockjepsen/scenario"
)

// The library scenarios are valid configurations, keep their verdicts, and
// take their place in the registry's order among the core's.
func TestLibraryScenarios(t *testing.T) {
	want := map[string]string{
		"redislock-restart": "unsafe", "redsync-baseline": "safe", "redsync-minority": "safe",
		"redsync-restart": "unsafe", "redsync-delayed-restart": "safe",
		"etcd-baseline": "safe", "etcd-session-client-pause": "unsafe", "etcd-gc-pause-fenced": "safe",
		"rueidislock-baseline": "safe", "rueidislock-clock-offset": "unsafe", "valkeylock-clock-offset": "unsafe",
		"rueidislock-server-pause": "unsafe", "rueidislock-cluster-baseline": "safe",
		"rueidislock-partition": "unsafe", "rueidislock-latency": "safe", "rueidislock-sentinel-kill-after-acquire": "unsafe",
	}
	for n, v := range want {
		s, ok := scenario.Get(n)
		if !ok || s.Expect != v {
			t.Errorf("%s: present %v, expects %q, want %q", n, ok, s.Expect, v)
		}
	}
	for _, s := range liblocks.Scenarios {
		cfg := s.Config()
		cfg.Store = t.TempDir()
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: %v", s.Name, err)
		}
	}
	names := scenario.Names()
	pos := func(n string) int { return slices.Index(names, n) }
	// By system first: a single-Redis library scenario before Sentinel's,
	// redsync after our Redlock, etcd's after them (and before Redis
	// Cluster's, the last system).
	if !(pos("redislock-restart") < pos("sentinel-baseline") && pos("kleppmann-clock-jump") < pos("redsync-baseline") &&
		pos("redsync-delayed-restart") < pos("etcd-baseline") && pos("etcd-gc-pause-fenced") == pos("cluster-baseline")-1) {
		t.Errorf("registry order: %v", names)
	}
	got, err := scenario.Select("tag:redsync")
	if err != nil {
		t.Fatal(err)
	}
	var picked []string
	for _, s := range got {
		picked = append(picked, s.Name)
	}
	if strings.Join(picked, ",") != "redsync-baseline,redsync-minority,redsync-restart,redsync-delayed-restart" {
		t.Errorf("tag:redsync picks %v", picked)
	}
	if s, ok := scenario.Find("redlock", liblocks.RedsyncName, "mutex", []string{"pause", "partition"}); !ok || s.Name != "redsync-minority" {
		t.Errorf("Find(redsync minority) = %q %v", s.Name, ok)
	}
	if err := liblocks.Register(); err != nil {
		t.Errorf("a second Register: %v", err)
	}
}
