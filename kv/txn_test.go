package kv

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
)

func isAborted(err error, reason kvpb.AbortReason) bool {
	var ab *kvpb.TransactionAbortedError
	return errors.As(err, &ab) && ab.Reason == reason
}

// TestReadYourWrites: a transaction sees its own puts and deletes in gets
// and scans, on one tablet and across two.
func TestReadYourWrites(t *testing.T) {
	e := newTestEnv(t, envOptions{splits: []string{"m"}})
	ctx := context.Background()
	e.mustPut("b", "old")
	txn := e.db.NewTxn(ctx, "ryw", Snapshot)
	for _, kv := range [][2]string{{"a", "1"}, {"b", "2"}, {"x", "3"}} {
		if err := txn.Put(ctx, []byte(kv[0]), []byte(kv[1])); err != nil {
			t.Fatal(err)
		}
	}
	if v, _, err := txn.Get(ctx, []byte("b")); err != nil || string(v) != "2" {
		t.Fatalf("get b = %q, %v; want 2", v, err)
	}
	if err := txn.Delete(ctx, []byte("a")); err != nil {
		t.Fatal(err)
	}
	rows, err := txn.Scan(ctx, []byte("a"), []byte("z"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := rowsString(rows); got != "b=2 x=3" {
		t.Fatalf("scan = %q, want b=2 x=3", got)
	}
	// Nobody else sees them yet.
	if got := e.mustGet("b"); got != "old" {
		t.Fatalf("outside read of b before commit = %q, want old", got)
	}
	if err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.mustGet("b") + e.mustGet("x") + e.mustGet("a"); got != "23<none>" {
		t.Fatalf("after commit got %q", got)
	}
}

// TestSnapshotVisibility: a Snapshot transaction does not see a write
// committed after it started, even on a key it had not read yet.
func TestSnapshotVisibility(t *testing.T) {
	e := newTestEnv(t, envOptions{splits: []string{"m"}})
	ctx := context.Background()
	e.mustPut("a", "1")
	e.mustPut("x", "1")
	txn := e.db.NewTxn(ctx, "reader", Snapshot)
	if v, _, _ := txn.Get(ctx, []byte("a")); string(v) != "1" {
		t.Fatalf("first read %q", v)
	}
	e.mustPut("a", "2")
	e.mustPut("x", "2")
	e.mustPut("y", "new")
	rows, err := txn.Scan(ctx, []byte("a"), []byte("z"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := rowsString(rows); got != "a=1 x=1" {
		t.Fatalf("snapshot scan = %q, want a=1 x=1", got)
	}
	if err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestNoDirtyReads: an uncommitted write is invisible to others; a reader
// meeting the intent reads the committed value below it and does not block
// the writer's commit.
func TestNoDirtyReads(t *testing.T) {
	for _, iso := range []IsolationLevel{ReadCommitted, Snapshot, Serializable} {
		t.Run(iso.String(), func(t *testing.T) {
			e := newTestEnv(t, envOptions{})
			ctx := context.Background()
			e.mustPut("k", "committed")
			w := e.db.NewTxn(ctx, "writer", Snapshot)
			if err := w.Put(ctx, []byte("k"), []byte("dirty")); err != nil {
				t.Fatal(err)
			}
			r := e.db.NewTxn(ctx, "reader", iso)
			v, _, err := r.Get(ctx, []byte("k"))
			if err != nil {
				t.Fatal(err)
			}
			if string(v) != "committed" {
				t.Fatalf("reader saw %q", v)
			}
			if err := r.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if err := w.Commit(ctx); err != nil {
				t.Fatalf("writer commit after being read under: %v", err)
			}
			if !r.CommitTimestamp().Less(w.CommitTimestamp()) {
				t.Fatalf("writer committed at %s, not above the read at %s", w.CommitTimestamp(), r.CommitTimestamp())
			}
			if got := e.mustGet("k"); got != "dirty" {
				t.Fatalf("after commit: %q", got)
			}
		})
	}
}

// TestNoLostUpdates: two goroutines increment one counter N times each in
// transactions; every increment survives, at every isolation level.
func TestNoLostUpdates(t *testing.T) {
	const n = 15
	for _, iso := range []IsolationLevel{ReadCommitted, Snapshot, Serializable} {
		t.Run(iso.String(), func(t *testing.T) {
			e := newTestEnv(t, envOptions{})
			ctx := context.Background()
			e.mustPut("counter", "0")
			var wg sync.WaitGroup
			errs := make(chan error, 2)
			for range 2 {
				wg.Go(func() {
					for range n {
						err := e.db.Txn(ctx, iso, func(ctx context.Context, txn *Txn) error {
							v, _, err := txn.Get(ctx, []byte("counter"))
							if err != nil {
								return err
							}
							c, err := strconv.Atoi(string(v))
							if err != nil {
								return err
							}
							return txn.Put(ctx, []byte("counter"), []byte(strconv.Itoa(c+1)))
						})
						if err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if got := e.mustGet("counter"); got != strconv.Itoa(2*n) {
				t.Fatalf("counter = %s, want %d", got, 2*n)
			}
		})
	}
}

// TestWriteWriteConflict: two Snapshot transactions read and then write the
// same key; the first to commit wins, the other's write fails with a
// retryable error (it cannot refresh its read), and after PrepareForRetry it
// sees the winner's value.
func TestWriteWriteConflict(t *testing.T) {
	e := newTestEnv(t, envOptions{})
	ctx := context.Background()
	e.mustPut("k", "0")
	a := e.db.NewTxn(ctx, "a", Snapshot)
	b := e.db.NewTxn(ctx, "b", Snapshot)
	for _, txn := range []*Txn{a, b} {
		if _, _, err := txn.Get(ctx, []byte("k")); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Put(ctx, []byte("k"), []byte("b")); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	err := a.Put(ctx, []byte("k"), []byte("a"))
	if !kvpb.IsRetryable(err) {
		t.Fatalf("loser's write: got %v, want a retryable error", err)
	}
	if err2 := a.Put(ctx, []byte("other"), []byte("x")); !errors.Is(err2, err) {
		t.Fatalf("txn must refuse work until PrepareForRetry, got %v", err2)
	}
	if err := a.PrepareForRetry(ctx); err != nil {
		t.Fatal(err)
	}
	if v, _, err := a.Get(ctx, []byte("k")); err != nil || string(v) != "b" {
		t.Fatalf("after restart a reads %q, %v; want b", v, err)
	}
	if err := a.Put(ctx, []byte("k"), []byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.mustGet("k"); got != "a" {
		t.Fatalf("final %q", got)
	}
}

// TestBlindWriteAfterConflictRefreshes: a transaction that never read the
// key it writes is moved above a concurrent commit instead of restarting
// (its reads of other keys still hold).
func TestBlindWriteAfterConflictRefreshes(t *testing.T) {
	e := newTestEnv(t, envOptions{})
	ctx := context.Background()
	e.mustPut("r", "1")
	a := e.db.NewTxn(ctx, "a", Snapshot)
	if _, _, err := a.Get(ctx, []byte("r")); err != nil {
		t.Fatal(err)
	}
	start := a.ReadTimestamp()
	e.mustPut("k", "other")
	if err := a.Put(ctx, []byte("k"), []byte("a")); err != nil {
		t.Fatalf("blind write: %v", err)
	}
	if !start.Less(a.ReadTimestamp()) {
		t.Fatalf("read timestamp did not move: %s", a.ReadTimestamp())
	}
	if err := a.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.mustGet("k"); got != "a" {
		t.Fatalf("final %q", got)
	}
}

// TestReadCommittedStep: a READ COMMITTED transaction keeps its snapshot
// within a statement and sees new commits after Step.
func TestReadCommittedStep(t *testing.T) {
	e := newTestEnv(t, envOptions{})
	ctx := context.Background()
	e.mustPut("k", "1")
	for _, iso := range []IsolationLevel{ReadCommitted, Snapshot} {
		txn := e.db.NewTxn(ctx, "rc", iso)
		v1, _, _ := txn.Get(ctx, []byte("k"))
		next := strconv.Itoa(mustAtoi(t, string(v1)) + 1)
		e.mustPut("k", next)
		v2, _, _ := txn.Get(ctx, []byte("k"))
		if string(v2) != string(v1) {
			t.Fatalf("%s: same statement read %q then %q", iso, v1, v2)
		}
		if err := txn.Step(ctx); err != nil {
			t.Fatal(err)
		}
		v3, _, _ := txn.Get(ctx, []byte("k"))
		want := string(v1)
		if iso == ReadCommitted {
			want = next
		}
		if string(v3) != want {
			t.Fatalf("%s: after Step read %q, want %q", iso, v3, want)
		}
		if err := txn.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSerializableRefresh: a transaction whose write is pushed above its
// read timestamp (another reader read the key later) commits after a
// successful refresh under Serializable, and restarts when the refresh
// fails because something it read changed. Snapshot commits at the pushed
// timestamp either way (write skew is allowed there).
func TestSerializableRefresh(t *testing.T) {
	run := func(t *testing.T, iso IsolationLevel, changeRead bool) (err error, readTS, commitTS hlc.Timestamp) {
		e := newTestEnv(t, envOptions{splits: []string{"m"}})
		ctx := context.Background()
		e.mustPut("a", "1")
		txn := e.db.NewTxn(ctx, "s", iso)
		if _, _, err := txn.Get(ctx, []byte("a")); err != nil {
			t.Fatal(err)
		}
		readTS = txn.ReadTimestamp()
		if changeRead {
			e.mustPut("a", "2")
		}
		// A later read of x makes the timestamp cache push our write.
		_ = e.mustGet("x")
		if err := txn.Put(ctx, []byte("x"), []byte("s")); err != nil {
			t.Fatal(err)
		}
		err = txn.Commit(ctx)
		return err, readTS, txn.CommitTimestamp()
	}
	t.Run("serializable/refresh succeeds", func(t *testing.T) {
		err, readTS, commitTS := run(t, Serializable, false)
		if err != nil {
			t.Fatal(err)
		}
		if !readTS.Less(commitTS) {
			t.Fatalf("commit at %s not above the original read at %s", commitTS, readTS)
		}
	})
	t.Run("serializable/refresh fails", func(t *testing.T) {
		err, _, _ := run(t, Serializable, true)
		var retry *kvpb.TransactionRetryError
		if !errors.As(err, &retry) {
			t.Fatalf("got %v, want a TransactionRetryError", err)
		}
	})
	t.Run("snapshot/commits pushed", func(t *testing.T) {
		err, readTS, commitTS := run(t, Snapshot, true)
		if err != nil {
			t.Fatal(err)
		}
		if !readTS.Less(commitTS) {
			t.Fatalf("commit at %s not above the read at %s", commitTS, readTS)
		}
	})
	t.Run("serializable/db.Txn retries", func(t *testing.T) {
		e := newTestEnv(t, envOptions{})
		ctx := context.Background()
		e.mustPut("a", "1")
		attempts := 0
		err := e.db.Txn(ctx, Serializable, func(ctx context.Context, txn *Txn) error {
			attempts++
			if _, _, err := txn.Get(ctx, []byte("a")); err != nil {
				return err
			}
			if attempts == 1 {
				e.mustPut("a", "2")
				_ = e.mustGet("x")
			}
			return txn.Put(ctx, []byte("x"), []byte("s"))
		})
		if err != nil {
			t.Fatal(err)
		}
		if attempts != 2 {
			t.Fatalf("%d attempts, want 2", attempts)
		}
	})
}

// TestUncertaintyRefresh: with a clock offset, a value written just after a
// transaction started (but possibly before it, in real time on another
// node) is uncertain; the transaction moves its read timestamp above it
// and reads it, rather than returning a stale answer.
func TestUncertaintyRefresh(t *testing.T) {
	e := newTestEnv(t, envOptions{manualClock: true, maxOffset: 100 * time.Millisecond})
	ctx := context.Background()
	txn := e.db.NewTxn(ctx, "u", Snapshot)
	start := txn.ReadTimestamp()
	e.manual.Advance(10 * time.Millisecond)
	e.mustPut("k", "v")
	v, ok, err := txn.Get(ctx, []byte("k"))
	if err != nil {
		t.Fatal(err)
	}
	if !ok || string(v) != "v" {
		t.Fatalf("read %q (found %t); want the uncertain value", v, ok)
	}
	if !start.Less(txn.ReadTimestamp()) {
		t.Fatalf("read timestamp did not move")
	}
	if err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestDeadlock: A holds k1 (tablet 1) and wants k2; B holds k2 (tablet 2)
// and wants k1. Exactly one is aborted as the deadlock's victim; the other
// gets its write and commits.
func TestDeadlock(t *testing.T) {
	e := newTestEnv(t, envOptions{splits: []string{"m"}})
	ctx := context.Background()
	a := e.db.NewTxn(ctx, "a", Snapshot)
	b := e.db.NewTxn(ctx, "b", Snapshot)
	if err := a.Put(ctx, []byte("k1"), []byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, []byte("x2"), []byte("b")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	errs := make([]error, 2)
	var wg sync.WaitGroup
	wg.Go(func() { errs[0] = a.Put(ctx, []byte("x2"), []byte("a")) })
	wg.Go(func() { errs[1] = b.Put(ctx, []byte("k1"), []byte("b")) })
	wg.Wait()
	victims := 0
	var winner *Txn
	for i, err := range errs {
		switch {
		case err == nil:
			winner = []*Txn{a, b}[i]
		case isAborted(err, kvpb.AbortDeadlock):
			victims++
			_ = []*Txn{a, b}[i].Rollback(ctx)
		default:
			t.Fatalf("txn %d: %v", i, err)
		}
	}
	if victims != 1 || winner == nil {
		t.Fatalf("want exactly one victim and one winner, got %v", errs)
	}
	if err := winner.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	want := "a"
	if winner == b {
		want = "b"
	}
	if got := e.mustGet("k1") + e.mustGet("x2"); got != want+want {
		t.Fatalf("final values %q, want both %q", got, want)
	}
}

// TestCommitOfAbortedTxn: a transaction aborted by a high-priority pusher
// cannot commit; its commit fails with TransactionAbortedError, and DB.Txn
// would retry it in a new transaction.
func TestCommitOfAbortedTxn(t *testing.T) {
	e := newTestEnv(t, envOptions{})
	ctx := context.Background()
	a := e.db.NewTxn(ctx, "a", Snapshot)
	if err := a.Put(ctx, []byte("k"), []byte("a")); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	pushee := a.mu.proto.TxnMeta
	a.mu.Unlock()
	pusher := kvpb.Transaction{TxnMeta: kvpb.TxnMeta{Priority: math.MaxInt32, WriteTimestamp: e.clock.Now()}}
	ba := &kvpb.BatchRequest{}
	ba.Add(&kvpb.PushTxnRequest{Key: pushee.Key, Pusher: pusher, Pushee: pushee, PushType: kvpb.PushAbort, PushTo: e.clock.Now()})
	br, err := e.db.Send(ctx, ba)
	if err != nil {
		t.Fatal(err)
	}
	if st := br.Responses[0].(*kvpb.PushTxnResponse).Pushee.Status; st != kvpb.Aborted {
		t.Fatalf("pushee status %s after an abort push", st)
	}
	err = a.Commit(ctx)
	var ab *kvpb.TransactionAbortedError
	if !errors.As(err, &ab) {
		t.Fatalf("commit of an aborted txn: got %v, want TransactionAbortedError", err)
	}
	if err := a.PrepareForRetry(ctx); !errors.Is(err, ErrTxnAborted) {
		t.Fatalf("PrepareForRetry of an aborted txn: %v", err)
	}
	if err := a.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.mustGet("k"); got != "<none>" {
		t.Fatalf("aborted write visible: %q", got)
	}
}

// TestOnePhaseCommit: a transaction whose writes all go in the committing
// batch on one tablet commits in one phase and leaves no intent and no
// record; one whose writes span two tablets does not.
func TestOnePhaseCommit(t *testing.T) {
	e := newTestEnv(t, envOptions{splits: []string{"m"}})
	ctx := context.Background()
	txn := e.db.NewTxn(ctx, "1pc", Snapshot)
	if _, _, err := txn.Get(ctx, []byte("a")); err != nil {
		t.Fatal(err)
	}
	b := &Batch{}
	b.Put([]byte("a"), []byte("1"))
	b.Put([]byte("b"), []byte("2"))
	if err := txn.CommitInBatch(ctx, b); err != nil {
		t.Fatal(err)
	}
	if !txn.OnePhaseCommitted() {
		t.Fatal("single-tablet commit did not use one phase")
	}
	if n, r := e.allIntents(), e.txnRecordCount(); n != 0 || r != 0 {
		t.Fatalf("one-phase commit left %d intents and %d records", n, r)
	}
	if got := e.mustGet("a") + e.mustGet("b"); got != "12" {
		t.Fatalf("values %q", got)
	}

	txn2 := e.db.NewTxn(ctx, "2pc", Snapshot)
	b = &Batch{}
	b.Put([]byte("a"), []byte("3"))
	b.Put([]byte("x"), []byte("4"))
	if err := txn2.CommitInBatch(ctx, b); err != nil {
		t.Fatal(err)
	}
	if txn2.OnePhaseCommitted() {
		t.Fatal("two-tablet commit claims one phase")
	}
	// The commit resolves the intent on the other tablet by itself (the
	// anchor's EndTxn does, in the background), before any reader meets
	// it and has to push.
	for i := 0; len(e.intentsOf(txn2.ID())) > 0; i++ {
		if i == 500 {
			t.Fatalf("intents of a committed transaction never resolved: %q", e.intentsOf(txn2.ID()))
		}
		time.Sleep(time.Millisecond)
	}
	if got := e.mustGet("a") + e.mustGet("x"); got != "34" {
		t.Fatalf("values %q", got)
	}

	// Writes sent before the commit rule one phase out, even on one tablet.
	txn3 := e.db.NewTxn(ctx, "earlier", Snapshot)
	if err := txn3.Put(ctx, []byte("c"), []byte("5")); err != nil {
		t.Fatal(err)
	}
	b = &Batch{}
	b.Put([]byte("d"), []byte("6"))
	if err := txn3.CommitInBatch(ctx, b); err != nil {
		t.Fatal(err)
	}
	if txn3.OnePhaseCommitted() {
		t.Fatal("commit after earlier writes claims one phase")
	}
	if got := e.mustGet("c") + e.mustGet("d"); got != "56" {
		t.Fatalf("values %q", got)
	}
}

// TestAbandonedTxnRecovery: A writes intents on two tablets and its
// coordinator disappears (its context ends, so its heartbeat stops). Once
// the clock passes the liveness threshold, B writes the same keys and
// commits; A's intents are gone and A's commit fails as aborted.
func TestAbandonedTxnRecovery(t *testing.T) {
	const liveness = 5 * time.Second
	e := newTestEnv(t, envOptions{splits: []string{"m"}, manualClock: true, liveness: liveness})
	ctx := context.Background()
	actx, abandon := context.WithCancel(ctx)
	a := e.db.NewTxn(actx, "abandoned", Snapshot)
	for _, k := range []string{"k1", "x2"} {
		if err := a.Put(actx, []byte(k), []byte("a")); err != nil {
			t.Fatal(err)
		}
	}
	abandon()
	if got := len(e.intentsOf(a.ID())); got != 2 {
		t.Fatalf("A holds %d intents, want 2", got)
	}
	e.manual.Advance(liveness + time.Second)

	bctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	err := e.db.Txn(bctx, Snapshot, func(ctx context.Context, txn *Txn) error {
		b := &Batch{}
		b.Put([]byte("k1"), []byte("b"))
		b.Put([]byte("x2"), []byte("b"))
		return txn.Run(ctx, b)
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.intentsOf(a.ID()); len(got) != 0 {
		t.Fatalf("A's intents survive on %v", got)
	}
	if got := e.mustGet("k1") + e.mustGet("x2"); got != "bb" {
		t.Fatalf("values %q", got)
	}
	err = a.Commit(ctx)
	var ab *kvpb.TransactionAbortedError
	if !errors.As(err, &ab) {
		t.Fatalf("commit of the abandoned txn: got %v, want TransactionAbortedError", err)
	}
}

// TestReadCommittedWritesAcrossStatements: a READ COMMITTED transaction
// writes in one statement, steps, reads a concurrent commit in the next and
// writes again; both statements' writes commit, at one timestamp.
func TestReadCommittedWritesAcrossStatements(t *testing.T) {
	e := newTestEnv(t, envOptions{splits: []string{"m"}})
	ctx := context.Background()
	txn := e.db.NewTxn(ctx, "rc", ReadCommitted)
	if err := txn.Put(ctx, []byte("a"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	e.mustPut("x", "other")
	if err := txn.Step(ctx); err != nil {
		t.Fatal(err)
	}
	v, _, err := txn.Get(ctx, []byte("x"))
	if err != nil || string(v) != "other" {
		t.Fatalf("second statement read x = %q, %v", v, err)
	}
	if err := txn.Put(ctx, []byte("y"), append(v, '+')); err != nil {
		t.Fatal(err)
	}
	if err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.mustGet("a") + " " + e.mustGet("y"); got != "1 other+" {
		t.Fatalf("got %q", got)
	}
	// Both intents resolve to the commit timestamp: a snapshot just below
	// it sees neither, one at it sees both.
	ts := txn.CommitTimestamp()
	for _, c := range []struct {
		at   hlc.Timestamp
		want string
	}{{ts.Prev(), ""}, {ts, "a=1 y=other+"}} {
		ba := &kvpb.BatchRequest{}
		ba.Timestamp = c.at
		ba.Add(&kvpb.ScanRequest{Key: []byte("a"), EndKey: []byte("z")})
		br, err := e.db.Send(ctx, ba)
		if err != nil {
			t.Fatal(err)
		}
		var rows []kvpb.KeyValue
		for _, r := range br.Responses[0].(*kvpb.ScanResponse).Rows {
			if string(r.Key) != "x" {
				rows = append(rows, r)
			}
		}
		if got := rowsString(rows); got != c.want {
			t.Fatalf("scan at %s: %q, want %q", c.at, got, c.want)
		}
	}
}

// TestLateFirstWriteIsNotAbandoned: a transaction that first writes long
// after it started (longer than the liveness threshold) creates its record
// with the write, so a pusher finds it alive instead of aborting it as
// abandoned.
func TestLateFirstWriteIsNotAbandoned(t *testing.T) {
	const liveness = 5 * time.Second
	e := newTestEnv(t, envOptions{manualClock: true, liveness: liveness})
	ctx := context.Background()
	a := e.db.NewTxn(ctx, "slow", Snapshot)
	e.manual.Advance(liveness + time.Second)
	if err := a.Put(ctx, []byte("k"), []byte("a")); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	pushee := a.mu.proto.TxnMeta
	a.mu.Unlock()
	// A push that only succeeds against a finished or abandoned
	// transaction, told not to wait.
	ba := &kvpb.BatchRequest{}
	ba.WaitPolicy = kvpb.WaitError
	ba.Add(&kvpb.PushTxnRequest{Key: pushee.Key, Pushee: pushee, PushType: kvpb.PushTouch, PushTo: e.clock.Now(),
		Pusher: kvpb.Transaction{TxnMeta: kvpb.TxnMeta{Priority: 1, WriteTimestamp: e.clock.Now()}}})
	_, err := e.db.Send(ctx, ba)
	var pushErr *kvpb.TransactionPushError
	if !errors.As(err, &pushErr) {
		t.Fatalf("push of a live transaction: got %v, want TransactionPushError", err)
	}
	if err := a.Commit(ctx); err != nil {
		t.Fatalf("the slow transaction was treated as abandoned: %v", err)
	}
}

// TestCPutAndDelRange: conditional puts succeed or fail with
// ConditionFailedError (a final answer that leaves the transaction usable),
// and DelRange deletes across tablets and lists what it deleted.
func TestCPutAndDelRange(t *testing.T) {
	e := newTestEnv(t, envOptions{splits: []string{"m"}})
	ctx := context.Background()
	for _, k := range []string{"a", "b", "n", "o"} {
		e.mustPut(k, "v"+k)
	}
	txn := e.db.NewTxn(ctx, "cput", Serializable)
	if err := txn.CPut(ctx, []byte("c"), []byte("new"), nil, false); err != nil {
		t.Fatalf("cput of an absent key: %v", err)
	}
	if err := txn.CPut(ctx, []byte("a"), []byte("x"), []byte("va"), true); err != nil {
		t.Fatalf("cput with the right expectation: %v", err)
	}
	err := txn.CPut(ctx, []byte("b"), []byte("x"), []byte("wrong"), true)
	var cf *kvpb.ConditionFailedError
	if !errors.As(err, &cf) || string(cf.ActualValue) != "vb" {
		t.Fatalf("cput with a wrong expectation: %v", err)
	}
	deleted, err := txn.DelRange(ctx, []byte("b"), []byte("z"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, k := range deleted {
		got = append(got, string(k))
	}
	if strings.Join(got, " ") != "b c n o" {
		t.Fatalf("deleted %v, want b c n o", got)
	}
	if err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := e.db.Scan(ctx, []byte("a"), []byte("z"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if s := rowsString(rows); s != "a=x" {
		t.Fatalf("after commit: %q", s)
	}
}

// TestHeartbeatSaysWhyAborted: a record aborted because it expired (its
// beats did not get through for the liveness threshold) makes the next
// operation fail with ABORT_REASON_EXPIRED, not the PUSHED of a lost
// priority contest: what a COPY aborted by the transaction cleanup
// reported (bench/README, "the COPY that failed with 40001").
func TestHeartbeatSaysWhyAborted(t *testing.T) {
	const liveness = 2 * time.Second
	e := newTestEnv(t, envOptions{manualClock: true, liveness: liveness, db: Options{HeartbeatInterval: time.Hour}})
	ctx := context.Background()
	a := e.db.NewTxn(ctx, "a", Snapshot)
	if err := a.Put(ctx, []byte("k"), []byte("a")); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	pushee, hb := a.mu.proto.TxnMeta, a.mu.hb
	a.mu.Unlock()
	if keepGoing := a.beat(hb); !keepGoing {
		t.Fatal("the first heartbeat found the record aborted")
	}
	e.manual.Advance(liveness + time.Second)
	ba := &kvpb.BatchRequest{}
	ba.Add(&kvpb.PushTxnRequest{Key: pushee.Key, Pushee: pushee, PushType: kvpb.PushAbort, PushTo: e.clock.Now()})
	if _, err := e.db.Send(ctx, ba); err != nil {
		t.Fatal(err)
	}
	if keepGoing := a.beat(hb); keepGoing {
		t.Fatal("heartbeat of an aborted record wants to keep beating")
	}
	if _, _, err := a.Get(ctx, []byte("other")); !isAborted(err, kvpb.AbortExpired) {
		t.Fatalf("read after the heartbeat found the expired record aborted: got %v, want ABORT_REASON_EXPIRED", err)
	}
}

// TestHeartbeatFindsAbort: once a heartbeat finds the record aborted, the
// next operation fails with TransactionAbortedError (even a read, which the
// tablet alone would have served), and PrepareForRetry refuses.
func TestHeartbeatFindsAbort(t *testing.T) {
	e := newTestEnv(t, envOptions{db: Options{HeartbeatInterval: time.Hour}})
	ctx := context.Background()
	a := e.db.NewTxn(ctx, "a", Snapshot)
	if err := a.Put(ctx, []byte("k"), []byte("a")); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	pushee, hb := a.mu.proto.TxnMeta, a.mu.hb
	a.mu.Unlock()
	ba := &kvpb.BatchRequest{}
	ba.Add(&kvpb.PushTxnRequest{Key: pushee.Key, Pushee: pushee, PushType: kvpb.PushAbort, PushTo: e.clock.Now(),
		Pusher: kvpb.Transaction{TxnMeta: kvpb.TxnMeta{Priority: math.MaxInt32, WriteTimestamp: e.clock.Now()}}})
	if _, err := e.db.Send(ctx, ba); err != nil {
		t.Fatal(err)
	}
	// The scheduled beat is an hour away; beat by hand.
	if keepGoing := a.beat(hb); keepGoing {
		t.Fatal("heartbeat of an aborted record wants to keep beating")
	}
	_, _, err := a.Get(ctx, []byte("other"))
	if !isAborted(err, kvpb.AbortPushed) {
		t.Fatalf("read after the heartbeat saw the abort: got %v", err)
	}
	if err := a.PrepareForRetry(ctx); !errors.Is(err, ErrTxnAborted) {
		t.Fatalf("PrepareForRetry: %v", err)
	}
	if err := a.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestBackgroundTxnIsDeadlockVictim: a background transaction (a
// schema-change job's) and a client's deadlock, each holding the key the
// other wants; the background one is the victim every time, the client's
// write goes through untouched, and BackgroundTxn retries and commits.
func TestBackgroundTxnIsDeadlockVictim(t *testing.T) {
	for i := range 5 {
		e := newTestEnv(t, envOptions{splits: []string{"m"}})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		client := e.db.NewTxn(ctx, "client", Snapshot)
		if err := client.Put(ctx, []byte("k1"), []byte("client")); err != nil {
			t.Fatal(err)
		}
		holding := make(chan struct{})
		var attempts atomic.Int32
		var wg sync.WaitGroup
		var bgErr error
		wg.Go(func() {
			bgErr = e.db.BackgroundTxn(ctx, Snapshot, func(ctx context.Context, txn *Txn) error {
				n := attempts.Add(1)
				if err := txn.Put(ctx, []byte("x2"), []byte("job")); err != nil {
					return err
				}
				if n == 1 {
					close(holding)
				}
				return txn.Put(ctx, []byte("k1"), []byte("job"))
			})
		})
		<-holding
		// The client now wants x2, which the job holds: a cycle.
		if err := client.Put(ctx, []byte("x2"), []byte("client")); err != nil {
			t.Fatalf("run %d: the client's write failed in a deadlock with a background transaction: %v", i, err)
		}
		if err := client.Commit(ctx); err != nil {
			t.Fatalf("run %d: client commit: %v", i, err)
		}
		wg.Wait()
		if bgErr != nil {
			t.Fatalf("run %d: the background transaction did not retry to a commit: %v", i, bgErr)
		}
		if n := attempts.Load(); n < 2 {
			t.Fatalf("run %d: the background transaction ran %d times; it should have been the victim and retried", i, n)
		}
		if got := e.mustGet("k1") + "," + e.mustGet("x2"); got != "job,job" {
			t.Fatalf("run %d: final values %q, want the retried job's over the client's", i, got)
		}
		cancel()
	}
}
