package main

import (
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/lockjepsen/lockjepsen/internal/atomicfile"
)

// JUnit XML as CI systems read it (GitHub Actions test reporters, GitLab,
// Jenkins): one suite, one test case per run.
type junitSuites struct {
	XMLName xml.Name `xml:"testsuites"`
	junitCounts
	Suites []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	junitCounts
	Timestamp string      `xml:"timestamp,attr"`
	Cases     []junitCase `xml:"testcase"`
}

// junitCounts are the attributes a suite and the document both carry.
type junitCounts struct {
	Name     string `xml:"name,attr"`
	Tests    int    `xml:"tests,attr"`
	Failures int    `xml:"failures,attr"`
	Errors   int    `xml:"errors,attr"`
	Skipped  int    `xml:"skipped,attr"`
	Time     string `xml:"time,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
	Skipped   *junitProblem `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
	// Properties carry "vacuous" on a safe run whose faults never
	// produced their dangerous moment: a CI gate may refuse it.
	Properties *junitProperties `xml:"properties,omitempty"`
}

type junitProperties struct {
	Property []junitProperty `xml:"property"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

func writeJUnit(path string, res *matrixResults) error {
	suite := junitSuite{junitCounts: junitCounts{Name: res.Title}, Timestamp: res.Started.UTC().Format("2006-01-02T15:04:05")}
	var total float64
	for _, r := range res.Runs {
		c := junitCase{Name: r.Scenario, Classname: "lockjepsen." + r.System, Time: fmt.Sprintf("%.3f", r.Duration)}
		total += r.Duration
		story := runStory(r)
		switch {
		case r.Verdict == stateSkipped:
			c.Skipped = &junitProblem{Message: r.Why}
			suite.Skipped++
		case r.Verdict == stateError || r.Error != "":
			c.Error = &junitProblem{Message: "harness failure: " + r.Error, Type: "harness", Text: story}
			suite.Errors++
		case !r.Met:
			msg := fmt.Sprintf("verdict %s, expected %s: %s", r.Verdict, r.Expected, r.Summary)
			if r.Why != "" {
				msg = fmt.Sprintf("verdict %s, expected %s: %s", r.Verdict, r.Expected, r.Why)
			}
			c.Failure = &junitProblem{Message: msg, Type: "unexpected verdict", Text: story}
			suite.Failures++
		default:
			c.SystemOut = story
		}
		if r.Vacuous != "" {
			c.Properties = &junitProperties{Property: []junitProperty{{Name: "vacuous", Value: r.Vacuous}}}
		}
		suite.Tests++
		suite.Cases = append(suite.Cases, c)
	}
	suite.Time = fmt.Sprintf("%.3f", total)
	doc := junitSuites{junitCounts: suite.junitCounts, Suites: []junitSuite{suite}}
	doc.Name = "lockjepsen"
	b, err := xml.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	return atomicfile.WriteBytes(path, append([]byte(xml.Header), append(b, '\n')...))
}

// runStory is what a person reads in CI about one run: the configuration,
// the checkers' summary, the first violation's story and where the files are.
func runStory(r matrixRun) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%s/%s, faults %s; expected %s, got %s\n", r.System, r.Lock, r.Workload, r.Faults, r.Expected, r.Verdict)
	for _, l := range r.details {
		b.WriteString(l + "\n")
	}
	if r.Story != "" {
		b.WriteString("First violation: " + r.Story + "\n")
	}
	if r.Why != "" {
		b.WriteString(r.Why + "\n")
	}
	if r.Error != "" {
		b.WriteString("Harness error: " + r.Error + "\n")
	}
	if r.Dir != "" {
		b.WriteString("Files: " + r.Dir + "\n")
	}
	return b.String()
}
