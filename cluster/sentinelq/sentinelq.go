// Package sentinelq asks a running Redis Sentinel deployment about itself:
// which node the sentinels name primary (by majority), whether replication
// and the sentinels are healthy, and it asks them for a manual failover. It
// is the backend-independent half of cluster.SentinelCluster: the local
// backend (processes) and the docker backends (containers) describe their
// processes to it and forward their SentinelCluster methods here.
//
// Every process has two addresses: the one the backend itself dials (its
// admin client's, which must bypass any fault on the cluster's links), and
// the one the cluster knows it by (Announce: replicaof, replica-announce-*,
// sentinel announce-*). Sentinels report primaries and replicas by the
// latter; Deployment maps them back to node names.
package sentinelq

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// HealthyTimeout bounds WaitHealthy, Failover and Poll when the
	// caller's context has no deadline of its own. It is a failure
	// deadline sized for a cold, loaded machine, not an expectation: a
	// healthy topology after a start takes a few seconds (sentinels find
	// each other through hello messages every 2 s), but after a failover
	// a returning old primary is only converted to a replica once a
	// sentinel next asks it for INFO (every 10 s), and then it resyncs;
	// on two cores busy with compilers and -race tests the rest can
	// stretch several-fold.
	HealthyTimeout = 60 * time.Second
	// AdminTimeout bounds each command sent to one process. A paused or
	// cut-off process must cost a poll, not the whole wait.
	AdminTimeout = 500 * time.Millisecond
	// PollEvery is the interval between two checks of a poll.
	PollEvery = 50 * time.Millisecond
	// TiltPeriod is how long a sentinel stays in TILT mode after its
	// timer last saw a gap of more than 2 s (a stall of the machine, a
	// paused sentinel) or its clock jump back: Sentinel's tilt-period,
	// which only SENTINEL DEBUG changes. In TILT a sentinel watches but
	// acts on nothing, and a primary that fails meanwhile is not failed
	// over at all once down-after is short: when TILT ends, the replicas'
	// links to it have been down too long for Sentinel to promote one.
	TiltPeriod = 30 * time.Second
	// WaitHealthyTimeout bounds WaitHealthy when the caller's context
	// has no deadline of its own: a sentinel that has just entered TILT
	// needs TiltPeriod to leave it, and then the topology as long as
	// ever (HealthyTimeout).
	WaitHealthyTimeout = HealthyTimeout + TiltPeriod
)

// Proc is one redis-server or redis-sentinel process of a deployment.
type Proc struct {
	Name string
	// Announce is the host:port the cluster uses for the process and
	// reports it by.
	Announce string
	// Client is the backend's own client on the process's real address
	// (AdminOptions). The caller owns it and closes it.
	Client *redis.Client
}

// AdminOptions are the options of a backend's own client of one process:
// no retries, short timeouts, and RESP2, in which Sentinel's replies are
// flat field/value lists.
func AdminOptions(addr string) *redis.Options {
	return &redis.Options{
		Addr: addr, MaxRetries: -1, DisableIdentity: true,
		DialTimeout: AdminTimeout, ReadTimeout: AdminTimeout, WriteTimeout: AdminTimeout,
		PoolSize: 2,
		Protocol: 2,
	}
}

// Deployment is a primary with replicas (Nodes) watched by Sentinels under
// MasterName.
type Deployment struct {
	MasterName string
	Nodes      []Proc
	Sentinels  []Proc
	// FailoverTimeout is the sentinels' failover-timeout; Failover asks
	// again when a failover it asked for has had time to abort (0: 3 s).
	FailoverTimeout time.Duration
}

// ByAnnounce maps an address the cluster reports to its node's name.
func (d *Deployment) ByAnnounce(addr string) (string, bool) {
	for _, n := range d.Nodes {
		if n.Announce == addr {
			return n.Name, true
		}
	}
	return "", false
}

func (d *Deployment) node(name string) (Proc, bool) {
	for _, n := range d.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return Proc{}, false
}

func do(ctx context.Context, p Proc, args ...any) *redis.Cmd {
	ctx, cancel := context.WithTimeout(ctx, AdminTimeout)
	defer cancel()
	return p.Client.Do(ctx, args...)
}

