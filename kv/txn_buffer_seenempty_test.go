package kv

import (
	"context"
	"slices"
	"testing"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
)

// TestSeenEmptyRangeNotSent: a row read under its lock (Batch.LockOnRead)
// as its row key alone and rewritten whole with Batch.DelRangeSeenEmpty
// (sql/rowenc's RowWriter.WholeRow over a row with no column entries)
// commits with no DeleteRange sent when the transaction buffers its
// writes; the buffer still answers the row's scan alone (no batch sent).
// A plain DelRange is sent, and so is a DelRangeSeenEmpty of a
// transaction that does not buffer. Under every isolation level, what
// each transaction commits and reads is what the deletion would have
// left.
func TestSeenEmptyRangeNotSent(t *testing.T) {
	ctx := context.Background()
	row := []byte("r5")
	end := keys.PrefixEnd(row)
	rewrite := func(t *testing.T, txn *Txn, seenEmpty bool) {
		r := &Batch{}
		r.Scan(row, end, 0)
		r.LockOnRead(row, end)
		mustOK(t, txn.Run(ctx, r))
		if n := len(r.Results[0].Rows); n != 1 {
			t.Fatalf("the locking read found %d keys, want the row key alone", n)
		}
		b := &Batch{}
		if seenEmpty {
			b.DelRangeSeenEmpty(keys.Next(row), end)
		} else {
			b.DelRange(keys.Next(row), end)
		}
		b.Put(row, []byte("new"))
		mustOK(t, txn.Run(ctx, b))
	}
	for _, iso := range []IsolationLevel{ReadCommitted, Snapshot, Serializable} {
		for _, tc := range []struct {
			name      string
			unbuffed  bool
			write     func(t *testing.T, txn *Txn)
			scanSent  int // batches the row's scan after the writes sends
			delRanges int // DeleteRanges sent in all
			want      []string
		}{
			{"read empty", false, func(t *testing.T, txn *Txn) { rewrite(t, txn, true) }, 0, 0, []string{"r5=new"}},
			{"plain DelRange", false, func(t *testing.T, txn *Txn) { rewrite(t, txn, false) }, 0, 1, []string{"r5=new"}},
			{"read empty, then a column entry", false, func(t *testing.T, txn *Txn) {
				rewrite(t, txn, true)
				mustOK(t, txn.Put(ctx, []byte("r5\x02"), []byte("c2")))
			}, 0, 0, []string{"r5=new", "r5\x02=c2"}},
			{"read empty, rolled back to a savepoint", false, func(t *testing.T, txn *Txn) {
				sp, err := txn.Savepoint(ctx)
				mustOK(t, err)
				rewrite(t, txn, true)
				mustOK(t, txn.RollbackToSavepoint(ctx, sp))
			}, 1, 0, []string{"r5=old"}},
			{"read empty, not buffered", true, func(t *testing.T, txn *Txn) { rewrite(t, txn, true) }, 1, 1, []string{"r5=new"}},
		} {
			t.Run(iso.String()+"/"+tc.name, func(t *testing.T) {
				e, w := newWatchedEnv(t)
				e.mustPut("r5", "old")
				e.mustPut("r6", "s6")
				txn := e.db.NewTxn(ctx, "rewrite", iso)
				if !tc.unbuffed {
					txn.EnableWriteBuffering()
				}
				tc.write(t, txn)
				before := w.sent()
				b := &Batch{}
				b.Scan(row, end, 0)
				mustOK(t, txn.Run(ctx, b))
				if n := w.sent() - before; n != tc.scanSent {
					t.Errorf("the scan sent %d batches, want %d", n, tc.scanSent)
				}
				if got := kvStrings(b.Results[0].Rows); !slices.Equal(got, tc.want) {
					t.Errorf("scan in the transaction = %q, want %q", got, tc.want)
				}
				mustOK(t, txn.Commit(ctx))
				if n := w.deleteRanges(); n != tc.delRanges {
					t.Errorf("%d DeleteRanges sent, want %d", n, tc.delRanges)
				}
				after := &Batch{}
				after.Scan(row, []byte("r7"), 0)
				mustOK(t, e.db.Run(ctx, after))
				if got, want := kvStrings(after.Results[0].Rows), append(slices.Clone(tc.want), "r6=s6"); !slices.Equal(got, want) {
					t.Errorf("committed = %q, want %q", got, want)
				}
			})
		}
	}
}

// kvStrings renders rows as key=value.
func kvStrings(rows []kvpb.KeyValue) []string {
	var out []string
	for _, kv := range rows {
		out = append(out, string(kv.Key)+"="+string(kv.Value))
	}
	return out
}

// TestDelRangeSeenEmptyAllocs: an UPDATE's one DelRangeSeenEmpty takes
// its request alone (its list of such requests starts in the batch).
func TestDelRangeSeenEmptyAllocs(t *testing.T) {
	b := &Batch{}
	start, end := []byte("r5\x00"), []byte("r6")
	if n := testing.AllocsPerRun(100, func() {
		*b = Batch{}
		b.DelRangeSeenEmpty(start, end)
	}); n != 1 {
		t.Errorf("%.0f allocations, want 1", n)
	}
	if !b.isSeenEmpty(b.reqs[0].(*kvpb.DeleteRangeRequest)) {
		t.Error("the request is not marked read empty")
	}
}
