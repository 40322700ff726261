// Package review answers a design review's question about one lock on one
// system: which production threats break it, and which changes close each
// threat it breaks under. It runs every threat that applies (threats.go),
// then each mitigation listed for a threat it found unsafe
// (mitigations.go), on the same seeds, within a time budget, and writes
// review.html and review.json (page.go).
package review

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/locks/extclient"
	"github.com/lockjepsen/lockjepsen/nemesis"
	"github.com/lockjepsen/lockjepsen/scenario"
	"github.com/lockjepsen/lockjepsen/workloads"
)

// Options say what to review and how long it may take.
type Options struct {
	// System and Lock are what is reviewed; Client, when set, is an
	// external lock client that replaces Lock.
	System, Lock string
	Client       []string
	// TTL is the lock's TTL; 0 is the harness's default.
	TTL time.Duration
	// Workload is how clients use the lock; "" is counter, a protected
	// resource, so that a mitigation of the resource (fencing) can show.
	Workload string
	// Persistence is the servers' persistence as deployed; "" is none.
	Persistence string
	// TimeLimit is each run's fault phase; 0 is each system's own (3 s on
	// a single Redis).
	TimeLimit time.Duration
	// Seeds is the number of seeds each cell runs; 0 picks the most, up
	// to 5, that the budget fits, and at least 2.
	Seeds int
	// Budget bounds the whole review.
	Budget time.Duration
	// Threats and Mitigations narrow the review to these names; empty is
	// every one that applies.
	Threats, Mitigations []string
	// Backend is where every run's system runs; nil is the local
	// backend. A hosts file's deployment (the ssh backend) is reviewed
	// this way.
	Backend cluster.Backend
	// BackendFlags are the flags that choose Backend on a command line
	// (--backend ssh --hosts FILE), for each cell's reproducing command.
	BackendFlags []string
	// Store is where the runs go ("" is the harness's default, store);
	// Out where review.html and review.json go ("" is STORE/review/TIME).
	Store, Out string
	// Configure, when set, edits every run's configuration last: a Go
	// user's own Locker, say.
	Configure func(*harness.Config)
	// Run runs one configuration and draws its report; nil is harness.Run
	// and reports.WriteRun.
	Run func(ctx context.Context, cfg harness.Config) (*harness.Outcome, error)
	// Say, when set, is told of each run as it starts and ends.
	Say func(format string, a ...any)
}

// minSeeds and maxSeeds bound the seeds a budget buys per cell.
const (
	minSeeds = 2
	maxSeeds = 5
)

// Plan is what a review will run: its threats, the mitigations it may
// try, and the seeds per cell.
type Plan struct {
	Options Options
	Threats []Threat
	// Tries are the mitigations each threat may try, by threat name;
	// NotTried says why the others it lists cannot be tried here.
	Tries    map[string][]Mitigation
	NotTried map[string]string
	// ElseCouldServe are the other locks a threat lists for a client under
	// review: they would replace it, so they are named, not run.
	ElseCouldServe []string
	Seeds          int
	// Estimate is the time the whole plan takes if every threat is found
	// unsafe and every mitigation runs.
	Estimate time.Duration
}

// BudgetError refuses a budget too small for the review's threats.
type BudgetError struct {
	Budget, Needs time.Duration
	Seeds         int
	// WouldSkip are the cells that would not fit, in the order they run.
	WouldSkip []string
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("a budget of %s cannot fit this review with %d seeds per cell (about %s): it would skip %s; give --budget %s, or fewer --threats or --mitigations",
		e.Budget, e.Seeds, e.Needs.Round(time.Second), strings.Join(e.WouldSkip, ", "), suggest(e.Needs))
}

// suggest rounds a duration up to a whole minute, for a budget to ask for.
func suggest(d time.Duration) time.Duration {
	return (d + time.Minute - 1).Truncate(time.Minute)
}