// MasterAddrs asks every sentinel for the primary's address, concurrently.
// A sentinel that does not answer has an error in its place.
func (d *Deployment) MasterAddrs(ctx context.Context) ([]string, []error) {
	addrs := make([]string, len(d.Sentinels))
	errs := make([]error, len(d.Sentinels))
	var wg sync.WaitGroup
	for i, s := range d.Sentinels {
		wg.Go(func() {
			hp, err := do(ctx, s, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", d.MasterName).StringSlice()
			switch {
			case err != nil:
				errs[i] = fmt.Errorf("sentinel %s: %w", s.Name, err)
			case len(hp) != 2:
				errs[i] = fmt.Errorf("sentinel %s: master address %q", s.Name, hp)
			default:
				addrs[i] = net.JoinHostPort(hp[0], hp[1])
			}
		})
	}
	wg.Wait()
	return addrs, errs
}

// Primary asks the sentinels which node is the primary now and returns the
// answer of a majority of them.
func (d *Deployment) Primary(ctx context.Context) (string, error) {
	if len(d.Sentinels) == 0 {
		return "", errors.New("primary: the cluster has no sentinels")
	}
	addrs, errs := d.MasterAddrs(ctx)
	votes := map[string]int{}
	for _, a := range addrs {
		if a != "" {
			votes[a]++
		}
	}
	for a, n := range votes {
		if n > len(d.Sentinels)/2 {
			name, ok := d.ByAnnounce(a)
			if !ok {
				return "", fmt.Errorf("primary: the sentinels name %s, which is no node of this cluster", a)
			}
			return name, nil
		}
	}
	return "", fmt.Errorf("primary: no majority of %d sentinels agrees (answers %v): %w", len(d.Sentinels), votes, errors.Join(errs...))
}

// WaitHealthy polls until every sentinel names the same primary and is out
// of TILT mode, every other node replicates from the primary and has
// caught up with it, and every sentinel sees every replica and every other
// sentinel as healthy. Without a deadline on ctx it gives up after
// WaitHealthyTimeout.
//
// TILT is waited out so that no fault is aimed at a system whose sentinels
// would not act on it (see TiltPeriod); when the deadline passes first,
// the error names the sentinels still in TILT.
func (d *Deployment) WaitHealthy(ctx context.Context) error {
	if len(d.Sentinels) == 0 {
		return errors.New("wait healthy: the cluster has no sentinels")
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, WaitHealthyTimeout)
		defer cancel()
	}
	return Poll(ctx, "healthy sentinel topology", d.CheckHealthy)
}

// Poll runs check until it succeeds, ctx ends, or HealthyTimeout passes if
// ctx has no deadline. The error says what was still wrong, and how many
// checks failed. The check that ctx's end cuts short fails only with a
// context error, which says nothing of the cluster: the error then also
// gives the last check's own answer before it, or says that every check
// ran out of time (a process that never answered).
func Poll(ctx context.Context, what string, check func(context.Context) error) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, HealthyTimeout)
		defer cancel()
	}
	start := time.Now()
	t := time.NewTicker(PollEvery)
	defer t.Stop()
	var answered error // the last error that was not a timeout
	timeouts := 0
	for checks := 1; ; checks++ {
		err := check(ctx)
		if err == nil {
			return nil
		}
		if isTimeout(err) {
			timeouts++
		} else {
			answered = err
		}
		// Asked first: a select with a tick also ready picks at random.
		if ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-t.C:
				continue
			}
		}
		msg := fmt.Sprintf("waiting for %s: not reached after %v and %d checks", what, time.Since(start).Round(time.Millisecond), checks)
		switch {
		case !isTimeout(err):
		case answered != nil:
			return fmt.Errorf("%s: %w (the last check that got an answer: %v)", msg, err, answered)
		case timeouts == checks && checks > 1:
			return fmt.Errorf("%s, every one of them out of time: %w", msg, err)
		}
		return fmt.Errorf("%s: %w", msg, err)
	}
}

// isTimeout is whether err is a check running out of time: its context's
// deadline, or a network timeout (a client's read or dial timeout).
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		(errors.As(err, &ne) && ne.Timeout())
}

