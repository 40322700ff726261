package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/review"
	"github.com/lockjepsen/lockjepsen/runfile"
)

// reviewFlags are the review command's flags.
type reviewFlags struct {
	o                    review.Options
	threats, mitigations string
	client               clientFlags
	quiet                bool
	render               string
}

func newReviewCmd(stdout, stderr io.Writer) *cobra.Command {
	var rf reviewFlags
	cmd := &cobra.Command{
		Use:   "review",
		Short: "Answer a design review: which threats break this lock on this system, and what closes each",
		Long: `review runs every threat that applies to the system (client pause and crash,
server crash and restart, a partition, clock jump and drift; on Sentinel,
failover and split brain; on Redlock, faults aimed at the holder's nodes), each
on several seeds, then, for each threat it found unsafe, every mitigation that
could close it (fencing, appendfsync always, a delayed restart, WAIT,
min-replicas-to-write, a TTL below the failover time, Redlock, the etcd
baseline), on the same seeds, within --budget.

It writes review.html (a verdict paragraph, a threats × mitigations table whose
cells link to each run's report, the timings measured, and the command that
reproduces each cell; printable) and review.json. A budget too small for the
threats is refused before anything runs, naming what it would skip.

"not found in N × T" is what it says: no violation in N seeds of T each. It is
evidence, not proof. "unsafe" is proof: the linked report has the witness.

Exit codes: 0 the review was written, 2 bad usage or a budget too small, 3 the
harness failed in some cell.`,
		Example: `  lockjepsen review --system single --lock token --budget 6m
  lockjepsen review --system sentinel --lock token --budget 15m
  lockjepsen review --client 'python3 examples/python/token_lock.py' --budget 6m
  lockjepsen review --lock token --threats client-pause,server-restart --seeds 1 --budget 2m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if rf.render != "" {
				return rerender(rf.render, stdout, stderr)
			}
			plan, err := rf.plan(stderr)
			if err != nil {
				return usageErr(stderr, err)
			}
			if !rf.quiet {
				fmt.Fprintf(stderr, "review: %d threats, %d seeds each, at most about %s (budget %s); files in %s\n",
					len(plan.Threats), plan.Seeds, plan.Estimate.Round(time.Second), rf.o.Budget, rf.o.Out)
			}
			res, err := plan.Run(cmd.Context())
			if err != nil {
				return failure(stderr, err)
			}
			return printReview(stdout, res, rf.o.Out)
		},
	}
	rf.flags(cmd)
	return cmd
}

func (rf *reviewFlags) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	def := harness.DefaultConfig()
	f.StringVar(&rf.o.System, "system", cluster.Single, "system under review: single, sentinel, redlock, etcd or cluster")
	f.StringVar(&rf.o.Lock, "lock", locks.Token, lockHelp())
	f.DurationVar(&rf.o.TTL, "ttl", 0, fmt.Sprintf("the lock's TTL (default %s; etcd 1s)", def.TTL))
	f.StringVar(&rf.o.Workload, "workload", "", "how clients use the lock (default counter: a protected resource, so that fencing can show)")
	f.StringVar(&rf.o.Persistence, "persistence", "", "Redis persistence as deployed: none, everysec or always (default none)")
	f.DurationVar(&rf.o.TimeLimit, "time-limit", 0, "fault phase of each run (default: each system's own, 3s on a single Redis)")
	f.IntVar(&rf.o.Seeds, "seeds", 0, "seeds per cell (default: as many, 2 to 5, as the budget fits)")
	f.DurationVar(&rf.o.Budget, "budget", 10*time.Minute, "time for the whole review; a budget that cannot fit it is refused")
	f.StringVar(&rf.threats, "threats", "", "only these threats, a comma list: "+threatList())
	f.StringVar(&rf.mitigations, "mitigations", "", "only these mitigations, a comma list: "+mitigationList())
	f.StringVar(&rf.o.Store, "store", "store", "directory where runs are stored")
	f.StringVar(&rf.o.Out, "out", "", "directory for review.html and review.json (default STORE/review/TIMESTAMP)")
	f.BoolVarP(&rf.quiet, "quiet", "q", false, "print only the verdict paragraph and the page's path")
	f.StringVar(&rf.render, "render", "", "draw review.html again from a stored review's review.json in this directory, running nothing")
	rf.client.flags(f)
}

// plan checks the flags and plans the review.
func (rf *reviewFlags) plan(stderr io.Writer) (*review.Plan, error) {
	var cfg harness.Config
	if err := rf.client.apply(&cfg); err != nil {
		return nil, err
	}
	rf.o.Client = cfg.Client
	rf.o.Threats, rf.o.Mitigations = nonEmpty(rf.threats), nonEmpty(rf.mitigations)
	if rf.o.Out == "" {
		rf.o.Out = filepath.Join(rf.o.Store, runfile.ReviewDir, time.Now().UTC().Format("20060102T150405Z"))
	}
	rf.o.Run = func(ctx context.Context, c harness.Config) (*harness.Outcome, error) {
		return runWithProgress(ctx, c, stderr, output{quiet: true}, "")
	}
	if !rf.quiet {
		rf.o.Say = func(format string, a ...any) { fmt.Fprintf(stderr, format+"\n", a...) }
	}
	plan, err := review.NewPlan(rf.o)
	var be *review.BudgetError
	if errors.As(err, &be) {
		return nil, be
	}
	return plan, err
}

func printReview(w io.Writer, r *review.Review, out string) error {
	fmt.Fprintln(w, r.Verdict)
	fmt.Fprintf(w, "Review: %s\n", filepath.Join(absDir(out), review.PageFile))
	for _, row := range r.Rows {
		for _, c := range append([]review.Cell{row.Configured}, row.Tried...) {
			if c.State == review.StateError {
				fmt.Fprintf(w, "harness failure in %s %s: %s\n", c.Threat, c.Mitigation, c.Note)
				return exitError{exitHarness}
			}
		}
	}
	return nil
}

func threatList() string {
	var names []string
	for _, t := range review.Threats {
		names = append(names, t.Name)
	}
	return strings.Join(names, ", ")
}

func mitigationList() string {
	var names []string
	for _, m := range review.Mitigations() {
		names = append(names, m.Name)
	}
	return strings.Join(names, ", ")
}

// nonEmpty is a comma list's items; none for "".
func nonEmpty(list string) []string {
	if strings.TrimSpace(list) == "" {
		return nil
	}
	return splitList(list)
}

// rerender draws a stored review's page again from its review.json.
func rerender(dir string, stdout, stderr io.Writer) error {
	r, err := review.Read(dir)
	if err != nil {
		return usageErr(stderr, fmt.Errorf("--render %s: not a review directory: %v", dir, err))
	}
	r.Compose()
	if err := r.Write(dir); err != nil {
		return failure(stderr, err)
	}
	return printReview(stdout, r, dir)
}
