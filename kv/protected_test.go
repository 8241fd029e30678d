package kv

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/storage"
	"github.com/cairn-db/cairn/store"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// A long REPEATABLE READ transaction keeps seeing its snapshot while the
// GC queue runs with a TTL far shorter than it lives: the store's queue
// asks the DB for its protected timestamp. Once it commits, GC passes its
// snapshot and a read there is refused, never answered wrongly.
func TestProtectedTimestampHoldsSnapshot(t *testing.T) {
	ctx := context.Background()
	manual := hlc.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	clock := hlc.NewClock(manual.UnixNano, 0)
	eng, err := storage.Open("", storage.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	var db *DB
	st, err := store.Open(ctx, eng, clock, store.Config{
		GCTTL:       func([]byte) time.Duration { return time.Millisecond },
		GCProtected: func(context.Context) (hlc.Timestamp, error) { return db.ProtectedTimestamp(), nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	db = NewDB(st, st, clock, Options{})
	defer db.Close()

	put := func(i int) {
		manual.Advance(10 * time.Millisecond)
		if err := db.Put(ctx, []byte("k"), fmt.Appendf(nil, "v%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 50 {
		put(i)
	}
	txn := db.NewTxn(ctx, "long", Snapshot)
	if v, _, err := txn.Get(ctx, []byte("k")); err != nil || string(v) != "v49" {
		t.Fatalf("first read: %q, %v", v, err)
	}
	snapshot := txn.ReadTimestamp()
	for i := 50; i < 100; i++ {
		put(i)
	}
	manual.Advance(time.Second)
	if n := st.GCPass(ctx, true); n != 49 {
		t.Fatalf("GC under the open transaction removed %d versions, want 49 (those below its snapshot)", n)
	}
	if v, _, err := txn.Get(ctx, []byte("k")); err != nil || string(v) != "v49" {
		t.Fatalf("read in the transaction after GC: %q, %v; want its snapshot's v49", v, err)
	}
	if err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := db.OpenTxns(); n != 0 {
		t.Fatalf("%d transactions still registered after commit", n)
	}
	manual.Advance(time.Second)
	if n := st.GCPass(ctx, true); n != 50 {
		t.Fatalf("GC after the commit removed %d versions, want 50", n)
	}
	ba := &kvpb.BatchRequest{Header: kvpb.Header{Timestamp: snapshot}}
	ba.Add(&kvpb.GetRequest{Key: []byte("k")})
	var bgc *kvpb.BatchTimestampBeforeGCError
	if _, err := db.Send(ctx, ba); !errors.As(err, &bgc) {
		t.Fatalf("read at the finished transaction's snapshot: %v, want BatchTimestampBeforeGCError", err)
	}
	if v, _, err := db.Get(ctx, []byte("k")); err != nil || string(v) != "v99" {
		t.Fatalf("fresh read: %q, %v", v, err)
	}
}

// A rolled-back transaction stops protecting too.
func TestProtectedTimestampRollback(t *testing.T) {
	e := newTestEnv(t, envOptions{})
	ctx := context.Background()
	txn := e.db.NewTxn(ctx, "t", Serializable)
	if p := e.db.ProtectedTimestamp(); txn.ReadTimestamp().Less(p) {
		t.Fatalf("protected %s above the open transaction's read timestamp %s", p, txn.ReadTimestamp())
	}
	if err := txn.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n := e.db.OpenTxns(); n != 0 {
		t.Fatalf("%d transactions registered after rollback", n)
	}
}
