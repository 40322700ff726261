package harness

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/locks/extclient"
	"github.com/lockjepsen/lockjepsen/nemesis"
	"github.com/lockjepsen/lockjepsen/runfile"
	"github.com/lockjepsen/lockjepsen/workloads"
)

// ClientsDir is the run directory's folder of external clients' stderr.
const ClientsDir = "clients"

// validateClient checks an external client before anything starts: that
// it does not also name a lock of Go, that its program exists, and that
// it runs on the system (it says which in its handshake).
func (c *Config) validateClient() error {
	if c.Locker != nil {
		return usage("--client and a Go Locker are two locks under test; give one")
	}
	if _, err := exec.LookPath(c.Client[0]); err != nil {
		return usage("--client %s: %v", strings.Join(c.Client, " "), err)
	}
	if ok, systems := ClientRunsOn(c.Client, c.System); !ok {
		return usage("--client %s runs on --system %s (it says so in its handshake), not on %s",
			strings.Join(c.Client, " "), strings.Join(systems, ", "), c.System)
	}
	return nil
}

// ClientRunsOn reports whether the external client runs on the system,
// and the systems it declares: it is started once to ask (docs/client-
// protocol.md, init_ok's systems). A client that does not start is
// assumed to run anywhere; its run then says why it failed.
func ClientRunsOn(argv []string, system string) (bool, []string) {
	if _, err := lookupSystem(system); err != nil {
		return false, nil
	}
	d, err := extclient.Describe(context.Background(), argv, 0)
	if err != nil {
		return true, nil
	}
	return extclient.RunsOn(d.Systems, system), extclient.Systems(d.Systems)
}

// clientName names an external client after its program: the script an
// interpreter runs ("redispy_lock" for "python3 redispy_lock.py"), else
// the program itself ("sleep" for "sleep 1000": an argument is not a
// name).
func clientName(argv []string) string {
	name := argv[0]
	for _, a := range argv[1:] {
		if !strings.HasPrefix(a, "-") && namesScript(a) {
			name = a
			break
		}
	}
	name = strings.TrimSuffix(filepath.Base(name), filepath.Ext(name))
	name = regexp.MustCompile(`[^A-Za-z0-9_.-]+`).ReplaceAllString(name, "-")
	if name == "" || name == "." || name == ".." || name == "custom" {
		return "client"
	}
	return name
}

// checkClientScript refuses, before a run starts, a client whose script
// is not there: a relative path is the client process's, from the
// working directory. Not part of Validate, which judges a configuration
// wherever it is read (a scenario list, a matrix's shards).
func (c *Config) checkClientScript() error {
	script := clientScript(c.Client)
	if script == "" {
		return nil
	}
	if _, err := os.Stat(script); err != nil {
		wd, _ := os.Getwd()
		return usage("--client %s: its script %s is not there (from %s): the examples' clients are paths from the repository's root, so run there or give the script's absolute path",
			strings.Join(c.Client, " "), script, wd)
	}
	return nil
}

// CheckClientScript is checkClientScript for a command that plans runs
// of a client before any starts (review): a missing script is bad input,
// refused before the first run, not a harness failure of each.
func CheckClientScript(client []string) error {
	return (&Config{Settings: runfile.Settings{Client: client}}).checkClientScript()
}

// scriptExts are the extensions of the scripts interpreters run.
var scriptExts = []string{".py", ".js", ".mjs", ".cjs", ".php", ".rb", ".pl", ".sh", ".ts"}

// clientScript is the script file a client's interpreter runs
// ("examples/python/redispy_lock.py" of "python3 examples/python/
// redispy_lock.py"), or "" when its arguments name none: a code argument
// ("node -e '...'") has spaces or no script extension.
func clientScript(argv []string) string {
	if len(argv) < 2 {
		return ""
	}
	for _, a := range argv[1:] {
		if !strings.HasPrefix(a, "-") && !strings.ContainsAny(a, " \t\n;'\"") && slices.Contains(scriptExts, filepath.Ext(a)) {
			return a
		}
	}
	return ""
}

// namesScript says whether a client's argument looks like the script its
// program runs: a path, a file name with an extension (not "1.5"), or a
// file that exists.
func namesScript(arg string) bool {
	if strings.ContainsRune(arg, filepath.Separator) {
		return true
	}
	if ext := strings.TrimPrefix(filepath.Ext(arg), "."); ext != "" && unicode.IsLetter(rune(ext[0])) {
		return true
	}
	st, err := os.Stat(arg)
	return err == nil && st.Mode().IsRegular()
}

// extOptions are the options of every external client of the run. A
// client that stops being trustworthy during the run (it exits, breaks
// the protocol or hangs) fails the run: its operations were recorded as
// unknown outcomes, the history stays checkable, and the run stops with a
// harness error that names the client and ends with its stderr.
func (r *runner) extOptions() extclient.Options {
	o := extclient.Options{Argv: r.cfg.Client, TTL: r.cfg.TTL, OpTimeout: r.cfg.OpTimeout,
		StderrDir: filepath.Join(r.dir, ClientsDir), Fatal: r.clientFailed}
	if r.clocks != nil {
		o.Clock = r.clocks.env
	}
	return o
}

// externalLockerFactory gives each client process a process of the
// external client, handed the system the way its ecosystem's clients take
// it (extclient.Topology): on Sentinel and Redis Cluster the client finds
// the primaries itself, as the Go clients of failoverLockerFactory and
// clusterLockerFactory do.
func (r *runner) externalLockerFactory(sys *system) workloads.LockerFactory {
	return func(process int) (locks.Locker, io.Closer, error) {
		c, err := extclient.LaunchContext(r.startCtx, r.extOptions(), r.topology(sys, process%r.cfg.Clients), process)
		if err != nil {
			return nil, nil, err
		}
		return c, c, nil
	}
}

// topology is the system as the worker's client dials it: through its own
// links when the run cuts links, so that network faults act on what the
// client dials, as they do on the Go clients (linkDialer). The servers of
// Sentinel and Redis Cluster report one another by the addresses the
// cluster uses (its internal links), which the address map turns into
// the client's.
func (r *runner) topology(sys *system, worker int) extclient.Topology {
	dial := func(n cluster.Node) string {
		if link := sys.mesh.Find(nemesis.ClientLinkName(worker), n.Name); link != nil {
			return link.Addr()
		}
		return n.Addr
	}
	t := extclient.Topology{System: r.cfg.System}
	for _, n := range sys.cl.Nodes() {
		t.Nodes = append(t.Nodes, extclient.Node{Name: n.Name, Addr: dial(n)})
	}
	if sys.sc != nil {
		t.MasterName = sys.sc.MasterName()
		for _, n := range sys.sc.Sentinels() {
			t.Sentinels = append(t.Sentinels, extclient.Node{Name: n.Name, Addr: dial(n)})
		}
	}
	if sys.sc != nil || sys.slots != nil {
		t.AddressMap = map[string]string{}
		for _, n := range sys.targets {
			for _, a := range []string{n.Addr, n.Announce} {
				if a != "" && a != dial(n) {
					t.AddressMap[a] = dial(n)
				}
			}
		}
	}
	return t
}

// clientFailed records a client's failure and stops the run.
func (r *runner) clientFailed(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clientErrs = append(r.clientErrs, fmt.Sprintf("the external client failed: %v", err))
	if r.stopRun != nil {
		r.stopRun()
	}
}

// TakesClients reports whether the harness can hand an external client
// the system: every system, since the client protocol carries each one's
// topology; whether a given client runs on it is ClientRunsOn.
func TakesClients(system string) bool {
	_, err := lookupSystem(system)
	return err == nil
}
