package runfile

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Settings is what config.json holds: every option of a run that a file
// can hold. harness.Config embeds it, with the run's scripted steps and
// what only a live process can hold (a user's lock, a backend, writers).
// Reports read it from here, so that no package mirrors the file.
type Settings struct {
	System          string        `json:"system"`
	Lock            string        `json:"lock"`
	Workload        string        `json:"workload"`
	Nemesis         []string      `json:"nemesis"`
	NemesisInterval time.Duration `json:"nemesis_interval"`
	// Nodes is the number of nodes under test; 0 is the system's default
	// (single 1, redlock 5).
	Nodes     int           `json:"nodes"`
	Clients   int           `json:"clients"`
	Keys      int           `json:"keys"`
	TTL       time.Duration `json:"ttl"`
	TimeLimit time.Duration `json:"time_limit"`
	// Recovery is a fault-free phase after the faults are healed, so that
	// liveness after faults can be judged.
	Recovery time.Duration `json:"recovery"`
	// Fault parameters (see nemesis.Options).
	Targets       string        `json:"targets"`
	FaultDuration time.Duration `json:"fault_duration"`
	RestartDelay  time.Duration `json:"restart_delay"`
	LoseUnsynced  bool          `json:"lose_unsynced"`
	// ClockJump is a duration ("750ms", "-2s") or a multiple of the TTL
	// ("1.5ttl").
	ClockJump string        `json:"clock_jump"`
	ClockRate float64       `json:"clock_rate"`
	Latency   time.Duration `json:"latency"`
	Jitter    time.Duration `json:"jitter"`
	Bandwidth int64         `json:"bandwidth_kbps"`
	// ScriptName picks a named script (nemesis.Scripts) instead; it is
	// built from the run's parameters when the run starts.
	ScriptName string `json:"script_name,omitempty"`

	// Sentinel system options (0: the default).
	Sentinels          int           `json:"sentinels,omitempty"`
	DownAfter          time.Duration `json:"down_after,omitempty"`
	FailoverTimeout    time.Duration `json:"failover_timeout,omitempty"`
	MinReplicasToWrite int           `json:"min_replicas_to_write,omitempty"`
	MinReplicasMaxLag  time.Duration `json:"min_replicas_max_lag,omitempty"`
	// The wait lock's WAIT arguments (0: 1 replica, 100ms).
	WaitReplicas int           `json:"wait_replicas,omitempty"`
	WaitTimeout  time.Duration `json:"wait_timeout,omitempty"`
	// AfterAcquire starts each server fault right after a lease is granted.
	AfterAcquire bool `json:"after_acquire,omitempty"`

	// Multi-node lock options (0: the lock's default).
	DriftFactor float64 `json:"drift_factor,omitempty"`
	LockTries   int     `json:"lock_tries,omitempty"`
	// NodeTimeout bounds each node's answer during a multi-node
	// acquisition. A small one keeps a dead node cheap, but on starved
	// cores every node can miss it: go-redis drops a connection whose
	// read timed out, and the next command must dial and handshake within
	// the same budget, so a lock can stay unavailable as long as the load.
	NodeTimeout time.Duration `json:"node_timeout,omitempty"`

	Hold         string        `json:"hold"`
	LongHoldRate float64       `json:"long_hold_rate"`
	RetryBackoff time.Duration `json:"retry_backoff"`
	OpTimeout    time.Duration `json:"op_timeout"`
	Persistence  string        `json:"persistence"`
	Seed         int64         `json:"seed"`
	Store        string        `json:"store"`
	// Name of the test in the store; derived from the options when empty.
	Name   string `json:"name"`
	Expect string `json:"expect"`
	// StopOnFirstViolation ends the fault phase as soon as two believed
	// holds of one key overlap, or the protected resource first suffers
	// (a lost update, or a stale fence refused): the faults are healed,
	// the clients stop (no recovery phase) and the history is checked as
	// usual. A test or
	// CI gate that expects a violation can then give the run a generous
	// time limit without paying for it when the lock breaks early.
	StopOnFirstViolation bool `json:"stop_on_first_violation,omitempty"`
	// StopGrace, with StopOnFirstViolation, lets the run go on after the
	// first violation until the earlier holder's hold has ended (it
	// released, asked again, lost an extension or crashed), but at most
	// this long, so that what it did while it still believed is recorded
	// too: a fenced resource refusing the stale holder's write, once it
	// wakes.
	StopGrace time.Duration `json:"stop_grace,omitempty"`
	// CheckpointEvery, when set, rewrites checkpoint.json this often during
	// the run (runfile.Checkpoint): what a long run killed before its end
	// had found.
	CheckpointEvery time.Duration `json:"checkpoint_every,omitempty"`
	// RecordFailedAcquires is "all" ("" too): every acquire is recorded,
	// or "summary": a failed acquire is counted per process, key and
	// second instead (history.Summary), which keeps a long run's history
	// small where most attempts fail. Liveness counts them all the same;
	// porcupine and the timeline do not see them.
	RecordFailedAcquires string `json:"record_failed_acquires,omitempty"`
	// ServerRecord has an observer per Redis node record what the node
	// did to the keys (package serverrecord) in ServerRecordFile.
	ServerRecord bool `json:"server_record"`
	// Command is the command line that reproduces the run, for the record.
	Command []string `json:"command,omitempty"`
	// CustomLock records in config.json that the run tested a Locker of
	// the user's, which the file cannot hold.
	CustomLock bool `json:"custom_lock,omitempty"`
	// CustomLockName names the user's lock (in the test name, the report
	// and the matrix); "" is "custom". CustomLockFences and
	// CustomLockRenews are what the user declared of it.
	CustomLockName   string `json:"custom_lock_name,omitempty"`
	CustomLockFences bool   `json:"custom_lock_fences,omitempty"`
	CustomLockRenews bool   `json:"custom_lock_renews,omitempty"`
	// Client is an external lock client, a program and its arguments,
	// driven over the client protocol (docs/client-protocol.md): one
	// process per client. It replaces Lock.
	Client []string `json:"client,omitempty"`
	// Renew is the renewal workloads' mode, explicit or watchdog; RenewFor
	// is how long their holds last, in TTLs ("1..5").
	Renew    string `json:"renew,omitempty"`
	RenewFor string `json:"renew_for,omitempty"`
	// RenewBefore, when set, is how long before its validity ends an
	// explicit renewal's holder extends, instead of every TTL/3.
	RenewBefore time.Duration `json:"renew_before,omitempty"`
	// AllowRemote lets clients dial nodes outside 127.0.0.0/8 (a backend
	// whose nodes live elsewhere). Off, such a node is refused before any
	// traffic is sent.
	AllowRemote bool `json:"allow_remote,omitempty"`
}

