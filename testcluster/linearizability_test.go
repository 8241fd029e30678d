package testcluster

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/cairn-db/cairn/clockmon"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/storage"
	"github.com/cairn-db/cairn/store"
	"github.com/cairn-db/cairn/tablet"
)

// The register workload of TestLinearizableRegisters: clients read,
// write and compare-and-set a few keys through different gateways while
// the keys' leaseholder is crashed and restarted, and porcupine checks
// that the history is linearizable. The model and the error
// classification are plain functions so that TestLinearizabilityModel can show
// the check fails on histories that are not linearizable.

var (
	linDuration = flag.Duration("lin-duration", 8*time.Second, "how long TestLinearizableRegisters runs its workload (the history check comes after)")
	linSeed     = flag.Uint64("lin-seed", 0, "seed of TestLinearizableRegisters' choices (0: from the time; the test logs it)")
	linOut      = flag.String("lin-out", "", "directory for the history and porcupine's visualization when TestLinearizableRegisters fails (default: a new directory under the system temp dir, logged)")
)

// regOp is what a register operation does.
type regOp uint8

const (
	opRead regOp = iota
	opWrite
	opCAS
)

func (o regOp) String() string {
	switch o {
	case opRead:
		return "read"
	case opWrite:
		return "write"
	case opCAS:
		return "cas"
	}
	return "?"
}

// regInput is an operation on one key. Written values are unique across
// the whole history and never empty; "" is the value of a key never
// written.
type regInput struct {
	Op       regOp  `json:"op"`
	Key      string `json:"key"`
	Value    string `json:"value,omitempty"`    // write, cas: the new value
	Expected string `json:"expected,omitempty"` // cas: the value it replaces
}

// regOutput is what the client saw. Unknown marks a write or cas whose
// outcome the client could not learn: it may have taken effect at any
// time after its call, or never, so its return is put at the end of the
// history and its step accepts both outcomes.
type regOutput struct {
	Value   string `json:"value,omitempty"` // read: the value; failed cas: the value it found
	OK      bool   `json:"ok,omitempty"`    // cas: it swapped
	Unknown bool   `json:"unknown,omitempty"`
}

// registerModel is a map of registers, partitioned by key so that each key
// is checked as one register whose state is its value.
var registerModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(regInput).Key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return "" },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(string), input.(regInput), output.(regOutput)
		switch in.Op {
		case opRead:
			return out.Value == s, s
		case opWrite:
			return true, in.Value
		case opCAS:
			switch {
			case out.Unknown:
				// Placed where the register holds Expected it swaps; a
				// cas that never happened is placed at the end, where
				// its effect is seen by nothing.
				if s == in.Expected {
					return true, in.Value
				}
				return true, s
			case out.OK:
				return s == in.Expected, in.Value
			default:
				// It read the register inside its transaction.
				return s == out.Value && s != in.Expected, s
			}
		}
		return false, s
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(regInput), output.(regOutput)
		var res string
		switch {
		case out.Unknown:
			res = "unknown"
		case in.Op == opRead:
			res = fmt.Sprintf("%q", out.Value)
		case in.Op == opWrite:
			res = "ok"
		case out.OK:
			res = "ok"
		default:
			res = fmt.Sprintf("failed, found %q", out.Value)
		}
		switch in.Op {
		case opWrite:
			return fmt.Sprintf("write(%q) -> %s", in.Value, res)
		case opCAS:
			return fmt.Sprintf("cas(%q→%q) -> %s", in.Expected, in.Value, res)
		}
		return "read() -> " + res
	},
	DescribeState: func(state any) string { return fmt.Sprintf("%q", state.(string)) },
}

// outcome classifies an error a client got.
type outcome uint8

const (
	outcomeOK outcome = iota
	// outcomeFailed: certainly not applied; the operation is dropped.
	outcomeFailed
	// outcomeAmbiguous: may or may not have been applied.
	outcomeAmbiguous
)

