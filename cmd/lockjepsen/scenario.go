package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/scenario"
)

// overrides are the flags a named scenario accepts on top of its own
// configuration: only those given change it.
type overrides struct {
	timeLimit, recovery time.Duration
	seed                int64
	store               string
	stopOnFirst         bool
}

func (ov *overrides) flags(f *pflag.FlagSet) {
	f.DurationVar(&ov.timeLimit, "time-limit", 0, "fault phase of each run (default: the scenario's own, a few seconds)")
	f.DurationVar(&ov.recovery, "recovery", 0, "fault-free phase after healing (default: the scenario's own)")
	f.Int64Var(&ov.seed, "seed", 1, "random seed of clients and nemesis (default: the scenario's own)")
	f.StringVar(&ov.store, "store", "store", "directory where runs are stored")
	f.BoolVar(&ov.stopOnFirst, "stop-on-first-violation", false, stopOnFirstHelp)
}

func (ov *overrides) apply(f *pflag.FlagSet, cfg *harness.Config) {
	if f.Changed("time-limit") {
		cfg.TimeLimit = ov.timeLimit
	}
	if f.Changed("recovery") {
		cfg.Recovery = ov.recovery
	}
	if f.Changed("seed") {
		cfg.Seed = ov.seed
	}
	cfg.Store = ov.store
	cfg.StopOnFirstViolation = cfg.StopOnFirstViolation || ov.stopOnFirst
}

func newScenarioCmd(args []string, stdout, stderr io.Writer) *cobra.Command {
	var list bool
	var configFile string
	var ov overrides
	var cf clientFlags
	var o output
	cmd := &cobra.Command{
		Use:   "scenario NAME",
		Short: "Run a named scenario with its expected verdict (--list to see them)",
		Long: `scenario runs one of the named scenarios: a system, a lock, a workload, a fault
schedule and short timings that reliably give the scenario's verdict, which is
also the expectation that decides the exit code. --list prints every scenario
with its expected verdict and what it shows.

--time-limit runs it longer (more confidence in a safe verdict); --seed draws
another fault schedule.`,
		Example: `  lockjepsen scenario --list
  lockjepsen scenario del-release
  lockjepsen scenario gc-pause-fenced --time-limit 30s
  lockjepsen scenario redlock-restart --quiet && echo "as expected"`,
		Args: func(cmd *cobra.Command, a []string) error {
			if list {
				return cobra.NoArgs(cmd, a)
			}
			return cobra.ExactArgs(1)(cmd, a)
		},
		RunE: func(cmd *cobra.Command, a []string) error {
			if list {
				printScenarioList(stdout)
				return nil
			}
			if err := o.check(stderr); err != nil {
				return err
			}
			if configFile != "" {
				if err := applyConfigFile(configFile, cmd.Flags()); err != nil {
					return usageErr(stderr, err)
				}
			}
			sc, ok := scenario.Get(a[0])
			if !ok {
				return usageErr(stderr, fmt.Errorf("unknown scenario %q; known: %s", a[0], strings.Join(scenario.Names(), ", ")))
			}
			cfg := sc.Config()
			if err := cf.useIn(&cfg); err != nil {
				return flagErr(stderr, err, cmd.Flags())
			}
			ov.apply(cmd.Flags(), &cfg)
			cfg.Command = append([]string{"lockjepsen"}, args...)
			if !o.quiet && !o.json {
				fmt.Fprintf(stderr, "scenario %s: %s (expect %s)\n", sc.Name, sc.Shows, sc.Expect)
			}
			return runAndReport(cmd.Context(), cfg, cmd.Flags(), stdout, stderr, o)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&list, "list", false, "list the scenarios, one line each")
	f.StringVar(&configFile, "config", "", "read these flags from a YAML or JSON file; flags on the command line override it")
	ov.flags(f)
	o.flags(f)
	cf.flags(f)
	return cmd
}

func printScenarioList(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tEXPECT\tSYSTEM/LOCK/WORKLOAD\tFAULTS\tTIME\tSHOWS")
	for _, s := range scenario.All() {
		c := s.Config()
		faults := faultsLabel(c, ",")
		if c.ScriptName == "" && len(c.Nemesis) > 0 && c.Targets != harness.DefaultConfig().Targets {
			faults += " @" + c.Targets
		}
		fmt.Fprintf(tw, "%s\t%s\t%s/%s/%s\t%s\t%s\t%s\n", s.Name, s.Expect, c.System, c.Lock, c.Workload, faults,
			c.TimeLimit+c.Recovery, s.Shows)
	}
	tw.Flush()
}
