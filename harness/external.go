package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"

	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/locks/extclient"
)

// ClientsDir is the run directory's folder of external clients' stderr.
const ClientsDir = "clients"

// validateClient checks an external client before anything starts: that
// the system can hand it addresses, that it does not also name a lock of
// Go, and that its program exists.
func (c *Config) validateClient() error {
	switch {
	case c.Locker != nil:
		return usage("--client and a Go Locker are two locks under test; give one")
	case !c.system().externalClients:
		return usage("--client runs on --system single or redlock: a client of another language dials the nodes' addresses itself, and --system %s has none to give it yet", c.System)
	}
	if _, err := exec.LookPath(c.Client[0]); err != nil {
		return usage("--client %s: %v", strings.Join(c.Client, " "), err)
	}
	return nil
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

// externalClient starts the client process for one client process number.
// A client that stops being trustworthy during the run (it exits, breaks
// the protocol or hangs) fails the run: its operations were recorded as
// unknown outcomes, the history stays checkable, and the run stops with a
// harness error that names the client and ends with its stderr.
func (r *runner) externalClient(conns []locks.Conn, process int) (locks.Locker, error) {
	o := extclient.Options{Argv: r.cfg.Client, TTL: r.cfg.TTL, OpTimeout: r.cfg.OpTimeout,
		StderrDir: filepath.Join(r.dir, ClientsDir), Fatal: r.clientFailed}
	return extclient.Factory(o)(conns, process)
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

// TakesClients reports whether an external client can run on the system.
func TakesClients(system string) bool {
	d, err := lookupSystem(system)
	return err == nil && d.externalClients
}
