package tablet

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
)

// Every kind of bad input is refused with its typed error and leaves the
// engine exactly as it was (package invariant 2).
func TestBadInputChangesNothing(t *testing.T) {
	h := newHarness(t, Config{MaxValueSize: 16})
	ctx := context.Background()
	// Narrow the replica to [b, m) so keys can fall outside it.
	h.r.mu.Lock()
	h.r.setDescLocked(kvpb.TabletDescriptor{TabletID: 1, StartKey: []byte("b"), EndKey: []byte("m")})
	h.r.mu.Unlock()

	// Some state to keep: a committed value, an aborted transaction.
	seed := &kvpb.BatchRequest{Header: kvpb.Header{Timestamp: ts(10)}}
	seed.Add(&kvpb.PutRequest{Key: []byte("c"), Value: []byte("c1")})
	if _, err := h.send(ctx, seed, ""); err != nil {
		t.Fatal(err)
	}
	h.newTxn("A", ts(20), 0)
	if _, err := h.send(ctx, putBatch("d", "a"), "A"); err != nil {
		t.Fatal(err)
	}
	abort := &kvpb.BatchRequest{}
	abort.Add(&kvpb.EndTxnRequest{Key: []byte("d"), LockSpans: []kvpb.Span{{Key: []byte("d")}}})
	if _, err := h.send(ctx, abort, "A"); err != nil {
		t.Fatal(err)
	}
	h.newTxn("T", ts(30), 0)
	// B's record was aborted by a pusher while B was still pending at its
	// coordinator: its last batch (write + commit) must write nothing.
	b := h.newTxn("B", ts(25), 0)
	b.Key = []byte("e")
	push := &kvpb.BatchRequest{}
	push.Add(&kvpb.PushTxnRequest{Key: b.Key, Pushee: b.TxnMeta, Pusher: kvpb.Transaction{TxnMeta: kvpb.TxnMeta{Priority: MaxPriority}}})
	if _, err := h.send(ctx, push, ""); err != nil {
		t.Fatal(err)
	}
	before := h.dump()

	far := hlc.Timestamp{WallTime: testClockStart + int64(time.Hour)}
	var (
		inv      *kvpb.InvalidArgumentError
		mismatch *kvpb.TabletKeyMismatchError
		aborted  *kvpb.TransactionAbortedError
		offset   *hlc.ClockOffsetError
		status   *kvpb.TransactionStatusError
	)
	batch := func(h kvpb.Header, reqs ...kvpb.Request) *kvpb.BatchRequest {
		return (&kvpb.BatchRequest{Header: h}).Add(reqs...)
	}
	put := func(k, v string) kvpb.Request { return &kvpb.PutRequest{Key: []byte(k), Value: []byte(v)} }
	for _, tc := range []struct {
		name  string
		ba    *kvpb.BatchRequest
		txn   string
		check func(error) bool
	}{
		{"key before the span", batch(kvpb.Header{}, put("a", "x")), "", func(err error) bool { return errors.As(err, &mismatch) }},
		{"key at the span end", batch(kvpb.Header{}, put("m", "x")), "", func(err error) bool { return errors.As(err, &mismatch) }},
		{"scan past the span", batch(kvpb.Header{}, &kvpb.ScanRequest{Key: []byte("c"), EndKey: []byte("z")}), "", func(err error) bool { return errors.As(err, &mismatch) }},
		{"local key", batch(kvpb.Header{}, put(string(keys.Lock([]byte("c"))), "x")), "", func(err error) bool { return errors.As(err, &mismatch) }},
		{"second request outside", batch(kvpb.Header{}, put("c", "ok"), put("z", "x")), "", func(err error) bool { return errors.As(err, &mismatch) }},
		{"empty key", batch(kvpb.Header{}, put("", "x")), "", func(err error) bool { return errors.As(err, &inv) }},
		{"empty get key", batch(kvpb.Header{}, put("c", "ok"), &kvpb.GetRequest{}), "", func(err error) bool { return errors.As(err, &inv) }},
		{"scan without end", batch(kvpb.Header{}, &kvpb.ScanRequest{Key: []byte("c")}), "", func(err error) bool { return errors.As(err, &inv) }},
		{"inverted span", batch(kvpb.Header{}, &kvpb.DeleteRangeRequest{Key: []byte("e"), EndKey: []byte("c")}), "", func(err error) bool { return errors.As(err, &inv) }},
		{"value over the limit", batch(kvpb.Header{}, put("c", "ok"), put("e", "01234567890123456")), "", func(err error) bool { return errors.As(err, &inv) }},
		{"cput value over the limit", batch(kvpb.Header{}, &kvpb.ConditionalPutRequest{Key: []byte("e"), Value: make([]byte, 17)}), "", func(err error) bool { return errors.As(err, &inv) }},
		{"timestamp beyond max offset", batch(kvpb.Header{Timestamp: far}, put("c", "x")), "", func(err error) bool { return errors.As(err, &inv) && errors.As(err, &offset) }},
		{"now beyond max offset", batch(kvpb.Header{Now: far}, put("c", "x")), "", func(err error) bool { return errors.As(err, &inv) && errors.As(err, &offset) }},
		{"EndTxn without txn", batch(kvpb.Header{}, &kvpb.EndTxnRequest{Key: []byte("c"), Commit: true}), "", func(err error) bool { return errors.As(err, &inv) }},
		{"HeartbeatTxn without txn", batch(kvpb.Header{}, &kvpb.HeartbeatTxnRequest{Key: []byte("c")}), "", func(err error) bool { return errors.As(err, &inv) }},
		{"Refresh without txn", batch(kvpb.Header{}, &kvpb.RefreshRequest{Key: []byte("c"), From: ts(1)}), "", func(err error) bool { return errors.As(err, &inv) }},
		{"EndTxn not last", batch(kvpb.Header{}, &kvpb.EndTxnRequest{Key: []byte("e"), Commit: true}, put("e", "x")), "T", func(err error) bool { return errors.As(err, &inv) }},
		{"GC inside a txn", batch(kvpb.Header{}, &kvpb.GCRequest{Key: []byte("c"), EndKey: []byte("d")}), "T", func(err error) bool { return errors.As(err, &inv) }},
		{"GC threshold in the future", batch(kvpb.Header{}, &kvpb.GCRequest{Key: []byte("c"), EndKey: []byte("d"), Threshold: far}), "", func(err error) bool { return errors.As(err, &inv) }},
		{"split sent to a replica", batch(kvpb.Header{}, &kvpb.SplitRequest{SplitKey: []byte("e")}), "", func(err error) bool { return errors.As(err, &inv) }},
		{"empty batch", batch(kvpb.Header{}), "", func(err error) bool { return errors.As(err, &inv) }},
		{"commit of an aborted txn", batch(kvpb.Header{}, &kvpb.EndTxnRequest{Key: []byte("d"), Commit: true, LockSpans: []kvpb.Span{{Key: []byte("d")}}}), "A", func(err error) bool {
			return errors.As(err, &aborted) && aborted.Reason == kvpb.AbortClient
		}},
		{"write in a finished txn", batch(kvpb.Header{}, put("d", "x")), "A", func(err error) bool { return errors.As(err, &status) }},
		{"write after the commit failed", batch(kvpb.Header{}, put("e", "x"), &kvpb.EndTxnRequest{Key: []byte("e"), Commit: true}), "B", func(err error) bool {
			return errors.As(err, &aborted)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.send(ctx, tc.ba, tc.txn)
			if err == nil || !tc.check(err) {
				t.Fatalf("err = %v (%T)", err, err)
			}
			if after := h.dump(); after != before {
				t.Fatalf("engine changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}
