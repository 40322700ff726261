package checker

import (
	"fmt"
	"slices"
)

// A fencing token promises to grow with every grant of a key. One that
// does not (Failover.FenceRegressions) is the lock's broken promise unless
// something could have reset the counter under a correct lock: a fault
// that loses keys (a restart without fsync, a clock fault, a manual
// failover) or cuts a node off, active between the two grants on either
// grant's nodes (or anywhere, when the grants name none), or a change of
// primary between them (an INCR that had not replicated). Then it is the
// deployment's.

// MechFenceRegression is a fence that did not grow: the lock's when
// nothing could reset the counter, else the deployment's (cause
// CauseCounterReset).
const (
	MechFenceRegression = "fence-regression"
	CauseCounterReset   = "counter-reset"
)

// FenceAnswer splits the fence regressions by whose they are.
type FenceAnswer struct {
	Lock              int    `json:"lock"`
	Deployment        int    `json:"deployment"`
	LockExample       string `json:"lock_example,omitempty"`
	DeploymentExample string `json:"deployment_example,omitempty"`
}

// fenceState follows each key's highest fence so far.
type fenceState struct {
	opts Options
	best map[string]*Hold
	a    FenceAnswer
}

func newFenceState(opts Options) *fenceState {
	return &fenceState{opts: opts, best: map[string]*Hold{}}
}

// grant judges a grant's fence against the key's highest so far; faults
// are the key-losing faults seen, primaries the primary spans.
func (fs *fenceState) grant(h *Hold, faults []*Fault, primaries []Primary) {
	if h.Fence == nil {
		return
	}
	best := fs.best[h.Key]
	if best == nil || *h.Fence > *best.Fence {
		fs.best[h.Key] = h
		return
	}
	story := fmt.Sprintf("process %d was granted %s with fence %d at %s%s, not above fence %d granted to process %d at %s%s",
		h.Process, h.Key, *h.Fence, fmtT(h.Start), by(h), *best.Fence, best.Process, fmtT(best.Start), by(best))
	if why := fs.reset(best, h, faults, primaries); why != "" {
		if fs.a.Deployment++; fs.a.DeploymentExample == "" {
			fs.a.DeploymentExample = story + ": " + why
		}
		return
	}
	if fs.a.Lock++; fs.a.LockExample == "" {
		fs.a.LockExample = story + ", with no fault or failover between them that could reset the counter: the fencing token did not grow"
	}
}

// reset says what could have reset the counter between a's grant and b's.
func (fs *fenceState) reset(a, b *Hold, faults []*Fault, primaries []Primary) string {
	nodes := append(slices.Clone(a.Nodes), b.Nodes...)
	for _, f := range faults {
		resets := slices.Contains(fs.opts.KeyLossFaults, f.Name) || slices.Contains(fs.opts.CutOffFaults, f.Name)
		if resets && f.Start <= b.Start && f.End >= a.Invoke && (len(f.Targets) == 0 || len(nodes) == 0 || intersects(f.Targets, nodes)) {
			return fmt.Sprintf("a %s on %v between the grants may have reset the counter", f.Name, f.Targets)
		}
	}
	for i := 1; i < len(primaries); i++ {
		if p := primaries[i]; p.Start > a.Invoke && p.Start <= b.Start && p.Node != primaries[i-1].Node {
			return fmt.Sprintf("a failover to %s at %s, between the grants, may have lost the counter's last increments", p.Node, fmtT(p.Start))
		}
	}
	return ""
}

// fencesAnswer splits the fences that did not grow between the lock's
// mechanisms and the deployment's losses.
func fencesAnswer(r *Results, a *Answers) {
	lockF, lossF := fenceMechanisms(r.Fences)
	a.Mechanisms, a.Losses = append(a.Mechanisms, lockF...), append(a.Losses, lossF...)
}

// fenceMechanisms are the regressions as the lock's mechanism and the
// deployment's loss.
func fenceMechanisms(f *FenceAnswer) (lock, loss []Mechanism) {
	if f == nil || f.Lock+f.Deployment == 0 {
		return nil, nil
	}
	if f.Lock > 0 {
		lock = append(lock, Mechanism{Kind: MechFenceRegression, Count: f.Lock, Example: f.LockExample,
			Says: "a fencing token did not grow with no fault or failover to reset the counter"})
	}
	if f.Deployment > 0 {
		loss = append(loss, Mechanism{Kind: MechFenceRegression, Cause: CauseCounterReset, Count: f.Deployment, Example: f.DeploymentExample,
			Says: "a fault or failover reset the fencing counter"})
	}
	return lock, loss
}

// result is the answer, nil when no grant carried a fence.
func (fs *fenceState) result() *FenceAnswer {
	if len(fs.best) == 0 {
		return nil
	}
	a := fs.a
	return &a
}
