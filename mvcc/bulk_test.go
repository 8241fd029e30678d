package mvcc

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/storage"
	"github.com/cockroachdb/pebble/v2/vfs"
)

func openMem(t *testing.T) *storage.Engine {
	t.Helper()
	eng, err := storage.Open("", storage.Options{FS: vfs.NewMem(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng
}

func TestFirstExisting(t *testing.T) {
	eng := openMem(t)
	ts := hlc.Timestamp{WallTime: 10}
	b := eng.NewBatch()
	for _, k := range []string{"b", "d", "f"} {
		if err := BulkPut(b, []byte(k), ts, []byte("v"), false); err != nil {
			t.Fatal(err)
		}
	}
	// A tombstone counts as a version: the key was used.
	if _, err := Delete(b, []byte("h"), ts, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	b.Close()
	keys := func(ks ...string) [][]byte {
		out := make([][]byte, len(ks))
		for i, k := range ks {
			out[i] = []byte(k)
		}
		return out
	}
	for _, tc := range []struct {
		keys []string
		want int
	}{
		{nil, -1},
		{[]string{"a"}, -1},
		{[]string{"a", "c", "e", "g"}, -1},
		{[]string{"a", "c", "d"}, 2},
		{[]string{"b"}, 0},
		{[]string{"c", "ca", "cb", "f"}, 3},
		{[]string{"g", "h"}, 1},
		{[]string{"x", "y"}, -1},
	} {
		got, err := FirstExisting(eng, keys(tc.keys...))
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("FirstExisting(%q) = %d, want %d", tc.keys, got, tc.want)
		}
	}
}

func TestBulkPut(t *testing.T) {
	e := openMem(t)
	eng := e.NewBatch()
	defer eng.Close()
	ts := hlc.Timestamp{WallTime: 10}
	if err := BulkPut(eng, []byte("a"), ts, []byte("1"), true); err != nil {
		t.Fatal(err)
	}
	var cf *kvpb.ConditionFailedError
	if err := BulkPut(eng, []byte("a"), ts.Next(), []byte("2"), true); !errors.As(err, &cf) || string(cf.ActualValue) != "1" {
		t.Fatalf("second unique bulk put of a: %v", err)
	}
	txn := &kvpb.Transaction{TxnMeta: kvpb.TxnMeta{ID: [16]byte{1}, WriteTimestamp: ts, MinTimestamp: ts}, ReadTimestamp: ts}
	if err := Put(eng, []byte("b"), ts, []byte("x"), txn); err != nil {
		t.Fatal(err)
	}
	if err := BulkPutCheckIntent(eng, []byte("b")); !errors.As(err, &cf) {
		t.Fatalf("intent on b not reported: %v", err)
	}
	if err := BulkPutCheckIntent(eng, []byte("c")); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		key []byte
		ts  hlc.Timestamp
	}{{nil, ts}, {[]byte("k"), hlc.Timestamp{}}} {
		if err := BulkPut(eng, bad.key, bad.ts, nil, false); err == nil {
			t.Errorf("BulkPut(%q, %s) accepted", bad.key, bad.ts)
		}
	}
	res, err := Get(eng, []byte("a"), ts.Next(), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Value) != "1" {
		t.Errorf("a = %q, want 1", res.Value)
	}
}

// TestResolveIntentRangeChunks resolves more intents than one collection
// chunk holds, among another transaction's, with and without a limit.
func TestResolveIntentRangeChunks(t *testing.T) {
	ts := hlc.Timestamp{WallTime: 10}
	mk := func(id byte) *kvpb.Transaction {
		return &kvpb.Transaction{TxnMeta: kvpb.TxnMeta{ID: [16]byte{id}, WriteTimestamp: ts, MinTimestamp: ts}, ReadTimestamp: ts}
	}
	a, b := mk(1), mk(2)
	const n = 3*resolveChunk + 7
	for _, tc := range []struct {
		max        int64
		wantN      int
		wantResume bool
	}{{0, n, false}, {2500, 2500, true}, {n, n, false}} {
		eng := openMem(t).NewBatch()
		for i := 0; i < n; i++ {
			if err := Put(eng, fmt.Appendf(nil, "k%05d", 2*i), ts, []byte("a"), a); err != nil {
				t.Fatal(err)
			}
			if err := Put(eng, fmt.Appendf(nil, "k%05d", 2*i+1), ts, []byte("b"), b); err != nil {
				t.Fatal(err)
			}
		}
		got, resume, err := ResolveIntentRange(eng, []byte("k"), []byte("l"), a.TxnMeta, kvpb.Committed, tc.max)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.wantN || (resume != nil) != tc.wantResume {
			t.Fatalf("max %d: resolved %d (resume %v), want %d (resume %t)", tc.max, got, resume, tc.wantN, tc.wantResume)
		}
		if resume != nil && string(resume.Key) != fmt.Sprintf("k%05d", 2*tc.wantN) {
			t.Errorf("max %d: resume at %q, want k%05d", tc.max, resume.Key, 2*tc.wantN)
		}
		left, err := ScanIntents(eng, []byte("k"), []byte("l"), 0)
		if err != nil {
			t.Fatal(err)
		}
		if want := n + (n - tc.wantN); len(left) != want {
			t.Errorf("max %d: %d intents left, want %d (all of b's and a's unresolved)", tc.max, len(left), want)
		}
		eng.Close()
	}
}

// TestFirstLocked: the first of sorted keys holding a lock record, found
// with one iterator over the lock keyspace; committed versions are not
// locks.
func TestFirstLocked(t *testing.T) {
	e := openMem(t)
	eng := e.NewBatch()
	defer eng.Close()
	ts := hlc.Timestamp{WallTime: 10}
	txn := &kvpb.Transaction{TxnMeta: kvpb.TxnMeta{ID: [16]byte{1}, WriteTimestamp: ts, MinTimestamp: ts}, ReadTimestamp: ts}
	for _, k := range []string{"c", "g", "ga"} {
		if err := Put(eng, []byte(k), ts, []byte("x"), txn); err != nil {
			t.Fatal(err)
		}
	}
	if err := BulkPut(eng, []byte("b"), ts, []byte("1"), false); err != nil {
		t.Fatal(err)
	}
	keys := func(ks ...string) [][]byte {
		out := make([][]byte, len(ks))
		for i, k := range ks {
			out[i] = []byte(k)
		}
		return out
	}
	for _, tc := range []struct {
		keys []string
		want int
	}{
		{nil, -1},
		{[]string{"a", "b"}, -1},
		{[]string{"a", "b", "c"}, 2},
		{[]string{"c"}, 0},
		{[]string{"d", "f", "ga"}, 2},
		{[]string{"d", "gb", "z"}, -1},
		{[]string{"ca", "cb", "g"}, 2},
	} {
		got, err := FirstLocked(eng, keys(tc.keys...))
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("FirstLocked(%q) = %d, want %d", tc.keys, got, tc.want)
		}
	}
}