// CheckHealthy is one check of WaitHealthy.
func (d *Deployment) CheckHealthy(ctx context.Context) error {
	// TILT first: while it lasts, nothing else a sentinel says matters
	// (it acts on none of it), and the error says what to wait for.
	if err := d.CheckTilt(ctx); err != nil {
		return err
	}
	addrs, errs := d.MasterAddrs(ctx)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for i, a := range addrs {
		if a != addrs[0] {
			return fmt.Errorf("sentinels disagree on the primary: %s says %s, %s says %s",
				d.Sentinels[0].Name, addrs[0], d.Sentinels[i].Name, a)
		}
	}
	primary, ok := d.ByAnnounce(addrs[0])
	if !ok {
		return fmt.Errorf("the sentinels name %s as primary, which is no node of this cluster", addrs[0])
	}
	if err := d.CheckReplication(ctx, primary); err != nil {
		return err
	}
	for _, s := range d.Sentinels {
		if err := d.checkSentinel(ctx, s, primary); err != nil {
			return err
		}
	}
	return nil
}

// CheckTilt checks that no sentinel is in TILT mode (INFO sentinel). The
// error names every sentinel that is, and for how long it has been.
func (d *Deployment) CheckTilt(ctx context.Context) error {
	var tilted []string
	for _, s := range d.Sentinels {
		ictx, cancel := context.WithTimeout(ctx, AdminTimeout)
		txt, err := s.Client.Info(ictx, "sentinel").Result()
		cancel()
		if err != nil {
			return fmt.Errorf("sentinel %s: info sentinel: %w", s.Name, err)
		}
		on, since, err := Tilt(txt)
		switch {
		case err != nil:
			return fmt.Errorf("sentinel %s: %w", s.Name, err)
		case on && since >= 0:
			tilted = append(tilted, fmt.Sprintf("%s (for %v)", s.Name, since))
		case on:
			tilted = append(tilted, s.Name)
		}
	}
	if len(tilted) > 0 {
		return fmt.Errorf("sentinels in TILT mode: %s; a sentinel in TILT acts on no failure, and leaves TILT %v after its timer last stalled for more than 2 s (a paused sentinel or a stalled machine)",
			strings.Join(tilted, ", "), TiltPeriod)
	}
	return nil
}

// Tilt reads a sentinel's INFO sentinel reply: whether it is in TILT mode
// and since how long (-1 when the reply does not say, as before Redis 7).
// A reply without sentinel_tilt is no sentinel's.
func Tilt(info string) (on bool, since time.Duration, err error) {
	f := InfoFields(info)
	v, ok := f["sentinel_tilt"]
	if !ok {
		return false, 0, errors.New("INFO sentinel has no sentinel_tilt field: is this a sentinel?")
	}
	if v != "0" && v != "1" {
		return false, 0, fmt.Errorf("INFO sentinel: sentinel_tilt:%s, want 0 or 1", v)
	}
	since = -1
	if secs, err := strconv.Atoi(f["sentinel_tilt_since_seconds"]); err == nil && secs >= 0 {
		since = time.Duration(secs) * time.Second
	}
	return v == "1", since, nil
}

// CheckReplication checks that the named node is a primary that lists every
// other node as an online replica, and that each of them replicates from
// it, with its link up and its offset at least the primary's.
func (d *Deployment) CheckReplication(ctx context.Context, primaryName string) error {
	primary, ok := d.node(primaryName)
	if !ok {
		return fmt.Errorf("check replication: no node %q", primaryName)
	}
	pinfo, err := ReplicationInfo(ctx, primary)
	if err != nil {
		return err
	}
	if pinfo["role"] != "master" {
		return fmt.Errorf("%s: role %s, want master", primary.Name, pinfo["role"])
	}
	online := map[string]bool{}
	for k, v := range pinfo {
		// slave0:ip=127.0.0.1,port=6380,state=online,offset=42,lag=0
		if !strings.HasPrefix(k, "slave") || !strings.Contains(v, "state=") {
			continue
		}
		f := fields(v, ",")
		if f["state"] == "online" {
			online[net.JoinHostPort(f["ip"], f["port"])] = true
		}
	}
	poff, _ := strconv.ParseInt(pinfo["master_repl_offset"], 10, 64)
	for _, r := range d.Nodes {
		if r.Name == primary.Name {
			continue
		}
		if !online[r.Announce] {
			return fmt.Errorf("%s does not list %s (%s) as an online replica", primary.Name, r.Name, r.Announce)
		}
		rinfo, err := ReplicationInfo(ctx, r)
		if err != nil {
			return err
		}
		master := net.JoinHostPort(rinfo["master_host"], rinfo["master_port"])
		switch {
		case rinfo["role"] != "slave":
			return fmt.Errorf("%s: role %s, want replica of %s", r.Name, rinfo["role"], primary.Name)
		case master != primary.Announce:
			return fmt.Errorf("%s replicates from %s, not from %s (%s)", r.Name, master, primary.Name, primary.Announce)
		case rinfo["master_link_status"] != "up" || rinfo["master_sync_in_progress"] != "0":
			return fmt.Errorf("%s: link to %s %s, sync in progress %s", r.Name, primary.Name, rinfo["master_link_status"], rinfo["master_sync_in_progress"])
		}
		// The primary's offset was read first: a replica that has reached
		// it is in sync as of then, even while writes go on.
		if roff, _ := strconv.ParseInt(rinfo["slave_repl_offset"], 10, 64); roff < poff {
			return fmt.Errorf("%s is behind %s: offset %d < %d", r.Name, primary.Name, roff, poff)
		}
	}
	return nil
}

