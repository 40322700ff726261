package review

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/harness"
)

// Lock verdicts (Review.LockVerdict), for CI gates that read review.json.
const (
	LockBroken       = "broken"        // the lock's own mechanism broke under some threat
	LockHeld         = "held"          // it held under every threat that was exercised
	LockNotExercised = "not-exercised" // no threat was exercised: no evidence either way
)

// Control is the harness's correct lock for the system, run on a cell's
// seed where the reviewed lock overlapped with no cause the witness could
// name but under server-side faults: what breaks the correct lock too is
// the deployment's loss.
type Control struct {
	Lock string `json:"lock"`
	Seed int64  `json:"seed"`
	// Broke: the correct lock overlapped too on that seed.
	Broke bool   `json:"broke"`
	Run   RunRef `json:"run"`
}

// ReviewMechanism is one of the lock's own broken promises, across the
// threats that showed it.
type ReviewMechanism struct {
	Kind    string   `json:"kind"`
	Cause   string   `json:"cause,omitempty"`
	Count   int      `json:"count"`
	Threats []string `json:"threats"`
	Says    string   `json:"says"`
	Example string   `json:"example,omitempty"`
}

// DeploymentLoss is a threat under which the deployment lost a key from
// under a lock that did nothing wrong.
type DeploymentLoss struct {
	Threat string `json:"threat"`
	Cause  string `json:"cause"`
	Count  int    `json:"count"`
	Says   string `json:"says"`
	// Control says how the harness's correct lock fared, where one ran.
	Control string `json:"control,omitempty"`
}

// answer decides the cell's three answers from its runs: unsafe where a
// run found it so, else not-found where the threat's dangerous moments
// happened, else not-exercised.
func (c *Cell) answer() {
	if len(c.Runs) == 0 || c.State == StateError {
		return
	}
	c.Exercised = map[string]int{}
	var lock, dep, use bool
	for _, r := range c.Runs {
		for k, v := range r.Exercised {
			c.Exercised[k] += v
		}
		if a := r.Answers; a != nil {
			lock = lock || a.Lock == checker.AnswerUnsafe
			dep = dep || a.Deployment == checker.AnswerUnsafe
			use = use || a.Use == checker.AnswerUnsafe
			c.Mechanisms = mergeMechanisms(c.Mechanisms, a.Mechanisms)
			c.Losses = mergeMechanisms(c.Losses, a.Losses)
			c.Damage = mergeMechanisms(c.Damage, a.Damage)
		}
	}
	c.hit = lock || dep || use
	c.LockState, c.DeploymentState, c.UseState = c.stateOf(lock), c.stateOf(dep), c.stateOf(use)
}

// stateOf is one answer's state. A cell is exercised when the threat's
// own dangerous moments happened, or when any of its answers broke: a key
// the deployment lost, or a stale write, is the threat hitting too.
func (c *Cell) stateOf(broke bool) string {
	switch {
	case broke:
		return StateUnsafe
	case !c.hit && c.exercised() == 0:
		return StateNotExercised
	}
	return StateNotFound
}

// exercised counts the threat's own dangerous moments over the seeds.
func (c *Cell) exercised() int {
	n := 0
	for _, m := range c.Moments {
		n += c.Exercised[m]
	}
	return n
}

func mergeMechanisms(into, from []checker.Mechanism) []checker.Mechanism {
	for _, m := range from {
		i := slices.IndexFunc(into, func(o checker.Mechanism) bool { return o.Kind == m.Kind && o.Cause == m.Cause })
		if i < 0 {
			into = append(into, m)
			continue
		}
		into[i].Count += m.Count
	}
	return into
}

// unclear reports whether the cell's lock finding rests only on overlaps
// no cause was found for, under a threat whose faults act on servers: the
// deployment may have lost the key in a way the witness does not show.
func (c *Cell) unclear(t Threat) bool {
	if c.LockState != StateUnsafe || !slices.Contains(t.Moments, checker.MomentNodeFaults) {
		return false
	}
	return !slices.ContainsFunc(c.Mechanisms, func(m checker.Mechanism) bool {
		return m.Kind != checker.MechOverlap || m.Cause != checker.CauseNoServerCause
	})
}

// runControl runs the harness's correct lock on the cell's first unsafe
// seed. If it overlaps too, the cell's unexplained overlaps are the
// deployment's: they move from the lock's mechanisms to the losses.
func (p *Plan) runControl(ctx context.Context, t Threat, c *Cell) {
	ref := harness.ReferenceLock(p.Options.System)
	seed := c.Runs[0].Seed
	for _, r := range c.Runs {
		if r.Answers != nil && r.Answers.Lock == checker.AnswerUnsafe {
			seed = r.Seed
			break
		}
	}
	cfg, err := p.controlConfig(t, ref, seed)
	if err != nil || ctx.Err() != nil {
		return
	}
	p.say("review: %s, control: the %s lock on seed %d...", t.Name, ref, seed)
	run := p.runOne(ctx, cfg, false)
	ctl := &Control{Lock: ref, Seed: seed, Run: run.RunRef,
		Broke: run.Answers != nil && (run.Answers.Lock == checker.AnswerUnsafe || run.Answers.Deployment == checker.AnswerUnsafe)}
	c.Control = ctl
	p.say("review: %s, control: %s", t.Name, run.summary())
	if !ctl.Broke {
		return
	}
	var kept []checker.Mechanism
	for _, m := range c.Mechanisms {
		if m.Kind == checker.MechOverlap && m.Cause == checker.CauseNoServerCause {
			c.Losses = append(c.Losses, checker.Mechanism{Kind: checker.MechKeyLost, Cause: t.Name, Count: m.Count, Example: m.Example,
				Says: fmt.Sprintf("%s broke the harness's correct %s lock too", short(t.Name), ref)})
			continue
		}
		kept = append(kept, m)
	}
	c.Mechanisms = kept
	c.LockState = c.stateOf(len(kept) > 0)
	c.DeploymentState = StateUnsafe
}

