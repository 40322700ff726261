package ssh

import (
	"fmt"
	"net"
	"path"
	"strconv"
	"strings"
)

// Files in a process's directory on its host.
const (
	confFile  = "server.conf"
	pidFile   = "server.pid"
	logFile   = "server.log"
	clockFile = "faketime"
	// MarkerFile lists the commands that undo a process's faults and
	// stop it; a run that was killed leaves it for the next to execute.
	MarkerFile = "lockjepsen-undo.sh"
	// Chain is lockjepsen's own iptables chain: every rule lockjepsen
	// adds is in it, and a heal flushes only it.
	Chain = "LOCKJEPSEN"
)

// proc is one process of a running cluster and the faults it has in
// effect, which its marker file lists as the commands that undo them.
type proc struct {
	Process
	// role is the cluster role (primary, replica, sentinel).
	role    string
	started bool
	paused  bool
	killed  bool
	// rules are the iptables rules (arguments after the chain) in effect.
	rules []string
	netem bool
	// env is the environment the server starts with (libfaketime), "".
	env string
}

func (p *proc) file(name string) string { return path.Join(p.Dir, name) }

// pid is a shell snippet that sets $p to the server's pid, and fails
// unless that process is still the server on this port: the pid file may
// be stale and the pid reused by another program.
func (p *proc) pid() string {
	return fmt.Sprintf(`p=$(cat %s 2>/dev/null) && [ -n "$p" ] && grep -qa ':%d' /proc/$p/cmdline 2>/dev/null`, p.file(pidFile), p.Port)
}

func (p *proc) signal(sig string) string {
	return fmt.Sprintf("%s && kill -%s $p", p.pid(), sig)
}

// startCmd starts the server, daemonized, from its configuration file.
func (p *proc) startCmd() string {
	env := ""
	if p.env != "" {
		env = p.env + " "
	}
	return fmt.Sprintf("cd %s && %s%s %s", p.Dir, env, p.Binary, p.file(confFile))
}

// stopCmd ends the server: SIGTERM (and SIGCONT, should it be paused),
// then SIGKILL if it is still there after 10 s. No error if none runs.
func (p *proc) stopCmd() string {
	return fmt.Sprintf(`if %s; then kill -TERM $p; kill -CONT $p; i=0; while [ $i -lt 100 ] && kill -0 $p 2>/dev/null; do sleep 0.1; i=$((i+1)); done; kill -KILL $p 2>/dev/null; fi; true`, p.pid())
}

// killCmd sends SIGKILL and waits until the process is gone.
func (p *proc) killCmd() string {
	return fmt.Sprintf(`%s && kill -KILL $p && i=0; while [ $i -lt 100 ] && kill -0 $p 2>/dev/null; do sleep 0.05; i=$((i+1)); done; ! kill -0 $p 2>/dev/null`, p.pid())
}

// netemUndo removes lockjepsen's root qdisc (prio, handle 1:) from the
// node's interface, and succeeds when it is not there: a netem fault
// whose command failed half-way left nothing, or only part, to remove.
func (p *proc) netemUndo() string {
	return fmt.Sprintf("if tc qdisc show dev %s | grep -q '^qdisc prio 1: root'; then tc qdisc del dev %s root; fi", p.Interface, p.Interface)
}

// undo lists the commands that undo every fault in effect and stop the
// server, in that order: the marker file's content.
func (p *proc) undo() []string {
	var out []string
	if p.paused {
		out = append(out, p.signal("CONT"))
	}
	for _, r := range p.rules {
		out = append(out, "iptables -D "+Chain+" "+r)
	}
	if p.netem {
		out = append(out, p.netemUndo())
	}
	if p.started {
		out = append(out, p.stopCmd())
	}
	return out
}

// markerCmd writes the marker file; with nothing to undo, removes it.
func (p *proc) markerCmd() string {
	u := p.undo()
	if len(u) == 0 {
		return "rm -f " + p.file(MarkerFile)
	}
	return fmt.Sprintf("cat > %s <<'LOCKJEPSEN_EOF'\n# Written by lockjepsen: what undoes its faults on %s and stops the server it started.\n# A run that was killed leaves it; the next run executes it before it starts.\n%s\nLOCKJEPSEN_EOF",
		p.file(MarkerFile), p.Name, strings.Join(u, "\n"))
}

// healMarkerCmd executes a marker left by an earlier run, then removes it,
// printing what it ran.
func healMarkerCmd(dir string) string {
	m := path.Join(dir, MarkerFile)
	return fmt.Sprintf("if [ -f %s ]; then grep -v '^#' %s; sh %s >/dev/null 2>&1; rm -f %s; fi; true", m, m, m, m)
}

// heredoc writes content to file on the host.
func heredoc(file, content string) string {
	return fmt.Sprintf("cat > %s <<'LOCKJEPSEN_EOF'\n%sLOCKJEPSEN_EOF", file, content)
}

// redisConf is a redis-server node's configuration file.
func (p *proc) redisConf(persistence string, extra []string) string {
	lines := []string{
		"# Written by lockjepsen; Sentinel may rewrite it (CONFIG REWRITE).",
		"port " + strconv.Itoa(p.Port),
		p.bindLine(),
		"protected-mode no",
		"daemonize yes",
		"pidfile " + p.file(pidFile),
		"logfile " + p.file(logFile),
		"dir " + p.Dir,
		`save ""`,
		"enable-debug-command local",
		"replica-announce-ip " + p.Address,
		"replica-announce-port " + strconv.Itoa(p.Port),
		"repl-diskless-sync-delay 0",
	}
	switch persistence {
	case "everysec", "always":
		lines = append(lines, "appendonly yes", "appendfsync "+persistence)
	default:
		lines = append(lines, "appendonly no")
	}
	return strings.Join(append(lines, extra...), "\n") + "\n"
}

// sentinelHead is the part of a sentinel's file that is about the process.
func (p *proc) sentinelHead() string {
	return strings.Join([]string{
		"port " + strconv.Itoa(p.Port),
		p.bindLine(),
		"protected-mode no",
		"daemonize yes",
		"pidfile " + p.file(pidFile),
		"logfile " + p.file(logFile),
		"dir " + p.Dir,
	}, "\n") + "\n"
}

// bindLine binds the server to the addresses the run uses, not to every
// interface: the cluster's address (its peers and sentinels), the
// address clients dial when it is another of the host's (optional, "-":
// a forwarded port names an address the host may not have), and
// loopback. The servers take no password (protected-mode no, for their
// peers), so they must not listen where the run does not look
// (docs/remote.md).
func (p *proc) bindLine() string {
	addrs := []string{p.Address}
	if host, _, err := net.SplitHostPort(p.Client); err == nil && host != p.Address && host != "127.0.0.1" && net.ParseIP(host) != nil {
		addrs = append(addrs, "-"+host)
	}
	if p.Address != "127.0.0.1" {
		addrs = append(addrs, "-127.0.0.1")
	}
	return "bind " + strings.Join(addrs, " ")
}