// checkSentinel checks that a sentinel sees the primary as a healthy
// primary, every other node as a healthy replica of it, and every other
// sentinel.
func (d *Deployment) checkSentinel(ctx context.Context, s Proc, primary string) error {
	v, err := do(ctx, s, "SENTINEL", "MASTER", d.MasterName).Result()
	if err != nil {
		return fmt.Errorf("sentinel %s: master: %w", s.Name, err)
	}
	master := pairs(v)
	if master["flags"] != "master" {
		return fmt.Errorf("sentinel %s: primary %s has flags %s", s.Name, primary, master["flags"])
	}
	// Not checked: the sentinel's master-host for a replica. A sentinel
	// asks a replica for INFO only every 10 s, so for a demoted primary it
	// says "?" for up to 10 s after the node itself follows the new
	// primary; CheckReplication asked the node.
	if err := d.checkKnown(ctx, s, "REPLICAS", "replica", "slave", d.Nodes, primary); err != nil {
		return err
	}
	return d.checkKnown(ctx, s, "SENTINELS", "sentinel", "sentinel", d.Sentinels, s.Name)
}

// checkKnown checks that sentinel s lists every process of want but the
// one named skip (itself, or the primary) under SENTINEL <sub> with the
// flags it should have. what names such a process in errors.
func (d *Deployment) checkKnown(ctx context.Context, s Proc, sub, what, flags string, want []Proc, skip string) error {
	v, err := do(ctx, s, "SENTINEL", sub, d.MasterName).Result()
	if err != nil {
		return fmt.Errorf("sentinel %s: %s: %w", s.Name, strings.ToLower(sub), err)
	}
	known := map[string]map[string]string{}
	for _, o := range list(v) {
		p := pairs(o)
		known[net.JoinHostPort(p["ip"], p["port"])] = p
	}
	for _, o := range want {
		if o.Name == skip {
			continue
		}
		p, ok := known[o.Announce]
		switch {
		case !ok:
			return fmt.Errorf("sentinel %s does not know %s %s (%s)", s.Name, what, o.Name, o.Announce)
		case p["flags"] != flags:
			return fmt.Errorf("sentinel %s: %s %s has flags %s", s.Name, what, o.Name, p["flags"])
		}
	}
	return nil
}

// Failover asks a sentinel for a manual failover and waits until a
// majority of the sentinels names another primary. Without a deadline on
// ctx it gives up after HealthyTimeout.
//
// A sentinel that accepted can still abort: the replica it promotes must
// report itself primary within failover-timeout, and just after every
// internal connection dropped (a toxiproxy restart, a loaded machine) it
// may not. Sentinel never retries a manual failover, so Failover asks
// again once an accepted failover has had time to finish or abort.
func (d *Deployment) Failover(ctx context.Context) (string, error) {
	if len(d.Sentinels) == 0 {
		return "", errors.New("failover: the cluster has no sentinels")
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, HealthyTimeout)
		defer cancel()
	}
	old, err := d.Primary(ctx)
	if err != nil {
		return "", fmt.Errorf("failover: %w", err)
	}
	if err := d.askFailover(ctx, old); err != nil {
		return "", err
	}
	var (
		now  string
		errs []error
	)
	for round := 1; ; round++ {
		wctx, cancel := context.WithTimeout(ctx, d.failoverWindow())
		err = Poll(wctx, "a new primary", func(ctx context.Context) error {
			p, err := d.Primary(ctx)
			if err != nil {
				return err
			}
			if p == old {
				return fmt.Errorf("the sentinels still name %s", old)
			}
			now = p
			return nil
		})
		cancel()
		if err == nil {
			return now, nil
		}
		errs = append(errs, fmt.Errorf("round %d: %w", round, err))
		if ctx.Err() != nil {
			return "", fmt.Errorf("failover away from %s: %w", old, errors.Join(errs...))
		}
		if _, err := d.RepeatFailover(ctx, old); err != nil {
			errs = append(errs, err)
		}
	}
}

