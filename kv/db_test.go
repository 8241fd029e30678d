package kv

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-db/cairn/kvpb"
)

// TestRoutingRecoversFromSplitBehindCache: the router's cache learns one
// tablet, the store splits it twice without telling the router, and every
// read and write still lands right; the cache ends up knowing the new
// tablets.
func TestRoutingRecoversFromSplitBehindCache(t *testing.T) {
	e := newTestEnv(t, envOptions{})
	ctx := context.Background()
	for _, k := range []string{"a", "c", "e", "g", "i"} {
		e.mustPut(k, "v"+k)
	}
	if n := e.db.TabletCache().Len(); n != 1 {
		t.Fatalf("cache holds %d descriptors before the splits, want 1", n)
	}
	for _, k := range []string{"d", "h"} {
		if _, _, err := e.store.Split(ctx, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := e.db.Scan(ctx, []byte("a"), []byte("z"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rowsString(rows), "a=va c=vc e=ve g=vg i=vi"; got != want {
		t.Fatalf("scan after splits: got %q, want %q", got, want)
	}
	e.mustPut("f", "vf")
	if got := e.mustGet("f"); got != "vf" {
		t.Fatalf("get f = %q", got)
	}
	if n := e.db.TabletCache().Len(); n != 3 {
		t.Fatalf("cache holds %d descriptors after recovery, want 3", n)
	}
}

// barrierSender holds every sub-batch until n have arrived at once, so a
// batch over n tablets completes only if its sub-batches are in flight
// together. A serial router would wait forever; the context bound turns
// that into a failure.
type barrierSender struct {
	next    kvpb.Sender
	n       int
	mu      sync.Mutex
	arrived int
	release chan struct{}
	armed   atomic.Bool
}

func (b *barrierSender) Send(ctx context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
	if b.armed.Load() {
		b.mu.Lock()
		b.arrived++
		if b.arrived == b.n {
			close(b.release)
		}
		b.mu.Unlock()
		select {
		case <-b.release:
		case <-ctx.Done():
			return nil, fmt.Errorf("sub-batch to tablet %d waited for its siblings: %w", ba.TabletID, ctx.Err())
		}
	}
	return b.next.Send(ctx, ba)
}

// TestParallelFanOut: a batch touching four tablets is sent as four
// concurrent sub-batches, and the results come back in request order.
func TestParallelFanOut(t *testing.T) {
	bs := &barrierSender{n: 4, release: make(chan struct{})}
	e := newTestEnv(t, envOptions{
		splits:     []string{"c", "e", "g"},
		wrapSender: func(s kvpb.Sender) kvpb.Sender { bs.next = s; return bs },
	})
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		e.mustPut(k, "v"+k)
	}
	// Warm the cache so the armed batch is exactly four sub-batches.
	if _, err := e.db.Scan(context.Background(), []byte("a"), []byte("z"), 0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bs.armed.Store(true)
	b := &Batch{}
	b.Get([]byte("h"))
	b.Get([]byte("a"))
	b.Scan([]byte("b"), []byte("h"), 0)
	b.Get([]byte("e"))
	b.Get([]byte("zz"))
	if err := e.db.Run(ctx, b); err != nil {
		t.Fatal(err)
	}
	bs.armed.Store(false)
	got := []string{
		rowsString(b.Results[0].Rows), rowsString(b.Results[1].Rows), rowsString(b.Results[2].Rows),
		rowsString(b.Results[3].Rows), fmt.Sprint(b.Results[4].Found),
	}
	want := []string{"h=vh", "a=va", "b=vb c=vc d=vd e=ve f=vf g=vg", "e=ve", "false"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// TestScanLimitsAcrossTablets reads eight tablets' worth of rows in pages,
// forward and reverse, in a transaction: every row exactly once, in order.
func TestScanLimitsAcrossTablets(t *testing.T) {
	e := newTestEnv(t, envOptions{splits: []string{"b", "c", "d", "e", "f", "g", "h"}})
	ctx := context.Background()
	var all []string
	for _, c := range "abcdefgh" {
		for i := range 3 {
			k := fmt.Sprintf("%c%d", c, i)
			e.mustPut(k, "x")
			all = append(all, k)
		}
	}
	for _, reverse := range []bool{false, true} {
		for _, page := range []int64{1, 2, 3, 5, 24, 100} {
			t.Run(fmt.Sprintf("reverse=%t/page=%d", reverse, page), func(t *testing.T) {
				txn := e.db.NewTxn(ctx, "pager", Snapshot)
				defer func() { _ = txn.Rollback(ctx) }()
				var got []string
				span := &kvpb.Span{Key: []byte("a"), EndKey: []byte("z")}
				for span != nil {
					b := &Batch{}
					if reverse {
						b.ReverseScan(span.Key, span.EndKey, page)
					} else {
						b.Scan(span.Key, span.EndKey, page)
					}
					if err := txn.Run(ctx, b); err != nil {
						t.Fatal(err)
					}
					r := b.Results[0]
					if int64(len(r.Rows)) > page {
						t.Fatalf("page of %d rows, limit %d", len(r.Rows), page)
					}
					for _, row := range r.Rows {
						got = append(got, string(row.Key))
					}
					span = r.ResumeSpan
				}
				want := all
				if reverse {
					want = make([]string, len(all))
					for i, k := range all {
						want[len(all)-1-i] = k
					}
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("got %v, want %v", got, want)
				}
			})
		}
	}
}
