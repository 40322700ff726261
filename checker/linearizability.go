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
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/lockjepsen/lockjepsen/history"
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

// Linearizability checks the holds of a history against a mutex model with
// porcupine.
func Linearizability(ops []history.Op, opts Options) *LinearizabilityResult {
	return scan(ops).linearizability(opts.withDefaults())
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
	batchOps     = 8192
)

// linOp is one operation of the mutex model: a hold's acquire [Invoke,
// Start] or its release [End, End].
type linOp struct {
	call, ret int64
	hold      int32
	release   bool
}

// segment is a part of one key's operations that can be checked alone: every
// operation before it returned before any of it was called, and at that
// instant the lock's state was known (free, or held by init).
type segment struct {
	key  string
	n    int
	ops  []linOp
	init int32 // hold that holds the lock when the segment starts, -1 = free
	gi   int   // index in time order among all keys' segments
}

// lockInput is the model's input; client is a dense id, as porcupine wants.
type lockInput struct {
	release bool
	init    bool // the synthetic acquire that sets a segment's initial state
	client  int
	hold    int32
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
	a        *analysis
	opts     Options
	clients  map[int]int // process -> dense id
	procOf   []int
	model    porcupine.Model
	batched  porcupine.Model
	deadline time.Time
}

func (a *analysis) linearizability(opts Options) *LinearizabilityResult {
	began := time.Now()
	r := &LinearizabilityResult{Valid: ValidTrue}
	lc := &linChecker{a: a, opts: opts, clients: map[int]int{}, deadline: began.Add(opts.LinearizabilityBudget)}
	if opts.OutDir != "" {
		// A re-check must not leave the pictures of an earlier check beside
		// results that do not list them.
		removeVisualizations(r, opts.OutDir)
	}
	byKey := map[string][]linOp{}
	var keys []string
	for i := range a.holds {
		h := &a.holds[i]
		if h.Empty() {
			continue
		}
		if _, ok := lc.clients[h.Process]; !ok {
			lc.clients[h.Process] = len(lc.procOf)
			lc.procOf = append(lc.procOf, h.Process)
		}
		if _, ok := byKey[h.Key]; !ok {
			keys = append(keys, h.Key)
		}
		byKey[h.Key] = append(byKey[h.Key], linOp{call: h.Invoke, ret: h.Start, hold: int32(i)})
		if h.End != Never {
			byKey[h.Key] = append(byKey[h.Key], linOp{call: h.End, ret: h.End, hold: int32(i), release: true})
		}
	}
	lc.buildModels()
	var segs []*segment
	perKey := map[string][]*segment{}
	for _, k := range keys {
		ops := byKey[k]
		r.Ops += len(ops)
		ks := cutSegments(k, ops)
		perKey[k] = ks
		segs = append(segs, ks...)
	}
	slices.SortStableFunc(segs, func(x, y *segment) int { return cmp.Compare(x.ops[0].call, y.ops[0].call) })
	for i, s := range segs {
		s.gi = i
	}
	r.Segments = len(segs)
	results := lc.checkAll(len(segs), chunks(keys, perKey, opts.MaxSegmentOps))

	var illegal []*segment
	for i, s := range segs {
		switch results[i] {
		case segLegal:
			r.SegmentsChecked++
			r.OpsChecked += len(s.ops)
		case segIllegal:
			r.SegmentsChecked++
			r.SegmentsIllegal++
			r.OpsChecked += len(s.ops)
			illegal = append(illegal, s)
		case segTooLarge:
			r.TooLarge++
		case segTimedOut:
			r.TimedOut++
		default:
			r.OverBudget++
		}
	}
	r.SegmentsUnknown = r.TooLarge + r.TimedOut + r.OverBudget
	switch {
	case r.SegmentsIllegal > 0:
		r.Valid = ValidFalse
	case r.SegmentsUnknown > 0:
		r.Valid = ValidUnknown
	}
	for i, s := range illegal {
		if i == maxIllegalListed {
			break
		}
		info := s.info()
		if i < maxIllegalFiles && opts.OutDir != "" {
			info.File = lc.visualizeIllegal(r, s, perKey[s.key])
		}
		r.Illegal = append(r.Illegal, info)
	}
	if r.Valid == ValidTrue && len(segs) > 0 && opts.OutDir != "" {
		// Show the start of the first key's history: consecutive segments
		// of one key form a valid history together.
		first := segs[0]
		ks := perKey[first.key]
		j, n := first.n, 0
		for j < len(ks) && (n == 0 || n+len(ks[j].ops) <= visCap) {
			n += len(ks[j].ops)
			j++
		}
		lc.visualize(r, first.key, first.n, ks[first.n:j], "")
	}
	r.Elapsed = int64(time.Since(began))
	return r
}

