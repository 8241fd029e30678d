package rowenc

import "github.com/cairn-db/cairn/sql/types"

// PrimaryRowKey returns the row key of key when key is an entry of t's
// primary index (the row key itself or one of the row's column keys,
// which extend it): the key every entry of that row begins with, so a
// span cut there leaves the whole row on one side (an index build's
// backfill reads a tablet in sub-spans cut so). ok is false for any other
// key.
func (t *TableLayout) PrimaryRowKey(key []byte) (rowKey []byte, ok bool) {
	p, rest, err := DecodeKeyPrefix(key)
	if err != nil || p.Table != t.ID || p.Index != t.Primary.keyID() {
		return nil, false
	}
	row := make([]types.Datum, len(t.Columns))
	suffix, err := decodeColumns(rest, t, row, t.Primary.keyPos, t.Primary.KeyOrders)
	if err != nil {
		return nil, false
	}
	return key[:len(key)-len(suffix)], true
}
