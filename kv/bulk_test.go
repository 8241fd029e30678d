package kv

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/mvcc"
	"github.com/cairn-db/cairn/storage"
)

// TestRunBulk: bulk writes are committed values just below the
// transaction's read timestamp: its own reads see them, they are not its
// writes (no intent, nothing to resolve), and a rollback leaves them.
func TestRunBulk(t *testing.T) {
	ctx := context.Background()
	e := newTestEnv(t, envOptions{splits: []string{"m"}})
	txn := e.db.NewTxn(ctx, "bulk", Serializable)
	b := &Batch{}
	b.BulkPut([]byte("a"), []byte("1"), true)
	b.BulkPut([]byte("z"), []byte("2"), true) // another tablet
	if err := txn.RunBulk(ctx, b); err != nil {
		t.Fatal(err)
	}
	if got := txnRead(t, txn, "a") + txnRead(t, txn, "z"); got != "12" {
		t.Errorf("the transaction reads %q, want its bulk writes", got)
	}

	if n := e.allIntents(); n != 0 {
		t.Errorf("%d intents after a bulk write", n)
	}
	// A later write of the transaction lands above the bulk value.
	if err := txn.Put(ctx, []byte("a"), []byte("3")); err != nil {
		t.Fatal(err)
	}
	if got := txnRead(t, txn, "a"); got != "3" {
		t.Errorf("after its own put the transaction reads %q, want 3", got)
	}
	dup := &Batch{}
	dup.BulkPut([]byte("z"), []byte("4"), true)
	if err := txn.RunBulk(ctx, dup); err == nil {
		t.Error("a second MustNotExist bulk put of z succeeded")
	}
	mixed := &Batch{}
	mixed.Put([]byte("b"), []byte("5"))
	if err := txn.RunBulk(ctx, mixed); err == nil {
		t.Error("RunBulk accepted a Put")
	}
	if err := txn.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.mustGet("z"); got != "2" {
		t.Errorf("after rollback z = %q: bulk writes are not the transaction's", got)
	}
	if err := txn.RunBulk(ctx, b); err == nil {
		t.Error("RunBulk in a finished transaction succeeded")
	}
}

// TestRunBulkCommitsAboveClock: a transaction that bulk-wrote commits at
// or above the clock's reading when its bulk write was sent, however old
// its read timestamp (bulkWritten: above any trailing closed timestamp
// published before the values applied), at every isolation level.
func TestRunBulkCommitsAboveClock(t *testing.T) {
	ctx := context.Background()
	e := newTestEnv(t, envOptions{})
	for _, iso := range []IsolationLevel{ReadCommitted, Snapshot, Serializable} {
		txn := e.db.NewTxn(ctx, "bulk", iso)
		key := []byte("k" + iso.String())
		if err := txn.Put(ctx, append(key, 'x'), []byte("w")); err != nil {
			t.Fatal(err)
		}
		before := e.db.Clock().Now()
		b := &Batch{}
		b.BulkPut(key, []byte("1"), true)
		if err := txn.RunBulk(ctx, b); err != nil {
			t.Fatal(err)
		}
		if err := txn.Commit(ctx); err != nil {
			t.Fatalf("%s: %v", iso, err)
		}
		if c := txn.CommitTimestamp(); c.Less(before) {
			t.Errorf("%s: committed at %s; want at or above %s, the clock before the bulk write", iso, c, before)
		}
	}
}

