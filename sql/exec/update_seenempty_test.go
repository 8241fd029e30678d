package exec

import (
	"context"
	"testing"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/types"
)

// TestWholeRowRewriteSendsNoRangeDeletion: in a block that buffers its
// writes, pgbench's UPDATE of one row by its primary key rewrites the row
// whole (rowenc.RowWriter.WholeRow). When its locking read found the row
// key alone, the deletion of the row's column entries is one read empty
// (kv.Batch.DelRangeSeenEmpty): the commit sends one write fewer (no
// DeleteRange: kv.Txn.CommitPlan's count). A row with committed column
// entries, or with column entries the block itself wrote, still has them
// deleted. Under every isolation level the block reads, and commits,
// the rows a DeleteRange would have left.
func TestWholeRowRewriteSendsNoRangeDeletion(t *testing.T) {
	e := newDMLEnv(t)
	tb := newTable("acct",
		catalog.Column{Name: "aid", Type: types.Int8},
		catalog.Column{Name: "bid", Type: types.Int8, Nullable: true},
		catalog.Column{Name: "abalance", Type: types.Int4, Nullable: true},
		catalog.Column{Name: "filler", Type: types.Text, Nullable: true},
	)
	tb.PrimaryIndex = pk("acct_pkey", 1)
	e.create(tb)
	const update = "UPDATE acct SET abalance = abalance + 5 WHERE aid = "
	for _, iso := range []kv.IsolationLevel{kv.ReadCommitted, kv.Snapshot, kv.Serializable} {
		e.mustSQL("DELETE FROM acct")
		e.mustSQL("INSERT INTO acct VALUES (1, 1, 0, 'f'), (2, 1, 0, 'f'), (3, 1, 0, 'f')")
		// Row 2 gets committed column entries (an UPDATE not by the
		// primary key alone writes the changed column's).
		e.mustSQL("UPDATE acct SET abalance = 1 WHERE aid = 2 AND bid = 1")
		for _, tc := range []struct {
			name   string
			stmts  []string
			writes int // the commit's buffered writes
			read   string
		}{
			// The row's lock and its packed row.
			{"packed row", []string{update + "1"}, 2, "(1,1,5,f)"},
			// And a DeleteRange of its column entries.
			{"committed column entries", []string{update + "2"}, 3, "(2,1,6,f)"},
			// The block's column entry: the lock, a point deletion of
			// the entry and a DeleteRange either side of it, the packed
			// row.
			{"the block's column entry", []string{"UPDATE acct SET abalance = 7 WHERE aid = 3 AND bid = 1", update + "3"}, 5, "(3,1,12,f)"},
		} {
			var read string
			var writes int
			err := e.db.Txn(context.Background(), iso, func(ctx context.Context, txn *kv.Txn) error {
				txn.EnableWriteBuffering()
				if _, err := e.runSQL(ctx, txn, tc.stmts...); err != nil {
					return err
				}
				var err error
				if read, err = e.runSQL(ctx, txn, "SELECT * FROM acct WHERE aid = "+tc.read[1:2]); err != nil {
					return err
				}
				writes, _, _, err = txn.CommitPlan(ctx)
				return err
			})
			if err != nil {
				t.Fatalf("%s/%s: %s", iso, tc.name, describeErr(err))
			}
			if writes != tc.writes {
				t.Errorf("%s/%s: the commit sends %d buffered writes, want %d", iso, tc.name, writes, tc.writes)
			}
			if read != tc.read {
				t.Errorf("%s/%s: the block read %s, want %s", iso, tc.name, read, tc.read)
			}
		}
		if got, want := e.rows(tb.ID), "(1,1,5,f) (2,1,6,f) (3,1,12,f)"; got != want {
			t.Errorf("%s: acct = %s, want %s", iso, got, want)
		}
	}
}
