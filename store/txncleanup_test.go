package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/mvcc"
	"github.com/google/uuid"
)

// txnEnv drives transactions by hand against an env's store, as a
// coordinator would, so a test can kill one (stop sending).
type txnEnv struct {
	*env
	ctx context.Context
}

func (e txnEnv) begin(anchor string) *kvpb.Transaction {
	now := e.clock.Now()
	return &kvpb.Transaction{TxnMeta: kvpb.TxnMeta{ID: uuid.New(), Key: []byte(anchor), WriteTimestamp: now, MinTimestamp: now},
		Status: kvpb.Pending, ReadTimestamp: now}
}

func (e txnEnv) run(txn *kvpb.Transaction, reqs ...kvpb.Request) error {
	ba := &kvpb.BatchRequest{Header: kvpb.Header{Txn: txn.Clone()}}
	for _, r := range reqs {
		ba.Add(r)
	}
	br, err := e.send(e.ctx, ba)
	if err == nil && br.Txn != nil {
		*txn = *br.Txn.Clone()
	}
	return err
}

func (e txnEnv) heartbeat(txn *kvpb.Transaction) error {
	return e.run(txn, &kvpb.HeartbeatTxnRequest{Key: txn.Key, Now: e.clock.Now()})
}

func (e txnEnv) intents() int {
	in, err := mvcc.ScanIntents(e.eng, []byte("a"), []byte("z"), 0)
	if err != nil {
		e.t.Fatal(err)
	}
	return len(in)
}