// errCASMismatch ends a cas transaction whose read found another value.
var errCASMismatch = errors.New("cas: register holds another value")

// classifyWrite says what a write's (or cas's) error means for its
// effect. Only errors that say the request was refused before it could
// be applied count as failures: the KV layer's ambiguous result, the
// caller's deadline (the request may be in flight or applied) and any
// error not known to be definite all mean "may have happened".
func classifyWrite(err error) outcome {
	var (
		amb *kvpb.AmbiguousResultError
		nle *kvpb.NotLeaseholderError
		tnf *kvpb.TabletNotFoundError
		rex *kv.RetriesExhaustedError
	)
	switch {
	case err == nil:
		return outcomeOK
	case errors.As(err, &amb):
		return outcomeAmbiguous
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return outcomeAmbiguous
	case errors.As(err, &rex):
		// Every attempt ended in a retryable error: none committed.
		return outcomeFailed
	case errors.As(err, &nle), errors.As(err, &tnf):
		// Refused without evaluation, or never sent (routing errors).
		return outcomeFailed
	case clockmon.IsFenced(err):
		// The gateway's clock monitor refused it before sending
		// (clockmon.Guard): the node is fenced.
		return outcomeFailed
	case errors.Is(err, store.ErrClosed), errors.Is(err, tablet.ErrClosed), errors.Is(err, kv.ErrDBClosed):
		// The gateway's store or replica was closed when the request
		// arrived: refused at the door.
		return outcomeFailed
	}
	return outcomeAmbiguous
}

// linOp is one recorded operation.
type linOp struct {
	Client int       `json:"client"`
	Node   uint64    `json:"node"`
	In     regInput  `json:"in"`
	Out    regOutput `json:"out"`
	Call   int64     `json:"call"`   // ns since the workload started
	Return int64     `json:"return"` // ns; for an unknown outcome, when the client gave up
	Err    string    `json:"err,omitempty"`
}

// linEvent is a crash or restart done by the nemesis.
type linEvent struct {
	At   int64  `json:"at"`
	What string `json:"what"`
}

// toPorcupine turns the recorded operations into porcupine's history:
// failed writes and failed reads were dropped when recorded; operations
// of unknown outcome return after everything else.
func toPorcupine(ops []linOp) []porcupine.Operation {
	var end int64
	for _, op := range ops {
		end = max(end, op.Return)
	}
	out := make([]porcupine.Operation, 0, len(ops))
	for _, op := range ops {
		ret := op.Return
		if op.Out.Unknown {
			ret = end + 1
		}
		out = append(out, porcupine.Operation{ClientId: op.Client, Input: op.In, Call: op.Call, Output: op.Out, Return: ret, Metadata: op.Err})
	}
	return out
}

// checkHistory runs porcupine over ops; on anything but Ok it writes the
// history (JSON) and the visualization (HTML) to a directory that
// outlives the test, and returns its path.
func checkHistory(t *testing.T, ops []linOp, events []linEvent, versions func() string) (porcupine.CheckResult, string) {
	t.Helper()
	model := registerModel
	model.DescribeOperationMetadata = func(info any) string {
		if s, _ := info.(string); s != "" {
			return "error: " + s
		}
		return ""
	}
	res, info := porcupine.CheckOperationsVerbose(model, toPorcupine(ops), 3*time.Minute)
	if res == porcupine.Ok {
		return res, ""
	}
	dir := *linOut
	var err error
	if dir == "" {
		dir, err = os.MkdirTemp("", "cairn-linearizability-")
	} else {
		err = os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		t.Errorf("keeping the history: %v", err)
		return res, ""
	}
	var notes []porcupine.Annotation
	for _, e := range events {
		notes = append(notes, porcupine.Annotation{Tag: "nemesis", Start: e.At, Description: e.What})
	}
	info.AddAnnotations(notes)
	if err := porcupine.VisualizePath(model, info, filepath.Join(dir, "linearizability.html")); err != nil {
		t.Errorf("writing the visualization: %v", err)
	}
	b, err := json.MarshalIndent(struct {
		Ops    []linOp    `json:"ops"`
		Events []linEvent `json:"events"`
	}{ops, events}, "", " ")
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "history.json"), b, 0o644)
	}
	if err != nil {
		t.Errorf("writing the history: %v", err)
	}
	if versions != nil {
		if err := os.WriteFile(filepath.Join(dir, "versions.txt"), []byte(versions()), 0o644); err != nil {
			t.Errorf("writing the versions: %v", err)
		}
	}
	return res, dir
}