// NewPlan checks the options and plans the review. A budget that cannot
// fit every threat and mitigation with the seeds asked (or the minimum of
// 2) is a *BudgetError.
func NewPlan(o Options) (*Plan, error) {
	if o.Budget <= 0 {
		return nil, errors.New("the budget must be positive")
	}
	if o.Seeds < 0 {
		return nil, errors.New("seeds must be positive")
	}
	threats, err := chooseThreats(o)
	if err != nil {
		return nil, err
	}
	tries, err := chooseMitigations(o, threats)
	if err != nil {
		return nil, err
	}
	p := &Plan{Options: o, Threats: threats, Tries: tries}
	if _, err := p.threatConfig(threats[0], 1); err != nil {
		return nil, err
	}
	p.dropNotApplicable()
	p.dropRenewals()
	p.dropClientProcessThreats()
	if len(p.Threats) == 0 {
		return nil, fmt.Errorf("no threat left to run: %s", strings.Join(slices.Sorted(maps.Values(p.NotTried)), "; "))
	}
	perSeed, cells, seeds := p.sized()
	if perSeed*time.Duration(seeds) > o.Budget && len(o.Mitigations) == 0 && p.dropSwaps() {
		perSeed, cells, seeds = p.sized()
	}
	p.Seeds, p.Estimate = seeds, perSeed*time.Duration(seeds)
	if p.Estimate > o.Budget {
		return nil, &BudgetError{Budget: o.Budget, Needs: p.Estimate, Seeds: seeds, WouldSkip: skipped(cells, seeds, o.Budget)}
	}
	return p, nil
}

// sized is one seed's cost, the cells, and the seeds per cell: those
// asked for, or as many as fill half the budget (the estimate is an idle
// machine's, and a loaded one, CI or a laptop on battery, stretches every
// run up to twice, which must not cut the review short).
func (p *Plan) sized() (time.Duration, []plannedCell, int) {
	perSeed, cells := p.estimate()
	seeds := p.Options.Seeds
	if seeds == 0 {
		seeds = max(minSeeds, min(maxSeeds, int(p.Options.Budget/2/max(perSeed, time.Second))))
	}
	return perSeed, cells, seeds
}

// dropSwaps moves the mitigations that replace the lock under review
// (Redlock, etcd) to what else could serve, when the review would not fit
// its budget with them: they answer another question (which other lock
// would do) than the review's (what breaks this one, and what mends it).
// It reports whether it dropped any.
func (p *Plan) dropSwaps() bool {
	dropped := false
	for name, ms := range p.Tries {
		p.Tries[name] = slices.DeleteFunc(ms, func(m Mitigation) bool {
			if !m.SwapsLock {
				return false
			}
			dropped = true
			if !slices.Contains(p.ElseCouldServe, m.Title) {
				p.ElseCouldServe = append(p.ElseCouldServe, m.Title)
			}
			p.NotTried[m.Name+" against "+short(name)] = "it replaces the lock under review, and did not fit the budget with the rest; a larger --budget, or --mitigations " + m.Name + ", runs it"
			return true
		})
	}
	slices.Sort(p.ElseCouldServe)
	return dropped
}

// dropNotApplicable keeps out of the plan the mitigations that cannot be
// tried on this system (Redlock instead of a Sentinel system, fencing a
// client), and records why, so that the page says so once instead of in a
// column of "n/a". A mitigation sized by a measurement is judged with a
// failover of FailoverTTL; if none is measured, its cell says so.
func (p *Plan) dropNotApplicable() {
	p.NotTried = map[string]string{}
	for _, t := range p.Threats {
		var keep []Mitigation
		for _, m := range p.Tries[t.Name] {
			if m.alreadyOn(p.Options.System) {
				p.NotTried[m.Name+" against "+short(t.Name)] = fmt.Sprintf("the lock under review runs on %s already", m.SwapsTo)
				continue
			}
			if m.SwapsLock && len(p.Options.Client) > 0 {
				if !slices.Contains(p.ElseCouldServe, m.Title) {
					p.ElseCouldServe = append(p.ElseCouldServe, m.Title)
				}
				continue
			}
			var na *NotApplicable
			if _, _, err := p.mitigationConfig(t, m, 1, Measured{Failover: FailoverTTL}); errors.As(err, &na) {
				p.NotTried[m.Name+" against "+short(t.Name)] = na.Why
				continue
			}
			keep = append(keep, m)
		}
		p.Tries[t.Name] = keep
	}
}

