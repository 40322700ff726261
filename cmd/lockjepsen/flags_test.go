package main

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/nemesis"
)

// runfile.Settings.Flags names the test command's flags after the
// settings' keys: parsing its output must give back the same settings,
// for every kind of option, or a review's "reproduce" command would run
// something else.
func TestSettingsFlagsParseBack(t *testing.T) {
	cases := map[string]func(*harness.Config){
		"defaults": func(*harness.Config) {},
		"faults": func(c *harness.Config) {
			c.Nemesis, c.Targets, c.FaultDuration, c.RestartDelay = []string{"kill", "client-pause"}, "holder", 300*time.Millisecond, time.Second
			c.ClockRate, c.ClockJump, c.Bandwidth, c.LoseUnsynced = 1.01, "1.5ttl", 64, true
		},
		"system": func(c *harness.Config) {
			c.System, c.Lock, c.Persistence, c.MinReplicasToWrite, c.MinReplicasMaxLag = "sentinel", "wait", "always", 1, time.Second
			c.ScriptName, c.WaitReplicas, c.AfterAcquire = "sentinel-split-brain", 2, true
		},
		"workload": func(c *harness.Config) {
			c.Workload, c.Renew, c.RenewFor, c.TTL, c.Hold = "renew-counter", "watchdog", "2..3", 5*time.Second, "3s..4500ms"
			c.Seed, c.TimeLimit, c.Recovery, c.StopOnFirstViolation, c.StopGrace = 4, 9*time.Second, 2*time.Second, true, time.Second
			c.CheckpointEvery, c.ServerRecord = 30*time.Second, true
		},
		"renew-before": func(c *harness.Config) { c.Workload, c.RenewBefore = "renew", 25*time.Millisecond },
		"client":       func(c *harness.Config) { c.Client = []string{"python3", "examples/python/token_lock.py", "--fenced"} },
	}
	for name, edit := range cases {
		t.Run(name, func(t *testing.T) {
			want := harness.DefaultConfig()
			edit(&want)
			args := want.Settings.Flags(harness.DefaultConfig().Settings)
			got := harness.DefaultConfig()
			var nem string
			var cf clientFlags
			fl := pflag.NewFlagSet("test", pflag.ContinueOnError)
			systemFlags(fl, &got)
			faultFlags(fl, &got, &nem)
			runFlags(fl, &got)
			cf.flags(fl)
			if err := fl.Parse(args); err != nil {
				t.Fatalf("%s: %v", strings.Join(args, " "), err)
			}
			list, err := nemesis.ParseList(nem)
			if err != nil {
				t.Fatal(err)
			}
			if fl.Changed("nemesis") {
				got.Nemesis = list
			}
			if err := cf.apply(&got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Settings, want.Settings) {
				t.Fatalf("%s parses to\n%+v\nwant\n%+v", strings.Join(args, " "), got.Settings, want.Settings)
			}
		})
	}
}
