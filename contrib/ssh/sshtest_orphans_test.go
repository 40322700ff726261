package ssh_test

import (
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/lockjepsen/lockjepsen/contrib/docker"
	"github.com/lockjepsen/lockjepsen/contrib/ssh/sshtest"
)

// The test hosts, network and key directory of a test binary that died
// before sshtest.Main removed them (a panic, a test timeout) are removed
// by the next binary's fixture; those of a live binary are not. The
// containers are created, not started: the owner labels are what counts.
func TestFixtureRemovesHostsOfKilledTestBinaries(t *testing.T) {
	f := sshtest.Start(t)
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	deadOwner := []string{"--label", sshtest.FixtureLabel + "=1",
		"--label", docker.LabelOwner + "=" + host + "/" + strconv.Itoa(gone.Process.Pid)}
	liveOwner := []string{"--label", sshtest.FixtureLabel + "=1"}
	for k, v := range docker.OwnerLabels() {
		liveOwner = append(liveOwner, "--label", k+"="+v)
	}
	keys, err := os.MkdirTemp("", "lockjepsen-sshtest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(keys) })
	id := "lockjepsen-sshtest-orphantest-" + strconv.Itoa(os.Getpid())
	dockerCLI := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("docker", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("docker %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	t.Cleanup(func() {
		_ = exec.Command("docker", "rm", "-f", id+"-dead", id+"-live").Run()
		_ = exec.Command("docker", "network", "rm", id).Run()
	})
	dockerCLI(append(append([]string{"network", "create"}, append(deadOwner, "--label", sshtest.DirLabel+"="+keys)...), id)...)
	dockerCLI(append(append([]string{"create", "--name", id + "-dead"}, deadOwner...), f.Image)...)
	dockerCLI(append(append([]string{"create", "--name", id + "-live"}, liveOwner...), f.Image)...)

	removed := sshtest.ReapOrphans()
	for _, want := range []string{"container " + id + "-dead", "network " + id, "directory " + keys} {
		if !slices.Contains(removed, want) {
			t.Errorf("ReapOrphans removed %v, not the %s", removed, want)
		}
	}
	if slices.Contains(removed, "container "+id+"-live") {
		t.Errorf("ReapOrphans removed the live binary's container: %v", removed)
	}
	names := dockerCLI("container", "ls", "--all", "--filter", "name="+id, "--format", "{{.Names}}")
	if names != id+"-live" {
		t.Errorf("containers left: %q, want only %s-live", names, id)
	}
	if _, err := os.Stat(keys); !os.IsNotExist(err) {
		t.Errorf("the dead binary's key directory is still there: %v", err)
	}
	// This binary's own hosts are live: still there.
	if out := dockerCLI("container", "ls", "--filter", "label="+sshtest.FixtureLabel+"=1", "--format", "{{.Names}}"); !strings.Contains(out, "-h1") {
		t.Errorf("this binary's hosts are gone: %q", out)
	}
}
