package tablet

import (
	"context"
	"errors"
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
)

// TestSplitKeepsUnreplicatedLocks: a split turns the unreplicated locks on
// its right side into lock records, so the right replica's table, and a
// table rebuilt from storage by a new lease, still make another writer
// wait for their holder; the left side's stay unreplicated; the holder's
// EndTxn resolves them like any lock.
func TestSplitKeepsUnreplicatedLocks(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, Config{})
	h.newTxn("a", hlc.Timestamp{WallTime: 10}, 0)
	h.newTxn("b", hlc.Timestamp{WallTime: 20}, 0)
	h.txn("a").Key = []byte("c")
	h.txn("b").Key = []byte("p")
	for _, k := range []string{"c", "p"} {
		ba := &kvpb.BatchRequest{}
		ba.Add(&kvpb.LockRequest{Key: []byte(k), Unreplicated: true})
		if _, err := h.send(ctx, ba, "a"); err != nil {
			t.Fatalf("lock %s: %v", k, err)
		}
	}
	var right *Replica
	if _, _, err := h.r.Split(ctx, []byte("m"), 2, func(r *Replica) { right = r }); err != nil {
		t.Fatal(err)
	}
	if right == nil {
		t.Fatal("split registered no right replica")
	}
	if got := h.renameIDs(right.locks.String()); got != `"p" holder=a waiters=0`+"\n" {
		t.Fatalf("right lock table after split:\n%s", got)
	}
	if got := h.r.locks.unreplicatedIn(nil, nil); len(got) != 1 || string(got[0].Key) != "c" {
		t.Fatalf("left side's unreplicated locks after split: %v", got)
	}
	put := func(r *Replica, k string) error {
		ba := &kvpb.BatchRequest{Header: kvpb.Header{WaitPolicy: kvpb.WaitError}}
		ba.Txn = h.txn("b").Clone()
		ba.Add(&kvpb.PutRequest{Key: []byte(k), Value: []byte("vb")})
		_, err := r.Send(ctx, ba)
		return err
	}
	wantHeld := func(what string, err error) {
		t.Helper()
		var wie *kvpb.WriteIntentError
		if !errors.As(err, &wie) || len(wie.Intents) != 1 || wie.Intents[0].Txn.ID != h.txn("a").ID {
			t.Fatalf("%s: b's write got %v, want a's lock", what, err)
		}
	}
	wantHeld("right side after the split", put(right, "p"))
	// A new lease builds the table from storage.
	right.rebuildFromEngine()
	wantHeld("right side rebuilt from storage", put(right, "p"))
	wantHeld("left side", put(h.r, "c"))

	// a commits: its EndTxn on the left, anchored at c, and the resolution
	// of p on the right free both keys.
	end := &kvpb.BatchRequest{}
	end.Add(&kvpb.EndTxnRequest{Key: []byte("c"), Commit: true, LockSpans: []kvpb.Span{{Key: []byte("c")}}})
	if _, err := h.send(ctx, end, "a"); err != nil {
		t.Fatal(err)
	}
	res := &kvpb.BatchRequest{Header: kvpb.Header{Timestamp: hlc.Timestamp{WallTime: 30}}}
	res.Add(&kvpb.ResolveIntentRequest{Key: []byte("p"), Txn: h.txn("a").TxnMeta, Status: kvpb.Committed})
	if _, err := right.Send(ctx, res); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*Replica{h.r, right} {
		if got := r.locks.String(); got != "" {
			t.Fatalf("locks left after a's commit:\n%s", got)
		}
	}
	if err := put(right, "p"); err != nil {
		t.Fatalf("b's write of p after a committed: %v", err)
	}
}