// controlConfig is the threat as deployed with the system's correct lock
// in place of the user's: no client, no Go Locker of the user's.
func (p *Plan) controlConfig(t Threat, lock string, seed int64) (harness.Config, error) {
	if lock == "" {
		return harness.Config{}, fmt.Errorf("no correct lock is known for %s", p.Options.System)
	}
	c := p.base(seed)
	c.Lock, c.Client = lock, nil
	t.Inject(&c)
	c.Name = fmt.Sprintf("review-%s-control-%s-%s", c.System, lock, t.Name)
	c.Command = p.command(c)
	return c, c.Validate()
}

// summarize fills in the review's answers for CI gates from the cells as
// deployed: the lock's verdict and mechanisms, the deployment's losses.
func (r *Review) summarize() {
	r.Mechanisms, r.Deployment = []ReviewMechanism{}, []DeploymentLoss{} // empty lists, never null, for CI gates
	r.UseUnsafe, r.NotExercised = nil, nil
	held := false
	for _, row := range r.Rows {
		c := row.Configured
		if c.State == StateSkipped && c.LockState != StateUnsafe {
			// Interrupted or out of budget: no evidence, and a gate that
			// refuses a non-empty not_exercised must see it.
			r.NotExercised = append(r.NotExercised, row.Threat)
			continue
		}
		switch c.LockState {
		case StateUnsafe:
			for _, m := range c.Mechanisms {
				r.addMechanism(m, row.Threat)
			}
		case StateNotFound:
			held = true
		case StateNotExercised:
			r.NotExercised = append(r.NotExercised, row.Threat)
		}
		if c.DeploymentState == StateUnsafe {
			for _, m := range c.Losses {
				r.Deployment = append(r.Deployment, DeploymentLoss{Threat: row.Threat, Cause: m.Cause, Count: m.Count, Says: m.Says, Control: c.controlSays()})
			}
		}
		if c.UseState == StateUnsafe {
			r.UseUnsafe = append(r.UseUnsafe, row.Threat)
		}
	}
	switch {
	case len(r.Mechanisms) > 0:
		r.LockVerdict = LockBroken
	case held:
		r.LockVerdict = LockHeld
	default:
		r.LockVerdict = LockNotExercised
	}
}

func (r *Review) addMechanism(m checker.Mechanism, threat string) {
	i := slices.IndexFunc(r.Mechanisms, func(o ReviewMechanism) bool { return o.Kind == m.Kind && o.Cause == m.Cause })
	if i < 0 {
		r.Mechanisms = append(r.Mechanisms, ReviewMechanism{Kind: m.Kind, Cause: m.Cause, Count: m.Count,
			Threats: []string{threat}, Says: m.Says, Example: m.Example})
		return
	}
	r.Mechanisms[i].Count += m.Count
	if !slices.Contains(r.Mechanisms[i].Threats, threat) {
		r.Mechanisms[i].Threats = append(r.Mechanisms[i].Threats, threat)
	}
}

func (c *Cell) controlSays() string {
	if c.Control == nil {
		return ""
	}
	if c.Control.Broke {
		return fmt.Sprintf("the harness's %s lock broke too on seed %d", c.Control.Lock, c.Control.Seed)
	}
	return fmt.Sprintf("the harness's %s lock did not break on seed %d", c.Control.Lock, c.Control.Seed)
}

// lockSentence opens the verdict: what broke in the lock itself, or that
// it held, and where.
func (r *Review) lockSentence() string {
	switch r.LockVerdict {
	case LockBroken:
		var parts []string
		for _, m := range r.Mechanisms {
			parts = append(parts, fmt.Sprintf("%s (%s, under %s)", m.Says, checker.Times(m.Count), andList(shorts(m.Threats))))
		}
		return "The lock itself broke: " + strings.Join(parts, "; ") + "."
	case LockHeld:
		var held []string
		for _, row := range r.Rows {
			if c := row.Configured; c.LockState == StateNotFound {
				held = append(held, fmt.Sprintf("%s (%s)", short(row.Threat), momentsSay(c)))
			}
		}
		return "The lock held under every threat tried: " + andList(held) + "."
	}
	return "No threat was exercised: the runs give no evidence about the lock."
}

// momentsSay is "a stale holder acted 14 times" for a cell's own moments
// that happened, or what else showed the threat hit.
func momentsSay(c Cell) string {
	var parts []string
	for _, m := range checker.ExercisedMoments() {
		if n := c.Exercised[m.Name]; slices.Contains(c.Moments, m.Name) && n > 0 {
			parts = append(parts, m.Description+" "+checker.Times(n))
		}
	}
	switch {
	case len(parts) > 0:
		return strings.Join(parts, ", ")
	case c.DeploymentState == StateUnsafe:
		return "the deployment lost the key"
	case c.UseState == StateUnsafe:
		return "a holder acted after its lease"
	}
	return "not exercised"
}

func shorts(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = short(n)
	}
	return out
}
