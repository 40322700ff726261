package ssh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/proxy"
)

// DryRun prints, through the backend's dry runner, every command a run of
// the spec would execute on each host: the servers' start, each fault the
// backend applies (on the first Redis node, as an example of every node)
// with its heal, and the stop. It runs none and dials no host. The run
// itself is not started: with nothing running, its clients would reach
// nothing and its verdict would mean nothing.
func (b Backend) DryRun(ctx context.Context, spec cluster.Spec, w io.Writer) error {
	if !b.Runner.Dry() {
		return errors.New("ssh dry run: the runner is not a dry one (NewRunner with dry set)")
	}
	cl, err := b.Start(ctx, spec)
	if err != nil {
		return fmt.Errorf("ssh dry run: starting %s: %w", spec.System, err)
	}
	c := cl.(*Cluster)
	if len(c.nodes) == 0 {
		return errors.New("ssh dry run: the hosts file lists no redis node")
	}
	node := c.nodes[0].Name
	steps := []struct {
		what string
		do   func() error
	}{
		{"pause", func() error { return c.Pause(node) }},
		{"resume", func() error { return c.Resume(node) }},
		{"kill", func() error { return c.Kill(node, false) }},
		{"restart", func() error { return c.Restart(ctx, node) }},
		{"partition", func() error { return c.CutInternal(ctx, node, proxy.Fault{Mode: proxy.Partition}) }},
		{"heal", func() error { return c.HealInternal(ctx, node) }},
	}
	if c.nodes[0].env != "" {
		steps = append(steps, struct {
			what string
			do   func() error
		}{"clock jump", func() error { return c.SetClock(node, time.Second) }})
	}
	for _, s := range steps {
		fmt.Fprintf(w, "# fault: %s %s\n", s.what, node)
		if err := s.do(); err != nil {
			return fmt.Errorf("ssh dry run: %s %s: %w", s.what, node, err)
		}
	}
	fmt.Fprintln(w, "# stop")
	if err := cl.Close(ctx); err != nil {
		return fmt.Errorf("ssh dry run: stop: %w", err)
	}
	fmt.Fprintln(w, "# dry run: nothing was run on any host")
	return nil
}
