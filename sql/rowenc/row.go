package rowenc

import (
	"encoding/binary"
	"fmt"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/sql/types"
)

// Row value tags: the first byte of every value this package writes under
// a row key or a column key.
const (
	tagPacked     = 0x01 // row key: [tag][version][n][bitmap][values]
	tagLiveness   = 0x02 // row key of an unpacked row: [tag][version]
	tagColumn     = 0x03 // column key: [tag][value]
	tagColumnNull = 0x04 // column key: [tag]; the column was set to NULL
)

// RowKeyTags are the tags of a row key's values: a key of a primary
// index whose visible value starts with one of them is a row that exists
// (RowMerger.Exists), and no column entry's value does. A count of rows at
// the tablets (kv.Batch.Count) counts the values that start with them, so
// that column entries and deleted rows are left out without decoding a
// key.
func RowKeyTags() []byte { return []byte{tagPacked, tagLiveness} }

// PackRow appends the packed encoding of row under s.Version:
//
//	0x01 | version uvarint | n uvarint | bitmap ceil(n/8) | values
//
// row[i] is the value of s.Live()[i]. n is one past the last non-NULL
// column, so trailing NULLs cost nothing and NULLs elsewhere cost one bit;
// a row of only NULLs is three bytes. If sizeLimit > 0 and the result is
// longer, PackRow returns ErrRowTooLarge and the caller writes the row
// unpacked (EncodeUnpackedRow).
func PackRow(dst []byte, s *Schema, row []types.Datum, sizeLimit int) ([]byte, error) {
	if len(row) != len(s.live) {
		return nil, fmt.Errorf("%w: %d values for %d columns", ErrRowShape, len(row), len(s.live))
	}
	n := len(row)
	for n > 0 && types.IsNull(row[n-1]) {
		n--
	}
	start := len(dst)
	dst = append(dst, tagPacked)
	dst = binary.AppendUvarint(dst, uint64(s.Version))
	dst = binary.AppendUvarint(dst, uint64(n))
	bm := len(dst)
	dst = append(dst, make([]byte, (n+7)/8)...)
	for i := range n {
		if types.IsNull(row[i]) {
			continue
		}
		dst[bm+i/8] |= 1 << (i % 8)
		var err error
		col := &s.Columns[s.live[i]]
		if dst, err = appendValue(dst, col.Type, row[i]); err != nil {
			return nil, fmt.Errorf("column %d: %w", col.ID, err)
		}
	}
	if sizeLimit > 0 && len(dst)-start > sizeLimit {
		return dst[:start], fmt.Errorf("%w: %d bytes, limit %d", ErrRowTooLarge, len(dst)-start, sizeLimit)
	}
	return dst, nil
}

// EncodeLiveness returns the row-key value of an unpacked row: it says the
// row exists and under which schema version it was inserted.
func EncodeLiveness(dst []byte, version uint32) []byte {
	return binary.AppendUvarint(append(dst, tagLiveness), uint64(version))
}

// EncodeColumnValue appends the value of a column entry (key/column): a
// partial update of a packed row, or one column of an unpacked row. A NULL
// d records that the column was set to NULL.
func EncodeColumnValue(dst []byte, t *types.T, d types.Datum) ([]byte, error) {
	if types.IsNull(d) {
		return append(dst, tagColumnNull), nil
	}
	return appendValue(append(dst, tagColumn), t, d)
}

// ColumnValue is one column entry: the column and its encoded value.
type ColumnValue struct {
	ID    ColumnID
	Value []byte
}

// EncodeUnpackedRow returns the liveness value for the row key and one
// column entry per non-NULL column (NULL columns need no entry: column
// entries older than the liveness entry are ignored by readers).
func EncodeUnpackedRow(s *Schema, row []types.Datum) ([]byte, []ColumnValue, error) {
	if len(row) != len(s.live) {
		return nil, nil, fmt.Errorf("%w: %d values for %d columns", ErrRowShape, len(row), len(s.live))
	}
	var cols []ColumnValue
	for i, d := range row {
		if types.IsNull(d) {
			continue
		}
		col := &s.Columns[s.live[i]]
		v, err := EncodeColumnValue(nil, col.Type, d)
		if err != nil {
			return nil, nil, fmt.Errorf("column %d: %w", col.ID, err)
		}
		cols = append(cols, ColumnValue{ID: col.ID, Value: v})
	}
	return EncodeLiveness(nil, s.Version), cols, nil
}

