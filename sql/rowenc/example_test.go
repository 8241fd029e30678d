package rowenc_test

import (
	"fmt"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

// A packed row, a later partial update, and a read that merges them under
// a schema that has since gained a column with a default.
func Example() {
	v1, _ := rowenc.NewSchema(1, []rowenc.Column{
		{ID: 1, Type: types.Text},
		{ID: 2, Type: types.Int8},
	})
	packed, _ := rowenc.PackRow(nil, v1, []types.Datum{types.DString("ada"), types.DNull}, 0)

	update, _ := rowenc.EncodeColumnValue(nil, types.Int8, types.DInt(36))

	v2, _ := rowenc.NewSchema(2, []rowenc.Column{
		{ID: 1, Type: types.Text},
		{ID: 2, Type: types.Int8},
		{ID: 3, Type: types.Bool, Added: 2, Default: types.DBool(true)},
	})
	m := rowenc.NewRowMerger(v2)
	m.SetBase(packed, hlc.Timestamp{WallTime: 10})
	m.AddColumn(2, update, hlc.Timestamp{WallTime: 20})
	row, ok, _ := m.Row(nil)
	fmt.Println(len(packed), "bytes packed;", ok, row)

	rowKey, _ := rowenc.EncodeKey(rowenc.EncodeTableIndexPrefix(nil, 52, 1), types.DInt(7), rowenc.Asc)
	fmt.Printf("row key %x, column 2 entry at %x\n", rowKey, rowenc.ColumnKey(nil, rowKey, 2))
	// Output:
	// 8 bytes packed; true [ada 36 t]
	// row key 81348101018107, column 2 entry at 813481010181078102
}
