package kv_test

import (
	"context"
	"testing"
	"time"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/testcluster"
)

// maxImplicitReadAllocs bounds the allocations of one implicit point read
// of a row read before (kv.DB.RunImplicitRead of a one-row Scan on a node
// wired as `cairn start` wires one), the batch included. It was 17 before
// the tablet's read stopped allocating a closure per request
// (startUnder), a Proposal apart from its evalCtx, a response slice apart
// from its BatchResponse, and the timestamp cache's key of a row already
// there; each allocation is CPU a point SELECT pays (issue 22). A change
// that adds one to the read path must say why here.
const maxImplicitReadAllocs = 13

// TestImplicitReadAllocs: a point read of a row allocates at most
// maxImplicitReadAllocs objects.
func TestImplicitReadAllocs(t *testing.T) {
	if kv.RaceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	ctx := context.Background()
	n := testcluster.StartNode(t, testcluster.Options{Raft: true, MaxOffset: 500 * time.Millisecond})
	const rows = 100
	loadRows(t, n.DB, rows)
	key := rowKey(7)
	end := keys.PrefixEnd(key)
	read := func() {
		b := &kv.Batch{}
		b.Scan(key, end, 256)
		if err := n.DB.RunImplicitRead(ctx, b); err != nil {
			t.Fatal(err)
		}
		if got := len(b.Results[0].Rows); got != 1 {
			t.Fatalf("read %d rows, want 1", got)
		}
	}
	read()
	if got := testing.AllocsPerRun(200, read); got > maxImplicitReadAllocs {
		t.Errorf("an implicit point read allocates %.1f objects, want at most %d", got, maxImplicitReadAllocs)
	} else {
		t.Logf("an implicit point read allocates %.1f objects", got)
	}
}