// RowMerger assembles a row from what an MVCC read returns for its keys:
// the newest visible value of the row key (a packed row, a liveness entry,
// or a deletion) and the newest visible value of each column key. Column
// entries older than the row-key value belong to an earlier incarnation of
// the row (before a full-row rewrite or a delete and re-insert) and are
// ignored; entries at the same timestamp apply, because a transaction
// writes its row first and its column updates after. A writer that rewrites
// a whole packed row must therefore do so at a timestamp above any column
// entry it means to supersede (a later transaction, or an overwrite of
// those entries in the same one).
//
// Use: Reset, SetBase, AddColumn for each column key, then Row. A
// RowMerger is not safe for concurrent use; reuse one per scan.
type RowMerger struct {
	s       *Schema
	base    []byte
	baseTS  hlc.Timestamp
	hasBase bool
	cols    map[ColumnID]colEntry
	// skip marks the columns (Live() order) Row leaves undecoded; nil
	// decodes every column.
	skip []bool
}

type colEntry struct {
	value []byte
	ts    hlc.Timestamp
}

// NewRowMerger returns a merger for rows of schema s.
func NewRowMerger(s *Schema) *RowMerger {
	// cols is made by the first AddColumn: a packed row's merge (a point
	// read's, most often) adds none.
	return &RowMerger{s: s}
}

// SetSkip makes Row leave the columns marked in skip (Live() order) as
// NULL without decoding them: a scan that needs a few columns of wide
// rows (an index build, a projection) builds no value for the others.
// nil decodes every column again.
func (m *RowMerger) SetSkip(skip []bool) { m.skip = skip }

// Reset forgets the previous row.
func (m *RowMerger) Reset() {
	m.base, m.hasBase, m.baseTS = nil, false, hlc.Timestamp{}
	clear(m.cols)
}

// SetBase records the row key's newest visible value; an empty value is a
// deletion. The merger keeps value until Reset; the caller must not
// modify it meanwhile.
func (m *RowMerger) SetBase(value []byte, ts hlc.Timestamp) {
	m.base, m.baseTS, m.hasBase = value, ts, true
}

// AddColumn records a column key's newest visible value. Entries for
// columns the schema does not hold live are ignored; of two entries for one
// column the newer wins.
func (m *RowMerger) AddColumn(id ColumnID, value []byte, ts hlc.Timestamp) {
	if old, ok := m.cols[id]; ok && ts.Less(old.ts) {
		return
	}
	if m.cols == nil {
		m.cols = map[ColumnID]colEntry{}
	}
	m.cols[id] = colEntry{value: value, ts: ts}
}

// Exists reports whether the row exists (Row's ok) without decoding it.
func (m *RowMerger) Exists() bool { return m.hasBase && len(m.base) > 0 }

// Row decodes the merged row into dst (reusing its storage) in Live()
// order. ok is false when the row does not exist: no row-key value, or a
// deletion.
func (m *RowMerger) Row(dst []types.Datum) (row []types.Datum, ok bool, err error) {
	if !m.hasBase || len(m.base) == 0 {
		return dst[:0], false, nil
	}
	row = append(dst[:0], make([]types.Datum, len(m.s.live))...)
	if err := decodeBaseSkip(m.s, m.base, row, m.skip); err != nil {
		return nil, false, err
	}
	for id, e := range m.cols {
		if e.ts.Less(m.baseTS) {
			continue
		}
		i := m.s.LiveIndex(id)
		if i < 0 {
			continue // dropped, or unknown to this schema
		}
		if m.skip != nil && m.skip[i] {
			continue
		}
		d, err := decodeColumnValue(m.s.Columns[m.s.live[i]].Type, e.value)
		if err != nil {
			return nil, false, fmt.Errorf("column %d: %w", id, err)
		}
		row[i] = d
	}
	return row, true, nil
}

// Repack folds the merged row into one packed row under the schema's
// current version, for compaction and GC. ok is false for a deleted row.
func (m *RowMerger) Repack(dst []byte, sizeLimit int) (out []byte, ok bool, err error) {
	row, ok, err := m.Row(nil)
	if err != nil || !ok {
		return dst, ok, err
	}
	out, err = PackRow(dst, m.s, row, sizeLimit)
	return out, true, err
}

// DecodeRow is RowMerger for callers that already selected the column
// entries newer than base: it decodes base and applies newer in order.
func DecodeRow(s *Schema, base []byte, newer []ColumnValue) ([]types.Datum, error) {
	row := make([]types.Datum, len(s.live))
	if err := decodeBase(s, base, row); err != nil {
		return nil, err
	}
	for _, c := range newer {
		i := s.LiveIndex(c.ID)
		if i < 0 {
			continue
		}
		d, err := decodeColumnValue(s.Columns[s.live[i]].Type, c.Value)
		if err != nil {
			return nil, fmt.Errorf("column %d: %w", c.ID, err)
		}
		row[i] = d
	}
	return row, nil
}

