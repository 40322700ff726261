package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
)

// newSoakCmd is test for long runs: the same flags, with the fault phase
// given as --duration and a checkpoint every minute. What keeps a long
// run's cost flat is the harness's (a compressed history, checkers that
// stream); this command only picks the defaults a soak wants.
func newSoakCmd(args []string, stdout, stderr io.Writer) *cobra.Command {
	cmd := newTestCmd(args, stdout, stderr)
	cmd.Use = "soak"
	cmd.Short = "A long test: --duration of faults, progress with the violations so far, checkpoint.json every minute"
	cmd.Long = `soak is test for runs of minutes to hours, where rare interleavings show.
It takes every flag of test; --duration is the fault phase (--time-limit)
and --checkpoint-every defaults to 1m. Progress prints the operations, the
faults in force and the violations found so far. checkpoint.json in the run
directory says what the run had found by its last checkpoint, and the
history is flushed every 200 ms, so a soak killed before its end still
leaves a history that 'lockjepsen check RUN_DIR' judges. Where most
attempts fail (many clients on few keys), --record-failed-acquires=summary
records failed acquires as per-second counts and keeps the history small.`
	cmd.Example = `  lockjepsen soak --duration 1h --lock token --nemesis client-pause
  lockjepsen soak --duration 8h --system redlock --lock redsync --nemesis partition,kill --expect safe
  lockjepsen soak --duration 1h --lock token --nemesis client-pause --record-failed-acquires summary`
	f := cmd.Flags()
	duration := f.Duration("duration", time.Hour, "how long the faults run (sets --time-limit)")
	if cp := f.Lookup("checkpoint-every"); cp != nil {
		_ = cp.Value.Set("1m") // the default, not a flag the user gave
		cp.DefValue = "1m0s"
	}
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, a []string) error {
		if f.Changed("time-limit") && f.Changed("duration") {
			return usageErr(stderr, fmt.Errorf("--duration %s and --time-limit %s: give one (--duration sets the time limit)", duration, f.Lookup("time-limit").Value))
		}
		if !f.Changed("time-limit") {
			if err := f.Set("time-limit", duration.String()); err != nil {
				return usageErr(stderr, err)
			}
			setOrigin(f, "time-limit", "--duration") // a refusal names the flag given
		}
		return run(c, a)
	}
	return cmd
}
