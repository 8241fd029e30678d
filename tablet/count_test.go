package tablet

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
)

// TestCountsInParallel: a batch of counting scans (evaluated concurrently,
// evalCounts) answers as the same scans one by one: each request's count
// and resume span, pages included; and with another transaction's intent
// in the spans of two of them, the error is the first of those in batch
// order, as sequential evaluation returns it.
func TestCountsInParallel(t *testing.T) {
	h := newHarness(t, Config{})
	ctx := context.Background()
	tags := []byte("r")
	put := &kvpb.BatchRequest{Header: kvpb.Header{Timestamp: hlc.Timestamp{WallTime: 10}}}
	for i := range 300 {
		tag := "r"
		if i%5 == 0 {
			tag = "c" // a column entry: not counted
		}
		put.Requests = append(put.Requests, &kvpb.PutRequest{Key: []byte(fmt.Sprintf("k%03d", i)), Value: []byte(tag)})
	}
	if _, err := h.send(ctx, put, ""); err != nil {
		t.Fatal(err)
	}
	spans := [][2]string{{"k000", "k100"}, {"k100", "k150"}, {"k150", "k299"}, {"k299", "k3"}, {"a", "b"}}
	batch := func(page int64, ts int64) *kvpb.BatchRequest {
		ba := &kvpb.BatchRequest{Header: kvpb.Header{Timestamp: hlc.Timestamp{WallTime: ts}}}
		for _, sp := range spans {
			ba.Requests = append(ba.Requests, &kvpb.ScanRequest{Key: []byte(sp[0]), EndKey: []byte(sp[1]), MaxKeys: page, CountTags: tags})
		}
		return ba
	}
	for _, page := range []int64{0, 30} {
		br, err := h.send(ctx, batch(page, 20), "")
		if err != nil {
			t.Fatal(err)
		}
		for i, sp := range spans {
			one := batch(page, 20)
			one.Requests = one.Requests[i : i+1]
			alone, err := h.send(ctx, one, "")
			if err != nil {
				t.Fatal(err)
			}
			got, want := br.Responses[i].(*kvpb.ScanResponse), alone.Responses[0].(*kvpb.ScanResponse)
			if got.Count != want.Count || fmt.Sprint(got.ResumeSpan) != fmt.Sprint(want.ResumeSpan) {
				t.Errorf("page %d, count %v: in the batch %d resume %v, alone %d resume %v", page, sp, got.Count, got.ResumeSpan, want.Count, want.ResumeSpan)
			}
		}
		if c := br.Responses[0].(*kvpb.ScanResponse).Count; page == 0 && c != 80 {
			t.Errorf("count of [k000, k100) = %d, want 80", c)
		}
	}

	// Intents of a pending transaction in the third and fourth spans
	// (at 20,1: above the counts' reads), read at 30.
	h.newTxn("w", hlc.Timestamp{WallTime: 15}, 0)
	for _, k := range []string{"k299", "k200"} {
		w := &kvpb.BatchRequest{Requests: []kvpb.Request{&kvpb.PutRequest{Key: []byte(k), Value: []byte("r")}}}
		if _, err := h.send(ctx, w, "w"); err != nil {
			t.Fatal(err)
		}
	}
	// Evaluated directly: Send would push the writer out of the way.
	_, _, err := h.r.Evaluate(batch(0, 30))
	var wie *kvpb.WriteIntentError
	if !errors.As(err, &wie) || len(wie.Intents) != 1 || string(wie.Intents[0].Key) != "k200" {
		t.Fatalf("counts over two intents: %v, want the first request's intent error on k200", err)
	}
}