// TestLinearizableRegisters runs clients reading, writing and
// compare-and-setting three registers (keys of one tablet) through all
// three gateways while the tablet's leaseholder is crashed (losing what it
// had not synced) and restarted about every second, then checks the
// history with porcupine. Writes of unknown outcome may have happened at
// any time after their call; certainly refused writes and failed reads
// are left out.
func TestLinearizableRegisters(t *testing.T) {
	c := StartCluster(t, ClusterOptions{})
	c.WaitLeader(1, 10*time.Second)
	res := runRegisters(t, c, linSeedOrNow(t), *linDuration, crashLeaseholders)
	res.check(t)
}

func linSeedOrNow(t *testing.T) uint64 {
	seed := *linSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (-lin-seed to repeat the choices; timings differ), workload %s (-lin-duration)", seed, *linDuration)
	return seed
}

// crashLeaseholders is the nemesis of TestLinearizableRegisters: about
// every second, crash the leaseholder, let the others elect a new one,
// restart it.
func crashLeaseholders(r *linRun, rng *rand.Rand) {
	time.Sleep(time.Duration(700+rng.IntN(600)) * time.Millisecond)
	if leader := r.c.Leader(1); leader != 0 {
		r.crashRestart(r.c.Nodes[leader-1], rng)
	}
}

// linRun is one run of the register workload.
type linRun struct {
	t     *testing.T
	c     *Cluster
	start time.Time
	// gate[i] orders node i's Restart (which rebuilds its fields) after
	// the operations in flight through it: clients hold it for reading
	// around each operation, the nemesis for writing around Restart.
	gate []sync.RWMutex

	mu     sync.Mutex
	ops    []linOp
	counts map[string]int
	firsts map[string]string
	// okVia counts the operations that succeeded through each gateway.
	okVia  map[uint64]int
	events []linEvent
	kills  int
}

func (r *linRun) since() int64 { return int64(time.Since(r.start)) }

// note records a nemesis event.
func (r *linRun) note(what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, linEvent{At: r.since(), What: what})
}

// crashRestart crashes victim (losing what it had not synced), waits a
// little and restarts it.
func (r *linRun) crashRestart(victim *ClusterNode, rng *rand.Rand) {
	r.note(fmt.Sprintf("crash node %d", victim.ID))
	if err := victim.Crash(rng.Uint64()); err != nil {
		r.t.Errorf("crash node %d: %v", victim.ID, err)
	}
	r.mu.Lock()
	r.kills++
	r.mu.Unlock()
	time.Sleep(time.Duration(200+rng.IntN(400)) * time.Millisecond)
	g := &r.gate[victim.ID-1]
	g.Lock()
	err := victim.Restart()
	g.Unlock()
	if err != nil {
		r.t.Fatalf("restart node %d: %v", victim.ID, err)
	}
	r.note(fmt.Sprintf("restart node %d", victim.ID))
}