// cutSegments splits one key's operations at quiet points: instants when
// every earlier operation has returned and no later one has been called
// (porcupine's intervals are closed, so strictly), and at most one hold is
// acquired but not released, which makes the lock's state there certain.
func cutSegments(key string, ops []linOp) []*segment {
	slices.SortFunc(ops, func(x, y linOp) int {
		if c := cmp.Compare(x.call, y.call); c != 0 {
			return c
		}
		return cmp.Compare(x.ret, y.ret)
	})
	var segs []*segment
	maxRet := int64(math.MinInt64)
	open, openSum := 0, int64(0)
	start, init := 0, int32(-1)
	for j, o := range ops {
		if j > start && maxRet < o.call && open <= 1 {
			segs = append(segs, &segment{key: key, n: len(segs), ops: ops[start:j], init: init})
			init = -1
			if open == 1 {
				// With one hold open, openSum is that hold.
				init = int32(openSum)
			}
			start = j
		}
		maxRet = max(maxRet, o.ret)
		if o.release {
			open--
			openSum -= int64(o.hold)
		} else {
			open++
			openSum += int64(o.hold)
		}
	}
	if start < len(ops) {
		segs = append(segs, &segment{key: key, n: len(segs), ops: ops[start:], init: init})
	}
	return segs
}

func (s *segment) info() SegmentInfo {
	end := int64(math.MinInt64)
	for _, o := range s.ops {
		end = max(end, o.ret)
	}
	return SegmentInfo{Key: s.key, N: s.n, Start: s.ops[0].call, End: end, Ops: len(s.ops)}
}