// dropRenewals keeps the renewal threats out of the plan for a client
// that does not declare extend: the review would call an extend the
// client cannot make. A client the probe cannot start is assumed able
// (its runs will say why it failed).
func (p *Plan) dropRenewals() {
	if len(p.Options.Client) == 0 {
		return // every Go lock implements Extend
	}
	ttl := p.Options.TTL
	if ttl <= 0 {
		ttl = harness.DefaultTTL(p.Options.System)
	}
	caps, _, err := extclient.Probe(context.Background(), p.Options.Client, ttl)
	if err != nil || slices.Contains(caps, extclient.CapExtend) {
		return
	}
	p.Threats = slices.DeleteFunc(p.Threats, func(t Threat) bool {
		if t.Renews {
			p.NotTried[short(t.Name)] = "the client does not declare the extend capability, so the review cannot renew its lock"
		}
		return t.Renews
	})
}

// dropClientProcessThreats keeps out of the plan for a Go lock, which
// runs in the harness's own process, the threats that need a client in a
// process of its own, saying what stands in for each: those that kill a
// client inside a lock call (it cannot be killed alone; client crash
// stands in), and those whose faults move a protocol client's clock (the
// faults' descriptors say which; Go reads its clock through the vDSO, and
// clock-offset stands in). No control run (a Go lock) is made for them
// either: their moments are not a server fault's (Cell.unclear).
func (p *Plan) dropClientProcessThreats() {
	if len(p.Options.Client) > 0 {
		return
	}
	p.Threats = slices.DeleteFunc(p.Threats, func(t Threat) bool {
		if t.KillsClients {
			p.NotTried[short(t.Name)] = "a Go lock runs inside the harness's process, which cannot be killed alone in a lock call; it needs a lock client in its own process (--client), and client crash stands in for it"
			return true
		}
		c := p.base(1)
		t.Inject(&c)
		drop := nemesis.MovesClientClocks(c.Nemesis)
		if drop {
			p.NotTried[short(t.Name)] = "a Go lock runs in the harness's own process, whose clock no fault can move (Go reads it through the vDSO); the clock-offset threat, the servers' clocks off the clients', stands in for it"
		}
		return drop
	})
}

// plannedCell is a cell and the time one seed of it takes.
type plannedCell struct {
	name string
	cost time.Duration
}

// estimate is the time one seed of every cell takes, and the cells.
func (p *Plan) estimate() (time.Duration, []plannedCell) {
	var total time.Duration
	var cells []plannedCell
	add := func(name string, cfg harness.Config) {
		cost := scenario.Estimate(cfg)
		total += cost
		cells = append(cells, plannedCell{name, cost})
	}
	for _, t := range p.Threats {
		if cfg, err := p.threatConfig(t, 1); err == nil {
			add(t.Name, cfg)
		}
	}
	for _, t := range p.Threats {
		for _, m := range p.Tries[t.Name] {
			// A failover's TTL is measured by then: plan with the threat's.
			if cfg, _, err := p.mitigationConfig(t, m, 1, Measured{Failover: FailoverTTL}); err == nil {
				add(t.Name+" + "+m.Name, cfg)
			}
		}
	}
	return total, cells
}

// skipped names the cells past the budget when each runs seeds times.
func skipped(cells []plannedCell, seeds int, budget time.Duration) []string {
	var used time.Duration
	var out []string
	for _, c := range cells {
		used += c.cost * time.Duration(seeds)
		if used > budget {
			out = append(out, c.name)
		}
	}
	return out
}

