package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/raftnode"
	"github.com/cairn-db/cairn/storage"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/uuid"
)

type env struct {
	t      *testing.T
	fs     vfs.FS
	eng    *storage.Engine
	manual *hlc.ManualClock
	clock  *hlc.Clock
	s      *Store
	cfg    Config
	// stopRaft stops the raft node of a store opened in raft mode.
	stopRaft func()
	raft     *raftnode.Node
}

// settle waits, in raft mode, until every tablet's group has taken up its
// lease, so the raft bookkeeping of a split's new group (its election and
// first entry) is not mistaken for a change made by what follows.
func (e *env) settle() {
	if e.raft == nil {
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, d := range e.s.Tablets() {
		for {
			if term, _ := e.raft.Replica(uint64(d.TabletID)).Lease(); term != 0 {
				break
			}
			if time.Now().After(deadline) {
				e.t.Fatalf("tablet %d never took up its lease", d.TabletID)
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// raftMode makes newEnv open stores whose tablets are raft groups of one
// voter (TestRaftRF1 runs the store's tests that way).
var raftMode bool

func newEnv(t *testing.T, cfg Config) *env {
	cfg.VerifyLockTable = true
	e := &env{t: t, fs: vfs.NewMem(), manual: hlc.NewManualClock(1), cfg: cfg}
	e.clock = hlc.NewClock(e.manual.UnixNano, 500*time.Millisecond)
	e.open()
	t.Cleanup(e.close)
	return e
}

func (e *env) open() {
	eng, err := storage.Open("db", storage.Options{FS: e.fs})
	if err != nil {
		e.t.Fatal(err)
	}
	cfg := e.cfg
	if raftMode {
		node := raftnode.NewNode(raftnode.Config{NodeID: 1}, eng, nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- node.Run(ctx, 10*time.Millisecond) }()
		e.stopRaft = func() {
			cancel()
			if err := <-done; err != nil {
				e.t.Errorf("raft node: %v", err)
			}
		}
		cfg.Raft = &RaftConfig{Node: node, Peers: []uint64{1}}
		e.raft = node
	}
	s, err := Open(context.Background(), eng, e.clock, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.eng, e.s = eng, s
}

func (e *env) close() {
	if e.s != nil {
		e.s.Close()
		e.s = nil
	}
	if e.stopRaft != nil {
		e.stopRaft()
		e.stopRaft = nil
	}
	if e.eng != nil {
		_ = e.eng.Close()
		e.eng = nil
	}
}

func (e *env) reopen() {
	e.close()
	e.open()
}

func (e *env) send(ctx context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
	return e.s.Send(ctx, ba)
}

// dump lists every engine key and value, to compare before and after.
func (e *env) dump() string {
	it, err := e.eng.NewIter(storage.IterOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	defer it.Close()
	var b strings.Builder
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.UnsafeValue()
		if err != nil {
			e.t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s=%x\n", it.UnsafeKey(), v)
	}
	if err := it.Err(); err != nil {
		e.t.Fatal(err)
	}
	return b.String()
}

func newTxn(name string, id byte, now hlc.Timestamp, pri int32) *kvpb.Transaction {
	var u uuid.UUID
	u[0] = id
	return &kvpb.Transaction{
		TxnMeta:       kvpb.TxnMeta{ID: u, WriteTimestamp: now, MinTimestamp: now, Priority: pri},
		Name:          name,
		ReadTimestamp: now,
	}
}

func put(txn *kvpb.Transaction, k, v string) *kvpb.BatchRequest {
	ba := &kvpb.BatchRequest{Header: kvpb.Header{Txn: txn.Clone()}}
	return ba.Add(&kvpb.PutRequest{Key: []byte(k), Value: []byte(v)})
}

func endTxn(txn *kvpb.Transaction, commit bool, spans ...string) *kvpb.BatchRequest {
	ba := &kvpb.BatchRequest{Header: kvpb.Header{Txn: txn.Clone()}}
	req := &kvpb.EndTxnRequest{Key: txn.Key, Commit: commit}
	for _, s := range spans {
		req.LockSpans = append(req.LockSpans, kvpb.Span{Key: []byte(s)})
	}
	return ba.Add(req)
}

func (e *env) get(k string) []byte {
	ba := &kvpb.BatchRequest{}
	ba.Add(&kvpb.GetRequest{Key: []byte(k)})
	br, err := e.send(context.Background(), ba)
	if err != nil {
		e.t.Fatalf("get %s: %v", k, err)
	}
	return br.Responses[0].(*kvpb.GetResponse).Value
}

func TestBootstrapAndReopen(t *testing.T) {
	e := newEnv(t, Config{})
	got := e.s.Tablets()
	if len(got) != 1 || got[0].TabletID != 1 || !bytes.Equal(got[0].StartKey, keys.Min) || !bytes.Equal(got[0].EndKey, keys.Max) {
		t.Fatalf("bootstrap tablets = %v", got)
	}
	ba := &kvpb.BatchRequest{}
	ba.Add(&kvpb.PutRequest{Key: []byte("k"), Value: []byte("v")})
	if _, err := e.send(context.Background(), ba); err != nil {
		t.Fatal(err)
	}
	e.reopen()
	if got := e.s.Tablets(); len(got) != 1 || got[0].TabletID != 1 {
		t.Fatalf("tablets after reopen = %v", got)
	}
	if v := e.get("k"); string(v) != "v" {
		t.Fatalf("k = %q after reopen", v)
	}
}

// A split writes both descriptors in one batch; after a reopen the
// directory gives back the same tablets, lookups find them, and the data
// (which never moved) is read through the right tablet.
func TestSplitAndReloadDirectory(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	for _, k := range []string{"b", "m", "x"} {
		ba := &kvpb.BatchRequest{}
		ba.Add(&kvpb.PutRequest{Key: []byte(k), Value: []byte(k + "1")})
		if _, err := e.send(ctx, ba); err != nil {
			t.Fatal(err)
		}
	}
	left, right, err := e.s.Split(ctx, []byte("m"))
	if err != nil {
		t.Fatal(err)
	}
	if left.TabletID != 1 || left.Generation != 1 || string(left.EndKey) != "m" ||
		right.TabletID != 2 || right.Generation != 1 || string(right.StartKey) != "m" || !bytes.Equal(right.EndKey, keys.Max) {
		t.Fatalf("split gave %s and %s", &left, &right)
	}
	// The same through Send.
	sba := &kvpb.BatchRequest{}
	sba.Add(&kvpb.SplitRequest{SplitKey: []byte("t")})
	br, err := e.send(ctx, sba)
	if err != nil {
		t.Fatal(err)
	}
	sr := br.Responses[0].(*kvpb.SplitResponse)
	if sr.Left.TabletID != 2 || sr.Right.TabletID != 3 || string(sr.Left.EndKey) != "t" {
		t.Fatalf("split via Send gave %s and %s", &sr.Left, &sr.Right)
	}
	before := e.s.Tablets()
	e.reopen()
	after := e.s.Tablets()
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("tablets before reopen %v, after %v", before, after)
	}
	for _, tc := range []struct {
		key     string
		reverse bool
		want    kvpb.TabletID
	}{
		{"b", false, 1},
		{"m", false, 2},
		{"m", true, 1},
		{"m\x00", true, 2},
		{"s", false, 2},
		{"t", false, 3},
		{"t", true, 2},
		{"x", false, 3},
		{"\xff\xff", true, 3},
	} {
		d, err := e.s.LookupTablet(ctx, []byte(tc.key), tc.reverse)
		if err != nil {
			t.Fatalf("lookup %q reverse=%v: %v", tc.key, tc.reverse, err)
		}
		if d.TabletID != tc.want {
			t.Errorf("lookup %q reverse=%v = %s, want tablet %d", tc.key, tc.reverse, &d, tc.want)
		}
	}
	for _, k := range []string{"b", "m", "x"} {
		if v := e.get(k); string(v) != k+"1" {
			t.Fatalf("%s = %q after split and reopen", k, v)
		}
	}
	// A batch sent to a tablet that does not hold its key is refused.
	ba := &kvpb.BatchRequest{Header: kvpb.Header{TabletID: 1}}
	ba.Add(&kvpb.GetRequest{Key: []byte("x")})
	_, err = e.send(ctx, ba)
	var mismatch *kvpb.TabletKeyMismatchError
	if !errors.As(err, &mismatch) || mismatch.Tablet == nil || mismatch.Tablet.TabletID != 1 {
		t.Fatalf("misrouted batch: err = %v, want TabletKeyMismatchError from tablet 1", err)
	}
	ba.TabletID = 9
	var notFound *kvpb.TabletNotFoundError
	if _, err := e.send(ctx, ba); !errors.As(err, &notFound) {
		t.Fatalf("unknown tablet: err = %v, want TabletNotFoundError", err)
	}
	// A new split after reopen does not reuse an ID.
	_, r4, err := e.s.Split(ctx, []byte("c"))
	if err != nil {
		t.Fatal(err)
	}
	// Unreplicated, IDs come one at a time from the local counter; under
	// raft a block is reserved at a time and the rest of the block the
	// store held before reopening is skipped.
	if r4.TabletID <= 3 || (!raftMode && r4.TabletID != 4) {
		t.Fatalf("split after reopen got tablet %d, want 4 (or above 3 under raft)", r4.TabletID)
	}
}

func TestSplitBadKeys(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	if _, _, err := e.s.Split(ctx, []byte("m")); err != nil {
		t.Fatal(err)
	}
	e.settle()
	before := e.dump()
	for _, key := range []string{"m", "\x02", "\x01x", "\xff\xff", ""} {
		_, _, err := e.s.Split(ctx, []byte(key))
		var inv *kvpb.InvalidArgumentError
		if !errors.As(err, &inv) {
			t.Errorf("split at %q: err = %v, want InvalidArgumentError", key, err)
		}
	}
	if after := e.dump(); after != before {
		t.Fatalf("refused splits changed the engine:\n%s\nvs\n%s", before, after)
	}
}

// A transaction whose writes are on two tablets commits in two phases: the
// record and the local intent settle at once, the other tablet's intent is
// resolved asynchronously (or by the next reader that meets it).
func TestTwoTabletCommit(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	if _, _, err := e.s.Split(ctx, []byte("m")); err != nil {
		t.Fatal(err)
	}
	txn := newTxn("A", 1, e.clock.Now(), 0)
	txn.Key = []byte("c")
	for _, k := range []string{"c", "p"} {
		br, err := e.send(ctx, put(txn, k, k+"A"))
		if err != nil {
			t.Fatal(err)
		}
		txn = br.Txn
	}
	br, err := e.send(ctx, endTxn(txn, true, "c", "p"))
	if err != nil {
		t.Fatal(err)
	}
	if br.OnePhaseCommit || br.Txn.Status != kvpb.Committed {
		t.Fatalf("commit: 1pc=%v status=%s", br.OnePhaseCommit, br.Txn.Status)
	}
	for _, k := range []string{"c", "p"} {
		if v := e.get(k); string(v) != k+"A" {
			t.Fatalf("%s = %q after commit", k, v)
		}
	}
}

// Two transactions on two tablets each wait for the other: X holds c
// (tablet 1) and wants p, Y holds p (tablet 2) and wants c. The wait-for
// graph finds the cycle; exactly one is aborted with AbortDeadlock (the
// lower priority, or on a tie the larger ID) and the other commits.
func TestDeadlockAcrossTablets(t *testing.T) {
	for _, tc := range []struct {
		name       string
		priX, priY int32
		xIsVictim  bool
	}{
		{"tie: larger ID loses", 0, 0, false},
		{"lower priority loses", 5, 1, false},
		{"lower priority loses even with the smaller ID", 1, 5, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testDeadlock(t, tc.priX, tc.priY, tc.xIsVictim)
		})
	}
}

func testDeadlock(t *testing.T, priX, priY int32, xIsVictim bool) {
	e := newEnv(t, Config{PushPollInterval: 5 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, _, err := e.s.Split(ctx, []byte("m")); err != nil {
		t.Fatal(err)
	}
	now := e.clock.Now()
	x := newTxn("X", 1, now, priX)
	x.Key = []byte("c")
	y := newTxn("Y", 2, now, priY)
	y.Key = []byte("p")
	if _, err := e.send(ctx, put(x, "c", "cX")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.send(ctx, put(y, "p", "pY")); err != nil {
		t.Fatal(err)
	}
	type result struct {
		br  *kvpb.BatchResponse
		err error
	}
	resX, resY := make(chan result, 1), make(chan result, 1)
	go func() {
		br, err := e.send(ctx, put(x, "p", "pX"))
		resX <- result{br, err}
	}()
	go func() {
		br, err := e.send(ctx, put(y, "c", "cY"))
		resY <- result{br, err}
	}()
	rx, ry := <-resX, <-resY
	winner, loser, rw, rl := x, y, rx, ry
	want := map[string]string{"c": "cX", "p": "pX"}
	winnerSpans := []string{"c", "p"}
	loserSpans := []string{"p"}
	if xIsVictim {
		winner, loser, rw, rl = y, x, ry, rx
		want = map[string]string{"c": "cY", "p": "pY"}
		loserSpans = []string{"c"}
	}
	if rw.err != nil {
		t.Fatalf("%s (the survivor) failed: %v", winner.Name, rw.err)
	}
	var abt *kvpb.TransactionAbortedError
	if !errors.As(rl.err, &abt) || abt.Reason != kvpb.AbortDeadlock {
		t.Fatalf("%s (the victim): err = %v, want TransactionAbortedError(DEADLOCK)", loser.Name, rl.err)
	}
	// The victim rolls back (its record may already say so); the survivor
	// commits; the victim can no longer commit.
	if _, err := e.send(ctx, endTxn(loser, false, loserSpans...)); err != nil {
		t.Fatalf("rollback of %s: %v", loser.Name, err)
	}
	if _, err := e.send(ctx, endTxn(rw.br.Txn, true, winnerSpans...)); err != nil {
		t.Fatalf("commit of %s: %v", winner.Name, err)
	}
	if _, err := e.send(ctx, endTxn(loser, true, loserSpans...)); !errors.As(err, &abt) {
		t.Fatalf("commit of the victim: err = %v, want TransactionAbortedError", err)
	}
	for k, v := range want {
		if got := e.get(k); string(got) != v {
			t.Fatalf("%s = %q, want %q", k, got, v)
		}
	}
}

// A request waiting on a lock when the tablet splits under it is woken,
// finds its key gone to the new tablet, is routed there by the store, waits
// on the same lock in the new tablet's table, and proceeds when the holder
// commits.
func TestSplitMovesLockWaiters(t *testing.T) {
	e := newEnv(t, Config{PushPollInterval: 5 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	now := e.clock.Now()
	a := newTxn("A", 1, now, 0)
	a.Key = []byte("p")
	br, err := e.send(ctx, put(a, "p", "pA"))
	if err != nil {
		t.Fatal(err)
	}
	a = br.Txn
	// The waiter is a non-transactional write: it lands above A's commit.
	done := make(chan error, 1)
	go func() {
		ba := &kvpb.BatchRequest{}
		ba.Add(&kvpb.PutRequest{Key: []byte("p"), Value: []byte("pB")})
		_, err := e.send(ctx, ba)
		done <- err
	}()
	for e.s.Replica(1).LockWaiters() != 1 {
		time.Sleep(time.Millisecond)
	}
	if _, _, err := e.s.Split(ctx, []byte("m")); err != nil {
		t.Fatal(err)
	}
	for e.s.Replica(2).LockWaiters() != 1 {
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("waiter finished before the holder did: %v", err)
	default:
	}
	if _, err := e.send(ctx, endTxn(a, true, "p")); err != nil {
		t.Fatalf("commit of A: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("B after the split: %v", err)
	}
	if n := e.s.Replica(1).LockWaiters(); n != 0 {
		t.Fatalf("left tablet still has %d waiters", n)
	}
	if v := e.get("p"); string(v) != "pB" {
		t.Fatalf("p = %q, want the waiter's write", v)
	}
}

// Key-routed batches racing a split all succeed: those that reach the old
// tablet after it shrank are re-routed by the store.
func TestRoutingRacesSplit(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	const n = 50
	errs := make(chan error, n)
	for i := range n {
		go func() {
			ba := &kvpb.BatchRequest{}
			ba.Add(&kvpb.PutRequest{Key: []byte(fmt.Sprintf("k%02d", i)), Value: []byte("v")})
			_, err := e.send(ctx, ba)
			errs <- err
		}()
	}
	for _, k := range []string{"k10", "k20", "k30", "k40"} {
		if _, _, err := e.s.Split(ctx, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	ba := &kvpb.BatchRequest{}
	ba.Add(&kvpb.ScanRequest{Key: []byte("k20"), EndKey: []byte("k30")})
	br, err := e.send(ctx, ba)
	if err != nil {
		t.Fatal(err)
	}
	if rows := br.Responses[0].(*kvpb.ScanResponse).Rows; len(rows) != 10 {
		t.Fatalf("scan of one tablet found %d rows, want 10", len(rows))
	}
}

// The GC threshold is replicated tablet state: it survives a restart and a
// split gives it to both sides.
func TestGCThresholdSurvivesSplitAndReopen(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	th := e.clock.Now()
	gc := &kvpb.BatchRequest{}
	gc.Add(&kvpb.GCRequest{Key: []byte("a"), EndKey: []byte("b"), Threshold: th})
	if _, err := e.send(ctx, gc); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.s.Split(ctx, []byte("m")); err != nil {
		t.Fatal(err)
	}
	e.reopen()
	for _, k := range []string{"c", "x"} {
		ba := &kvpb.BatchRequest{Header: kvpb.Header{Timestamp: th.Prev()}}
		ba.Add(&kvpb.GetRequest{Key: []byte(k)})
		var bgc *kvpb.BatchTimestampBeforeGCError
		if _, err := e.send(ctx, ba); !errors.As(err, &bgc) {
			t.Fatalf("read of %s below the GC threshold: err = %v, want BatchTimestampBeforeGCError", k, err)
		}
	}
}

// A cycle of three transactions on three tablets (X waits for Y, Y for Z, Z
// for X) is broken too: at least one is aborted for the deadlock, and every
// survivor's write goes through.
func TestDeadlockOfThree(t *testing.T) {
	e := newEnv(t, Config{PushPollInterval: 5 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, k := range []string{"h", "p"} {
		if _, _, err := e.s.Split(ctx, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	now := e.clock.Now()
	keysOf := []string{"c", "k", "s"} // one per tablet
	txns := make([]*kvpb.Transaction, 3)
	for i := range txns {
		txns[i] = newTxn(fmt.Sprintf("T%d", i), byte(i+1), now, 0)
		txns[i].Key = []byte(keysOf[i])
		if _, err := e.send(ctx, put(txns[i], keysOf[i], "own")); err != nil {
			t.Fatal(err)
		}
	}
	errs := make(chan error, 3)
	for i := range txns {
		go func() {
			_, err := e.send(ctx, put(txns[i], keysOf[(i+1)%3], "next"))
			if err == nil {
				// A survivor commits at once, releasing its locks.
				_, err = e.send(ctx, endTxn(txns[i], true, keysOf[i], keysOf[(i+1)%3]))
			} else {
				_, _ = e.send(ctx, endTxn(txns[i], false, keysOf[i]))
			}
			errs <- err
		}()
	}
	aborted := 0
	for range txns {
		err := <-errs
		var abt *kvpb.TransactionAbortedError
		var rty *kvpb.TransactionRetryError
		var wto *kvpb.WriteTooOldError
		switch {
		case err == nil:
		case errors.As(err, &abt) && abt.Reason == kvpb.AbortDeadlock:
			aborted++
		case errors.As(err, &rty), errors.As(err, &wto):
			// A survivor may find its next key committed by another
			// survivor above its snapshot; that is a retry, not a hang.
		default:
			t.Fatalf("unexpected error: %v", err)
		}
	}
	if aborted == 0 {
		t.Fatal("no transaction was aborted, yet all three finished")
	}
}

// Close cancels a request blocked on a lock and waits for it, so the
// engine can be closed right after.
func TestCloseCancelsWaiters(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	a := newTxn("A", 1, e.clock.Now(), 0)
	a.Key = []byte("k")
	if _, err := e.send(ctx, put(a, "k", "a")); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		ba := &kvpb.BatchRequest{}
		ba.Add(&kvpb.PutRequest{Key: []byte("k"), Value: []byte("b")})
		_, err := e.send(ctx, ba)
		done <- err
	}()
	for e.s.Replica(1).LockWaiters() != 1 {
		time.Sleep(time.Millisecond)
	}
	e.s.Close()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("waiter after Close: err = %v, want context.Canceled", err)
	}
	if _, err := e.send(ctx, put(a, "j", "x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("send after Close: err = %v, want ErrClosed", err)
	}
}

// A request whose caller's context can never end runs on the store's stop
// context: Close cancels it, contexts derived from it follow, and the
// caller's values stay visible.
func TestStopCtx(t *testing.T) {
	stop, cancel := context.WithCancel(context.Background())
	type key struct{}
	ctx := stopCtx{Context: context.WithValue(context.Background(), key{}, "v"), stop: stop}
	derived, cancelDerived := context.WithCancel(ctx)
	defer cancelDerived()
	if ctx.Err() != nil || derived.Err() != nil {
		t.Fatal("cancelled before Close")
	}
	if ctx.Value(key{}) != "v" {
		t.Fatal("lost the caller's value")
	}
	cancel()
	<-ctx.Done()
	<-derived.Done()
	if !errors.Is(ctx.Err(), context.Canceled) || !errors.Is(derived.Err(), context.Canceled) {
		t.Fatalf("errors after stop: %v, %v", ctx.Err(), derived.Err())
	}
}

// A request whose caller's context can end waits until either it ends or
// the store closes, whichever comes first.
func TestCancelableCallerWaiter(t *testing.T) {
	for _, closeStore := range []bool{false, true} {
		e := newEnv(t, Config{})
		a := newTxn("A", 1, e.clock.Now(), 0)
		a.Key = []byte("k")
		if _, err := e.send(context.Background(), put(a, "k", "a")); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			ba := &kvpb.BatchRequest{}
			ba.Add(&kvpb.PutRequest{Key: []byte("k"), Value: []byte("b")})
			_, err := e.send(ctx, ba)
			done <- err
		}()
		for e.s.Replica(1).LockWaiters() != 1 {
			time.Sleep(time.Millisecond)
		}
		if closeStore {
			e.s.Close()
		} else {
			cancel()
		}
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("close=%v: waiter err = %v, want context.Canceled", closeStore, err)
		}
		cancel()
	}
}

// doneCounter is a caller's context that counts the calls of its Done.
type doneCounter struct {
	context.Context
	dones atomic.Int32
}

func (c *doneCounter) Done() <-chan struct{} {
	c.dones.Add(1)
	return c.Context.Done()
}

// TestBeginAsksNoDone is invariant 7: a read that does not wait asks its
// caller's context for no Done channel (a cancellable context makes one
// on the first call: an allocation per point read), whatever the
// context. (That a request that waits ends with its caller's context
// is TestCancelableCallerWaiter.)
func TestBeginAsksNoDone(t *testing.T) {
	type key struct{}
	e := newEnv(t, Config{})
	w := &kvpb.BatchRequest{}
	w.Add(&kvpb.PutRequest{Key: []byte("k"), Value: []byte("a")})
	if _, err := e.send(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	live, cancelLive := context.WithCancel(context.Background())
	defer cancelLive()
	for _, tc := range []struct {
		name    string
		caller  context.Context
		wantErr error
	}{
		{"cancellable", live, nil},
		{"with values only", context.WithValue(context.Background(), key{}, "v"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := &doneCounter{Context: tc.caller}
			ba := &kvpb.BatchRequest{}
			ba.Add(&kvpb.GetRequest{Key: []byte("k")})
			_, err := e.send(ctx, ba)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if n := ctx.dones.Load(); n != 0 {
				t.Errorf("the read asked its caller's context for Done %d times, want none", n)
			}
		})
	}
	// Registering a request allocates nothing for context.Background()
	// and its reqCtx alone for any other context.
	if !raceEnabled {
		for _, tc := range []struct {
			name string
			ctx  context.Context
			want float64
		}{
			{"background", context.Background(), 0},
			{"cancellable", live, 1},
		} {
			got := testing.AllocsPerRun(100, func() {
				_, rc, err := e.s.begin(tc.ctx)
				if err != nil {
					t.Fatal(err)
				}
				e.s.end(rc)
			})
			if got != tc.want {
				t.Errorf("%s: begin and end allocate %.1f objects, want %.0f", tc.name, got, tc.want)
			}
		}
	}
}

// reqCtx ends with the caller's context or the store's stop context,
// derived contexts follow, and Err needs no Done first.
func TestReqCtx(t *testing.T) {
	type key struct{}
	for _, stopFirst := range []bool{false, true} {
		stop, cancelStop := context.WithCancel(context.Background())
		caller, cancelCaller := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
		rc := &reqCtx{Context: caller, stop: stop}
		if rc.Err() != nil || rc.Value(key{}) != "v" {
			t.Fatalf("fresh reqCtx: err %v, value %v", rc.Err(), rc.Value(key{}))
		}
		derived, cancelDerived := context.WithCancel(rc)
		if stopFirst {
			cancelStop()
		} else {
			cancelCaller()
		}
		<-rc.Done()
		<-derived.Done()
		if !errors.Is(rc.Err(), context.Canceled) || !errors.Is(derived.Err(), context.Canceled) {
			t.Fatalf("stopFirst=%v: errors %v, %v", stopFirst, rc.Err(), derived.Err())
		}
		rc.release()
		cancelDerived()
		cancelStop()
		cancelCaller()
	}
	// Err without Done sees either end; release ends the context.
	stop, cancelStop := context.WithCancel(context.Background())
	rc := &reqCtx{Context: context.Background(), stop: stop}
	cancelStop()
	if !errors.Is(rc.Err(), context.Canceled) {
		t.Fatalf("Err after stop without Done: %v", rc.Err())
	}
	rc2 := &reqCtx{Context: context.Background(), stop: context.Background()}
	_ = rc2.Done()
	rc2.release()
	select {
	case <-rc2.Done():
	default:
		t.Fatal("release left the request's context running")
	}
	if rc2.Err() == nil {
		t.Fatal("release closed Done but Err is nil")
	}
}

// TestConcurrentSplits: splits are not serialized store-wide (sql/ddl
// splits the buckets of a hash-sharded index in parallel). Many splits
// racing on one tablet, and then on the tablets they made, must all take
// effect, with unique tablet IDs, a directory that still tiles the
// keyspace, and every row still readable.
func TestConcurrentSplits(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	const n = 48
	key := func(i int) []byte { return []byte(fmt.Sprintf("k%03d", i)) }
	for i := range n {
		ba := &kvpb.BatchRequest{}
		ba.Add(&kvpb.PutRequest{Key: key(i), Value: []byte{byte(i)}})
		if _, err := e.send(ctx, ba); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 1; i < n; i++ {
		wg.Go(func() {
			ba := &kvpb.BatchRequest{}
			ba.Add(&kvpb.SplitRequest{SplitKey: key(i)})
			if _, err := e.send(ctx, ba); err != nil {
				errs <- fmt.Errorf("split at %s: %w", key(i), err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	tablets := e.s.Tablets()
	if err := checkTiling(tablets); err != nil {
		t.Fatal(err)
	}
	ids := map[kvpb.TabletID]bool{}
	starts := map[string]bool{}
	for _, d := range tablets {
		if ids[d.TabletID] {
			t.Errorf("tablet ID %d twice", d.TabletID)
		}
		ids[d.TabletID] = true
		starts[string(d.StartKey)] = true
	}
	for i := 1; i < n; i++ {
		if !starts[string(key(i))] {
			t.Errorf("no tablet starts at %s", key(i))
		}
	}
	for i := range n {
		ba := &kvpb.BatchRequest{}
		ba.Add(&kvpb.GetRequest{Key: key(i)})
		br, err := e.send(ctx, ba)
		if err != nil {
			t.Fatal(err)
		}
		if v := br.Responses[0].(*kvpb.GetResponse).Value; len(v) != 1 || v[0] != byte(i) {
			t.Errorf("%s = %x after the splits", key(i), v)
		}
	}
}

// TestSendTakesNoStoreLock is invariants 7 and 8: a point read registers
// itself and finds its replica (by tablet ID and by key) without the
// store's mutex, which it used to read-lock twice per batch (begin and
// Replica): with the mutex held for writing, reads still complete.
func TestSendTakesNoStoreLock(t *testing.T) {
	e := newEnv(t, Config{})
	w := &kvpb.BatchRequest{}
	w.Add(&kvpb.PutRequest{Key: []byte("k"), Value: []byte("a")})
	if _, err := e.send(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	live, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.s.mu.Lock()
	done := make(chan error, 1)
	go func() {
		for _, ctx := range []context.Context{context.Background(), live} {
			for _, id := range []kvpb.TabletID{0, 1} {
				ba := &kvpb.BatchRequest{}
				ba.TabletID = id
				ba.Add(&kvpb.GetRequest{Key: []byte("k")})
				if _, err := e.send(ctx, ba); err != nil {
					done <- err
					return
				}
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		e.s.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		e.s.mu.Unlock()
		<-done
		t.Fatal("a point read waited for the store's mutex")
	}
}

// TestCloseDrainsInFlight: requests racing Close either are refused with
// ErrClosed or were counted before Close began, and Close returns only
// after every counted one has ended; a second Close returns at once.
func TestCloseDrainsInFlight(t *testing.T) {
	for range 20 {
		e := newEnv(t, Config{})
		var inside, after atomic.Int32
		closed := make(chan struct{})
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					_, rc, err := e.s.begin(context.Background())
					if errors.Is(err, ErrClosed) {
						return
					}
					inside.Add(1)
					select {
					case <-closed:
						// Counted, yet Close has returned.
						after.Add(1)
					default:
					}
					runtime.Gosched()
					inside.Add(-1)
					e.s.end(rc)
				}
			}()
		}
		time.Sleep(time.Millisecond)
		e.s.Close()
		if n := inside.Load(); n != 0 {
			t.Fatalf("Close returned with %d requests in flight", n)
		}
		close(closed)
		wg.Wait()
		if n := after.Load(); n != 0 {
			t.Fatalf("%d requests began after Close returned", n)
		}
		if got := e.s.inflight.Load(); got != closedBit {
			t.Fatalf("in-flight word after Close: %#x, want %#x", got, closedBit)
		}
		e.s.Close()
	}
}