func (lc *linChecker) buildModels() {
	step := func(state, input, output any) (bool, any) {
		in := input.(*lockInput)
		s := state.(int)
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
			h := &lc.a.holds[in.hold]
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
	if s := segs[0]; s.init >= 0 {
		h := &lc.a.holds[s.init]
		t := s.ops[0].call - 1
		ins = append(ins, lockInput{init: true, client: lc.clients[h.Process], hold: s.init, seg: seg})
		dst = append(dst, porcupine.Operation{ClientId: id(h.Process), Call: t, Return: t, Input: &ins[len(ins)-1]})
	}
	for _, s := range segs {
		for _, o := range s.ops {
			p := lc.a.holds[o.hold].Process
			ins = append(ins, lockInput{release: o.release, client: lc.clients[p], hold: o.hold, seg: seg})
			dst = append(dst, porcupine.Operation{ClientId: id(p), Call: o.call, Return: o.ret, Input: &ins[len(ins)-1]})
		}
	}
	return dst
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

// chunk is a run of consecutive segments of one key. Together they are a
// valid history to check as one porcupine partition, and a cheap one when
// legal: most segments hold one or two operations, and a partition per
// segment would cost a goroutine and a search each.
type chunk struct {
	segs []*segment
	ops  int
}

// chunks groups each key's small segments into chunks of about chunkOps
// operations; a segment too big for that is a chunk of its own.
func chunks(keys []string, perKey map[string][]*segment, maxSeg int) []chunk {
	var cs []chunk
	for _, k := range keys {
		var cur chunk
		for _, s := range perKey[k] {
			big := len(s.ops) > smallSegment || len(s.ops) > maxSeg
			if big || cur.ops+len(s.ops) > chunkOps {
				if cur.ops > 0 {
					cs = append(cs, cur)
				}
				cur = chunk{}
			}
			cur.segs = append(cur.segs, s)
			cur.ops += len(s.ops)
			if big {
				cs = append(cs, cur)
				cur = chunk{}
			}
		}
		if cur.ops > 0 {
			cs = append(cs, cur)
		}
	}
	// Time order, so that a budget that runs out leaves the end of the run
	// unchecked rather than a random part of it.
	slices.SortStableFunc(cs, func(x, y chunk) int { return cmp.Compare(x.segs[0].ops[0].call, y.segs[0].ops[0].call) })
	return cs
}

// checkChunk settles a chunk that was not legal as part of a batch: as one
// partition first, then segment by segment to find the culprits.
func (lc *linChecker) checkChunk(c chunk, results []int8) {
	if len(c.segs) > 1 {
		if timeout := lc.remaining(); timeout > 0 {
			ops := lc.operations(nil, c.segs, 0, nil)
			if porcupine.CheckOperationsTimeout(lc.model, ops, timeout) == porcupine.Ok {
				for _, s := range c.segs {
					results[s.gi] = segLegal
				}
				return
			}
		}
	}
	for _, s := range c.segs {
		results[s.gi] = lc.checkOne(s)
	}
}

func (lc *linChecker) checkAll(nsegs int, cs []chunk) []int8 {
	results := make([]int8, nsegs)
	var batch []chunk
	var flat []porcupine.Operation
	n := 0 // ops in batch
	flush := func() {
		defer func() { batch, n = batch[:0], 0 }()
		if len(batch) == 0 {
			return
		}
		if timeout := lc.remaining(); timeout > 0 {
			flat = flat[:0]
			for i, c := range batch {
				flat = lc.operations(flat, c.segs, int32(i), nil)
			}
			if porcupine.CheckOperationsTimeout(lc.batched, flat, timeout) == porcupine.Ok {
				for _, c := range batch {
					for _, s := range c.segs {
						results[s.gi] = segLegal
					}
				}
				return
			}
		}
		for _, c := range batch {
			lc.checkChunk(c, results)
		}
	}
	for _, c := range cs {
		switch {
		case len(c.segs) == 1 && c.ops > lc.opts.MaxSegmentOps:
			results[c.segs[0].gi] = segTooLarge
		case c.ops <= chunkOps:
			batch = append(batch, c)
			n += c.ops
			if n >= batchOps {
				flush()
			}
		default:
			results[c.segs[0].gi] = lc.checkOne(c.segs[0])
		}
	}
	flush()
	return results
}

// visualizeIllegal draws an illegal segment. A segment cut while a hold
// was open shows that holder only as a synthetic initial state, so the
// picture would show one process acquiring a lock that looks free in it;
// drawing the key's history from the holder's real acquire shows both sides
// of the conflict. The verdict is unaffected: this is for the human.
func (lc *linChecker) visualizeIllegal(r *LinearizabilityResult, s *segment, ks []*segment) string {
	if w := window(s, ks); w != nil {
		if name := lc.visualize(r, s.key, s.n, w, porcupine.Illegal); name != "" {
			return name
		}
	}
	return lc.visualize(r, s.key, s.n, []*segment{s}, "")
}

// window returns the key's consecutive segments from the one holding the
// real acquire of the hold open at s's start through s; nil when s starts
// with the lock free or the window would exceed visWindowCap operations.
// Only one hold is open at a cut, so that hold is the earliest one open.
func window(s *segment, ks []*segment) []*segment {
	if s.init < 0 || s.n >= len(ks) || ks[s.n] != s {
		return nil
	}
	n := len(s.ops)
	for j := s.n - 1; j >= 0; j-- {
		n += len(ks[j].ops)
		if n > visWindowCap {
			return nil
		}
		for _, o := range ks[j].ops {
			if o.hold == s.init && !o.release {
				return ks[j : s.n+1]
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
		if !e.Type().IsRegular() || !strings.HasPrefix(name, visPrefix) || !strings.HasSuffix(name, visSuffix) {
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