// runRegisters runs six clients, two per gateway, against three registers
// of tablet 1 for duration while nemesis runs in a loop, and returns what
// they saw.
//
// Each register moves to a fresh key after an operation of unknown outcome
// or after regKeyOps operations, as Jepsen's independent keys do: an
// ambiguous operation may take effect at any point after its call, so every
// later operation on its key is concurrent with it, and a few of them on
// one long history make porcupine's search exponential (a run once left it
// undecided after three minutes). Short histories per key keep every
// verdict decidable without hiding anything: each key is still checked as
// a whole register from its first operation to its last.
func runRegisters(t *testing.T, c *Cluster, seed uint64, duration time.Duration, nemesis func(*linRun, *rand.Rand)) *linRun {
	const regKeyOps = 60
	slots := []string{"\x03lin/a", "\x03lin/b", "\x03lin/c"}
	var keyMu sync.Mutex
	gens := make([]int, len(slots))
	opsOn := make([]int, len(slots))
	// keyFor returns the current key of slot i and counts an operation on it.
	keyFor := func(i int) string {
		keyMu.Lock()
		defer keyMu.Unlock()
		opsOn[i]++
		if opsOn[i] > regKeyOps {
			gens[i], opsOn[i] = gens[i]+1, 1
		}
		return fmt.Sprintf("%s.%d", slots[i], gens[i])
	}
	// retire moves slot i off key after an ambiguous operation on it.
	retire := func(i int, key string) {
		keyMu.Lock()
		defer keyMu.Unlock()
		if fmt.Sprintf("%s.%d", slots[i], gens[i]) == key {
			gens[i], opsOn[i] = gens[i]+1, 0
		}
	}
	const clients = 6
	r := &linRun{t: t, c: c, start: time.Now(), gate: make([]sync.RWMutex, len(c.Nodes)),
		counts: map[string]int{}, firsts: map[string]string{}, okVia: map[uint64]int{}}
	record := func(op linOp, class string, err error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.counts[class]++
		if err != nil && r.firsts[class] == "" {
			r.firsts[class] = err.Error()
		}
		if err == nil {
			r.okVia[op.Node]++
		}
		if class != "write failed" && class != "read failed" {
			r.ops = append(r.ops, op)
		}
	}
	var (
		stop atomic.Bool
		wg   sync.WaitGroup
	)
	defer func() { stop.Store(true); wg.Wait() }()

	var valueSeq atomic.Int64
	for cl := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(cl)))
			node := c.Nodes[cl%len(c.Nodes)]
			g := &r.gate[cl%len(c.Nodes)]
			lastSeen := map[string]string{}
			for !stop.Load() {
				g.RLock()
				if !node.Running() {
					g.RUnlock()
					time.Sleep(10 * time.Millisecond)
					continue
				}
				db := node.DB
				slot := rng.IntN(len(slots))
				key := keyFor(slot)
				in := regInput{Key: key}
				switch p := rng.IntN(10); {
				case p < 5:
					in.Op = opRead
				case p < 8:
					in.Op = opWrite
				default:
					in.Op = opCAS
					in.Expected = lastSeen[key]
				}
				if in.Op != opRead {
					in.Value = fmt.Sprintf("c%d-%d", cl, valueSeq.Add(1))
				}
				op := linOp{Client: cl, Node: node.ID, In: in, Call: r.since()}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				out, err := runRegisterOp(ctx, db, in)
				cancel()
				op.Return = r.since()
				g.RUnlock()
				op.Out = out
				if err != nil {
					op.Err = err.Error()
				}
				var class string
				switch {
				case in.Op == opRead && err != nil:
					class = "read failed"
				case in.Op == opRead:
					class = "read"
					lastSeen[key] = out.Value
				default:
					switch classifyWrite(err) {
					case outcomeOK:
						class = in.Op.String()
						if in.Op == opCAS && !out.OK {
							class = "cas mismatch"
							lastSeen[key] = out.Value
						} else {
							lastSeen[key] = in.Value
						}
					case outcomeFailed:
						class = "write failed"
					case outcomeAmbiguous:
						class = "ambiguous"
						op.Out = regOutput{Unknown: true}
						retire(slot, key)
					}
				}
				record(op, class, err)
				time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
			}
		})
	}

	rng := rand.New(rand.NewPCG(seed, 1<<32))
	for time.Since(r.start) < duration {
		nemesis(r, rng)
	}
	stop.Store(true)
	wg.Wait()
	return r
}

