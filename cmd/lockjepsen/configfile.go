package main

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/lockjepsen/lockjepsen/internal/boundedread"
	"io"
	"regexp"
	"sort"
	"strings"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/lockjepsen/lockjepsen/harness"
)

// A configuration file (--config FILE, YAML or JSON: JSON is YAML) is a
// mapping from a command's flag names to values:
//
//	system: redlock
//	lock: redsync
//	nemesis: [kill, pause]     # a list, or "kill,pause"
//	ttl: 500ms
//	time-limit: 20s            # time_limit works too
//	expect: unsafe
//
// Every key must be a flag of the command; a value is parsed exactly as the
// flag's value would be. Flags given on the command line override the file.
// Errors name the file and line: "config.yaml:7: unknown field "tll" (did
// you mean "ttl"?)".

// applyConfigFile sets every flag of fs named in the file at path that was
// not given on the command line.
func applyConfigFile(path string, fs *pflag.FlagSet) error {
	b, err := boundedread.File(path, boundedread.MaxConfig)
	if err != nil {
		return fmt.Errorf("--config: %v", err)
	}
	doc, err := oneDocument(path, b)
	if err != nil {
		return err
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil // an empty file sets nothing
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("%s:%d: the configuration must be a mapping of flag names to values (e.g. \"ttl: 500ms\")", path, root.Line)
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		key := k.Value
		name := strings.ReplaceAll(strings.ToLower(strings.TrimSpace(key)), "_", "-")
		if prev, dup := seen[name]; dup {
			return fmt.Errorf("%s:%d: field %q given twice (first on line %d)", path, k.Line, key, prev)
		}
		seen[name] = k.Line
		f := fs.Lookup(name)
		if f == nil || name == "config" || name == "help" {
			msg := fmt.Sprintf("%s:%d: unknown field %q", path, k.Line, key)
			if s := suggest(name, fs); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			} else {
				msg += ": not a flag of this command (its --help lists them)"
			}
			return errors.New(msg)
		}
		if fs.Changed(name) {
			continue // the command line wins
		}
		val, err := scalarValue(v)
		if err != nil {
			return fmt.Errorf("%s:%d: %s: %v", path, v.Line, key, err)
		}
		// Through the flag set, so that the value counts as given, as the
		// same flag typed would: commands that act only on given flags
		// (replay:, --client "", a scenario's --time-limit) ignored the
		// file's.
		if err := fs.Set(name, val); err != nil {
			return fmt.Errorf("%s:%d: %s: invalid value %q: %v", path, v.Line, key, val, err)
		}
		setOrigin(fs, name, fmt.Sprintf("%s:%d", path, v.Line))
	}
	return nil
}

// oneDocument parses the file's one YAML document. A second one (after
// "---") is refused rather than ignored: its settings would silently not
// apply.
func oneDocument(path string, b []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var doc, next yaml.Node
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, errors.New(yamlError(path, b, err))
	}
	err := dec.Decode(&next)
	switch {
	case errors.Is(err, io.EOF):
		return &doc, nil
	case err != nil:
		return nil, errors.New(yamlError(path, b, err))
	}
	line := next.Line
	if len(next.Content) > 0 {
		line = next.Content[0].Line
	}
	return nil, fmt.Errorf("%s:%d: a second YAML document (after ---): a configuration file is one document; merge the two, or give each its own file", path, line)
}

// originKey is the flag annotation that says where a flag's value came
// from when the user did not type it: "config.yaml:3", or the flag that
// set it ("--duration").
const originKey = "lockjepsen-origin"

func setOrigin(fs *pflag.FlagSet, name, origin string) {
	_ = fs.SetAnnotation(name, originKey, []string{origin})
}

var flagInMessage = regexp.MustCompile(`--([a-z][a-z0-9-]*)`)

// explainOrigin says where a refused value came from: the first flag the
// refusal names whose value was set by a configuration file gets the
// file's line in front ("config.yaml:3: --ttl must be ..."), and one set
// by another flag is called by that flag's name ("--duration must be
// ..." rather than --time-limit, which the user never typed). Other
// errors are returned as they are.
func explainOrigin(err error, fs *pflag.FlagSet) error {
	if fs == nil || !harness.IsUsage(err) {
		return err
	}
	msg := err.Error()
	for _, m := range flagInMessage.FindAllStringSubmatch(msg, -1) {
		f := fs.Lookup(m[1])
		if f == nil || len(f.Annotations[originKey]) == 0 {
			continue
		}
		origin := f.Annotations[originKey][0]
		if strings.HasPrefix(origin, "--") {
			return &harness.UsageError{Err: fmt.Errorf("%s (which sets %s)", strings.Replace(msg, m[0], origin, 1), m[0])}
		}
		return &harness.UsageError{Err: fmt.Errorf("%s: %w", origin, err)}
	}
	return err
}

// scalarValue is a node as a flag value: a scalar as written, a list of
// scalars as a comma list.
func scalarValue(v *yaml.Node) (string, error) {
	switch v.Kind {
	case yaml.ScalarNode:
		return v.Value, nil
	case yaml.SequenceNode:
		var parts []string
		for _, item := range v.Content {
			if item.Kind != yaml.ScalarNode {
				return "", fmt.Errorf("a list may hold only plain values")
			}
			parts = append(parts, item.Value)
		}
		return strings.Join(parts, ","), nil
	case yaml.AliasNode:
		return scalarValue(v.Alias)
	default:
		return "", fmt.Errorf("want a value or a list of values, not a mapping")
	}
}

var yamlLine = regexp.MustCompile(`^yaml: (?:line (\d+): )?(.*)$`)

// yamlError rewrites "yaml: line 3: did not find expected key" as
// "config.yaml:3: did not find expected key".
func yamlError(path string, b []byte, err error) string {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		if m[1] != "" {
			return fmt.Sprintf("%s:%s: %s", path, m[1], m[2])
		}
		if n := tabIndented(b); n > 0 {
			// The parser names no line for a tab before the first key.
			return fmt.Sprintf("%s:%d: %s (a tab indents this line: YAML indents with spaces)", path, n, m[2])
		}
		return fmt.Sprintf("%s: %s", path, m[2])
	}
	return path + ": " + msg
}

// tabIndented is the number of the first line whose indentation holds a
// tab, 0 when none does.
func tabIndented(b []byte) int {
	for i, line := range strings.Split(string(b), "\n") {
		indent := line[:len(line)-len(strings.TrimLeft(line, " \t"))]
		if strings.Contains(indent, "\t") {
			return i + 1
		}
	}
	return 0
}

// suggest is the flag closest to name, if it is close enough to be a typo:
// at most one edit in three letters ("tll" for ttl, not "ttl" for all).
func suggest(name string, fs *pflag.FlagSet) string {
	best, bestD := "", min(3, max(2, len(name)/3+1))
	var names []string
	fs.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	sort.Strings(names)
	for _, n := range names {
		if n == "config" || n == "help" {
			continue
		}
		if d := editDistance(name, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
