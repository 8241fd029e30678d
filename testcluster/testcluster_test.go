package testcluster

import (
	"context"
	"testing"

	"github.com/cairn-db/cairn/kv"
)

// TestNodeServesTransactions starts a node split into two tablets and runs
// a transaction across both through its KV client.
func TestNodeServesTransactions(t *testing.T) {
	for _, raft := range []bool{false, true} {
		t.Run(map[bool]string{false: "unreplicated", true: "raft-rf1"}[raft], func(t *testing.T) {
			testNodeServesTransactions(t, raft)
		})
	}
}

func testNodeServesTransactions(t *testing.T, raft bool) {
	n := StartNode(t, Options{Splits: [][]byte{[]byte("\x03m")}, Raft: raft})
	if got := len(n.Store.Tablets()); got != 2 {
		t.Fatalf("node has %d tablets, want 2", got)
	}
	ctx := context.Background()
	err := n.DB.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		b := &kv.Batch{}
		b.Put([]byte("\x03a"), []byte("1"))
		b.Put([]byte("\x03z"), []byte("2"))
		return txn.CommitInBatch(ctx, b)
	})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := n.DB.Scan(ctx, []byte("\x03"), []byte("\x04"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || string(rows[0].Value) != "1" || string(rows[1].Value) != "2" {
		t.Fatalf("scan = %v, want the two committed rows", rows)
	}
}
