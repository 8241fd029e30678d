package exec

import (
	"context"

	"github.com/cairn-db/cairn/sql/rowenc"
)

// Point deletes. A DELETE would otherwise delete each row's whole span
// (row key and any column entries) with a range deletion, which costs the
// tablet an iterator and a scan per row (50k rows: 6.5 s). When the rows
// it deletes were read by this statement's own scans and their spans held
// only the row key (a packed row never partially updated), one point
// deletion of the row key does the same. The scans of the DELETE's table
// learn of the set through the context, so no operator between them and
// the DELETE needs to know.

type keyOnlyCtxKey struct{}

// withKeyOnly returns ctx carrying set for the scans below a DELETE.
func withKeyOnly(ctx context.Context, set *rowenc.KeyOnlyRows) context.Context {
	return context.WithValue(ctx, keyOnlyCtxKey{}, set)
}

// noteKeyOnly lets f record key-only rows into the DELETE's set when ctx
// carries one and f reads that table's primary index.
func noteKeyOnly(ctx context.Context, f *rowenc.RowFetcher) {
	if f.KeyOnly != nil {
		return
	}
	set, _ := ctx.Value(keyOnlyCtxKey{}).(*rowenc.KeyOnlyRows)
	if set == nil {
		return
	}
	if t, idx := f.Layout(); t.ID == set.Table && idx.IsPrimary() {
		f.KeyOnly = set
	}
}

// pointDeletes makes ti's writer delete by point the rows the scans under
// the returned context read as a lone row key. The caller must be the only
// writer of the table in the statement.
func (ti *tableInfo) pointDeletes(ctx context.Context) context.Context {
	set := &ti.keyOnly
	*set = rowenc.KeyOnlyRows{Table: ti.layout.ID}
	ti.writer.KeyOnly = set
	return withKeyOnly(ctx, set)
}
