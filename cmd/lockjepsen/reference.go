package main

//go:generate sh -c "go run . reference > ../../docs/reference.md"

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/nemesis"
	"github.com/lockjepsen/lockjepsen/scenario"
)

// newReferenceCmd prints docs/reference.md: the lists of systems, locks,
// faults, scripts and scenarios, read from their descriptors (with the
// ones contrib registers), so that the docs cannot drift from the code
// (TestReferenceDocMatchesDescriptors; `go generate ./cmd/lockjepsen`
// rewrites the file).
func newReferenceCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "reference",
		Short: "Print the lists of systems, locks, faults, scripts and scenarios (docs/reference.md) from their descriptors",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return writeReference(stdout)
		},
	}
}

func writeReference(w io.Writer) error {
	var b strings.Builder
	b.WriteString("# Reference: systems, locks, faults, scripts and scenarios\n\n")
	b.WriteString("<!-- Generated from the descriptors by `go generate ./cmd/lockjepsen` (lockjepsen reference); do not edit. -->\n\n")
	b.WriteString("What each one does and why is explained in [running.md](running.md).\n")
	referenceSystems(&b)
	referenceLocks(&b)
	referenceFaults(&b)
	referenceScripts(&b)
	referenceScenarios(&b)
	_, err := io.WriteString(w, b.String())
	return err
}

func referenceSystems(b *strings.Builder) {
	b.WriteString("\n## Systems (`--system`)\n\n| system | what it is | default nodes | locks | faults |\n|---|---|---|---|---|\n")
	for _, s := range cluster.Systems {
		var faults []string
		for _, d := range nemesis.All() {
			if len(d.Systems) == 0 || slices.Contains(d.Systems, s) {
				faults = append(faults, "`"+d.Name+"`")
			}
		}
		fmt.Fprintf(b, "| `%s` | %s | %d | %s | %s |\n", s, cell(harness.SystemTitle(s)), cluster.DefaultNodes(s), codeList(locks.NamesFor(s)), strings.Join(faults, ", "))
	}
}

func referenceLocks(b *strings.Builder) {
	b.WriteString("\n## Locks (`--lock`)\n\n| lock | systems | fencing token | renews in the background | what it is |\n|---|---|---|---|---|\n")
	for _, d := range locks.All() {
		fmt.Fprintf(b, "| `%s` | %s | %s | %s | %s |\n", d.Name, codeList(d.Systems), yesNo(d.Fences), yesNo(d.BackgroundRenewal), cell(d.Description))
	}
}

func referenceFaults(b *strings.Builder) {
	b.WriteString("\n## Faults (`--nemesis`)\n\n| fault | kind | systems | what it does |\n|---|---|---|---|\n")
	for _, d := range nemesis.All() {
		systems := "all"
		if len(d.Systems) > 0 {
			systems = codeList(d.Systems)
		}
		fmt.Fprintf(b, "| `%s` | %s | %s | %s |\n", d.Name, d.Kind, systems, cell(d.Description))
	}
}

func referenceScripts(b *strings.Builder) {
	b.WriteString("\n## Fault scripts (`--script`)\n\n| script | what it does |\n|---|---|\n")
	for _, name := range nemesis.ScriptNames() {
		fmt.Fprintf(b, "| `%s` | %s |\n", name, cell(nemesis.Scripts[name].Description))
	}
}

func referenceScenarios(b *strings.Builder) {
	b.WriteString("\n## Scenarios (`lockjepsen scenario NAME`)\n\n| scenario | expects | system / lock / workload | faults | what it shows |\n|---|---|---|---|---|\n")
	for _, s := range scenario.All() {
		c := s.Config()
		fmt.Fprintf(b, "| `%s` | %s | %s / %s / %s | %s | %s |\n", s.Name, s.Expect, c.System, c.Lock, c.Workload, cell(faultsLabel(c, ", ")), cell(s.Shows))
	}
}

func codeList(names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "`" + n + "`"
	}
	return strings.Join(out, ", ")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// cell keeps a description inside its table cell.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}
