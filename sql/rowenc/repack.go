package rowenc

import (
	"sync/atomic"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/mvcc"
	"github.com/cairn-db/cairn/sql/types"
)

// Repacker is GC's row repacker (mvcc.Repacker, mvcc invariant 10) for
// the primary indexes of the tables it was last given (SetTables): GC
// hands it a row kept as a packed row plus column entries (partial
// updates), every version at or below the GC threshold, and it returns the
// one packed row a RowMerger reads from them (seeds/packed-rows.txt,
// "Compactions"). It is safe for concurrent use; SetTables swaps the whole
// table set at once.
//
// It leaves a row alone (ok false) unless it is sure the result reads the
// same for every reader at or above the threshold:
//
//  1. the row-key value is a packed row (an unpacked row, written with
//     storage.packed_rows.enabled off, stays unpacked);
//  2. the table's schema has been the one it knows since at or below
//     the threshold (RepackTable.Since), so every reader at or above it
//     reads with this version or a newer one, and can read a row packed
//     under it (invariant 5);
//  3. every column entry names a column of that schema, live or dropped
//     (an unknown one was added by a newer schema than it knows), and the
//     row was written under that version or an older one.
//
// The packed row is written under the schema's version, so repacking moves
// old rows to the current version: a dropped column's bytes are left out,
// and once no row written under a version that had it survives, the
// catalog may forget the column (invariant 5).
type Repacker struct {
	tables atomic.Pointer[map[uint32]RepackTable]
}

// RepackTable is one table the Repacker knows: its layout and the
// timestamp since which that layout's schema has been the table's (any
// timestamp at which it was already current does).
type RepackTable struct {
	Layout *TableLayout
	Since  hlc.Timestamp
}

var _ mvcc.Repacker = (*Repacker)(nil)

// SetTables replaces the tables r knows.
func (r *Repacker) SetTables(tables []RepackTable) {
	m := make(map[uint32]RepackTable, len(tables))
	for _, t := range tables {
		m[t.Layout.ID] = t
	}
	r.tables.Store(&m)
}

// table returns the table whose primary index holds key, and the rest of
// key after the index prefix.
func (r *Repacker) table(key []byte) (RepackTable, []byte, bool) {
	m := r.tables.Load()
	if m == nil {
		return RepackTable{}, nil, false
	}
	p, rest, err := DecodeKeyPrefix(key)
	if err != nil {
		return RepackTable{}, nil, false
	}
	t, ok := (*m)[p.Table]
	if !ok || p.Group != t.Layout.GroupID || p.Index != t.Layout.Primary.keyID() {
		return RepackTable{}, nil, false
	}
	return t, rest, true
}

// RowKeyLen implements mvcc.Repacker: the length of key's row key when
// key is in the primary index of a table r knows.
func (r *Repacker) RowKeyLen(key []byte) int {
	t, rest, ok := r.table(key)
	if !ok {
		return 0
	}
	l := t.Layout
	row := make([]types.Datum, len(l.Columns))
	suffix, err := decodeColumns(rest, l, row, l.Primary.keyPos, l.Primary.KeyOrders)
	if err != nil {
		return 0
	}
	if len(suffix) > 0 {
		if _, err := DecodeColumnSuffix(suffix); err != nil {
			return 0
		}
	}
	return len(key) - len(suffix)
}

// Repack implements mvcc.Repacker (see the type's comment for when it
// declines).
func (r *Repacker) Repack(threshold hlc.Timestamp, rowKey []byte, base mvcc.RowVersion, cols []mvcc.RowVersion) ([]byte, bool) {
	t, _, ok := r.table(rowKey)
	if !ok || threshold.Less(t.Since) || !IsPacked(base.Value) {
		return nil, false
	}
	s := t.Layout.Schema
	m := NewRowMerger(s)
	m.SetBase(base.Value, base.Timestamp)
	for _, c := range cols {
		id, err := DecodeColumnSuffix(c.Key[len(rowKey):])
		if err != nil || !s.knows(id) {
			return nil, false
		}
		m.AddColumn(id, c.Value, c.Timestamp)
	}
	out, ok, err := m.Repack(nil, 0)
	if err != nil || !ok {
		return nil, false
	}
	return out, true
}

// knows reports whether column id is in the schema, live or dropped.
func (s *Schema) knows(id ColumnID) bool {
	for i := range s.Columns {
		if s.Columns[i].ID == id {
			return true
		}
	}
	return false
}