func chooseThreats(o Options) ([]Threat, error) {
	var out []Threat
	for _, t := range Threats {
		if t.AppliesTo(o.System) && (len(o.Threats) == 0 || slices.Contains(o.Threats, t.Name)) {
			out = append(out, t)
		}
	}
	for _, name := range o.Threats {
		t, ok := LookupThreat(name)
		switch {
		case !ok:
			return nil, fmt.Errorf("unknown threat %q; the threats are %s", name, threatNames())
		case !t.AppliesTo(o.System):
			return nil, fmt.Errorf("threat %s does not apply to %s", name, o.System)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no threat applies to %s", o.System)
	}
	return out, nil
}

func chooseMitigations(o Options, threats []Threat) (map[string][]Mitigation, error) {
	for _, name := range o.Mitigations {
		if _, ok := LookupMitigation(name); !ok {
			return nil, fmt.Errorf("unknown mitigation %q; the mitigations are %s", name, mitigationNames())
		}
	}
	tries := map[string][]Mitigation{}
	for _, t := range threats {
		for _, name := range t.Mitigations {
			m, ok := LookupMitigation(name)
			if ok && (len(o.Mitigations) == 0 || slices.Contains(o.Mitigations, name)) {
				tries[t.Name] = append(tries[t.Name], m)
			}
		}
	}
	return tries, nil
}

func threatNames() string {
	var names []string
	for _, t := range Threats {
		names = append(names, t.Name)
	}
	return strings.Join(names, ", ")
}

func mitigationNames() string {
	var names []string
	for _, m := range Mitigations() {
		names = append(names, m.Name)
	}
	return strings.Join(names, ", ")
}

// base is the reviewed system as the scenarios run it, with the user's
// lock, TTL, workload and persistence.
func (p *Plan) base(seed int64) harness.Config {
	o := p.Options
	c := scenario.Base()
	if preset, err := scenario.PresetFor(o.System); err == nil {
		preset.On(o.Lock)(&c)
	}
	c.System, c.Lock, c.Client, c.Seed = o.System, o.Lock, o.Client, seed
	if o.Backend != nil {
		c.Backend = o.Backend
	}
	if o.Store != "" {
		c.Store = o.Store
	}
	c.Workload = workloads.Counter
	if o.Workload != "" {
		c.Workload = o.Workload
	}
	if o.TTL > 0 {
		c.TTL = o.TTL
	}
	if o.Persistence != "" {
		c.Persistence = o.Persistence
	}
	if o.TimeLimit > 0 {
		c.TimeLimit = o.TimeLimit
	}
	// An unsafe cell is decided at its first overlap; the grace records
	// what the holders do next (a fenced resource refusing a late write).
	c.StopOnFirstViolation, c.StopGrace = true, time.Second
	// A review's answer says what happened to the key, so it keeps each
	// node's record (docs/server-record.md: what it costs a run).
	c.ServerRecord = true
	return c
}

// threatConfig is one seed of a threat as deployed.
func (p *Plan) threatConfig(t Threat, seed int64) (harness.Config, error) {
	c := p.base(seed)
	t.Inject(&c)
	if t.runsItsTime(c.System) {
		c.StopOnFirstViolation, c.StopGrace = false, 0
	}
	return p.finish(c, t.Name)
}

// mitigationConfig is one seed of a threat with a mitigation applied.
func (p *Plan) mitigationConfig(t Threat, m Mitigation, seed int64, measured Measured) (harness.Config, string, error) {
	c := p.base(seed)
	t.Inject(&c)
	note, err := m.Apply(&c, t, measured)
	if err != nil {
		return c, "", err
	}
	if m.OnResource {
		// Judged by the resource: the lock may overlap long before a
		// stale write reaches the resource, so the run goes its full time.
		c.StopOnFirstViolation, c.StopGrace = false, 0
	}
	if c, err = p.finish(c, t.Name+"-"+m.Name); err != nil {
		var na *NotApplicable
		if !errors.As(err, &na) {
			err = notApplicable("%v", err)
		}
		return c, "", err
	}
	return c, note, nil
}

// command is the command line that reproduces a cell's run, on the
// review's backend.
func (p *Plan) command(c harness.Config) []string {
	return append(append([]string{"lockjepsen", "test"}, c.Settings.Flags(harness.DefaultConfig().Settings)...), p.Options.BackendFlags...)
}

// finish names the run, applies the user's last edits, and validates.
func (p *Plan) finish(c harness.Config, cell string) (harness.Config, error) {
	lock := c.Lock
	if len(c.Client) > 0 {
		lock = "client"
	}
	c.Name = fmt.Sprintf("review-%s-%s-%s", c.System, lock, cell)
	if p.Options.Configure != nil {
		p.Options.Configure(&c)
	}
	c.Command = p.command(c)
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("%s: %w", cell, err)
	}
	if _, err := locks.Lookup(c.Lock); err != nil && len(c.Client) == 0 && p.Options.Configure == nil {
		return c, notApplicable("%v", err)
	}
	return c, nil
}
