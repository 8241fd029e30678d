package session

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

// fakeDisk is a tablet directory that estimates a span's bytes on disk:
// n for exactly the span it expects, or an error.
type fakeDisk struct {
	key, endKey []byte
	n           int64
	err         error
}

func (fakeDisk) Tablets(context.Context) ([]plan.TabletState, error) { return nil, nil }

func (f fakeDisk) SpanDiskBytes(_ context.Context, key, endKey []byte) (int64, error) {
	if !bytes.Equal(key, f.key) || !bytes.Equal(endKey, f.endKey) {
		return 0, errors.New("another span")
	}
	return f.n, f.err
}

// noDisk is a directory without the estimate.
type noDisk struct{}

func (noDisk) Tablets(context.Context) ([]plan.TabletState, error) { return nil, nil }

// TestDiskBytes: ANALYZE's estimate of a table's primary index on disk
// (stats.Table.DiskBytes) is what the directory estimates for the
// index's span, at most the keys' and values' bytes, and unknown (0)
// where the directory cannot tell.
func TestDiskBytes(t *testing.T) {
	tbl := &catalog.Table{ID: 100, Name: "t", Columns: []catalog.Column{{ID: 1, Name: "k", Type: types.Int8}},
		PrimaryIndex: catalog.Index{ID: catalog.PrimaryIndexID, Name: "t_pkey", Unique: true, KeyColumnIDs: []rowenc.ColumnID{1},
			KeyDirections: []rowenc.Order{rowenc.Asc}, Kind: catalog.IndexBTree, State: catalog.IndexPublic}}
	layout, err := tbl.Layout()
	if err != nil {
		t.Fatal(err)
	}
	span := layout.IndexSpan(&layout.Primary)
	disk := func(n int64, err error) fakeDisk { return fakeDisk{key: span.Key, endKey: span.EndKey, n: n, err: err} }
	for _, tc := range []struct {
		name    string
		dir     plan.TabletDirectory
		logical int64
		want    int64
	}{
		{"the primary index's span: 3,000 of 10,000 bytes on disk", disk(3000, nil), 10000, 3000},
		{"never more than the keys and values (old versions on disk)", disk(15000, nil), 10000, 10000},
		{"nothing flushed yet", disk(0, nil), 10000, 0},
		{"the estimate fails", disk(3000, errors.New("down")), 10000, 0},
		{"a directory without the estimate", noDisk{}, 10000, 0},
		{"no directory", nil, 10000, 0},
		{"an empty table", disk(3000, nil), 0, 0},
	} {
		if got := diskBytes(context.Background(), tc.dir, tbl, tc.logical); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}
