package checker

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/lockjepsen/lockjepsen/internal/atomicfile"
)

// SegmentInfo locates one segment of a key's history in the
// linearizability check.
type SegmentInfo struct {
	Key string `json:"key"`
	// N numbers the key's segments from 0 in time order.
	N     int    `json:"n"`
	Start int64  `json:"start"`
	End   int64  `json:"end"`
	Ops   int    `json:"ops"`
	File  string `json:"file,omitempty"`
}

// LinearizabilityResult is porcupine's verdict on the mutex model.
type LinearizabilityResult struct {
	// Valid is false when a segment is illegal, unknown when a segment
	// could not be checked (too large, timed out, over budget).
	Valid Validity `json:"valid"`
	// Ops counts the acquire and release operations given to the model;
	// OpsChecked those in segments that got a definite answer.
	Ops        int `json:"ops"`
	OpsChecked int `json:"ops_checked"`
	Segments   int `json:"segments"`
	// SegmentsChecked got a definite answer; SegmentsIllegal of them are
	// not linearizable. SegmentsUnknown = TooLarge + TimedOut + OverBudget.
	SegmentsChecked int `json:"segments_checked"`
	SegmentsIllegal int `json:"segments_illegal"`
	SegmentsUnknown int `json:"segments_unknown"`
	TooLarge        int `json:"too_large"`
	TimedOut        int `json:"timed_out"`
	OverBudget      int `json:"over_budget"`
	// Illegal lists the first illegal segments, in time order.
	Illegal []SegmentInfo `json:"illegal,omitempty"`
	// Files are the HTML visualizations written to Options.OutDir (base
	// names).
	Files  []string `json:"files,omitempty"`
	Errors []string `json:"errors,omitempty"`
	// Elapsed is the check's wall time in ns.
	Elapsed int64 `json:"elapsed_ns"`
}

const (
	maxIllegalListed = 10
	maxIllegalFiles  = 3
	// visCap bounds the ops in the visualization of a legal history: the
	// HTML is for a human, and porcupine's verbose mode is not free.
	visCap = 2000
	// visWindowCap bounds the window drawn around an illegal segment.
	visWindowCap = 4000
	// Segments up to smallSegment ops are grouped into chunks of up to
	// chunkOps, and chunks checked about batchOps ops at a time in one
	// porcupine call (a partition each): a call per two-op segment would
	// cost far more than the checking.
	smallSegment = 64
	chunkOps     = 256
	batchOps     = 4096
	// replayCost is what a segment decided by sequentialLegal counts
	// against the budget: about its CPU time (a segment has one or two
	// operations).
	replayCost = 200 * time.Nanosecond
)

// linOp is one operation of the mutex model: a hold's acquire [Invoke,
// Start] or its release [End, End].
type linOp struct {
	call, ret int64
	hold      *Hold
	release   bool
}

// segment is a part of one key's operations that can be checked alone: every
// operation before it returned before any of it was called, and at that
// instant the lock's state was known (free, or held by init).
type segment struct {
	key    string
	keyIdx int // the key's place in the order keys were first held
	n      int
	ops    []linOp // in (call, ret) order; only the first maxKeptOps of a huge segment
	nops   int     // operations, also those not kept
	init   *Hold   // holds the lock when the segment starts, nil = free
	start  int64   // the first operation's call
	end    int64   // the latest return
	result int8
	window []*segment // for an illegal one: what visualizeIllegal draws
}

// before orders segments in time, then by key and number: the order the
// results list them in.
func (s *segment) before(o *segment) bool {
	if s.start != o.start {
		return s.start < o.start
	}
	if s.keyIdx != o.keyIdx {
		return s.keyIdx < o.keyIdx
	}
	return s.n < o.n
}

// lockInput is the model's input; client is a dense id, as porcupine wants.
type lockInput struct {
	release bool
	init    bool // the synthetic acquire that sets a segment's initial state
	client  int
	hold    *Hold
	seg     int32
}

const (
	segPending int8 = iota
	segLegal
	segIllegal
	segTooLarge
	segTimedOut
	segOverBudget
)

type linChecker struct {
	opts    Options
	clients map[int]int // process -> dense id
	procOf  []int
	model   porcupine.Model
	batched porcupine.Model
	// The budget counts the time spent checking, not the time a streaming
	// check waits for the history to be read: deadline is set when a piece
	// of work starts, from what spent left.
	spent    time.Duration
	deadline time.Time
}

