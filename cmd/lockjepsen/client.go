package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/lockjepsen/lockjepsen/harness"
)

// clientFlags name an external lock client: a program of any language
// driven over the client protocol (docs/client-protocol.md).
type clientFlags struct {
	command string
	args    []string
	name    string
	fs      *pflag.FlagSet // to tell --client "" from no --client
}

func (c *clientFlags) flags(f *pflag.FlagSet) {
	c.fs = f
	f.StringVar(&c.command, "client", "", "an external lock client to test instead of --lock: a program and its arguments, split at spaces (\"python3 examples/python/token_lock.py\"); one process per client, spoken to over the client protocol (docs/client-protocol.md)")
	f.StringArrayVar(&c.args, "client-arg", nil, "one more argument for --client, taken whole (spaces included); repeatable")
	f.StringVar(&c.name, "client-name", "", "what to call the --client lock in the run's name and report (default: the script's name)")
}

// apply puts the client into cfg; without --client it changes nothing.
// An empty --client is refused: an unset variable in a CI job
// (--client "$LOCK_CLIENT") would otherwise test the built-in lock and
// pass.
func (c *clientFlags) apply(cfg *harness.Config) error {
	if c.fs != nil && c.fs.Changed("client") && strings.TrimSpace(c.command) == "" {
		return errors.New(`--client is empty: give the program to test and its arguments ("python3 my_lock.py"), or leave --client out to test --lock`)
	}
	if c.command == "" {
		if len(c.args) > 0 || c.name != "" {
			return errors.New("--client-arg and --client-name go with --client")
		}
		return nil
	}
	cfg.Client = append(strings.Fields(c.command), c.args...)
	cfg.CustomLockName = c.name
	return nil
}

// useIn puts the client in place of a scenario's lock: the scenario's
// system, faults and timings, with the user's lock, which is meant to be
// safe (as lockjepsentest.Options.Scenario does); --expect is not a
// scenario flag, so a user who wants another verdict runs test.
func (c *clientFlags) useIn(cfg *harness.Config) error {
	if c.command == "" {
		return c.apply(cfg)
	}
	argv := append(strings.Fields(c.command), c.args...)
	if ok, systems := harness.ClientRunsOn(argv, cfg.System); !ok {
		return fmt.Errorf("--client runs on --system %s (it says so in its handshake); this scenario runs on %s", strings.Join(systems, ", "), cfg.System)
	}
	cfg.Name, cfg.Expect = "", harness.ExpectSafe
	return c.apply(cfg)
}
