package docker_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/contrib/docker"
	"github.com/lockjepsen/lockjepsen/testkit/testutil"
)

// The docker backend is the harness's orphan reaper.
var _ cluster.OrphanReaper = docker.Backend{}

// A `lockjepsen test --backend docker` run killed with SIGKILL leaves its
// containers and network running; ReapOrphans removes them, says so in
// one line each (naming the killed run's pid), and leaves alone what a
// live process owns (this test's own cluster).
func TestReapOrphansOfKilledRun(t *testing.T) {
	requireDocker(t)
	t.Parallel()
	bin := testutil.BuildCLI(t)
	cli := dockerClient(t)

	var out testutil.SyncBuffer
	child := exec.Command(bin, "test", "--backend", "docker", "--system", "single", "--time-limit", "60s", "--store", filepath.Join(t.TempDir(), "store"))
	child.Dir = t.TempDir()
	child.Stdout, child.Stderr = &out, &out
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	pid := child.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			<-exited
		}
		// Whatever happened, nothing of the child's is left behind.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		docker.Backend{}.ReapOrphans(ctx)
	})

	// Wait until the child's node runs (its containers carry the child's
	// pid in their owner label) and its network exists.
	owner := ownerLabel(pid)
	have, ok := waitLabelled(t, cli, owner, 50*time.Millisecond, func(have []string) {
		select {
		case err := <-exited:
			killed = true
			t.Fatalf("the child run ended (%v) before its containers were seen (%v):\n%s", err, have, out.String())
		default:
		}
	}, func(have []string) bool {
		running, nets := 0, 0
		for _, h := range have {
			if strings.HasPrefix(h, "container ") && strings.HasSuffix(h, "(running)") {
				running++
			}
			if strings.HasPrefix(h, "network ") {
				nets++
			}
		}
		return running > 0 && nets > 0
	})
	if !ok {
		t.Fatalf("the child run's container and network are not there %v after it started: it has %v (want a running container and a network); its output:\n%s", startDeadline, have, out.String())
	}
	t.Logf("the child run (pid %d) has %v", pid, have)

	// A cluster of a live process (this one): never reaped.
	mine := start(t, docker.Backend{}, cluster.Spec{System: cluster.Single})

	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed = true
	// Until its parent waits for it, a killed process is a zombie that
	// still has its pid: the shell that ran it would wait at once.
	<-exited

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	took := time.Now()
	lines := docker.Backend{}.ReapOrphans(ctx)
	t.Logf("ReapOrphans took %v:\n%s", time.Since(took).Round(time.Millisecond), strings.Join(lines, "\n"))
	for _, h := range have {
		kind, rest, _ := strings.Cut(h, " ")
		name, _, _ := strings.Cut(rest, " ")
		found := false
		for _, l := range lines {
			if strings.HasPrefix(l, "removed "+kind+" "+name+" ") && pidOf(l) == pid {
				found = true
			}
		}
		if !found {
			t.Errorf("no line says %s %s of pid %d was removed", kind, name, pid)
		}
	}
	requireNoneLabelled(t, cli, time.Minute, "nothing of the killed run left", owner)

	// What this live process owns is untouched.
	if err := rdb(t, mine.Nodes()[0].Addr).Ping(context.Background()).Err(); err != nil {
		t.Errorf("this process's own node after ReapOrphans: %v", err)
	}
	for _, l := range lines {
		if pidOf(l) == os.Getpid() {
			t.Errorf("ReapOrphans removed something of this live process: %s", l)
		}
	}
}

var pidRE = regexp.MustCompile(`of pid (\d+)`)

// pidOf is the pid a line of ReapOrphans names, or 0.
func pidOf(line string) int {
	m := pidRE.FindStringSubmatch(line)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}