// TestTxnCountsOnePageAtATime: a transaction's batch of counting scans
// (sendCounts: each request sent alone, under its own latches, on
// several goroutines) answers as the same requests sent one by one at
// the transaction, pages and resume spans included; the response carries
// the transaction; each request's span is in the timestamp cache, so a
// later write there is pushed above the read; and with a pending
// writer's intents in the spans of two requests and WaitError, the error
// is the intent of the first of them in batch order.
func TestTxnCountsOnePageAtATime(t *testing.T) {
	h := newHarness(t, Config{})
	ctx := context.Background()
	tags := []byte("r")
	put := &kvpb.BatchRequest{Header: kvpb.Header{Timestamp: hlc.Timestamp{WallTime: 10}}}
	for i := range 300 {
		tag := "r"
		if i%5 == 0 {
			tag = "c" // a column entry: not counted
		}
		put.Requests = append(put.Requests, &kvpb.PutRequest{Key: []byte(fmt.Sprintf("k%03d", i)), Value: []byte(tag)})
	}
	if _, err := h.send(ctx, put, ""); err != nil {
		t.Fatal(err)
	}
	// More requests than goroutines, so that they take turns.
	var spans [][2]string
	for i := 0; i < 300; i += 20 {
		spans = append(spans, [2]string{fmt.Sprintf("k%03d", i), fmt.Sprintf("k%03d", i+20)})
	}
	spans = append(spans, [2]string{"k300", "k4"}, [2]string{"a", "b"})
	batch := func(page int64, wait kvpb.WaitPolicy) *kvpb.BatchRequest {
		ba := &kvpb.BatchRequest{Header: kvpb.Header{WaitPolicy: wait}}
		for _, sp := range spans {
			ba.Requests = append(ba.Requests, &kvpb.ScanRequest{Key: []byte(sp[0]), EndKey: []byte(sp[1]), MaxKeys: page, CountTags: tags})
		}
		return ba
	}
	h.newTxn("reader", hlc.Timestamp{WallTime: 20}, 0)
	for _, page := range []int64{0, 7} {
		br, err := h.send(ctx, batch(page, kvpb.WaitBlock), "reader")
		if err != nil {
			t.Fatal(err)
		}
		if br.Txn == nil || br.Txn.ID != h.txn("reader").ID {
			t.Fatalf("page %d: the response carries transaction %v", page, br.Txn)
		}
		total := int64(0)
		for i, sp := range spans {
			one := batch(page, kvpb.WaitBlock)
			one.Requests = one.Requests[i : i+1]
			alone, err := h.send(ctx, one, "reader")
			if err != nil {
				t.Fatal(err)
			}
			got, want := br.Responses[i].(*kvpb.ScanResponse), alone.Responses[0].(*kvpb.ScanResponse)
			if got.Count != want.Count || fmt.Sprint(got.ResumeSpan) != fmt.Sprint(want.ResumeSpan) {
				t.Errorf("page %d, count %v: in the batch %d resume %v, alone %d resume %v", page, sp, got.Count, got.ResumeSpan, want.Count, want.ResumeSpan)
			}
			total += got.Count
		}
		// Each of the 15 spans of 20 keys holds 16 row keys, 5 of them
		// among its first 7 keys (the page examines 7).
		if want := map[int64]int64{0: 16 * 15, 7: 5 * 15}[page]; total != want {
			t.Errorf("page %d: the batch counted %d, want %d", page, total, want)
		}
	}
	// The reads at 20 are in the timestamp cache: a write at 15 under the
	// last counted span lands above 20.
	w := &kvpb.BatchRequest{Header: kvpb.Header{Timestamp: hlc.Timestamp{WallTime: 15}}, Requests: []kvpb.Request{&kvpb.PutRequest{Key: []byte("k285"), Value: []byte("r")}}}
	if _, err := h.send(ctx, w, ""); err != nil {
		t.Fatal(err)
	}
	// (k285 held a column entry, "c", at 10.)
	get := &kvpb.BatchRequest{Header: kvpb.Header{Timestamp: hlc.Timestamp{WallTime: 20}}, Requests: []kvpb.Request{&kvpb.GetRequest{Key: []byte("k285")}}}
	br, err := h.send(ctx, get, "")
	if err != nil {
		t.Fatal(err)
	}
	if v := string(br.Responses[0].(*kvpb.GetResponse).Value); v != "c" {
		t.Fatalf("at 20 k285 holds %q: a write under a counted span after the count landed at or below the count's read", v)
	}

	// Intents of a pending transaction in the spans of requests 13 and
	// 10, read at 30 with WaitError.
	h.newTxn("w", hlc.Timestamp{WallTime: 25}, 0)
	for _, k := range []string{"k270", "k200"} {
		w := &kvpb.BatchRequest{Requests: []kvpb.Request{&kvpb.PutRequest{Key: []byte(k), Value: []byte("r")}}}
		if _, err := h.send(ctx, w, "w"); err != nil {
			t.Fatal(err)
		}
	}
	h.newTxn("late reader", hlc.Timestamp{WallTime: 30}, 0)
	_, err = h.send(ctx, batch(0, kvpb.WaitError), "late reader")
	var wie *kvpb.WriteIntentError
	if !errors.As(err, &wie) || len(wie.Intents) != 1 || string(wie.Intents[0].Key) != "k200" {
		t.Fatalf("counts over two intents: %v, want the first request's intent error on k200", err)
	}
}
