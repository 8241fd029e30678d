package tablet

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	pb "go.etcd.io/raft/v3/raftpb"
)

// validate sends a strict refresh of key from from (a commit's validation
// of a key its writes depend on, kv/txn_validate.go) for a transaction at
// ts, and returns its error.
func (h *harness) validate(key string, from, ts hlc.Timestamp) error {
	txn := h.newTxn("validator", ts, 0)
	ba := &kvpb.BatchRequest{}
	ba.Txn = txn
	ba.Add(&kvpb.RefreshRequest{Key: []byte(key), From: from, Strict: true})
	_, err := h.r.Send(context.Background(), ba)
	return err
}

func wantRetry(t *testing.T, what string, err error) {
	t.Helper()
	var retry *kvpb.TransactionRetryError
	if !errors.As(err, &retry) {
		t.Fatalf("%s: validation err = %v, want a TransactionRetryError: a version written after the cached one was missed", what, err)
	}
}

// TestValidationCacheSeesEveryWrite: a strict refresh that passed leaves
// its key's newest version in the validation cache, and the next passes
// from it; a version of the key written afterwards, by any path (a plain
// put, a transaction's intent resolved by its commit, a one-phase commit,
// an ingested SST), fails the next validation from the old timestamp,
// exactly as the engine's seek did.
func TestValidationCacheSeesEveryWrite(t *testing.T) {
	h := newHarness(t, Config{})
	ctx := context.Background()
	from := wallTS(20)
	ts := wallTS(1000)
	next := int64(2000) // above ts: the validations leave their keys in the timestamp cache there
	// One replica for all cases, each on its own key (a validation leaves
	// its key in the timestamp cache at ts), so that the cache holds every
	// earlier case's keys too.
	var k string
	for _, tc := range []struct {
		name  string
		write func(at hlc.Timestamp)
	}{
		{"put", func(at hlc.Timestamp) {
			if _, err := h.sendAt(at, &kvpb.PutRequest{Key: []byte(k), Value: []byte("put")}); err != nil {
				t.Fatal(err)
			}
		}},
		{"intent resolved by its commit", func(at hlc.Timestamp) {
			w := h.newTxn("writer", at, 0)
			ba := &kvpb.BatchRequest{}
			ba.Add(&kvpb.PutRequest{Key: []byte(k), Value: []byte("txn")})
			if _, err := h.send(ctx, ba, "writer"); err != nil {
				t.Fatal(err)
			}
			// The intent alone fails the validation (the lock table).
			wantRetry(t, "an intent", h.validate(k, from, ts))
			ba = &kvpb.BatchRequest{}
			ba.Add(&kvpb.EndTxnRequest{Key: []byte(k), Commit: true, LockSpans: []kvpb.Span{{Key: []byte(k)}}})
			if _, err := h.send(ctx, ba, "writer"); err != nil {
				t.Fatalf("commit of %s: %v", w.Short(), err)
			}
		}},
		{"one-phase commit", func(at hlc.Timestamp) {
			h.newTxn("onepc", at, 0)
			ba := &kvpb.BatchRequest{}
			ba.Add(&kvpb.PutRequest{Key: []byte(k), Value: []byte("1pc")})
			ba.Add(&kvpb.EndTxnRequest{Key: []byte(k), Commit: true, LockSpans: []kvpb.Span{{Key: []byte(k)}}})
			br, err := h.send(ctx, ba, "onepc")
			if err != nil {
				t.Fatal(err)
			}
			if !br.OnePhaseCommit {
				t.Fatal("not committed in one phase")
			}
		}},
		{"SST", func(at hlc.Timestamp) {
			sst := sstOf(t, at, k, "sst")
			if _, err := h.sendAt(at, &kvpb.AddSSTableRequest{Key: []byte(k), EndKey: []byte(k + "\x00"), Data: sst}); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		// k's newest version below from: the validation passes, from
		// the engine and then from the cache.
		k = "\x03writer " + tc.name
		if _, err := h.sendAt(wallTS(10), &kvpb.PutRequest{Key: []byte(k), Value: []byte("old")}); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			if err := h.validate(k, from, ts); err != nil {
				t.Fatalf("%s: validation before the write: %v", tc.name, err)
			}
		}
		if !h.r.valid.passes([]byte(k), from) {
			t.Fatalf("%s: the passing validation left nothing in the cache", tc.name)
		}
		next++
		tc.write(wallTS(next))
		wantRetry(t, tc.name, h.validate(k, from, ts))
		// Still failing once the engine was read again.
		wantRetry(t, tc.name+", again", h.validate(k, from, ts))
	}
}

// TestValidationCacheAroundApply drives the raft path by hand to look
// into an apply: a validation evaluated after a write's batch committed
// but before its effects were applied (the window a write this replica
// did not latch would leave) fails, and one evaluated before the batch
// committed, which still passes on the old state, installs nothing that
// outlives the write.
func TestValidationCacheAroundApply(t *testing.T) {
	h := newHarness(t, Config{})
	g := &scriptedGroup{term: 5, leader: 1, proposed: make(chan []byte, 1)}
	h.r.SetRaft(g)
	sm := h.r.StateMachine()
	ctx := context.Background()
	const k = "\x03writer"
	from, ts := wallTS(20), wallTS(1000)
	index := uint64(10)
	entry := func(data []byte) *pb.Entry {
		index++
		i, term := index, uint64(5)
		return &pb.Entry{Term: &term, Index: &i, Data: data}
	}
	put := func(at hlc.Timestamp) (*pb.Entry, <-chan error) {
		done := make(chan error, 1)
		go func() {
			_, err := h.sendAt(at, &kvpb.PutRequest{Key: []byte(k), Value: []byte("v")})
			done <- err
		}()
		return entry(<-g.proposed), done
	}
	// evalValidation evaluates a validation directly, as a request that
	// needs no latch the write holds would (the write's latches would
	// make a Send wait for the write to be answered).
	evalValidation := func() error {
		txn := h.newTxn("validator", ts, 0)
		ba := &kvpb.BatchRequest{}
		ba.Txn = txn
		ba.Add(&kvpb.RefreshRequest{Key: []byte(k), From: from, Strict: true})
		_, _, err := h.r.Evaluate(ba)
		return err
	}
	e, done := put(wallTS(10))
	b := h.eng.NewBatch()
	if err := sm.Apply(b, e); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	b.Close()
	sm.Applied([]*pb.Entry{e}, false)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := evalValidation(); err != nil {
		t.Fatalf("validation of a key last written at 10 from 20: %v", err)
	}
	if !h.r.valid.passes([]byte(k), from) {
		t.Fatal("the passing validation left nothing in the cache")
	}

	// Committed, effects not yet applied: the cache must not answer.
	e, done = put(wallTS(30))
	b = h.eng.NewBatch()
	if err := sm.Apply(b, e); err != nil {
		t.Fatal(err)
	}
	// Before the commit a validation reads the old state and passes;
	// what it read must not be installed.
	if err := evalValidation(); err != nil {
		t.Fatalf("validation before the write's batch committed: %v", err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	b.Close()
	wantRetry(t, "committed, not yet applied", evalValidation())
	sm.Applied([]*pb.Entry{e}, false)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	wantRetry(t, "applied", evalValidation())
	_ = ctx
}

// TestLockedRowCheckAfterLostLock: an UPDATE's locking read takes an
// unreplicated lock on its row and leaves the row's newest version in the
// validation cache, so the commit's check of the row from the read's
// snapshot passes without a read. If the lock is lost (as at a lease
// change, simulated here by emptying the lock table) and another write of
// the row lands between the read and the commit, the check must fail as
// the engine's seek did.
func TestLockedRowCheckAfterLostLock(t *testing.T) {
	h := newHarness(t, Config{})
	ctx := context.Background()
	const k = "\x03account"
	if _, err := h.sendAt(wallTS(10), &kvpb.PutRequest{Key: []byte(k), Value: []byte("v10")}); err != nil {
		t.Fatal(err)
	}
	readAt := wallTS(20)
	h.newTxn("updater", readAt, 0)
	// lockingRead is SELECT ... FOR UPDATE of row k by the updater.
	lockingRead := func(k string) {
		t.Helper()
		ba := &kvpb.BatchRequest{}
		ba.Add(&kvpb.GetRequest{Key: []byte(k)})
		ba.Add(&kvpb.LockRequest{Key: []byte(k), Unreplicated: true})
		if _, err := h.send(ctx, ba, "updater"); err != nil {
			t.Fatal(err)
		}
	}
	lockingRead(k)
	if !h.r.valid.passes([]byte(k), readAt) {
		t.Fatal("the locking read left the row's newest version out of the cache")
	}
	// The commit's check, its read timestamp moved on (READ COMMITTED's
	// next statement): from the locking read's snapshot.
	check := func() error {
		txn := h.txn("updater").Clone()
		txn.ReadTimestamp, txn.WriteTimestamp = wallTS(50), wallTS(50)
		ba := &kvpb.BatchRequest{}
		ba.Txn = txn
		ba.Add(&kvpb.RefreshRequest{Key: []byte(k), From: readAt})
		_, err := h.r.Send(ctx, ba)
		return err
	}
	// (Not checked before the write: the check's read would push the
	// write above the check's timestamp, out of its reach.)
	h.r.locks.reset(nil) // the lock is lost; the cache is not told
	if _, err := h.sendAt(wallTS(30), &kvpb.PutRequest{Key: []byte(k), Value: []byte("v30")}); err != nil {
		t.Fatal(err)
	}
	wantRetry(t, "a write after the lost lock", check())
	// And with the row unchanged, the check passes from the cache: a
	// second row, locked the same way and left alone.
	const k2 = "\x03account2"
	lockingRead(k2)
	if !h.r.valid.passes([]byte(k2), readAt) {
		t.Fatal("the locking read of a row with no version left nothing in the cache")
	}

	// A row read and locked as a span (SQL's UPDATE scans its row's span
	// and locks it): each key of it is cached, and a write landing on one
	// after the lock was lost fails the check of that key.
	const row, col = "\x03row/", "\x03row/1"
	if _, err := h.sendAt(wallTS(10), &kvpb.PutRequest{Key: []byte(col), Value: []byte("v10")}); err != nil {
		t.Fatal(err)
	}
	ba := &kvpb.BatchRequest{}
	ba.Add(&kvpb.ScanRequest{Key: []byte(row), EndKey: []byte(row + "\xff")})
	ba.Add(&kvpb.LockRequest{Key: []byte(row), EndKey: []byte(row + "\xff"), Unreplicated: true})
	if _, err := h.send(ctx, ba, "updater"); err != nil {
		t.Fatal(err)
	}
	if !h.r.valid.passes([]byte(col), readAt) {
		t.Fatal("the span's locking read left its key's newest version out of the cache")
	}
	h.r.locks.reset(nil)
	if _, err := h.sendAt(wallTS(30), &kvpb.PutRequest{Key: []byte(col), Value: []byte("v30")}); err != nil {
		t.Fatal(err)
	}
	txn := h.txn("updater").Clone()
	txn.ReadTimestamp, txn.WriteTimestamp = wallTS(50), wallTS(50)
	ba = &kvpb.BatchRequest{}
	ba.Txn = txn
	ba.Add(&kvpb.RefreshRequest{Key: []byte(col), From: readAt})
	_, err := h.r.Send(ctx, ba)
	wantRetry(t, "a write of a span-locked row after the lost lock", err)
}

// TestValidationCacheRowSpan: an UPDATE's locking read locks its row's
// span [row, PrefixEnd(row)), and the lock's check leaves the span's
// newest version in the validation cache, so the commit's refresh of the
// lock's span passes without a read. Any write landing inside the span
// (a key of the row the check saw, a key it did not, the row's first
// key) drops the entry, and with the lock lost (as at a lease change)
// the commit's check then fails as the engine's read did; a write just
// past the span leaves it.
func TestValidationCacheRowSpan(t *testing.T) {
	h := newHarness(t, Config{})
	ctx := context.Background()
	readAt := wallTS(20)
	for i, tc := range []struct {
		name    string
		write   string // the key written after the lock, relative to the row
		invalid bool
	}{
		{name: "a key the check saw", write: "/1", invalid: true},
		{name: "a key the check did not see", write: "/2", invalid: true},
		{name: "the row's first key", write: "/", invalid: true},
		{name: "the next row", write: "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			row := []byte(fmt.Sprintf("\x03row%d/", i))
			end := keys.PrefixEnd(row)
			if _, err := h.sendAt(wallTS(10), &kvpb.PutRequest{Key: append(append([]byte(nil), row...), '1'), Value: []byte("v10")}); err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("updater%d", i)
			h.newTxn(name, readAt, 0)
			ba := &kvpb.BatchRequest{}
			ba.Add(&kvpb.ScanRequest{Key: row, EndKey: end})
			ba.Add(&kvpb.LockRequest{Key: row, EndKey: end, Unreplicated: true})
			if _, err := h.send(ctx, ba, name); err != nil {
				t.Fatal(err)
			}
			if !h.r.valid.passesSpan(row, end, readAt) {
				t.Fatal("the locking read left the row span's newest version out of the cache")
			}
			h.r.locks.reset(nil) // the lock is lost; the cache is not told
			w := append([]byte(nil), row[:len(row)-1]...)
			w = append(w, tc.write...)
			if _, err := h.sendAt(wallTS(30), &kvpb.PutRequest{Key: w, Value: []byte("v30")}); err != nil {
				t.Fatal(err)
			}
			if got := h.r.valid.passesSpan(row, end, readAt); got == tc.invalid {
				t.Fatalf("after a write of %q the cache passes the span: %v, want %v", w, got, !tc.invalid)
			}
			txn := h.txn(name).Clone()
			txn.ReadTimestamp, txn.WriteTimestamp = wallTS(50), wallTS(50)
			ba = &kvpb.BatchRequest{}
			ba.Txn = txn
			ba.Add(&kvpb.RefreshRequest{Key: row, EndKey: end, From: readAt})
			_, err := h.r.Send(ctx, ba)
			if tc.invalid {
				wantRetry(t, "a write inside the locked span", err)
			} else if err != nil {
				t.Fatalf("the check of the row after a write past it: %v", err)
			}
			// A one-phase commit below the write, its row lock checked
			// outside the transaction (evalOnePCWrites): the lock's check
			// must see the write above the commit, as the engine's read
			// did, and passes from the cache when nothing wrote the row.
			// (READ COMMITTED's, which may move above the refresh's read
			// at 50 once its writes passed at 25.)
			onepc := name + "-1pc"
			h.newTxn(onepc, wallTS(25), 0)
			ba = &kvpb.BatchRequest{}
			ba.Add(&kvpb.LockRequest{Key: row, EndKey: end})
			ba.Add(&kvpb.PutRequest{Key: append(append([]byte(nil), row...), '1'), Value: []byte("v25")})
			ba.Add(&kvpb.EndTxnRequest{Key: row, Commit: true, MayMoveCommit: true, LockSpans: []kvpb.Span{{Key: row, EndKey: end}}})
			br, err := h.send(ctx, ba, onepc)
			if tc.invalid {
				if err == nil {
					t.Fatalf("a one-phase commit at 25 of a row written at 30 committed (one phase: %v)", br.OnePhaseCommit)
				}
			} else if err != nil || !br.OnePhaseCommit {
				t.Fatalf("a one-phase commit of the row after a write past it: %v", err)
			}
		})
	}
}