// check logs what the run did and fails the test unless the history is
// linearizable.
func (r *linRun) check(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	classes := make([]string, 0, len(r.counts))
	for k := range r.counts {
		classes = append(classes, k)
	}
	slices.Sort(classes)
	var summary []string
	for _, k := range classes {
		summary = append(summary, fmt.Sprintf("%s %d", k, r.counts[k]))
	}
	t.Logf("%d operations checked (%s); %d crashes; succeeded per gateway %v", len(r.ops), strings.Join(summary, ", "), r.kills, r.okVia)
	var waits, waited int64
	for _, n := range r.c.Nodes {
		if !n.Running() {
			continue
		}
		for _, d := range n.Store.Tablets() {
			if rep := n.Store.Replica(d.TabletID); rep != nil {
				waits += rep.Metrics().CommitWaits.Load()
				waited += rep.Metrics().CommitWaitNanos.Load()
			}
		}
	}
	t.Logf("commit waits on the running nodes since their last start: %d, %v in all", waits, time.Duration(waited))
	for _, k := range classes {
		if r.firsts[k] != "" {
			t.Logf("first %s error: %s", k, r.firsts[k])
		}
	}
	if r.counts["read"] == 0 || r.counts["write"] == 0 {
		t.Fatalf("the workload completed no read or no write (%s): nothing to check", strings.Join(summary, ", "))
	}
	versions := func() string {
		for _, n := range r.c.Nodes {
			if n.Running() {
				return engineVersions(n, "\x03lin/", "\x03lin0")
			}
		}
		return "no node running"
	}
	switch res, dir := checkHistory(t, r.ops, r.events, versions); res {
	case porcupine.Ok:
	case porcupine.Illegal:
		t.Fatalf("the history is not linearizable: history.json and linearizability.html (open in a browser) in %s", dir)
	default:
		t.Fatalf("porcupine could not decide within its time limit (%s): history kept in %s", res, dir)
	}
}

// implicitReads alternates runRegisterOp's reads between DB.Get and
// DB.RunImplicitRead.
var implicitReads atomic.Int64

// runRegisterOp runs one operation through db. A cas is a serializable
// transaction that reads the register and, if it holds Expected, writes
// Value in the commit batch; finding another value ends it with
// errCASMismatch, which is reported as a completed cas that did not swap.
func runRegisterOp(ctx context.Context, db *kv.DB, in regInput) (regOutput, error) {
	key := []byte(in.Key)
	switch in.Op {
	case opRead:
		if implicitReads.Add(1)%2 == 0 {
			// Every other read as a SQL point SELECT outside BEGIN
			// makes it: an implicit transaction of one read batch,
			// which the leaseholder stamps (kv.DB.RunImplicitRead).
			b := &kv.Batch{}
			b.Get(key)
			if err := db.RunImplicitRead(ctx, b); err != nil {
				return regOutput{}, err
			}
			var v []byte
			if r := b.Results[0]; r.Found {
				v = r.Rows[0].Value
			}
			return regOutput{Value: string(v)}, nil
		}
		v, _, err := db.Get(ctx, key)
		return regOutput{Value: string(v)}, err
	case opWrite:
		return regOutput{}, db.Put(ctx, key, []byte(in.Value))
	}
	var found string
	err := db.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		v, _, err := txn.Get(ctx, key)
		if err != nil {
			return err
		}
		found = string(v)
		if found != in.Expected {
			return errCASMismatch
		}
		b := &kv.Batch{}
		b.Put(key, []byte(in.Value))
		return txn.CommitInBatch(ctx, b)
	})
	switch {
	case err == nil:
		return regOutput{OK: true}, nil
	case errors.Is(err, errCASMismatch):
		// It wrote nothing, so whatever its rollback met, the read
		// stands.
		return regOutput{Value: found}, nil
	}
	return regOutput{}, err
}

