package kv

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/cairn-db/cairn/kvpb"
)

// TestCountAtTablets: Batch.Count counts the visible values of a span
// whose first byte is a tag, at the tablets (no rows come back), summed
// over the tablets the span crosses and over the pages a key limit
// makes, and a transaction's buffered writes (a new tagged key, a
// deletion, a tagged key rewritten untagged, an untagged one) count as
// they would once written. Against tablets that predate CountTags (they
// ignore the field and return rows) the counts are the same.
func TestCountAtTablets(t *testing.T) {
	for _, old := range []bool{false, true} {
		t.Run(fmt.Sprintf("predating=%v", old), func(t *testing.T) { testCountAtTablets(t, old) })
	}
}

func testCountAtTablets(t *testing.T, predating bool) {
	ctx := context.Background()
	var rowsBack atomic.Int64
	e := newTestEnv(t, envOptions{splits: []string{"f", "m"}, wrapSender: func(s kvpb.Sender) kvpb.Sender {
		return senderFunc(func(ctx context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
			if predating {
				// What a node without the field decodes: a plain scan.
				c := *ba
				c.Requests = make([]kvpb.Request, len(ba.Requests))
				for i, r := range ba.Requests {
					if sc, ok := r.(*kvpb.ScanRequest); ok && len(sc.CountTags) > 0 {
						plain := *sc
						plain.CountTags = nil
						r = &plain
					}
					c.Requests[i] = r
				}
				ba = &c
			}
			br, err := s.Send(ctx, ba)
			if err == nil {
				for _, r := range br.Responses {
					if sr, ok := r.(*kvpb.ScanResponse); ok {
						rowsBack.Add(int64(len(sr.Rows)))
					}
				}
			}
			return br, err
		})
	}})
	tags := []byte("rl")
	model := map[string]byte{}
	for i, k := range []string{"a", "a/1", "c", "g", "g/1", "g/2", "k", "n", "p", "p/1", "x"} {
		tag := "rlc"[i%3]
		if len(k) > 1 {
			tag = 'c'
		}
		e.mustPut(k, string(tag)+k)
		model[k] = tag
	}
	want := func(start, end string) int64 {
		var n int64
		for k, tag := range model {
			if k >= start && k < end && (tag == 'r' || tag == 'l') {
				n++
			}
		}
		return n
	}
	count := func(txn *Txn, start, end string, page int64) int64 {
		t.Helper()
		var n int64
		s, en := []byte(start), []byte(end)
		for pages := 0; ; pages++ {
			if pages > 20 {
				t.Fatalf("count [%s, %s) page %d does not end", start, end, page)
			}
			b := &Batch{}
			b.Count(s, en, tags, page)
			mustOK(t, txn.Run(ctx, b))
			if len(b.Results[0].Rows) != 0 {
				t.Fatalf("count returned %d rows", len(b.Results[0].Rows))
			}
			n += b.Results[0].Count
			if b.Results[0].ResumeSpan == nil {
				return n
			}
			s, en = b.Results[0].ResumeSpan.Key, b.Results[0].ResumeSpan.EndKey
		}
	}
	spans := [][2]string{{"a", "z"}, {"b", "h"}, {"g", "g0"}, {"l", "o"}, {"y", "z"}}
	check := func(what string, txn *Txn) {
		t.Helper()
		for _, sp := range spans {
			for _, page := range []int64{0, 1, 2, 5} {
				if got, exp := count(txn, sp[0], sp[1], page), want(sp[0], sp[1]); got != exp {
					t.Errorf("%s: count %v page %d = %d, want %d", what, sp, page, got, exp)
				}
			}
		}
	}
	txn := e.db.NewTxn(ctx, "count", Snapshot)
	check("stored", txn)
	if n := rowsBack.Load(); (n != 0) != predating {
		t.Errorf("the tablets returned %d rows to counts", n)
	}
	mustOK(t, txn.Commit(ctx))

	txn = e.db.NewTxn(ctx, "count buffered", Snapshot)
	txn.EnableWriteBuffering()
	for k, tag := range map[string]byte{"b": 'r', "c": 'c', "h": 'l', "h/1": 'c', "q": 'c'} {
		mustOK(t, txn.Put(ctx, []byte(k), []byte(fmt.Sprintf("%c%s", tag, k))))
		model[k] = tag
	}
	for _, k := range []string{"a", "n", "zz"} {
		mustOK(t, txn.Delete(ctx, []byte(k)))
		delete(model, k)
	}
	check("buffered", txn)
	mustOK(t, txn.Commit(ctx))
	txn = e.db.NewTxn(ctx, "count committed", Snapshot)
	check("committed", txn)
	mustOK(t, txn.Commit(ctx))
}

type senderFunc func(context.Context, *kvpb.BatchRequest) (*kvpb.BatchResponse, error)

func (f senderFunc) Send(ctx context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
	return f(ctx, ba)
}
