package stats

import (
	"context"
	"testing"
	"time"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/cairn-db/cairn/testcluster"
)

// The cache reads committed statistics outside any transaction, keeps
// them for its TTL, and does not wait for a transaction that has written
// them and not ended (an ANALYZE in an open block).
func TestCache(t *testing.T) {
	ctx := context.Background()
	node := testcluster.StartNode(t, testcluster.Options{})
	tbl := &catalog.Table{ID: 60, Name: "c", Columns: []catalog.Column{{ID: 1, Name: "a", Type: types.Int8}}}
	save := func(txn *kv.Txn, rows float64) {
		if err := Save(ctx, txn, &Table{TableID: 60, RowCount: rows, Columns: []*Column{{ID: 1, Type: types.Int8, Distinct: rows}}}); err != nil {
			t.Fatal(err)
		}
	}
	c := NewCache(node.DB)
	now := time.Unix(1000, 0)
	c.now = func() time.Time { return now }
	if got := c.Get(ctx, tbl); got != nil {
		t.Fatalf("statistics before any: %+v", got)
	}
	if err := node.DB.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		save(txn, 10)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Within the TTL the cache answers what it read (nothing).
	if got := c.Get(ctx, tbl); got != nil {
		t.Fatalf("within the TTL: %+v", got)
	}
	now = now.Add(CacheTTL + time.Second)
	if got := c.Get(ctx, tbl); got == nil || got.RowCount != 10 || got.Column(1).Distinct != 10 {
		t.Fatalf("after the TTL: %+v", got)
	}
	// An open transaction rewrites them: planning neither waits nor sees
	// its uncommitted figures.
	// Its intent is written now (not buffered to the commit), so the
	// cache's read meets it.
	txn := node.DB.NewTxn(ctx, "analyze", kv.Serializable)
	if err := txn.DisableWriteBuffering(ctx); err != nil {
		t.Fatal(err)
	}
	save(txn, 20)
	readAt := txn.ReadTimestamp()
	now = now.Add(CacheTTL + time.Second)
	start := time.Now()
	got := c.Get(ctx, tbl)
	if took := time.Since(start); took > 5*readTimeout {
		t.Errorf("Get waited %v for an open transaction", took)
	}
	if got == nil || got.RowCount != 10 {
		t.Errorf("during an open ANALYZE: %+v", got)
	}
	if err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// A background reader must not push the writer: a pushed ANALYZE
	// (or any DDL rewriting statistics) has to refresh its reads and can
	// lose to 40001 when planners read the key over and over.
	if readAt.Less(txn.CommitTimestamp()) {
		t.Errorf("the cache's read pushed the open ANALYZE: it read at %s and committed at %s", readAt, txn.CommitTimestamp())
	}
	c.Invalidate(60)
	if got := c.Get(ctx, tbl); got == nil || got.RowCount != 20 {
		t.Errorf("after the commit and Invalidate: %+v", got)
	}
}