// linEngine is the linearizability check fed one key's operations at a
// time as they become known. Each key's operations are cut into segments
// at quiet points as soon as no later operation can sort before them, and
// segments are checked in batches as they close, so its memory is the
// operations not yet cut plus a batch, not the history.
type linEngine struct {
	lc       *linChecker
	r        *LinearizabilityResult
	began    time.Time
	keys     map[string]*linKey
	order    []*linKey
	batch    []chunk
	batchN   int
	illegal  []*segment // the first maxIllegalListed illegal segments, in order
	maxKept  int
	finished bool
}

// linKey is one key's operations on their way to segments.
type linKey struct {
	key string
	idx int
	buf []linOp // not yet cut, in arrival order
	cut cutter
	cur chunk
	// recent are the key's latest segments, enough to draw the window of
	// an illegal one once its batch is checked.
	recent    []*segment
	recentOps int
	// first are the key's first segments, as many as a legal history's
	// picture shows; firstFull once one did not fit.
	first     []*segment
	firstOps  int
	firstFull bool
}

// cutter splits one key's operations, fed in (call, ret) order, at quiet
// points: instants when every earlier operation has returned and no later
// one has been called (porcupine's intervals are closed, so strictly), and
// at most one hold is acquired but not released, which makes the lock's
// state there certain.
type cutter struct {
	seg    *segment
	maxRet int64
	open   []*Hold // acquired and not released
	n      int
}

func newLinEngine(opts Options) *linEngine {
	e := &linEngine{r: &LinearizabilityResult{Valid: ValidTrue}, began: time.Now(), keys: map[string]*linKey{},
		lc: &linChecker{opts: opts, clients: map[int]int{}}}
	// A huge segment is too large to check anyway; past what a window can
	// show, its operations are counted, not kept.
	e.maxKept = max(opts.MaxSegmentOps, visWindowCap)
	e.lc.buildModels()
	return e
}

// add queues one operation of key.
func (e *linEngine) add(key string, o linOp) {
	k := e.keys[key]
	if k == nil {
		k = &linKey{key: key, idx: len(e.order)}
		e.keys[key] = k
		e.order = append(e.order, k)
	}
	if _, ok := e.lc.clients[o.hold.Process]; !ok {
		e.lc.clients[o.hold.Process] = len(e.lc.procOf)
		e.lc.procOf = append(e.lc.procOf, o.hold.Process)
	}
	k.buf = append(k.buf, o)
}

// advance cuts key's queued operations that call before w: no operation
// still to come can sort before them.
func (e *linEngine) advance(k *linKey, w int64) {
	if len(k.buf) == 0 {
		return
	}
	slices.SortFunc(k.buf, func(x, y linOp) int {
		if c := cmp.Compare(x.call, y.call); c != 0 {
			return c
		}
		return cmp.Compare(x.ret, y.ret)
	})
	i := 0
	for ; i < len(k.buf) && k.buf[i].call < w; i++ {
		if s := k.cut.feed(k, k.buf[i], e.maxKept); s != nil {
			e.closed(k, s)
		}
	}
	k.buf = append(k.buf[:0], k.buf[i:]...)
}

// feed adds o and returns the segment it closed, if any.
func (c *cutter) feed(k *linKey, o linOp, maxKept int) *segment {
	var done *segment
	if c.seg != nil && c.maxRet < o.call && len(c.open) <= 1 {
		done = c.seg
		c.seg = nil
	}
	if c.seg == nil {
		c.seg = &segment{key: k.key, keyIdx: k.idx, n: c.n, start: o.call, end: math.MinInt64}
		if len(c.open) == 1 {
			c.seg.init = c.open[0]
		}
		c.n++
	}
	s := c.seg
	if s.nops < maxKept {
		s.ops = append(s.ops, o)
	} else {
		s.ops = nil // too large to check or draw: only counted
	}
	s.nops++
	c.maxRet = max(c.maxRet, o.ret)
	s.end = max(s.end, o.ret)
	if o.release {
		if j := slices.Index(c.open, o.hold); j >= 0 {
			c.open = slices.Delete(c.open, j, j+1)
		}
	} else {
		c.open = append(c.open, o.hold)
	}
	return done
}