// failoverWindow is how long an accepted failover may take before it is
// asked for again: the promotion's failover-timeout, the reconfiguration
// of the replicas, and two rounds of hello messages (every 2 s) for the
// other sentinels to learn the new primary.
func (d *Deployment) failoverWindow() time.Duration {
	ft := d.FailoverTimeout
	if ft <= 0 {
		ft = 3 * time.Second
	}
	return 3*ft + 4*time.Second
}

// askFailover asks the sentinels in turn until one accepts a manual
// failover. A sentinel refuses while a failover is in progress (INPROG) or
// while it knows no replica fit to promote (NOGOODSLAVE); either can pass.
func (d *Deployment) askFailover(ctx context.Context, old string) error {
	var errs []error
	for i := 0; ; i++ {
		s := d.Sentinels[i%len(d.Sentinels)]
		err := do(ctx, s, "SENTINEL", "FAILOVER", d.MasterName).Err()
		if err == nil {
			return nil
		}
		errs = append(errs, fmt.Errorf("sentinel %s: %w", s.Name, err))
		if len(errs) > len(d.Sentinels) {
			errs = errs[1:]
		}
		t := time.NewTimer(PollEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("failover away from %s: no sentinel accepted: %w", old, errors.Join(errs...))
		case <-t.C:
		}
	}
}

// RepeatFailover repeats a failover request that came to nothing, but only
// to a sentinel that still names old the primary, and only while no
// sentinel has a failover in progress: a request to a sentinel that
// already follows a new primary would fail over away from that one. It
// says whether it asked.
func (d *Deployment) RepeatFailover(ctx context.Context, old string) (bool, error) {
	n, _ := d.node(old)
	var fit *Proc
	for _, s := range d.Sentinels {
		v, err := do(ctx, s, "SENTINEL", "MASTER", d.MasterName).Result()
		if err != nil {
			continue
		}
		p := pairs(v)
		if strings.Contains(p["flags"], "failover_in_progress") {
			return false, nil
		}
		if fit == nil && net.JoinHostPort(p["ip"], p["port"]) == n.Announce {
			fit = &s
		}
	}
	if fit == nil {
		return false, nil
	}
	if err := do(ctx, *fit, "SENTINEL", "FAILOVER", d.MasterName).Err(); err != nil {
		return false, fmt.Errorf("asking sentinel %s again: %w", fit.Name, err)
	}
	return true, nil
}

// ReplicationInfo is a node's INFO replication as a map.
func ReplicationInfo(ctx context.Context, p Proc) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, AdminTimeout)
	defer cancel()
	txt, err := p.Client.Info(ctx, "replication").Result()
	if err != nil {
		return nil, fmt.Errorf("%s: info replication: %w", p.Name, err)
	}
	return InfoFields(txt), nil
}

// InfoFields reads the "key:value" lines of an INFO-style reply (INFO,
// CLUSTER INFO).
func InfoFields(text string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			out[k] = v
		}
	}
	return out
}

// fields parses "a=1,b=2".
func fields(s, sep string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(s, sep) {
		if k, v, ok := strings.Cut(kv, "="); ok {
			out[k] = v
		}
	}
	return out
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

// pairs reads a Sentinel reply of alternating field names and values.
func pairs(v any) map[string]string {
	out := map[string]string{}
	l := list(v)
	for i := 0; i+1 < len(l); i += 2 {
		k, _ := l[i].(string)
		val, _ := l[i+1].(string)
		out[k] = val
	}
	return out
}
