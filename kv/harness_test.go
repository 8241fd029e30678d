package kv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/mvcc"
	"github.com/cairn-db/cairn/storage"
	"github.com/cairn-db/cairn/store"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// testEnv is one real node in miniature for end-to-end tests: a storage
// engine over an in-memory filesystem, a clock, a store with its tablets,
// and a DB in front of it. Every transactional test uses it; none uses
// fakes.
type testEnv struct {
	t      testing.TB
	manual *hlc.ManualClock // nil with the real clock
	clock  *hlc.Clock
	eng    *storage.Engine
	store  *store.Store
	db     *DB
}

type envOptions struct {
	// splits are the keys the keyspace is split at before the test.
	splits []string
	// manualClock drives the clock by hand (for liveness tests).
	manualClock bool
	// maxOffset is the clock's maximum offset (uncertainty window).
	maxOffset time.Duration
	// liveness is the tablets' transaction liveness threshold.
	liveness time.Duration
	// sender, if set, wraps the store on the DB's side (to observe or
	// delay sub-batches).
	wrapSender func(kvpb.Sender) kvpb.Sender
	db         Options
}

func newTestEnv(t testing.TB, o envOptions) *testEnv {
	t.Helper()
	e := &testEnv{t: t}
	physical := hlc.UnixNano
	if o.manualClock {
		e.manual = hlc.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
		physical = e.manual.UnixNano
	}
	e.clock = hlc.NewClock(physical, o.maxOffset)
	eng, err := storage.Open("", storage.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	e.eng = eng
	st, err := store.Open(context.Background(), eng, e.clock, store.Config{TxnLivenessThreshold: o.liveness, VerifyLockTable: true})
	if err != nil {
		t.Fatal(err)
	}
	e.store = st
	for _, k := range o.splits {
		if _, _, err := st.Split(context.Background(), []byte(k)); err != nil {
			t.Fatalf("split at %q: %v", k, err)
		}
	}
	var sender kvpb.Sender = st
	if o.wrapSender != nil {
		sender = o.wrapSender(st)
	}
	e.db = NewDB(sender, st, e.clock, o.db)
	t.Cleanup(func() {
		e.db.Close()
		e.store.Close()
		if err := e.eng.Close(); err != nil {
			t.Errorf("closing engine: %v", err)
		}
	})
	return e
}

// intentsOf returns the keys on which txn id holds an intent, from the
// engine's lock table.
func (e *testEnv) intentsOf(id [16]byte) []string {
	e.t.Helper()
	intents, err := mvcc.ScanIntents(e.eng, keys.Min, keys.Max, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, in := range intents {
		if in.Txn.ID == id {
			out = append(out, string(in.Key))
		}
	}
	return out
}

// allIntents counts every intent in the engine.
func (e *testEnv) allIntents() int {
	e.t.Helper()
	intents, err := mvcc.ScanIntents(e.eng, keys.Min, keys.Max, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	return len(intents)
}

// txnRecordCount counts transaction records in the engine.
func (e *testEnv) txnRecordCount() int {
	e.t.Helper()
	lo, hi := keys.TxnRecordSpan(keys.Min, keys.Max)
	it, err := e.eng.NewIter(storage.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		e.t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	if err := it.Err(); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// mustPut writes key=value outside any transaction.
func (e *testEnv) mustPut(key, value string) {
	e.t.Helper()
	if err := e.db.Put(context.Background(), []byte(key), []byte(value)); err != nil {
		e.t.Fatalf("put %s: %v", key, err)
	}
}

// mustGet reads key outside any transaction ("<none>" if absent).
func (e *testEnv) mustGet(key string) string {
	e.t.Helper()
	v, ok, err := e.db.Get(context.Background(), []byte(key))
	if err != nil {
		e.t.Fatalf("get %s: %v", key, err)
	}
	if !ok {
		return "<none>"
	}
	return string(v)
}

func rowsString(rows []kvpb.KeyValue) string {
	s := ""
	for i, r := range rows {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%s=%s", r.Key, r.Value)
	}
	return s
}