// closed takes a finished segment: counted, kept for pictures, and put in
// a chunk to check.
func (e *linEngine) closed(k *linKey, s *segment) {
	e.r.Segments++
	e.r.Ops += s.nops
	k.recent = append(k.recent, s)
	k.recentOps += s.nops
	// The window is drawn only for an illegal segment, but the segments
	// before it are dropped long before its batch is checked: take it now
	// (a few segments in a run that cuts often), and keep only the
	// segments back to the acquire of the hold open at the next one's
	// start.
	s.window = window(s, k.recent)
	k.trimRecent()
	if !k.firstFull {
		if len(k.first) == 0 || k.firstOps+s.nops <= visCap {
			k.first = append(k.first, s)
			k.firstOps += s.nops
		} else {
			k.firstFull = true
		}
	}
	if e.lc.sequentialLegal(s) {
		e.result(s, segLegal) // no part of a chunk: see operations
		return
	}
	maxSeg := e.lc.opts.MaxSegmentOps
	big := s.nops > smallSegment || s.nops > maxSeg
	if big || k.cur.ops+s.nops > chunkOps {
		if k.cur.ops > 0 {
			e.dispatch(k.cur)
		}
		k.cur = chunk{}
	}
	k.cur.segs = append(k.cur.segs, s)
	k.cur.ops += s.nops
	if big {
		e.dispatch(k.cur)
		k.cur = chunk{}
	}
}

// sequentialLegal reports whether s is a sequential history that the
// mutex model accepts, which is porcupine's answer without porcupine:
// when every operation returns before the next one is called (strictly:
// porcupine's intervals are closed), their order in time is the only
// linearization, and replaying it step by step is the whole check. Most
// segments are one hold's acquire and release, and porcupine's cost is
// per operation (entries, a linked list, a cache of states), about a
// microsecond each. A segment that is not sequential, or that the replay
// refuses, is left to porcupine as before; and so is every segment once
// the budget is spent or the check is cancelled, as porcupine's would be.
// A replay counts against the budget as replayCost: reading the clock
// around it would cost more than the replay.
func (lc *linChecker) sequentialLegal(s *segment) bool {
	if len(s.ops) != s.nops || s.nops > smallSegment || s.nops > lc.opts.MaxSegmentOps ||
		lc.spent >= lc.opts.LinearizabilityBudget || lc.opts.ctx.Err() != nil {
		return false
	}
	lc.spent += replayCost
	state, prev := -1, int64(math.MinInt64) // free, and nothing before
	if s.init != nil {
		// operations' synthetic acquire at s.start-1
		state, prev = lc.clients[s.init.Process], s.start-1
	}
	for _, o := range s.ops {
		if o.call <= prev {
			return false // concurrent with the one before
		}
		prev = o.ret
		c := lc.clients[o.hold.Process]
		switch {
		case o.release && state == c:
			state = -1
		case !o.release && state == -1:
			state = c
		default:
			return false // the model's step refuses it
		}
	}
	return true
}

// dispatch checks a chunk, or batches it with others.
func (e *linEngine) dispatch(c chunk) {
	switch {
	case len(c.segs) == 1 && c.ops > e.lc.opts.MaxSegmentOps:
		e.result(c.segs[0], segTooLarge)
	case c.ops <= chunkOps:
		e.batch = append(e.batch, c)
		e.batchN += c.ops
		if e.batchN >= batchOps {
			e.flush()
		}
	default:
		e.lc.session(func() { e.result(c.segs[0], e.lc.checkOne(c.segs[0])) })
	}
}

// flush checks the batch: all of it in one porcupine call, and the chunks
// of a batch that was not legal one by one.
func (e *linEngine) flush() {
	batch := e.batch
	e.batch, e.batchN = nil, 0
	if len(batch) == 0 {
		return
	}
	e.lc.session(func() {
		if timeout := e.lc.remaining(); timeout > 0 {
			var flat []porcupine.Operation
			for i, c := range batch {
				flat = e.lc.operations(flat, c.segs, int32(i), nil)
			}
			if porcupine.CheckOperationsTimeout(e.lc.batched, flat, timeout) == porcupine.Ok {
				for _, c := range batch {
					for _, s := range c.segs {
						e.result(s, segLegal)
					}
				}
				return
			}
		}
		for _, c := range batch {
			e.checkChunk(c)
		}
	})
}

// checkChunk settles a chunk that was not legal as part of a batch: as one
// partition first, then segment by segment to find the culprits.
func (e *linEngine) checkChunk(c chunk) {
	if len(c.segs) > 1 {
		if timeout := e.lc.remaining(); timeout > 0 {
			ops := e.lc.operations(nil, c.segs, 0, nil)
			if porcupine.CheckOperationsTimeout(e.lc.model, ops, timeout) == porcupine.Ok {
				for _, s := range c.segs {
					e.result(s, segLegal)
				}
				return
			}
		}
	}
	for _, s := range c.segs {
		e.result(s, e.lc.checkOne(s))
	}
}