func (e txnEnv) record(txn *kvpb.Transaction) (kvpb.Transaction, bool) {
	rec, found, err := mvcc.GetTxnRecord(e.eng, txn.Key, txn.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	return rec, found
}

// The GC queue cleans up after a killed coordinator: its transaction's
// intents, once older than the cleanup age, are found, its expired record
// is aborted by a push, the intents are removed, and the aborted record is
// deleted a cleanup later; the zombie coordinator's late commit then
// fails. A committed transaction whose intents elsewhere were never
// resolved (its coordinator's node died after the commit) gets them
// committed and its record deleted. A live transaction as old is left
// alone.
func TestTxnCleanupKilledCoordinator(t *testing.T) {
	const age, liveness = 10 * time.Second, 2 * time.Second
	e := txnEnv{env: newEnv(t, Config{GCTxnCleanupAge: age, TxnLivenessThreshold: liveness}), ctx: context.Background()}
	e.settle()
	e.manual.Set(int64(time.Hour))

	killed := e.begin("a")
	if err := e.run(killed, &kvpb.PutRequest{Key: []byte("a"), Value: []byte("1")}, &kvpb.PutRequest{Key: []byte("b"), Value: []byte("1")}); err != nil {
		t.Fatal(err)
	}
	if err := e.heartbeat(killed); err != nil {
		t.Fatal(err)
	}
	committed := e.begin("c")
	if err := e.run(committed, &kvpb.PutRequest{Key: []byte("c"), Value: []byte("c1")}, &kvpb.PutRequest{Key: []byte("d"), Value: []byte("d1")}); err != nil {
		t.Fatal(err)
	}
	// Its commit record, as an EndTxn whose resolution of "d" (on another
	// tablet, say) was lost would leave it.
	final := *committed.Clone()
	final.Status = kvpb.Committed
	final.LockSpans = []kvpb.Span{{Key: []byte("c")}, {Key: []byte("d")}}
	b := e.eng.NewBatch()
	if err := mvcc.PutTxnRecord(b, &final); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	b.Close()
	live := e.begin("l")
	if err := e.run(live, &kvpb.PutRequest{Key: []byte("l"), Value: []byte("l1")}); err != nil {
		t.Fatal(err)
	}

	// Younger than the cleanup age: nothing happens.
	e.s.GCPass(e.ctx, true)
	if n := e.intents(); n != 5 {
		t.Fatalf("%d intents after a cleanup before the age, want 5", n)
	}

	e.manual.Advance(age + time.Second)
	if err := e.heartbeat(live); err != nil {
		t.Fatal(err)
	}
	e.s.GCPass(e.ctx, true)
	if n := e.intents(); n != 1 {
		t.Fatalf("%d intents after the cleanup, want only the live txn's", n)
	}
	if rec, found := e.record(killed); !found || rec.Status != kvpb.Aborted {
		t.Fatalf("killed coordinator's record: %+v (found %v), want ABORTED", rec, found)
	}
	if _, found := e.record(committed); found {
		t.Fatalf("the committed record was not deleted after its intents were resolved")
	}
	if rec, found := e.record(live); !found || rec.Status != kvpb.Pending {
		t.Fatalf("live txn's record: %+v (found %v)", rec, found)
	}
	for k, want := range map[string]string{"a": "", "b": "", "c": "c1", "d": "d1"} {
		if got := string(e.get(k)); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}

	// A cleanup later the aborted record goes; the zombie's commit fails.
	e.manual.Advance(age + time.Second)
	if err := e.heartbeat(live); err != nil {
		t.Fatal(err)
	}
	e.s.GCPass(e.ctx, true)
	if _, found := e.record(killed); found {
		t.Fatalf("the aborted record was not deleted")
	}
	var aborted *kvpb.TransactionAbortedError
	if err := e.run(killed, &kvpb.EndTxnRequest{Key: killed.Key, Commit: true, LockSpans: []kvpb.Span{{Key: []byte("a")}, {Key: []byte("b")}}}); !errors.As(err, &aborted) {
		t.Fatalf("zombie commit: %v, want TransactionAbortedError", err)
	}
	if _, found := e.record(killed); found {
		t.Fatalf("the zombie's commit recreated its record")
	}
	if e.intents() != 1 || string(e.get("l")) != "" {
		t.Fatalf("the live txn was disturbed")
	}
	st := e.s.GCQueueStats().TxnCleanup
	if st.IntentsResolved != 4 || st.RecordsRemoved != 2 || st.Aborted == 0 {
		t.Fatalf("cleanup stats %+v", st)
	}
}

// TestTxnCleanupSparesSlowHeartbeats: a transaction older than the
// cleanup age whose last heartbeat is past the liveness threshold but
// within the cleanup age (its coordinator alive, its beats held up: a
// COPY of over a minute on a node whose disk stalled behind the load) is
// left alone by the cleanup, its record on the intents' tablet or not;
// once it has had no heartbeat for the cleanup age it is aborted. Before,
// the cleanup aborted it as soon as its record passed the liveness
// threshold, and bench/parallelindex's long COPYs failed with 40001.
func TestTxnCleanupSparesSlowHeartbeats(t *testing.T) {
	const age, liveness = 10 * time.Second, 2 * time.Second
	e := txnEnv{env: newEnv(t, Config{GCTxnCleanupAge: age, TxnLivenessThreshold: liveness}), ctx: context.Background()}
	e.settle()
	e.manual.Set(int64(time.Hour))

	// slow's record is on "a", beside its first intent; its second
	// intent is found by the cleanup of the tablet holding "m" too.
	slow := e.begin("a")
	if err := e.run(slow, &kvpb.PutRequest{Key: []byte("a"), Value: []byte("1")}, &kvpb.PutRequest{Key: []byte("m"), Value: []byte("1")}); err != nil {
		t.Fatal(err)
	}
	if err := e.heartbeat(slow); err != nil {
		t.Fatal(err)
	}
	// Older than the cleanup age, its last beat liveness*3 ago.
	e.manual.Advance(age + time.Second)
	if err := e.heartbeat(slow); err != nil {
		t.Fatal(err)
	}
	e.manual.Advance(3 * liveness)
	e.s.GCPass(e.ctx, true)
	if rec, found := e.record(slow); !found || rec.Status != kvpb.Pending {
		t.Fatalf("a transaction whose last beat was %s ago (cleanup age %s): %+v (found %v), want PENDING", 3*liveness, age, rec, found)
	}
	if n := e.intents(); n != 2 {
		t.Fatalf("%d intents after the cleanup, want slow's 2", n)
	}
	// Its beats get through again, it commits.
	if err := e.heartbeat(slow); err != nil {
		t.Fatal(err)
	}
	if err := e.run(slow, &kvpb.EndTxnRequest{Key: slow.Key, Commit: true, LockSpans: []kvpb.Span{{Key: []byte("a")}, {Key: []byte("m")}}}); err != nil {
		t.Fatalf("commit after the cleanup: %v", err)
	}

	// One with no beat for the cleanup age is abandoned: aborted.
	gone := e.begin("b")
	if err := e.run(gone, &kvpb.PutRequest{Key: []byte("b"), Value: []byte("1")}); err != nil {
		t.Fatal(err)
	}
	if err := e.heartbeat(gone); err != nil {
		t.Fatal(err)
	}
	e.manual.Advance(age + time.Second)
	e.s.GCPass(e.ctx, true)
	if rec, found := e.record(gone); !found || rec.Status != kvpb.Aborted {
		t.Fatalf("a transaction with no beat for %s: %+v (found %v), want ABORTED", age+time.Second, rec, found)
	}
}

// TestTxnCleanupSkipsCleanTablets: the cleanup scans a tablet it last
// found without intents or records again only after the tablet took a
// write, so idle tablets cost no scan every half cleanup age; one holding
// an intent is scanned every time.
func TestTxnCleanupSkipsCleanTablets(t *testing.T) {
	const age = 10 * time.Second
	e := txnEnv{env: newEnv(t, Config{GCTxnCleanupAge: age}), ctx: context.Background()}
	e.settle()
	e.manual.Set(int64(time.Hour))
	tablets := int64(len(e.s.Tablets()))
	pass := func(what string, want int64) {
		t.Helper()
		e.manual.Advance(age/2 + time.Second)
		before := e.s.gc.stats.txnScans.Load()
		e.s.GCPass(e.ctx, false)
		if got := e.s.gc.stats.txnScans.Load() - before; got != want {
			t.Fatalf("%s: %d tablets scanned, want %d", what, got, want)
		}
	}
	pass("first", tablets)
	pass("nothing written", 0)
	txn := e.begin("a")
	if err := e.run(txn, &kvpb.PutRequest{Key: []byte("a"), Value: []byte("1")}); err != nil {
		t.Fatal(err)
	}
	pass("an intent written", 1)
	pass("the intent still there", 1)
}
