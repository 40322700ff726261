package scenario_test

import (
	"fmt"

	"github.com/lockjepsen/lockjepsen/scenario"
)

func ExampleGet() {
	s, _ := scenario.Get("gc-pause-fenced")
	cfg := s.Config()
	fmt.Println(s.Expect, cfg.System, cfg.Lock, cfg.Workload, cfg.Nemesis)
	// Output: safe single fenced counter [client-pause]
}

func ExampleSelect() {
	list, _ := scenario.Select("tag:sentinel")
	for _, s := range list {
		fmt.Println(s.Name, s.Expect)
	}
	// Output:
	// sentinel-baseline safe
	// sentinel-split-brain unsafe
	// sentinel-kill-after-acquire unsafe
}
