package main

import (
	"bytes"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/nemesis"
)

// docs/reference.md is what `lockjepsen reference` prints from the
// descriptors: a lock, fault, script or scenario added or changed without
// `go generate ./cmd/lockjepsen` fails here, and so does a hand edit.
func TestReferenceDocMatchesDescriptors(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"reference"}, &out, &errOut); code != 0 {
		t.Fatalf("lockjepsen reference: exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"| `token` |", "| `redsync` |", "| `client-pause` | client |", "| `sentinel-split-brain` |", "| `baseline` | safe |", "| `cluster` | Redis Cluster: primaries that share the hash slots, a replica each | 6 |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the reference lacks %q: a descriptor list is not read", want)
		}
	}
	doc, err := os.ReadFile("../../docs/reference.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(doc, out.Bytes()) {
		t.Fatalf("docs/reference.md differs from the descriptors; run go generate ./cmd/lockjepsen\n%s", firstDiff(string(doc), out.String()))
	}
}

// firstDiff quotes the first line where the doc and the descriptors part.
func firstDiff(doc, want string) string {
	d, w := strings.Split(doc, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(d) || i < len(w); i++ {
		var dl, wl string
		if i < len(d) {
			dl = d[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if dl != wl {
			return "line " + strconv.Itoa(i+1) + ":\n  docs:        " + dl + "\n  descriptors: " + wl
		}
	}
	return ""
}

// running.md explains the locks, faults and scripts in tables of its own
// (how each acquires and releases, how each fault is made); each table
// must name exactly what the descriptors list, so that one added in the
// code and not explained there, or explained and since removed, fails.
func TestRunningDocTablesNameTheDescriptors(t *testing.T) {
	doc, err := os.ReadFile("../../docs/running.md")
	if err != nil {
		t.Fatal(err)
	}
	if code := run([]string{"reference"}, io.Discard, io.Discard); code != 0 {
		t.Fatalf("lockjepsen reference: exit %d", code) // registers contrib's locks
	}
	for _, c := range []struct {
		section, header string
		want            []string
	}{
		{"### Locks", "| lock |", locks.Names()},
		{"### Faults", "| nemesis |", faultNames()},
		{"### Faults", "| script |", nemesis.ScriptNames()},
	} {
		got := firstColumn(string(doc), c.section, c.header)
		slices.Sort(got)
		want := slices.Sorted(slices.Values(c.want))
		if !slices.Equal(got, want) {
			t.Errorf("docs/running.md's %s table (%s) names %v; the descriptors list %v", c.section, c.header, got, want)
		}
	}
}

func faultNames() []string {
	var out []string
	for _, d := range nemesis.All() {
		out = append(out, d.Name)
	}
	return out
}

// firstColumn returns the first cell of each row of the table that starts
// with header, after the section heading: the name in backquotes, without
// the system a row adds in parentheses ("`wait` (sentinel)").
func firstColumn(doc, section, header string) []string {
	i := strings.Index(doc, "\n"+section+"\n")
	if i < 0 {
		return nil
	}
	j := strings.Index(doc[i:], "\n"+header)
	if j < 0 {
		return nil
	}
	var out []string
	for _, line := range strings.Split(doc[i+j+1:], "\n")[2:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cell := strings.TrimSpace(strings.Split(line, "|")[1])
		if a, b := strings.Index(cell, "`"), strings.LastIndex(cell, "`"); a >= 0 && b > a {
			cell = cell[a+1 : b]
			if k := strings.Index(cell, "`"); k >= 0 {
				cell = cell[:k]
			}
		}
		out = append(out, cell)
	}
	return out
}
