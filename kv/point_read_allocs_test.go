package kv_test

import (
	"context"
	"testing"
	"time"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/testcluster"
)

// maxImplicitReadAllocs bounds the allocations of one implicit point read
// of a row read before (kv.DB.RunImplicitRead of a one-row Scan on a node
// wired as `cairn start` wires one), the batch included, with
// context.Background(); a cancellable context adds the store's reqCtx.
// It was 17 before the tablet's read stopped allocating a closure per
// request (startUnder), a Proposal apart from its evalCtx, a response
// slice apart from its BatchResponse, and the timestamp cache's key of a
// row already there; 13 before the Batch kept its one request, its one
// result and the BatchRequest it is sent in (a statement's context was
// 17 then: the store's closure to end the request and the context's Done
// channel, store invariant 7); 11 before the tablet's latches of a
// one-request batch became one object (the guard holds its span, and makes
// its done channel only for a waiter) and the batch's one response, its
// ScanResponse and room for its row became part of the evaluation's
// evalCtx (seventeenth session); 6 before the tablet's copy of the
// request and its first latch guard became one object (Replica.send's
// sendState, eighteenth session); 5 before the batch kept its ScanRequest
// in itself (kv.Batch.scanSlot) and the tablet's read handed its evalCtx
// back to a pool and its answer to the sendState (twentieth session).
// Each allocation is CPU a point SELECT pays (issue 22). A change that
// adds one to the read path must say why here.
const maxImplicitReadAllocs = 3

// TestImplicitReadAllocs: a point read of a row allocates at most
// maxImplicitReadAllocs objects with context.Background(), one more with
// a cancellable context made for the statement, as pgwire makes one per
// Execute (the context's own allocations are not counted; its Done
// channel, made on the first call, is: nothing on the way to the tablet
// asks for it, store invariant 7), and no more when a client's read goes
// through the node's LeaseholderSender (which copied the BatchRequest to
// name the client's gateway node; RunImplicitRead names it).
func TestImplicitReadAllocs(t *testing.T) {
	if kv.RaceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	n := testcluster.StartNode(t, testcluster.Options{Raft: true, MaxOffset: 500 * time.Millisecond})
	const rows = 100
	loadRows(t, n.DB, rows)
	key := rowKey(7)
	end := keys.PrefixEnd(key)
	// gateway is the node's DB as `cairn start` wires it: through a
	// LeaseholderSender, which names a client's batch's gateway node.
	gateway := kv.NewDB(kv.NewLeaseholderSender(kv.LeaseholderConfig{
		LocalNode: 1,
		Node:      func(uint64) kvpb.Sender { return n.Store },
	}), n.Store, n.Clock, kv.Options{NodeID: 1})
	defer gateway.Close()
	statement := func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }
	for _, tc := range []struct {
		name string
		db   *kv.DB
		// ctx returns the read's context and what ends it.
		ctx  func() (context.Context, context.CancelFunc)
		want float64
	}{
		{"background", n.DB, func() (context.Context, context.CancelFunc) { return context.Background(), func() {} }, maxImplicitReadAllocs},
		{"statement context", n.DB, statement, maxImplicitReadAllocs + 1},
		{"a client's statement through the gateway", gateway, func() (context.Context, context.CancelFunc) {
			ctx, cancel := statement()
			return kv.WithClientRequests(ctx), cancel
		}, maxImplicitReadAllocs + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			read := func() {
				ctx, cancel := tc.ctx()
				defer cancel()
				b := &kv.Batch{}
				b.Scan(key, end, 256)
				if err := tc.db.RunImplicitRead(ctx, b); err != nil {
					t.Fatal(err)
				}
				if got := len(b.Results[0].Rows); got != 1 {
					t.Fatalf("read %d rows, want 1", got)
				}
			}
			ctxOnly := testing.AllocsPerRun(200, func() {
				_, cancel := tc.ctx()
				cancel()
			})
			read()
			got := testing.AllocsPerRun(200, read) - ctxOnly
			if got > tc.want {
				t.Errorf("an implicit point read allocates %.1f objects, want at most %.0f", got, tc.want)
			} else {
				t.Logf("an implicit point read allocates %.1f objects", got)
			}
		})
	}
}