// TestMarkNew: marks last for the attempt, and a rollback to a savepoint
// taken before one forgets it.
func TestMarkNew(t *testing.T) {
	ctx := context.Background()
	e := newTestEnv(t, envOptions{})
	txn := e.db.NewTxn(ctx, "ddl", Serializable)
	sp0 := mustSavepoint(t, txn)
	if err := txn.Put(ctx, []byte("d1"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	txn.MarkNew("t1")
	sp1 := mustSavepoint(t, txn)
	if err := txn.Put(ctx, []byte("d2"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	txn.MarkNew("t2")
	if !txn.IsNew("t1") || !txn.IsNew("t2") || txn.IsNew("t3") {
		t.Fatal("marks not recorded")
	}
	if err := txn.RollbackToSavepoint(ctx, sp1); err != nil {
		t.Fatal(err)
	}
	if !txn.IsNew("t1") || txn.IsNew("t2") {
		t.Errorf("after rolling back past t2's mark: t1 %t t2 %t, want true false", txn.IsNew("t1"), txn.IsNew("t2"))
	}
	if err := txn.RollbackToSavepoint(ctx, sp0); err != nil {
		t.Fatal(err)
	}
	if txn.IsNew("t1") {
		t.Error("t1 still marked after rolling back past its creation")
	}
	txn.MarkNew("t3")
	txn.mu.Lock()
	txn.mu.retryErr = &kvpb.TransactionRetryError{Reason: kvpb.RetrySerializable}
	txn.mu.Unlock()
	if err := txn.PrepareForRetry(ctx); err != nil {
		t.Fatal(err)
	}
	if txn.IsNew("t3") {
		t.Error("a mark survived a restart")
	}
}

// TestClearRange: a range clear removes every committed version in its
// span, across tablets, at every timestamp, and nothing outside it; it
// leaves intents alone, refuses non-table keys and transactions.
func TestClearRange(t *testing.T) {
	ctx := context.Background()
	e := newTestEnv(t, envOptions{splits: []string{"\x03m"}})
	for _, k := range []string{"\x03a", "\x03b", "\x03c", "\x03n", "\x03z"} {
		e.mustPut(k, "v1")
		e.mustPut(k, "v2")
	}
	// An intent inside the span stays (with its provisional value).
	txn := e.db.NewTxn(ctx, "writer", Serializable)
	if err := txn.Put(ctx, []byte("\x03d"), []byte("pending")); err != nil {
		t.Fatal(err)
	}
	if err := e.db.ClearRange(ctx, []byte("\x03b"), []byte("\x03y")); err != nil {
		t.Fatal(err)
	}
	rows, err := e.db.Scan(ctx, []byte("\x03"), []byte("\x04"), 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, string(r.Key[1:])+"="+string(r.Value))
	}
	if want := "a=v2 z=v2"; strings.Join(got, " ") != want {
		t.Errorf("after ClearRange [b, y): %q, want %q", strings.Join(got, " "), want)
	}
	if n := e.allIntents(); n != 1 {
		t.Errorf("%d intents after ClearRange, want the writer's 1", n)
	}
	if err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.mustGet("\x03d"); got != "pending" {
		t.Errorf("the writer's committed value: %q", got)
	}
	if err := e.db.ClearRange(ctx, []byte("\x02a"), []byte("\x02b")); err == nil {
		t.Error("ClearRange of system keys succeeded")
	}
	ba := &kvpb.BatchRequest{}
	ba.Txn = e.db.NewTxn(ctx, "t", Serializable).mu.proto.Clone()
	ba.Add(&kvpb.ClearRangeRequest{Key: []byte("\x03a"), EndKey: []byte("\x03b")})
	if _, err := e.db.Send(ctx, ba); err == nil {
		t.Error("a transactional ClearRange succeeded")
	}
}

// TestAfterCommit: functions registered run once after a commit, never
// after a rollback, and are forgotten by a rollback to a savepoint taken
// before them and by a restart.
func TestAfterCommit(t *testing.T) {
	ctx := context.Background()
	e := newTestEnv(t, envOptions{})
	var ran []string
	reg := func(txn *Txn, name string) {
		txn.AfterCommit(func(context.Context) { ran = append(ran, name) })
	}
	txn := e.db.NewTxn(ctx, "a", Serializable)
	if err := txn.Put(ctx, []byte("k1"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	reg(txn, "kept")
	sp := mustSavepoint(t, txn)
	if err := txn.Put(ctx, []byte("k2"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	reg(txn, "rolled back")
	if err := txn.RollbackToSavepoint(ctx, sp); err != nil {
		t.Fatal(err)
	}
	if len(ran) != 0 {
		t.Fatalf("ran before commit: %v", ran)
	}
	if err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if strings.Join(ran, ",") != "kept" {
		t.Errorf("after commit ran %v, want [kept]", ran)
	}
	ran = nil
	txn = e.db.NewTxn(ctx, "b", Serializable)
	if err := txn.Put(ctx, []byte("k3"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	reg(txn, "aborted")
	if err := txn.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	txn = e.db.NewTxn(ctx, "c", Serializable)
	reg(txn, "restarted")
	txn.mu.Lock()
	txn.mu.retryErr = &kvpb.TransactionRetryError{Reason: kvpb.RetrySerializable}
	txn.mu.Unlock()
	if err := txn.PrepareForRetry(ctx); err != nil {
		t.Fatal(err)
	}
	if err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if len(ran) != 0 {
		t.Errorf("ran %v after a rollback and a restart, want nothing", ran)
	}
}

// TestRunBulkMeetsIntent: a MustNotExist bulk write fails on another
// transaction's intent also when the tablet holds too many locks for its
// lock table to rule the batch's span out (the lock keyspace is then
// walked), and succeeds where there is none.
func TestRunBulkMeetsIntent(t *testing.T) {
	ctx := context.Background()
	e := newTestEnv(t, envOptions{})
	other := e.db.NewTxn(ctx, "other", Serializable)
	b := &Batch{}
	for i := range 100 {
		b.Put(fmt.Appendf(nil, "a%03d", i), []byte("x"))
	}
	b.Put([]byte("m"), []byte("x"))
	if err := other.Run(ctx, b); err != nil {
		t.Fatal(err)
	}
	loader := e.db.NewTxn(ctx, "loader", Serializable)
	hit := &Batch{}
	for _, k := range []string{"l", "m", "n"} {
		hit.BulkPut([]byte(k), []byte("1"), true)
	}
	var cf *kvpb.ConditionFailedError
	if err := loader.RunBulk(ctx, hit); !errors.As(err, &cf) || string(cf.Key) != "m" {
		t.Errorf("a bulk write over another transaction's intent on m: %v, want a condition failure on m", err)
	}
	miss := &Batch{}
	for _, k := range []string{"x", "y"} {
		miss.BulkPut([]byte(k), []byte("1"), true)
	}
	if err := loader.RunBulk(ctx, miss); err != nil {
		t.Errorf("a bulk write beside another transaction's intents: %v", err)
	}
	_ = other.Rollback(ctx)
	_ = loader.Rollback(ctx)
}

// sstSender records the AddSSTable sub-batches a DistSender sends: the
// span and the keys of the SST each carried, and whether it succeeded.
type sstSender struct {
	next kvpb.Sender
	mu   sync.Mutex
	sent []string
}

func (s *sstSender) Send(ctx context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
	br, err := s.next.Send(ctx, ba)
	if r, ok := ba.Requests[0].(*kvpb.AddSSTableRequest); ok {
		var ks []string
		if ferr := storage.ForEachSST(r.Data, nil, nil, func(k storage.MVCCKey, _ []byte) error {
			ks = append(ks, string(k.Key[1:]))
			return nil
		}); ferr != nil {
			return nil, ferr
		}
		s.mu.Lock()
		s.sent = append(s.sent, fmt.Sprintf("[%s,%s) %s ok=%v", r.Key[1:], r.EndKey[1:], strings.Join(ks, ""), err == nil))
		s.mu.Unlock()
	}
	return br, err
}

// TestAddSSTableSplitBetweenCutAndIngest: an SST cut for one tablet that
// split before it arrived is refused by the tablet, cut again at the new
// bound by the DistSender and ingested as two pieces; tablets whose part
// holds no key get nothing; a version written above the SST's timestamp
// wins over it.
func TestAddSSTableSplitBetweenCutAndIngest(t *testing.T) {
	ctx := context.Background()
	rec := &sstSender{}
	e := newTestEnv(t, envOptions{wrapSender: func(s kvpb.Sender) kvpb.Sender { rec.next = s; return rec }})
	e.mustPut("\x03z", "z")
	ts := e.clock.Now()
	b := storage.NewSSTBuilder()
	for _, k := range []string{"\x03a", "\x03c", "\x03n", "\x03p"} {
		if err := mvcc.PutSSTVersion(b, []byte(k), ts, []byte("sst-"+k[1:])); err != nil {
			t.Fatal(err)
		}
	}
	data, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	// The DB's cache knows one tablet; the store splits behind it.
	if _, _, err := e.store.Split(ctx, []byte("\x03m")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.store.Split(ctx, []byte("\x03x")); err != nil {
		t.Fatal(err)
	}
	n, err := e.db.AddSSTable(ctx, []byte("\x03a"), []byte("\x03q"), data, ts)
	if err != nil {
		t.Fatal(err)
	}
	if n != 4 {
		t.Fatalf("ingested %d versions, want 4", n)
	}
	want := []string{"[a,q) acnp ok=false", "[a,m) ac ok=true", "[m,q) np ok=true"}
	if len(rec.sent) > 1 {
		slices.Sort(rec.sent[1:]) // the pieces went in parallel
	}
	if fmt.Sprint(rec.sent) != fmt.Sprint(want) {
		t.Fatalf("sent %q, want %q", rec.sent, want)
	}
	e.mustPut("\x03c", "later")
	rows, err := e.db.Scan(ctx, []byte("\x03"), []byte("\x04"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := rowsString(rows); got != rowsString([]kvpb.KeyValue{
		{Key: []byte("\x03a"), Value: []byte("sst-a")}, {Key: []byte("\x03c"), Value: []byte("later")},
		{Key: []byte("\x03n"), Value: []byte("sst-n")}, {Key: []byte("\x03p"), Value: []byte("sst-p")},
		{Key: []byte("\x03z"), Value: []byte("z")},
	}) {
		t.Fatalf("after the ingest: %s", got)
	}
	// A span over three tablets whose SST has keys in one: one piece.
	rec.sent = nil
	b = storage.NewSSTBuilder()
	if err := mvcc.PutSSTVersion(b, []byte("\x03o"), ts, []byte("sst-o")); err != nil {
		t.Fatal(err)
	}
	if data, err = b.Finish(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.AddSSTable(ctx, []byte("\x03b"), []byte("\x03y"), data, ts); err != nil {
		t.Fatal(err)
	}
	if want := []string{"[m,x) o ok=true"}; fmt.Sprint(rec.sent) != fmt.Sprint(want) {
		t.Fatalf("sent %q, want %q", rec.sent, want)
	}
}

// TestSortedStream: batches whose selected keys continue ascending are
// taken out as runs and filled into one SST at the bulk timestamp,
// ingested once the stream breaks (Flush), the rest
// of each batch written as BulkPuts beside them; the first batch that
// goes back breaks the stream for good; a BulkPut of a key a finished
// run ingested fails its uniqueness check.
func TestSortedStream(t *testing.T) {
	ctx := context.Background()
	e := newTestEnv(t, envOptions{splits: []string{"\x03m"}})
	txn := e.db.NewTxn(ctx, "bulk", Serializable)
	defer func() { _ = txn.Rollback(ctx) }()
	s := &SortedStream{In: func(k []byte) bool { return k[1] == 'p' }}
	batch := func(ks ...string) *Batch {
		b := &Batch{}
		for _, k := range ks {
			b.BulkPut([]byte("\x03"+k), []byte("v"+k), true)
		}
		return b
	}
	run := func(b *Batch, wantRun bool) error {
		t.Helper()
		r, err := s.Take(ctx, txn, b)
		if err != nil {
			t.Fatal(err)
		}
		if (r != nil) != wantRun {
			t.Fatalf("Take: run %v, want %v (broken %v)", r != nil, wantRun, s.Broken())
		}
		if r == nil && s.Broken() {
			// As the bulk load does: the SST being filled goes in
			// before any BulkPut of the stream's keys.
			fr, err := s.Flush()
			if err != nil {
				t.Fatal(err)
			}
			if err := txn.RunBulkSorted(ctx, &Batch{}, fr); err != nil {
				t.Fatal(err)
			}
		}
		return txn.RunBulkSorted(ctx, b, r)
	}
	// Unsorted within the batch, above nothing: taken, sorted.
	if err := run(batch("p3", "a1", "p1", "x1", "p2"), true); err != nil {
		t.Fatal(err)
	}
	if err := run(batch("p5", "b1", "p4"), true); err != nil {
		t.Fatal(err)
	}
	if n := s.SSTs.Load(); n != 0 {
		t.Fatalf("%d SSTs, want 0 (the runs fill one SST, not ingested yet)", n)
	}
	// Goes back below p5: broken, written as BulkPuts; p2 was ingested.
	err := run(batch("p6", "p2"), false)
	var cf *kvpb.ConditionFailedError
	if !errors.As(err, &cf) || string(cf.Key) != "\x03p2" {
		t.Fatalf("BulkPut of an ingested key: %v", err)
	}
	if err := run(batch("p9"), false); err != nil {
		t.Fatal(err)
	}
	if !s.Broken() || s.SSTs.Load() != 1 {
		t.Fatalf("broken %v, %d SSTs", s.Broken(), s.SSTs.Load())
	}
	rows, err := txn.Scan(ctx, []byte("\x03"), []byte("\x04"), 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, string(r.Key[1:])+"="+string(r.Value))
	}
	// p6 may or may not have been written beside the failed p2.
	got = slices.DeleteFunc(got, func(s string) bool { return s == "p6=vp6" })
	if want := "a1=va1 b1=vb1 p1=vp1 p2=vp2 p3=vp3 p4=vp4 p5=vp5 p9=vp9 x1=vx1"; strings.Join(got, " ") != want {
		t.Fatalf("the transaction reads %q, want %q", strings.Join(got, " "), want)
	}
}

// TestSortedStreamTakeOrder: Take decides whether a batch continues the
// stream from its keys alone: a batch in ascending order continues it
// when its first key lies above the last taken (no sort), and a batch
// holding a key twice, or starting at or below that key, breaks it, in
// input order or not. Many BulkPuts in one batch keep their keys and
// values apart (BulkPut carves its requests from chunks).
func TestSortedStreamTakeOrder(t *testing.T) {
	ctx := context.Background()
	e := newTestEnv(t, envOptions{})
	txn := e.db.NewTxn(ctx, "bulk", Serializable)
	defer func() { _ = txn.Rollback(ctx) }()
	batch := func(ks ...string) *Batch {
		b := &Batch{}
		for _, k := range ks {
			b.BulkPut([]byte("\x03"+k), []byte("v"+k), true)
		}
		return b
	}
	for _, tc := range []struct {
		name    string
		batches [][]string
		runs    []bool // whether each batch continues the stream
	}{
		{"ascending, then ascending above", [][]string{{"a1", "a2", "a3"}, {"b1", "b2"}}, []bool{true, true}},
		{"ascending, then one starting at the last key", [][]string{{"a1", "a2"}, {"a2", "b1"}}, []bool{true, false}},
		{"ascending, then one starting below it", [][]string{{"a1", "a3"}, {"a2", "b1"}}, []bool{true, false}},
		{"a key twice, in order", [][]string{{"a1", "a2", "a2", "a3"}}, []bool{false}},
		{"a key twice, out of order", [][]string{{"a3", "a1", "a3"}}, []bool{false}},
		{"out of order, then below", [][]string{{"a3", "a1"}, {"b1", "a2"}}, []bool{true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &SortedStream{In: func([]byte) bool { return true }}
			for i, ks := range tc.batches {
				r, err := s.Take(ctx, txn, batch(ks...))
				if err != nil {
					t.Fatalf("batch %d: %v", i, err)
				}
				if (r != nil) != tc.runs[i] || s.Broken() == tc.runs[i] {
					t.Fatalf("batch %d %q: run %v, broken %v; want a run %v", i, ks, r != nil, s.Broken(), tc.runs[i])
				}
			}
		})
	}
	// 5,000 BulkPuts in one batch, in order: one run, every key with its
	// own value.
	b := &Batch{}
	for i := range 5000 {
		k := fmt.Sprintf("k%05d", i)
		b.BulkPut([]byte("\x03"+k), []byte("v"+k), true)
	}
	s := &SortedStream{In: func([]byte) bool { return true }}
	r, err := s.Take(ctx, txn, b)
	if err != nil || r == nil {
		t.Fatalf("Take: %v, %v", r, err)
	}
	if err := txn.RunBulkSorted(ctx, b, r); err != nil {
		t.Fatal(err)
	}
	fr, err := s.Flush()
	if err != nil {
		t.Fatal(err)
	}
	if err := txn.RunBulkSorted(ctx, &Batch{}, fr); err != nil {
		t.Fatal(err)
	}
	rows, err := txn.Scan(ctx, []byte("\x03"), []byte("\x04"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 5000 {
		t.Fatalf("%d rows, want 5000", len(rows))
	}
	for i, row := range rows {
		if k := fmt.Sprintf("k%05d", i); string(row.Key[1:]) != k || string(row.Value) != "v"+k {
			t.Fatalf("row %d: %q = %q", i, row.Key, row.Value)
		}
	}
}

// TestSortedStreamCuts: a stream's SST is cut only at its tablet's end,
// at SortedSSTBytes, or at Flush, whatever the batches: sorted input in
// many batches is a few SSTs (one per batch made 100 small SSTs of a
// 1M-row load), and every key is readable afterwards.
func TestSortedStreamCuts(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		sstBytes int64
		batches  [][]string
		want     int64
	}{
		{"one tablet, many batches", 24 << 20, [][]string{{"a1", "a2"}, {"b1"}, {"c1", "c2"}, {"d1"}}, 1},
		{"across the split at m", 24 << 20, [][]string{{"a1", "k1"}, {"l1", "n1"}, {"o1"}}, 2},
		{"a tiny size: one SST per key", 1, [][]string{{"a1", "a2"}, {"b1"}}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func(prev int64) { SortedSSTBytes = prev }(SortedSSTBytes)
			SortedSSTBytes = tc.sstBytes
			e := newTestEnv(t, envOptions{splits: []string{"\x03m"}})
			txn := e.db.NewTxn(ctx, "bulk", Serializable)
			defer func() { _ = txn.Rollback(ctx) }()
			s := &SortedStream{In: func([]byte) bool { return true }}
			var want []string
			for _, ks := range tc.batches {
				b := &Batch{}
				for _, k := range ks {
					b.BulkPut([]byte("\x03"+k), []byte("v"+k), true)
					want = append(want, k)
				}
				r, err := s.Take(ctx, txn, b)
				if err != nil || r == nil {
					t.Fatalf("Take: %v, %v", r, err)
				}
				if err := txn.RunBulkSorted(ctx, b, r); err != nil {
					t.Fatal(err)
				}
			}
			r, err := s.Flush()
			if err != nil || r == nil {
				t.Fatalf("Flush: %v, %v", r, err)
			}
			if err := txn.RunBulkSorted(ctx, &Batch{}, r); err != nil {
				t.Fatal(err)
			}
			if r, _ := s.Flush(); r != nil {
				t.Errorf("a second Flush returned a run")
			}
			if n := s.SSTs.Load(); n != tc.want {
				t.Errorf("%d SSTs, want %d", n, tc.want)
			}
			rows, err := txn.Scan(ctx, []byte("\x03"), []byte("\x04"), 0)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range rows {
				if string(r.Value) != "v"+string(r.Key[1:]) {
					t.Errorf("%q = %q", r.Key, r.Value)
				}
				got = append(got, string(r.Key[1:]))
			}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("the transaction reads %q, want %q", got, want)
			}
		})
	}
}

// TestSortedStreamTimestampMoves: every version of an SST is at one
// timestamp (the tablet refuses any other), so when the bulk timestamp
// moves between batches (a READ COMMITTED statement boundary) the stream
// seals its SST and starts another at the new one; both are readable.
func TestSortedStreamTimestampMoves(t *testing.T) {
	ctx := context.Background()
	e := newTestEnv(t, envOptions{})
	txn := e.db.NewTxn(ctx, "bulk", ReadCommitted)
	defer func() { _ = txn.Rollback(ctx) }()
	s := &SortedStream{In: func([]byte) bool { return true }}
	take := func(k string) {
		t.Helper()
		b := &Batch{}
		b.BulkPut([]byte("\x03"+k), []byte("v"+k), true)
		r, err := s.Take(ctx, txn, b)
		if err != nil || r == nil {
			t.Fatalf("Take: %v, %v", r, err)
		}
		if err := txn.RunBulkSorted(ctx, b, r); err != nil {
			t.Fatal(err)
		}
	}
	take("a")
	take("b")
	before := txn.ReadTimestamp()
	if err := txn.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if !before.Less(txn.ReadTimestamp()) {
		t.Fatalf("Step left the read timestamp at %v", txn.ReadTimestamp())
	}
	take("c")
	r, err := s.Flush()
	if err != nil {
		t.Fatal(err)
	}
	if err := txn.RunBulkSorted(ctx, &Batch{}, r); err != nil {
		t.Fatal(err)
	}
	if n := s.SSTs.Load(); n != 2 {
		t.Errorf("%d SSTs, want 2 (cut where the timestamp moved)", n)
	}
	rows, err := txn.Scan(ctx, []byte("\x03"), []byte("\x04"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Errorf("the transaction reads %d rows, want 3", len(rows))
	}
}

// failClears fails the ClearRange sub-batches it is told to, then passes
// the rest through: a refusal under load (a routing retry run out, a
// lease moving) that a retry gets past.
type failClears struct {
	kvpb.Sender
	mu   sync.Mutex
	fail int // sub-batches left to fail
	seen int // ClearRange sub-batches sent
	// after: fail only once this many sub-batches have gone through.
	after int
}

func (f *failClears) Send(ctx context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
	if len(ba.Requests) > 0 {
		if _, ok := ba.Requests[0].(*kvpb.ClearRangeRequest); ok {
			f.mu.Lock()
			f.seen++
			failIt := f.seen > f.after && f.fail > 0
			if failIt {
				f.fail--
			}
			f.mu.Unlock()
			if failIt {
				return nil, errors.New("injected: sub-batch refused")
			}
		}
	}
	return f.Sender.Send(ctx, ba)
}

// TestClearRangesRetriesABatch: ClearRanges over more spans than one
// batch holds, with a later batch's sub-batch refused a few times,
// clears every span (the refused batch is sent again); refused more
// often than its attempts, it fails and leaves the spans from that batch
// on as they were, which is what every such refusal did before the
// retries: the flaky 2 keys left by undistribute_table.
func TestClearRangesRetriesABatch(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fail     int
		wantErr  bool
		wantLeft bool
	}{
		{"refused twice", 2, false, false},
		{"refused beyond the attempts", clearRangesAttempts, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			fc := &failClears{fail: tc.fail, after: 1}
			e := newTestEnv(t, envOptions{wrapSender: func(s kvpb.Sender) kvpb.Sender { fc.Sender = s; return fc }})
			// One span per key, as a table's buckets in a shared group:
			// more than a batch, so the second batch is the refused one.
			n := clearRangesBatch + 100
			var spans []kvpb.Span
			for i := range n {
				k := fmt.Appendf([]byte("\x03"), "%05d", i)
				e.mustPut(string(k), "v")
				spans = append(spans, kvpb.Span{Key: k, EndKey: append(slices.Clone(k), 0)})
			}
			err := e.db.ClearRanges(ctx, spans)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ClearRanges: %v, want an error: %v", err, tc.wantErr)
			}
			rows, serr := e.db.Scan(ctx, []byte("\x03"), []byte("\x04"), 0)
			if serr != nil {
				t.Fatal(serr)
			}
			if left := len(rows) > 0; left != tc.wantLeft {
				t.Fatalf("%d keys left after ClearRanges, want some left: %v", len(rows), tc.wantLeft)
			}
			if tc.wantLeft && len(rows) != n-clearRangesBatch {
				t.Fatalf("%d keys left, want the second batch's %d", len(rows), n-clearRangesBatch)
			}
			if got := e.db.ClearRetries(); got != int64(min(tc.fail, clearRangesAttempts-1)) {
				t.Fatalf("%d batches sent again, want %d", got, min(tc.fail, clearRangesAttempts-1))
			}
		})
	}
}