// decodeBase fills row (Live() order) from a packed row or a liveness
// entry. Columns the writer's version lacked read as their Default;
// columns it had but left out (NULL, or no entry yet) read as NULL.
func decodeBase(s *Schema, base []byte, row []types.Datum) error {
	return decodeBaseSkip(s, base, row, nil)
}

// decodeBaseSkip is decodeBase leaving the columns marked in skip (Live()
// order; nil: none) NULL, their values passed over undecoded, as are
// those of columns dropped since the row was written.
func decodeBaseSkip(s *Schema, base []byte, row []types.Datum, skip []bool) error {
	if len(base) == 0 {
		return corrupt("empty row value")
	}
	r := valueReader{b: base[1:]}
	v, err := r.uvarint()
	if err != nil {
		return err
	}
	if v > uint64(^uint32(0)) {
		return corrupt("schema version")
	}
	layout, err := s.layout(uint32(v))
	if err != nil {
		return err
	}
	// Start from "absent": NULL if the writer had the column, else default.
	li := 0
	for i, j := range s.live {
		row[i] = types.DNull
		for li < len(layout) && layout[li] < j {
			li++
		}
		if li < len(layout) && layout[li] == j {
			continue
		}
		if def := s.Columns[j].Default; def != nil {
			row[i] = def
		}
	}
	switch base[0] {
	case tagLiveness:
		if len(r.b) != 0 {
			return corrupt("trailing bytes after liveness")
		}
		return nil
	case tagPacked:
		if uint32(v) < s.History.OldestPacked {
			return corrupt(fmt.Sprintf("packed row under schema version %d, which was forgotten (oldest kept %d)", v, s.History.OldestPacked))
		}
	default:
		return corrupt(fmt.Sprintf("row tag %#x", base[0]))
	}
	n, err := r.uvarint()
	if err != nil {
		return err
	}
	if n > uint64(len(layout)) {
		return corrupt("packed row has more columns than its schema version")
	}
	bm, err := r.fixed(int((n + 7) / 8))
	if err != nil {
		return err
	}
	out := 0 // index into s.live, advanced in step with layout
	for k := range int(n) {
		j := layout[k]
		present := bm[k/8]&(1<<(k%8)) != 0
		for out < len(s.live) && s.live[out] < j {
			out++
		}
		live := out < len(s.live) && s.live[out] == j // else: dropped since
		if live && skip != nil && skip[out] {
			row[out] = types.DNull
			live = false
		}
		var d types.Datum = types.DNull
		if present {
			if live {
				d, err = r.value(s.Columns[j].Type)
			} else {
				err = r.skip(s.Columns[j].Type)
			}
			if err != nil {
				return fmt.Errorf("column %d: %w", s.Columns[j].ID, err)
			}
		}
		if live {
			row[out] = d
		}
	}
	if len(r.b) != 0 {
		return corrupt("trailing bytes after packed row")
	}
	return nil
}

func decodeColumnValue(t *types.T, v []byte) (types.Datum, error) {
	if len(v) == 0 {
		return nil, corrupt("empty column value")
	}
	switch v[0] {
	case tagColumnNull:
		if len(v) != 1 {
			return nil, corrupt("trailing bytes after NULL column")
		}
		return types.DNull, nil
	case tagColumn:
		r := valueReader{b: v[1:]}
		d, err := r.value(t)
		if err != nil {
			return nil, err
		}
		if len(r.b) != 0 {
			return nil, corrupt("trailing bytes after column value")
		}
		return d, nil
	}
	return nil, corrupt(fmt.Sprintf("column tag %#x", v[0]))
}

// IsPacked reports whether a row-key value is a packed row (as opposed to
// a liveness entry or a deletion).
func IsPacked(value []byte) bool { return len(value) > 0 && value[0] == tagPacked }

// ColumnKey appends the key of column id's entry for the row at rowKey:
// rowKey followed by the column ID as an ordered varint. Column keys sort
// right after their row key, in column ID order, and before the next row.
func ColumnKey(dst, rowKey []byte, id ColumnID) []byte {
	return appendOrderedInt(append(dst, rowKey...), int64(id))
}

// DecodeColumnSuffix reads the column ID from what follows a row key in a
// column key.
func DecodeColumnSuffix(suffix []byte) (ColumnID, error) {
	r := keyReader{b: suffix}
	v, err := r.orderedInt()
	if err != nil {
		return 0, err
	}
	if v < 0 || v > int64(^uint32(0)) || len(r.b) != 0 {
		return 0, corrupt("column suffix")
	}
	return ColumnID(v), nil
}

// EncodeTableIndexPrefix appends the table and index IDs as ordered
// varints. The group/bucket prefix before them is the catalog's (DESIGN §5).
func EncodeTableIndexPrefix(dst []byte, tableID, indexID uint32) []byte {
	return appendOrderedInt(appendOrderedInt(dst, int64(tableID)), int64(indexID))
}