// TestLinearizabilityModel feeds hand-made histories to the checker: the
// linearizable ones pass and the others fail, so a passing
// TestLinearizableRegisters means something.
func TestLinearizabilityModel(t *testing.T) {
	w := func(client int, key, v string, call, ret int64) linOp {
		return linOp{Client: client, In: regInput{Op: opWrite, Key: key, Value: v}, Call: call, Return: ret}
	}
	amb := func(client int, key, v string, call, ret int64) linOp {
		op := w(client, key, v, call, ret)
		op.Out.Unknown = true
		return op
	}
	r := func(client int, key, v string, call, ret int64) linOp {
		return linOp{Client: client, In: regInput{Op: opRead, Key: key}, Out: regOutput{Value: v}, Call: call, Return: ret}
	}
	cas := func(client int, key, from, to string, ok bool, found string, call, ret int64) linOp {
		return linOp{Client: client, In: regInput{Op: opCAS, Key: key, Expected: from, Value: to}, Out: regOutput{OK: ok, Value: found}, Call: call, Return: ret}
	}
	for _, tc := range []struct {
		name string
		ops  []linOp
		want porcupine.CheckResult
	}{
		{"sequential write then read", []linOp{w(0, "k", "1", 0, 10), r(1, "k", "1", 20, 30)}, porcupine.Ok},
		{"stale read after an acknowledged write", []linOp{w(0, "k", "1", 0, 10), r(1, "k", "", 20, 30)}, porcupine.Illegal},
		{"concurrent read may miss the write", []linOp{w(0, "k", "1", 0, 10), r(1, "k", "", 5, 30)}, porcupine.Ok},
		{"read of a value never written", []linOp{w(0, "k", "1", 0, 10), r(1, "k", "2", 20, 30)}, porcupine.Illegal},
		{"reads going back in time", []linOp{
			w(0, "k", "1", 0, 10), w(0, "k", "2", 20, 100),
			r(1, "k", "2", 30, 40), r(2, "k", "1", 50, 60),
		}, porcupine.Illegal},
		{"keys are independent", []linOp{w(0, "a", "1", 0, 10), r(1, "b", "", 20, 30), r(1, "a", "1", 40, 50)}, porcupine.Ok},
		{"a write of unknown outcome seen later", []linOp{amb(0, "k", "1", 0, 5), r(1, "k", "", 10, 20), r(1, "k", "1", 30, 40)}, porcupine.Ok},
		{"a write of unknown outcome never seen", []linOp{amb(0, "k", "1", 0, 5), r(1, "k", "", 10, 20), r(1, "k", "", 30, 40)}, porcupine.Ok},
		{"a write of unknown outcome seen then unseen", []linOp{amb(0, "k", "1", 0, 5), r(1, "k", "1", 10, 20), r(1, "k", "", 30, 40)}, porcupine.Illegal},
		{"a write of unknown outcome seen before its call", []linOp{r(1, "k", "1", 0, 5), amb(0, "k", "1", 10, 20)}, porcupine.Illegal},
		{"cas swaps", []linOp{w(0, "k", "1", 0, 10), cas(1, "k", "1", "2", true, "", 20, 30), r(2, "k", "2", 40, 50)}, porcupine.Ok},
		{"two cas from the same value both swap", []linOp{
			w(0, "k", "1", 0, 10),
			cas(1, "k", "1", "2", true, "", 20, 30), cas(2, "k", "1", "3", true, "", 20, 30),
		}, porcupine.Illegal},
		{"cas fails but the value was there", []linOp{w(0, "k", "1", 0, 10), cas(1, "k", "1", "2", false, "1", 20, 30)}, porcupine.Illegal},
		// Taken from a failing run before non-transactional reads were
		// stamped by the leaseholder (times in ns since the start): the
		// read through node 1 began after the write through node 3 was
		// acknowledged and returned the value it replaced.
		{"stale read found in the cluster", []linOp{
			w(3, "a", "c3-457", 365660782, 366438296),
			cas(5, "a", "c5-438", "c5-466", false, "c2-468", 370853748, 371572962),
			w(2, "a", "c2-468", 370962001, 371485924),
			r(3, "a", "c3-457", 371621100, 371875684),
			r(1, "a", "c2-468", 372153657, 372177644),
		}, porcupine.Illegal},
		{"cas fails and finds the current value", []linOp{w(0, "k", "1", 0, 10), cas(1, "k", "0", "2", false, "1", 20, 30)}, porcupine.Ok},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := porcupine.CheckOperationsTimeout(registerModel, toPorcupine(tc.ops), time.Minute); got != tc.want {
				t.Fatalf("check = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestLinearizabilityClassify: only errors that say a write was refused before it
// could apply count as failures.
func TestLinearizabilityClassify(t *testing.T) {
	amb := &kvpb.AmbiguousResultError{Cause: errors.New("connection reset")}
	for _, tc := range []struct {
		name string
		err  error
		want outcome
	}{
		{"nil", nil, outcomeOK},
		{"ambiguous", amb, outcomeAmbiguous},
		{"wrapped ambiguous", fmt.Errorf("commit: %w", amb), outcomeAmbiguous},
		{"ambiguous joined with a rollback error", errors.Join(amb, store.ErrClosed), outcomeAmbiguous},
		{"deadline", fmt.Errorf("rpc: %w", context.DeadlineExceeded), outcomeAmbiguous},
		{"not leaseholder", &kvpb.NotLeaseholderError{TabletID: 1, Leader: 2}, outcomeFailed},
		{"not sent", fmt.Errorf("rpc: node 2 unreachable: %w", &kvpb.TabletNotFoundError{TabletID: 1}), outcomeFailed},
		{"retries exhausted", &kv.RetriesExhaustedError{Attempts: 31, Last: &kvpb.TransactionRetryError{}}, outcomeFailed},
		{"gateway closed", store.ErrClosed, outcomeFailed},
		{"gateway fenced", fmt.Errorf("refusing to act as a gateway: %w", clockmon.ErrClockOffset), outcomeFailed},
		{"gateway's clock not yet checked", fmt.Errorf("refusing to act as a gateway: %w", clockmon.ErrUnverified), outcomeFailed},
		{"unknown", errors.New("something else"), outcomeAmbiguous},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := classifyWrite(tc.err); got != tc.want {
				t.Fatalf("classifyWrite(%v) = %d, want %d", tc.err, got, tc.want)
			}
		})
	}
}

// engineVersions lists every MVCC version of [start, end) in n's engine,
// newest first per key, with its timestamp: where a history fails the
// check, the order the writes were given in the MVCC history shows which
// side of the KV layer is wrong.
func engineVersions(n *ClusterNode, start, end string) string {
	it, err := n.Engine.NewIter(storage.IterOptions{LowerBound: []byte(start), UpperBound: []byte(end)})
	if err != nil {
		return err.Error()
	}
	defer it.Close()
	var b strings.Builder
	fmt.Fprintf(&b, "node %d\n", n.ID)
	for ok := it.First(); ok; ok = it.Next() {
		k := it.UnsafeKey()
		v, err := it.UnsafeValue()
		if err != nil {
			return err.Error()
		}
		fmt.Fprintf(&b, "%q %s %q\n", k.Key, k.Timestamp, v)
	}
	if err := it.Err(); err != nil {
		fmt.Fprintf(&b, "error: %v\n", err)
	}
	return b.String()
}