// trimRecent drops the segments no later window can reach: those before
// the one with the acquire of the hold open at the current segment's start
// (any hold open at a later cut was that one or acquired in the current
// segment or after), and those more than visWindowCap operations back.
func (k *linKey) trimRecent() {
	from := len(k.recent)
	if cur := k.cut.seg; cur != nil && cur.init != nil {
		from = 0
		for j := len(k.recent) - 1; j >= 0; j-- {
			if slices.ContainsFunc(k.recent[j].ops, func(o linOp) bool { return o.hold == cur.init && !o.release }) {
				from = j
				break
			}
		}
	}
	ops := k.recentOps
	for _, s := range k.recent[:from] {
		ops -= s.nops
	}
	for from < len(k.recent) && ops-k.recent[from].nops >= visWindowCap {
		ops -= k.recent[from].nops
		from++
	}
	k.recentOps = ops
	clear(k.recent[:from])
	k.recent = slices.Delete(k.recent, 0, from)
}

// result counts one segment's answer and keeps the first illegal ones,
// with the window their picture needs.
func (e *linEngine) result(s *segment, res int8) {
	r := e.r
	s.result = res
	if res != segIllegal {
		s.window = nil
	}
	switch res {
	case segLegal:
		r.SegmentsChecked++
		r.OpsChecked += s.nops
		return
	case segTooLarge:
		r.TooLarge++
		return
	case segTimedOut:
		r.TimedOut++
		return
	case segOverBudget:
		r.OverBudget++
		return
	}
	r.SegmentsChecked++
	r.SegmentsIllegal++
	r.OpsChecked += s.nops
	i := sort.Search(len(e.illegal), func(i int) bool { return s.before(e.illegal[i]) })
	if i >= maxIllegalListed {
		return
	}
	e.illegal = slices.Insert(e.illegal, i, s)
	if len(e.illegal) > maxIllegalListed {
		e.illegal = e.illegal[:maxIllegalListed]
	}
}

// finish cuts and checks what is left and writes the pictures.
func (e *linEngine) finish() *LinearizabilityResult {
	if e.finished {
		return e.r
	}
	e.finished = true
	r := e.r
	for _, k := range e.order {
		e.advance(k, math.MaxInt64)
		if s := k.cut.seg; s != nil {
			k.cut.seg = nil
			e.closed(k, s)
		}
		if k.cur.ops > 0 {
			e.dispatch(k.cur)
			k.cur = chunk{}
		}
	}
	e.flush()
	r.SegmentsUnknown = r.TooLarge + r.TimedOut + r.OverBudget
	switch {
	case r.SegmentsIllegal > 0:
		r.Valid = ValidFalse
	case r.SegmentsUnknown > 0:
		r.Valid = ValidUnknown
	}
	if e.lc.opts.OutDir != "" {
		// A re-check must not leave the pictures of an earlier check beside
		// results that do not list them; removed only now, so that a
		// history that turns out malformed leaves them be.
		removeVisualizations(r, e.lc.opts.OutDir)
	}
	e.lc.session(e.pictures)
	r.Elapsed = int64(e.lc.spent)
	return r
}

// pictures lists the first illegal segments, drawing the first few, or
// draws the start of a legal history.
func (e *linEngine) pictures() {
	r, opts := e.r, e.lc.opts
	for i, s := range e.illegal {
		info := s.info()
		if i < maxIllegalFiles && opts.OutDir != "" {
			info.File = e.lc.visualizeIllegal(r, s)
		}
		r.Illegal = append(r.Illegal, info)
	}
	if r.Valid != ValidTrue || r.Segments == 0 || opts.OutDir == "" {
		return
	}
	// Show the start of the first key's history: consecutive segments of
	// one key form a valid history together.
	var first *linKey
	for _, k := range e.order {
		if len(k.first) > 0 && (first == nil || k.first[0].before(first.first[0])) {
			first = k
		}
	}
	if first != nil {
		e.lc.visualize(r, first.key, 0, first.first, "")
	}
}

func (s *segment) info() SegmentInfo {
	return SegmentInfo{Key: s.key, N: s.n, Start: s.start, End: s.end, Ops: s.nops}
}