// Flags is the command line of `lockjepsen test` options that give these
// settings, for the options that differ from def (the CLI's defaults):
// the CLI names its flags after these JSON keys, with dashes. What only a
// process can hold (a user's Go lock) and where the run is stored are
// left out.
func (s Settings) Flags(def Settings) []string {
	v, d := reflect.ValueOf(s), reflect.ValueOf(def)
	var out []string
	for i := range v.NumField() {
		key, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		if notAFlag[key] || key == "" || key == "-" || reflect.DeepEqual(v.Field(i).Interface(), d.Field(i).Interface()) {
			continue
		}
		name := "--" + strings.ReplaceAll(key, "_", "-")
		if n, ok := flagNames[key]; ok {
			name = "--" + n
		}
		switch x := v.Field(i).Interface().(type) {
		case bool:
			out = append(out, name+"="+strconv.FormatBool(x))
		case time.Duration:
			out = append(out, name, x.String())
		case float64:
			out = append(out, name, strconv.FormatFloat(x, 'g', -1, 64))
		case []string:
			if key == "client" {
				out = append(out, clientFlags(x)...)
				continue
			}
			out = append(out, name, strings.Join(x, ","))
		default:
			out = append(out, name, fmt.Sprint(x))
		}
	}
	return out
}

// clientFlags gives a client's program and arguments back as the flags
// that set them: --client split at spaces, and from the first argument
// that holds a space (or is empty) on, one --client-arg each, taken
// whole; folded into --client, such an argument did not reproduce.
func clientFlags(argv []string) []string {
	i := slices.IndexFunc(argv, func(a string) bool { return a == "" || strings.ContainsFunc(a, unicode.IsSpace) })
	if i < 0 {
		i = len(argv)
	}
	out := []string{"--client", strings.Join(argv[:i], " ")}
	for _, a := range argv[i:] {
		out = append(out, "--client-arg", a)
	}
	return out
}

// flagNames are the flags not named after their key.
var flagNames = map[string]string{"bandwidth_kbps": "bandwidth", "script_name": "script"}

// notAFlag are the settings no flag of `lockjepsen test` sets.
var notAFlag = map[string]bool{"store": true, "name": true, "command": true, "custom_lock": true,
	"custom_lock_name": true, "custom_lock_fences": true, "custom_lock_renews": true, "allow_remote": true}
