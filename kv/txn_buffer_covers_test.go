package kv

import (
	"context"
	"slices"
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
)

// TestBufferedRowRewriteReadsLocally: a scan of a span whose every key the
// write buffer decides (a row rewritten whole: a Put of its row key and a
// DeleteRange of the rest of its span, as sql/rowenc's RowWriter.WholeRow
// writes) is answered from the buffer, with no batch sent; a span the
// buffer decides only in part (a Put of the row key alone, a rewrite
// rolled back to a savepoint, a span reaching past the row) still reads
// KV, and every answer equals what KV under the buffer holds.
func TestBufferedRowRewriteReadsLocally(t *testing.T) {
	ctx := context.Background()
	row := []byte("r5")
	rowSpan := [2][]byte{row, keys.PrefixEnd(row)}
	rewrite := func(t *testing.T, txn *Txn, v string) {
		b := &Batch{}
		b.DelRange(keys.Next(row), keys.PrefixEnd(row))
		b.Put(row, []byte(v))
		mustOK(t, txn.Run(ctx, b))
	}
	for _, tc := range []struct {
		name  string
		write func(t *testing.T, txn *Txn)
		span  [2][]byte
		limit int64
		sent  int // batches the scan sends
		want  []string
	}{
		{"whole row", func(t *testing.T, txn *Txn) { rewrite(t, txn, "new") }, rowSpan, 0, 0, []string{"r5=new"}},
		{"whole row, limit 1", func(t *testing.T, txn *Txn) { rewrite(t, txn, "new") }, rowSpan, 1, 0, []string{"r5=new"}},
		{"whole row, then a column entry", func(t *testing.T, txn *Txn) {
			rewrite(t, txn, "new")
			mustOK(t, txn.Put(ctx, []byte("r5\x02"), []byte("c2")))
		}, rowSpan, 0, 0, []string{"r5=new", "r5\x02=c2"}},
		{"whole row, then deleted", func(t *testing.T, txn *Txn) {
			rewrite(t, txn, "new")
			b := &Batch{}
			b.DelRange(row, keys.PrefixEnd(row))
			mustOK(t, txn.Run(ctx, b))
		}, rowSpan, 0, 0, nil},
		{"the row key alone", func(t *testing.T, txn *Txn) {
			mustOK(t, txn.Put(ctx, row, []byte("new")))
		}, rowSpan, 0, 1, []string{"r5=new", "r5\x01=c1"}},
		{"whole row rolled back", func(t *testing.T, txn *Txn) {
			sp, err := txn.Savepoint(ctx)
			mustOK(t, err)
			rewrite(t, txn, "new")
			mustOK(t, txn.RollbackToSavepoint(ctx, sp))
		}, rowSpan, 0, 1, []string{"r5=old", "r5\x01=c1"}},
		{"row key rolled back, range deletion kept", func(t *testing.T, txn *Txn) {
			b := &Batch{}
			b.DelRange(keys.Next(row), keys.PrefixEnd(row))
			mustOK(t, txn.Run(ctx, b))
			sp, err := txn.Savepoint(ctx)
			mustOK(t, err)
			mustOK(t, txn.Put(ctx, row, []byte("new")))
			mustOK(t, txn.RollbackToSavepoint(ctx, sp))
		}, rowSpan, 0, 1, []string{"r5=old"}},
		{"a span past the row", func(t *testing.T, txn *Txn) { rewrite(t, txn, "new") },
			[2][]byte{row, []byte("r7")}, 0, 1, []string{"r5=new", "r6=s6"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, w := newWatchedEnv(t)
			e.mustPut("r5", "old")
			e.mustPut("r5\x01", "c1")
			e.mustPut("r6", "s6")
			txn := e.db.NewTxn(ctx, "rewrite", Snapshot)
			txn.EnableWriteBuffering()
			tc.write(t, txn)
			before := w.sent()
			b := &Batch{}
			b.Scan(tc.span[0], tc.span[1], tc.limit)
			mustOK(t, txn.Run(ctx, b))
			if n := w.sent() - before; n != tc.sent {
				t.Errorf("the scan sent %d batches, want %d", n, tc.sent)
			}
			var got []string
			for _, kv := range b.Results[0].Rows {
				got = append(got, string(kv.Key)+"="+string(kv.Value))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("scan = %q, want %q", got, tc.want)
			}
			if b.Results[0].ResumeSpan != nil {
				t.Errorf("scan resumes at %v", b.Results[0].ResumeSpan)
			}
			mustOK(t, txn.Commit(ctx))
		})
	}
}

// TestBufferLookupAllocs: resolving a key against a buffer that holds a
// range deletion, and deciding whether it covers a row's span, allocate
// nothing (a look-up built keys.Next of its key to search the range
// deletions: ten objects per pgbench -N transaction).
func TestBufferLookupAllocs(t *testing.T) {
	wb := &writeBuffer{}
	row := []byte("r5")
	wb.add(row, bufferedWrite{ord: 1, value: []byte("v")}, hlc.Timestamp{})
	wb.addRange(bufferedRange{span: kvpb.Span{Key: keys.Next(row), EndKey: keys.PrefixEnd(row)}, ord: 0})
	end := keys.PrefixEnd(row)
	col := []byte("r5\x01")
	var covered, known bool
	if n := testing.AllocsPerRun(100, func() {
		_, _, known = wb.resolve(col, nil)
	}); n != 0 {
		t.Errorf("resolve: %.0f allocations, want 0", n)
	}
	if !known {
		t.Error("resolve: the range deletion's key is not known")
	}
	// covers steps past the row key with keys.Next (one allocation).
	if n := testing.AllocsPerRun(100, func() {
		covered = wb.covers(row, end, nil)
	}); n > 1 {
		t.Errorf("covers: %.0f allocations, want at most 1", n)
	}
	if !covered {
		t.Error("covers: the rewritten row's span is not covered")
	}
}
