package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

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
	be                   backendFlags
	quiet                bool
	render               string
}

func newReviewCmd(stdout, stderr io.Writer) *cobra.Command {
	var rf reviewFlags
	cmd := &cobra.Command{
		Use:   "review",
		Short: "Answer a design review: which threats break this lock on this system, and what closes each",
		Long:  reviewLong(),
		Example: `  lockjepsen review --system single --lock token --budget 6m
  lockjepsen review --system sentinel --lock token --budget 15m
  lockjepsen review --client 'python3 examples/python/token_lock.py' --budget 6m
  lockjepsen review --lock token --threats client-pause,server-restart --seeds 1 --budget 2m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if rf.render != "" {
				if other := otherFlags(cmd, "render"); len(other) > 0 {
					return usageErr(stderr, fmt.Errorf("--render draws a stored review again and runs nothing: it takes no other flag (given: --%s)", strings.Join(other, ", --")))
				}
				return rerender(rf.render, stdout, stderr)
			}
			plan, err := rf.plan(cmd.Context(), stderr)
			if err != nil {
				return flagErr(stderr, err, cmd.Flags())
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
	f.StringVar(&rf.o.System, "system", cluster.Single, "system under review: "+harness.SystemHelp())
	f.StringVar(&rf.o.Lock, "lock", locks.Token, lockHelp())
	f.DurationVar(&rf.o.TTL, "ttl", 0, "the lock's TTL ("+harness.TTLHelp()+")")
	f.StringVar(&rf.o.Workload, "workload", "", "how clients use the lock (default counter: a protected resource, so that fencing can show)")
	f.StringVar(&rf.o.Persistence, "persistence", "", "Redis persistence as deployed: none, everysec or always (default none)")
	f.DurationVar(&rf.o.TimeLimit, "time-limit", 0, "fault phase of each run (default: each system's own, 3s on a single Redis)")
	f.IntVar(&rf.o.Seeds, "seeds", 0, "seeds per cell (default: as many, 2 to 5, as half the budget fits, leaving the other half to a loaded machine)")
	f.DurationVar(&rf.o.Budget, "budget", 10*time.Minute, "time for the whole review; a budget that cannot fit it is refused")
	f.StringVar(&rf.threats, "threats", "", "only these threats, a comma list: "+threatList())
	f.StringVar(&rf.mitigations, "mitigations", "", "only these mitigations, a comma list: "+mitigationList())
	f.StringVar(&rf.o.Store, "store", "store", "directory where runs are stored")
	f.StringVar(&rf.o.Out, "out", "", "directory for review.html and review.json (default STORE/review/TIMESTAMP)")
	f.BoolVarP(&rf.quiet, "quiet", "q", false, "print only the verdict paragraph and the page's path")
	f.StringVar(&rf.render, "render", "", "draw review.html again from a stored review's review.json in this directory, running nothing")
	rf.client.flags(f)
	rf.be.flags(f)
}

// plan checks the flags and plans the review.
func (rf *reviewFlags) plan(ctx context.Context, stderr io.Writer) (*review.Plan, error) {
	var cfg harness.Config
	if err := rf.client.apply(&cfg); err != nil {
		return nil, err
	}
	if rf.be.dryRun {
		return nil, errors.New("--dry-run is for the test command: a review runs many tests (lockjepsen test --backend ssh --dry-run shows the commands of one)")
	}
	// Nothing is printed: only a dry run prints to it.
	backend, err := rf.be.backend(ctx, io.Discard)
	if err != nil {
		return nil, err
	}
	rf.o.Backend, rf.o.BackendFlags = backend, rf.be.commandLine()
	rf.o.Client = cfg.Client
	if err := harness.CheckClientScript(cfg.Client); err != nil {
		return nil, err
	}
	rf.o.Threats, rf.o.Mitigations = nonEmpty(rf.threats), nonEmpty(rf.mitigations)
	if rf.o.Out == "" {
		rf.o.Out = filepath.Join(rf.o.Store, runfile.ReviewDir, time.Now().UTC().Format("20060102T150405Z"))
	} else if err := os.MkdirAll(rf.o.Out, 0o755); err != nil {
		// Found before the cells run, not after: a review of minutes was
		// lost to a --out that named a file.
		return nil, fmt.Errorf("--out %s: %w", rf.o.Out, err)
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
	printShrinkOffers(w, r)
	for _, row := range r.Rows {
		for _, c := range append([]review.Cell{row.Configured}, row.Tried...) {
			if c.State == review.StateError {
				fmt.Fprintf(w, "harness failure in %s %s: %s\n", c.Threat, c.Mitigation, c.Note)
				return exitError{code: exitHarness}
			}
		}
	}
	return nil
}

// reviewLong is review --help's text, with the threats listed from their
// descriptors: what each injects, the real bugs it is there to catch, and
// the dangerous moments that show a run exercised it.
func reviewLong() string {
	var b strings.Builder
	b.WriteString(`review runs every threat that applies to the system, each on several seeds,
then, for each threat it found unsafe, every mitigation that could close it
(fencing, appendfsync always, a delayed restart, WAIT, min-replicas-to-write,
a TTL below the failover time), on the same seeds, within --budget. For a
--client, the harness's other locks (Redlock, the etcd baseline) would replace
the client rather than mend it: they are listed under "what else could serve".

Every cell gives three answers, and the verdict leads with the first that
applies:
  the lock itself   something the lock did broke its promise: a release
                    deleted another client's key, a grant over-claimed its
                    validity, a release or extend reported success on a lease
                    it no longer held, or two holds overlapped with no
                    server-side cause;
  the deployment    a crash, restart, clock jump or failover took the key from
                    a lock that did nothing wrong (any lock there breaks the
                    same way); where the cause is unclear, the harness's own
                    correct lock runs on the same seed as a control;
  its use           the resource suffered while the lock kept its promise (a
                    holder acted after its lease): only fencing closes it.

A cell with no violation is "not found" only if its threat's dangerous moment
happened (a stale holder acted, a fault hit a node holding a live lease...);
otherwise it is "not exercised" and gives no evidence. "not found in N × T" is
evidence, not proof; "unsafe" is proof: the linked report has the witness.

The threats:
`)
	for _, t := range review.Threats {
		fmt.Fprintf(&b, "  %s: %s.\n", t.Name, t.Title)
		fmt.Fprintf(&b, "      catches: %s.\n", t.Catches)
		fmt.Fprintf(&b, "      exercised by: %s", strings.Join(t.Moments, ", "))
		if t.Renews {
			b.WriteString("; runs only where the lock can extend")
		}
		if t.Systems != nil {
			fmt.Fprintf(&b, "; on %s", strings.Join(t.Systems, ", "))
		}
		b.WriteString(".\n")
	}
	b.WriteString(`
It writes review.html (the verdict, what broke in the lock, what the
deployment loses, a threats × mitigations table whose cells link to each run's
report, the timings measured, and the command that reproduces each cell) and
review.json (docs/review.md describes its fields for CI gates: lock_verdict,
mechanisms, deployment, and each cell's lock_state, deployment_state,
use_state and exercised). A budget too small for the threats is refused
before anything runs, naming what it would skip.

Exit codes: 0 the review was written, 2 bad usage or a budget too small, 3 the
harness failed in some cell.`)
	return b.String()
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

// otherFlags are the flags given on the command line besides except.
func otherFlags(cmd *cobra.Command, except string) []string {
	var out []string
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if f.Name != except {
			out = append(out, f.Name)
		}
	})
	return out
}
