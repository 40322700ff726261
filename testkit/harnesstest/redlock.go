package harnesstest

import (
	"fmt"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/nemesis"
)

// RedlockRestartKillEvery spaces the kills of RedlockRestartScript: one
// kill and restart (0.7 s on containers, measured, a few seconds on a
// loaded machine) and the hold it breaks (at most 15 s) are over before
// the next one starts.
const RedlockRestartKillEvery = 20 * time.Second

// RedlockRestartScript makes scenario redlock-restart deterministic on
// every backend, with the structure of Kleppmann's counterexample: client
// 0 is cut off from n4 and n5 and can only ever lock n1, n2, n3; client 1
// is cut off from n1 and n2 and can only ever lock n3, n4, n5. Whichever
// of them holds the lock holds exactly a majority of 3, with n3 shared,
// and the other one is refused only by n3. Right after each grant
// (AfterGrant) n3 is killed and restarted at once; without persistence it
// comes back without the key, and the other client's next try takes n3
// and its two free nodes while the holder still believes it holds the
// lock. (With the random kill of the scenario, the holder usually holds
// all 5 nodes, and losing one of them leaves no majority to anyone else:
// 3 runs of 3 were safe on containers on a fresh machine.)
//
// The cuts reset the clients' connections (reject) rather than black-hole
// them (partition): an acquire then does not wait out the per-node
// timeout on the cut nodes, so the other client's next try follows the
// restart within its retry backoff (or, where a dial to the restarting
// node hangs, within a per-node timeout). They are the clients' own links in
// the harness's mesh, on the control machine, whatever the backend.
func RedlockRestartScript(timeLimit time.Duration) []nemesis.Step {
	steps := []nemesis.Step{
		{At: 0, Action: nemesis.Action{Fault: nemesis.Reject, Nodes: []string{"n4", "n5"}, Clients: []int{0}, For: timeLimit}},
		{At: 0, Action: nemesis.Action{Fault: nemesis.Reject, Nodes: []string{"n1", "n2"}, Clients: []int{1}, For: timeLimit}},
	}
	// The first kill waits for the first grant: the cuts, steps of the
	// same instant and in-process link faults, are in place by then.
	// Should a grant beat them and take all 5 nodes, the next kill comes
	// RedlockRestartKillEvery later.
	for at := time.Duration(0); at+RedlockRestartKillEvery <= timeLimit; at += RedlockRestartKillEvery {
		// For 0: the restart follows the kill at once.
		steps = append(steps, nemesis.Step{At: at, Action: nemesis.Action{Fault: nemesis.Kill, Nodes: []string{"n3"}, AfterGrant: true}})
	}
	return steps
}

// RedlockPatientNodeTimeout is the per-node timeout of RedlockPatient,
// instead of the redlock lock's default min(TTL/10, 50 ms). On a loaded
// machine 50 ms stalls are common; a SET whose answer comes too late
// leaves a key of the client's that no release removed (the release
// times out too), and that key refuses the client's own next tries for a
// whole TTL: the client that should take the restarted node was locking
// itself out (seen on containers: every try of one client refused by its
// own 5 s key on n2, for the whole of the other's hold). 400 ms stalls
// are rare, and the lock is the same algorithm.
const RedlockPatientNodeTimeout = 400 * time.Millisecond

// RedlockPatient is the redlock lock with RedlockPatientNodeTimeout.
func RedlockPatient(nodes []locks.Conn, process int) (locks.Locker, error) {
	return locks.New(locks.RedlockName, nodes, locks.Options{TokenPrefix: fmt.Sprintf("p%d", process), NodeTimeout: RedlockPatientNodeTimeout})
}

// RedlockRestartNodeTimeout is RedlockRestart's per-node budget, and
// RedlockRestartOpTimeout its budget for a whole operation (an acquire
// attempt waits for its SETs, then for the releases of a failed attempt,
// each at most 1.5 × the node budget).
//
// While one client holds the lock, the other tries every backoff: its two
// private nodes say yes, the shared node no, and the attempt deletes its
// two keys again. One delete that misses (its answer, or the SET's, came
// after the node budget) leaves a key of that client's on a private node
// for a whole TTL, longer than the hold: the client refuses itself until
// the lease it should overlap is over. On a fresh machine's saturated CI,
// with RedlockPatientNodeTimeout, that happened after each of 3 kills of
// a live lease in 104 s: 4 grants, 20 attempts refused by the client's
// own keys, and no violation (2026-12-05). A 2 s budget makes a miss need
// a 2 s stall, and a backoff of up to 500 ms makes about a tenth as many
// attempts during the hold.
const (
	RedlockRestartNodeTimeout = 2 * time.Second
	RedlockRestartOpTimeout   = 5 * time.Second
)

// RedlockRestart is scenario redlock-restart (a node of the holder's
// majority is killed and restarted at once, without persistence: it
// forgets the key), made deterministic by RedlockRestartScript: each
// holder's majority is exactly 3 nodes, and the kill hits the one node it
// shares with the other client right after a grant. The leases outlast a
// kill and restart by far: holds of 12-15 s under a TTL of 20 s, against
// a restart of about 0.7 s on containers idle and a few seconds loaded.
// (Holds of 2.5-3.5 s were not enough on a fresh machine's saturated CI:
// ten kills hit a live lease, and no restart came back inside its
// hold.) The lock is the redlock lock with the budgets above, set in the
// configuration, so that a replay or the CLI runs the same lock. It
// expects the violation and stops at the first, which a working harness
// reaches within seconds of the first kill: the long holds cost nothing
// then.
func RedlockRestart(c *harness.Config) {
	c.System, c.Lock, c.Clients = cluster.Redlock, locks.RedlockName, 2
	c.Persistence = cluster.PersistNone
	c.NodeTimeout, c.OpTimeout = RedlockRestartNodeTimeout, RedlockRestartOpTimeout
	c.RetryBackoff = 500 * time.Millisecond
	c.TTL, c.Hold = 20*time.Second, "12s..15s"
	c.Expect = harness.ExpectUnsafe
	UntilViolation(c)
	c.Script = RedlockRestartScript(c.TimeLimit)
}