func (lc *linChecker) buildModels() {
	step := func(state, input, output any) (bool, any) {
		in := input.(*lockInput)
		s := state.(int)
		if in.init {
			return true, in.client
		}
		if in.release {
			if s == in.client {
				return true, -1
			}
			return false, s
		}
		if s == -1 {
			return true, in.client
		}
		return false, s
	}
	lc.model = porcupine.Model{
		Init: func() any { return -1 },
		Step: step,
		DescribeOperation: func(input, output any) string {
			in := input.(*lockInput)
			h := in.hold
			switch {
			case in.init:
				return fmt.Sprintf("held by p%d (token %s) at segment start", h.Process, h.Token)
			case in.release:
				return fmt.Sprintf("p%d stops holding (%s, token %s)", h.Process, h.EndReason, h.Token)
			default:
				return fmt.Sprintf("p%d acquire → ok (token %s)", h.Process, h.Token)
			}
		},
		DescribeState: func(state any) string {
			s := state.(int)
			if s < 0 || s >= len(lc.procOf) {
				return "free"
			}
			return fmt.Sprintf("held by p%d", lc.procOf[s])
		},
	}
	lc.batched = lc.model
	lc.batched.Partition = func(h []porcupine.Operation) [][]porcupine.Operation {
		var parts [][]porcupine.Operation
		start := 0
		for i := 1; i <= len(h); i++ {
			if i == len(h) || h[i].Input.(*lockInput).seg != h[start].Input.(*lockInput).seg {
				parts = append(parts, h[start:i])
				start = i
			}
		}
		return parts
	}
}

// operations converts segments to porcupine operations; clientIds maps
// processes to the ClientId shown in a visualization (nil: the global ids).
// The first segment's state at its start is a synthetic acquire by its
// holder, and so is that of a segment whose predecessor is not in segs
// (decided without porcupine, see sequentialLegal): there the model's
// init sets the state whatever it was, which the end of the segment
// before it does not decide. Where segments follow one another the state
// at the cut is certain (one hold open), so a chunk is checked as its
// segments one by one would be.
func (lc *linChecker) operations(dst []porcupine.Operation, segs []*segment, seg int32, clientIds map[int]int) []porcupine.Operation {
	id := func(p int) int {
		if clientIds == nil {
			return lc.clients[p]
		}
		if c, ok := clientIds[p]; ok {
			return c
		}
		clientIds[p] = len(clientIds)
		return clientIds[p]
	}
	n := 1
	for _, s := range segs {
		n += len(s.ops)
	}
	// One allocation for all inputs instead of one per operation.
	ins := make([]lockInput, 0, n)
	for i, s := range segs {
		if h := s.init; h != nil && (i == 0 || s.n != segs[i-1].n+1) {
			t := s.start - 1
			ins = append(ins, lockInput{init: true, client: lc.clients[h.Process], hold: h, seg: seg})
			dst = append(dst, porcupine.Operation{ClientId: id(h.Process), Call: t, Return: t, Input: &ins[len(ins)-1]})
		}
		for _, o := range s.ops {
			p := o.hold.Process
			ins = append(ins, lockInput{release: o.release, client: lc.clients[p], hold: o.hold, seg: seg})
			dst = append(dst, porcupine.Operation{ClientId: id(p), Call: o.call, Return: o.ret, Input: &ins[len(ins)-1]})
		}
	}
	return dst
}

// session runs a piece of checking work against what is left of the
// budget, and counts the time it took.
func (lc *linChecker) session(work func()) {
	began := time.Now()
	lc.deadline = began.Add(lc.opts.LinearizabilityBudget - lc.spent)
	work()
	lc.spent += time.Since(began)
}

func (lc *linChecker) remaining() time.Duration {
	if lc.opts.ctx.Err() != nil {
		return 0
	}
	return min(lc.opts.SegmentTimeout, time.Until(lc.deadline))
}

func (lc *linChecker) checkOne(s *segment) int8 {
	timeout := lc.remaining()
	if timeout <= 0 {
		return segOverBudget
	}
	ops := lc.operations(nil, []*segment{s}, 0, nil)
	switch porcupine.CheckOperationsTimeout(lc.model, ops, timeout) {
	case porcupine.Ok:
		return segLegal
	case porcupine.Illegal:
		return segIllegal
	}
	if time.Until(lc.deadline) <= 0 {
		return segOverBudget
	}
	return segTimedOut
}

