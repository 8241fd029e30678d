package rowenc

import (
	"encoding/binary"
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
// A packed row with no column entries is rewritten too when it was
// written under an older version than the schema's. The packed row is
// written under the schema's version, so repacking moves old rows to the
// current version: a dropped column's bytes are left out,
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
	if len(cols) == 0 {
		// A row alone is rewritten only to move it off an older packing
		// version (what lets the catalog forget a dropped column's type).
		rd := valueReader{b: base.Value[1:]}
		if v, err := rd.uvarint(); err != nil || v >= uint64(s.Version) {
			return nil, false
		}
	}
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

// knows reports whether column id is in the schema, live or dropped, or
// is a dropped column it forgot (SchemaHistory.NextColumnID), whose
// entries a repack leaves out.
func (s *Schema) knows(id ColumnID) bool {
	if id < s.History.NextColumnID {
		return true
	}
	for i := range s.Columns {
		if s.Columns[i].ID == id {
			return true
		}
	}
	return false
}

// PackedVersion implements mvcc.RowFormats for a census (kvpb.GCRequest
// Census): the owner of a table data key is its index (CensusOwner),
// whatever table r knows, and a packed row's version is the one its
// value starts with.
func (r *Repacker) PackedVersion(key, value []byte) (owner []byte, version uint32, ok bool) {
	p, _, err := DecodeKeyPrefix(key)
	if err != nil {
		return nil, 0, false
	}
	owner = CensusOwner(p.Group, p.Table, p.Index)
	if !IsPacked(value) {
		return owner, 0, false
	}
	rd := valueReader{b: value[1:]}
	v, err := rd.uvarint()
	if err != nil || v > uint64(^uint32(0)) {
		return owner, 0, false
	}
	return owner, uint32(v), true
}

var _ mvcc.RowFormats = (*Repacker)(nil)

// CensusOwner names an index in a census: its group, table and index
// key ID (buckets of a hash-partitioned table are one owner).
func CensusOwner(group uint64, table, index uint32) []byte {
	b := binary.BigEndian.AppendUint64(nil, group)
	b = binary.BigEndian.AppendUint32(b, table)
	return binary.BigEndian.AppendUint32(b, index)
}

// PrimaryCensusOwner is CensusOwner of t's primary index.
func (t *TableLayout) PrimaryCensusOwner() []byte {
	return CensusOwner(t.GroupID, t.ID, t.Primary.keyID())
}
