package stats

import (
	"context"
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/cairn-db/cairn/testcluster"
)

// An automatic collection's read transaction writes nothing, so it is
// left out of kv.DB.DrainTimestamp: an online CREATE INDEX right after a
// large load does not wait between its steps for the collection the load
// started. An ordinary open transaction, beside it, still holds the
// drain (the check can fail).
func TestRefreshHoldsNoDrain(t *testing.T) {
	ctx := context.Background()
	node := testcluster.StartNode(t, testcluster.Options{})
	inside := make(chan hlc.Timestamp, 1)
	release := make(chan struct{})
	refreshTestingHook = func(txn *kv.Txn) {
		select {
		case inside <- txn.ReadTimestamp():
		default: // a retry: the test has what it needs
		}
		<-release
	}
	defer func() { refreshTestingHook = nil }()
	r := NewRefresher(node.DB, NewCache(node.DB), nil, nil)
	tbl := &catalog.Table{ID: 61, Name: "r", Columns: []catalog.Column{{ID: 1, Name: "a", Type: types.Int8}}}
	r.NotifyMutations(tbl, 10*StaleRows)
	ts := <-inside

	other := node.DB.NewTxn(ctx, "writer", kv.Serializable)
	if p := node.DB.DrainTimestamp(); other.ReadTimestamp().Less(p) {
		t.Errorf("drain timestamp %v above an open writer's read timestamp %v", p, other.ReadTimestamp())
	}
	if err := other.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if p := node.DB.DrainTimestamp(); !ts.Less(p) {
		t.Errorf("drain timestamp %v held at or below the open collection's read timestamp %v", p, ts)
	}
	close(release)
	r.Stop()
}
