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
	txn := node.DB.NewTxn(ctx, "analyze", kv.Serializable)
	save(txn, 20)
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
	c.Invalidate(60)
	if got := c.Get(ctx, tbl); got == nil || got.RowCount != 20 {
		t.Errorf("after the commit and Invalidate: %+v", got)
	}
}
