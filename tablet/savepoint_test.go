package tablet

import (
	"context"
	"testing"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/mvcc"
	"github.com/cairn-db/cairn/storage"
)

// A transaction that rolled back to a savepoint commits with intents left
// outside its EndTxn's lock spans (as when the resolution of another
// tablet's intents is lost). A reader meeting them pushes, finds the
// committed record, and resolves them with the record's ignored sequence
// numbers: the rolled back values never become visible.
func TestPusherResolvesWithRecordIgnoredSeqNums(t *testing.T) {
	h := newHarness(t, Config{})
	ctx := context.Background()
	a := h.newTxn("A", ts(10), 0)
	a.Sequence = 1
	if _, err := h.send(ctx, putBatch("a", "a1"), "A"); err != nil {
		t.Fatal(err)
	}
	a = h.txn("A")
	a.Sequence = 2
	ba := putBatch("a", "a2")
	ba.Add(&kvpb.PutRequest{Key: []byte("b"), Value: []byte("b2")})
	if _, err := h.send(ctx, ba, "A"); err != nil {
		t.Fatal(err)
	}
	a = h.txn("A")
	a.IgnoredSeqNums = []kvpb.SeqRange{{Start: 2, End: 2}}
	commit := &kvpb.BatchRequest{}
	commit.Add(&kvpb.EndTxnRequest{Key: []byte("a"), Commit: true, LockSpans: []kvpb.Span{{Key: []byte("zz")}}})
	if _, err := h.send(ctx, commit, "A"); err != nil {
		t.Fatal(err)
	}
	// Its intents all on this tablet, the commit left no record; a record
	// stays only while intents it names elsewhere are unresolved, which
	// the harness's one tablet cannot show: put back the one it wrote.
	final := *a.Clone()
	final.Status = kvpb.Committed
	final.LockSpans = []kvpb.Span{{Key: []byte("zz")}}
	b := h.eng.NewBatch()
	if err := mvcc.PutTxnRecord(b, &final); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	b.Close()
	rec, found, err := mvcc.GetTxnRecord(h.eng, []byte("a"), a.ID)
	if err != nil || !found || rec.Status != kvpb.Committed || kvpb.FormatSeqRanges(rec.IgnoredSeqNums) != "[2,2]" {
		t.Fatalf("record = %+v (found %v, %v); want COMMITTED with ignored [2,2]", rec, found, err)
	}
	for _, k := range []string{"a", "b"} {
		if in, err := getIntent(h, k); err != nil || in == nil {
			t.Fatalf("intent on %s = %v, %v; the test needs it left behind", k, in, err)
		}
	}

	for _, tc := range []struct{ key, want string }{{"a", "a1"}, {"b", ""}} {
		get := &kvpb.BatchRequest{Header: kvpb.Header{Timestamp: ts(30)}}
		get.Add(&kvpb.GetRequest{Key: []byte(tc.key)})
		br, err := h.send(ctx, get, "")
		if err != nil {
			t.Fatalf("get %s: %v", tc.key, err)
		}
		if got := string(br.Responses[0].(*kvpb.GetResponse).Value); got != tc.want {
			t.Errorf("get %s = %q, want %q", tc.key, got, tc.want)
		}
		if in, err := getIntent(h, tc.key); err != nil || in != nil {
			t.Errorf("intent on %s after the read = %v, %v; want it resolved", tc.key, in, err)
		}
	}
	// b's only value was rolled back: no version at all, not a tombstone.
	if n := h.versions("b"); n != 0 {
		t.Errorf("b has %d versions, want none", n)
	}
}

// versions counts the committed versions of key in the engine.
func (h *harness) versions(key string) int {
	h.t.Helper()
	it, err := h.eng.NewIter(storage.IterOptions{Prefix: true})
	if err != nil {
		h.t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for ok := it.SeekGE(storage.MVCCKey{Key: []byte(key)}); ok && string(it.UnsafeKey().Key) == key; ok = it.Next() {
		if !it.UnsafeKey().Timestamp.IsEmpty() {
			n++
		}
	}
	return n
}