// chunk is a run of segments of one key in order, less those decided
// without porcupine. Together they are a valid history to check as one
// porcupine partition (operations sets the state where one is left
// out), and a cheap one when legal: most segments hold one or two
// operations, and a partition per segment would cost a goroutine and a
// search each.
type chunk struct {
	segs []*segment
	ops  int
}

// visualizeIllegal draws an illegal segment. A segment cut while a hold
// was open shows that holder only as a synthetic initial state, so the
// picture would show one process acquiring a lock that looks free in it;
// drawing the key's history from the holder's real acquire shows both sides
// of the conflict. The verdict is unaffected: this is for the human.
func (lc *linChecker) visualizeIllegal(r *LinearizabilityResult, s *segment) string {
	if s.window != nil {
		if name := lc.visualize(r, s.key, s.n, s.window, porcupine.Illegal); name != "" {
			return name
		}
	}
	return lc.visualize(r, s.key, s.n, []*segment{s}, "")
}

// window returns the key's consecutive segments from the one holding the
// real acquire of the hold open at s's start through s; nil when s starts
// with the lock free or the window would exceed visWindowCap operations.
// Only one hold is open at a cut, so that hold is the earliest one open.
// recent are the key's latest segments, s among them.
func window(s *segment, recent []*segment) []*segment {
	at := slices.Index(recent, s)
	if s.init == nil || at < 0 {
		return nil
	}
	n := s.nops
	for j := at - 1; j >= 0; j-- {
		n += recent[j].nops
		if n > visWindowCap {
			return nil
		}
		for _, o := range recent[j].ops {
			if o.hold == s.init && !o.release {
				return slices.Clone(recent[j : at+1])
			}
		}
	}
	return nil
}

// visualize writes porcupine's HTML for segs (consecutive segments of one
// key) and returns the file's base name, "" on failure. With want set,
// nothing is written unless porcupine's answer is want.
func (lc *linChecker) visualize(r *LinearizabilityResult, key string, n int, segs []*segment, want porcupine.CheckResult) string {
	if err := os.MkdirAll(lc.opts.OutDir, 0o755); err != nil {
		r.Errors = append(r.Errors, fmt.Sprintf("visualization: %v", err))
		return ""
	}
	ops := lc.operations(nil, segs, 0, map[int]int{})
	timeout := min(lc.opts.SegmentTimeout, max(time.Until(lc.deadline), time.Second))
	res, info := porcupine.CheckOperationsVerbose(lc.model, ops, timeout)
	if want != "" && res != want {
		return ""
	}
	name := fmt.Sprintf("%s%s-%d%s", visPrefix, safeName(key), n, visSuffix)
	err := atomicfile.Write(filepath.Join(lc.opts.OutDir, name), func(w io.Writer) error {
		return porcupine.Visualize(lc.model, info, w)
	})
	if err != nil {
		r.Errors = append(r.Errors, fmt.Sprintf("visualization %s: %v", name, err))
		return ""
	}
	r.Files = append(r.Files, name)
	return name
}

// The visualizations' file names: linearizability-<key>-<segment>.html.
const (
	visPrefix = "linearizability-"
	visSuffix = ".html"
)

// IsVisualization reports whether a file name is one of porcupine's
// pictures as the checker names them.
func IsVisualization(name string) bool {
	return strings.HasPrefix(name, visPrefix) && strings.HasSuffix(name, visSuffix)
}

// RemoveVisualizations deletes the visualization files in dir, and only
// those: for a re-check that drew its pictures aside and now puts them in
// place of the earlier check's.
func RemoveVisualizations(dir string) error {
	var r LinearizabilityResult
	removeVisualizations(&r, dir)
	return errors.Join(stringErrors(r.Errors)...)
}

func stringErrors(ss []string) []error {
	var errs []error
	for _, s := range ss {
		errs = append(errs, errors.New(s))
	}
	return errs
}

// removeVisualizations deletes the visualization files in dir, and only
// those: the run directory holds everything else of the run.
func removeVisualizations(r *LinearizabilityResult, dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			r.Errors = append(r.Errors, fmt.Sprintf("remove old visualizations: %v", err))
		}
		return
	}
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !IsVisualization(name) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			r.Errors = append(r.Errors, fmt.Sprintf("remove old visualization: %v", err))
		}
	}
}

func safeName(s string) string {
	if s == "" {
		return "_"
	}
	return strings.Map(func(c rune) rune {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
			return c
		}
		return '_'
	}, s)
}
