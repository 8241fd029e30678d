package rowenc

import (
	"bytes"
	"fmt"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/types"
)

// RowFetcher decodes the KVs of a forward scan of one index into rows.
//
// For the primary index it groups each row's row key and column keys and
// merges them with a RowMerger, so packed rows, unpacked rows and packed
// rows with newer column entries all read the same (rowenc invariant 3).
// For a secondary index each entry is one row holding the index's key,
// primary-key and stored columns.
//
// Keys of other tables or indexes (a scan of a whole group, see
// TableLayout.IndexSpan) are skipped. Feed pages in key order with Add,
// then call Finish; a row split across pages is emitted once complete.
// The fetcher keeps references to values of the pending row until it is
// emitted. Not safe for concurrent use.
type RowFetcher struct {
	t      *TableLayout
	idx    *IndexLayout
	needed []int // row positions to keep; nil keeps all
	// drop marks the row positions not in needed (nil when needed is);
	// project clears them in place rather than copying the row.
	drop []bool
	// noValues is set when needed holds no value column (count(*), or
	// only key columns): a row's existence is then all the merger must
	// tell, and its values are not decoded.
	noValues bool
	// keySkip marks the primary key's columns (by key position) not in
	// needed whose encoding keyColumnLen measures (nil: none): a row's
	// key passes over them instead of decoding them into Datums that
	// project would clear (a point SELECT of a non-key column decoded,
	// and for an integer of 256 or more allocated, its key).
	keySkip []bool

	// KeyOnly, when set on a primary-index fetcher, receives the row key
	// of every row emitted whose span held nothing but its row key (no
	// column entry, whatever its timestamp), so that deleting the row
	// needs only a point deletion (RowWriter.KeyOnly).
	KeyOnly *KeyOnlyRows

	// needles (SetNeedles) are byte strings every wanted row holds in
	// one of its values; found marks those the pending row's values hold.
	needles [][]byte
	found   uint64

	// ReuseRows, when set, makes the emitted rows the fetcher's: valid
	// only during emit, their storage reused for later rows (an index
	// build encodes each row and drops it: a row's allocation per row
	// saved). Set before the first Add.
	ReuseRows bool
	rowBufs   [2][]types.Datum // ReuseRows: the pending row's and the next

	merger  *RowMerger
	pending []byte // row key of the row being merged; nil when none
	// pendingCols: the pending row has column entries.
	pendingCols bool
	keyRow      []types.Datum
	vals        []types.Datum
}

// NewRowFetcher returns a fetcher of idx's rows keeping the columns in
// needed (nil: every column the index has). Emitted rows are full width
// (len(t.Columns)); columns not kept, or not in the index, are nil.
func NewRowFetcher(t *TableLayout, idx *IndexLayout, needed []ColumnID) (*RowFetcher, error) {
	if idx.Inverted != "" {
		return nil, fmt.Errorf("rowenc: index %q is inverted: its entries are tokens, not rows", idx.Name)
	}
	f := &RowFetcher{t: t, idx: idx}
	if needed != nil {
		f.needed = []int{}
		for _, id := range needed {
			p := t.ColumnPos(id)
			if p < 0 {
				return nil, fmt.Errorf("rowenc: table %q has no column %d", t.Name, id)
			}
			f.needed = append(f.needed, p)
		}
		f.drop = make([]bool, len(t.Columns))
		for i := range f.drop {
			f.drop[i] = true
		}
		for _, p := range f.needed {
			f.drop[p] = false
		}
		f.noValues = true
		for _, p := range t.valuePos {
			if !f.drop[p] {
				f.noValues = false
			}
		}
	}
	if idx.primary {
		f.merger = NewRowMerger(t.Schema)
		if f.drop != nil && !f.noValues {
			// The values not needed are passed over, not decoded
			// and then cleared by project.
			skip := make([]bool, len(t.valuePos))
			for i, p := range t.valuePos {
				skip[i] = f.drop[p]
			}
			f.merger.SetSkip(skip)
		}
		if f.drop != nil {
			skip := make([]bool, len(idx.keyPos))
			some := false
			for i, p := range idx.keyPos {
				skip[i] = f.drop[p] && keySkippable(t.Columns[p].Type)
				some = some || skip[i]
			}
			if some {
				f.keySkip = skip
			}
		}
	}
	return f, nil
}

// Copy returns a fetcher of f's index and columns with nothing pending,
// as NewRowFetcher would make it, sharing f's column sets (read only once
// made) instead of computing them again: for a caller that keeps a
// fetcher of a plan it runs many times (sql/exec's PointCache). f must be
// fresh from NewRowFetcher; what was set on it since (KeyOnly, needles,
// ReuseRows) is not copied.
func (f *RowFetcher) Copy() *RowFetcher {
	c := &RowFetcher{}
	f.CopyTo(c, nil)
	return c
}

// CopyTo is Copy into c, whose merger (a primary index's) is m when m is
// not nil: a caller that keeps the fetcher inside a larger object saves
// two allocations.
func (f *RowFetcher) CopyTo(c *RowFetcher, m *RowMerger) {
	*c = RowFetcher{t: f.t, idx: f.idx, needed: f.needed, drop: f.drop, noValues: f.noValues, keySkip: f.keySkip}
	if f.merger != nil {
		if m == nil {
			m = NewRowMerger(f.t.Schema)
		} else {
			*m = RowMerger{s: f.t.Schema}
		}
		m.SetSkip(f.merger.skip)
		c.merger = m
	}
}

// MaxNeedles bounds SetNeedles.
const MaxNeedles = 64

// SetNeedles makes a primary-index fetcher skip, without decoding it, any
// row none of whose stored values (its packed value or column entries,
// every version the scan returned) contains one of needles as bytes: the
// caller knows that every row it wants holds each needle in some value
// (a jsonb column's stored text holds every string of a value it
// contains, in the one encoding it is stored in: sql/exec's
// jsonbNeedles). Values are stored as written, so a needle in a value is
// a run of its bytes. At most MaxNeedles; a secondary-index fetcher
// ignores them.
func (f *RowFetcher) SetNeedles(needles [][]byte) {
	if len(needles) > MaxNeedles {
		needles = needles[:MaxNeedles]
	}
	f.needles = needles
}

// see marks the needles v holds.
func (f *RowFetcher) see(v []byte) {
	for i, n := range f.needles {
		if f.found&(1<<i) == 0 && bytes.Contains(v, n) {
			f.found |= 1 << i
		}
	}
}

// Add decodes kvs and calls emit for every row they complete. emit owns
// the row it is given.
func (f *RowFetcher) Add(kvs []kvpb.KeyValue, emit func(row []types.Datum) error) error {
	for i := range kvs {
		kv := &kvs[i]
		p, rest, err := DecodeKeyPrefix(kv.Key)
		if err != nil {
			return fmt.Errorf("key %q: %w", kv.Key, err)
		}
		if p.Table != f.t.ID || p.Index != f.idx.keyID() {
			continue
		}
		if !f.idx.primary {
			row := make([]types.Datum, len(f.t.Columns))
			if err := f.t.decodeIndexEntry(f.idx, rest, kv.Value, row); err != nil {
				return fmt.Errorf("index %q key %q: %w", f.idx.Name, kv.Key, err)
			}
			if err := emit(f.project(row)); err != nil {
				return err
			}
			continue
		}
		if err := f.addPrimary(kv, rest, emit); err != nil {
			return err
		}
	}
	return nil
}

func (f *RowFetcher) addPrimary(kv *kvpb.KeyValue, rest []byte, emit func([]types.Datum) error) error {
	if f.pending != nil && len(kv.Key) > len(f.pending) && bytes.HasPrefix(kv.Key, f.pending) {
		// A column entry of the pending row: no row key is a prefix of
		// another (key columns are self-delimiting), so the key columns
		// need not be decoded again.
		return f.addColumn(kv, kv.Key[len(f.pending):])
	}
	keyRow := f.newRow()
	suffix, err := decodeKeyColumns(rest, f.t, keyRow, f.idx.keyPos, f.idx.KeyOrders, f.keySkip)
	if err != nil {
		return fmt.Errorf("key %q: %w", kv.Key, err)
	}
	rowKey := kv.Key[:len(kv.Key)-len(suffix)]
	if f.pending == nil || !bytes.Equal(rowKey, f.pending) {
		if err := f.Finish(emit); err != nil {
			return err
		}
		f.pending, f.keyRow = rowKey, keyRow
	}
	if len(suffix) == 0 {
		f.see(kv.Value)
		f.merger.SetBase(kv.Value, kv.Timestamp)
		return nil
	}
	return f.addColumn(kv, suffix)
}

// decodeKeyColumns is decodeColumns passing over the key columns skip
// marks (nil: none), whose row positions it leaves as they are; one
// whose bytes keyColumnLen does not measure (not in the form EncodeKey
// writes) is decoded, and so fails as decoding fails.
func decodeKeyColumns(src []byte, t *TableLayout, row []types.Datum, pos []int, orders []Order, skip []bool) ([]byte, error) {
	if skip == nil {
		return decodeColumns(src, t, row, pos, orders)
	}
	for i, p := range pos {
		if skip[i] {
			if n := keyColumnLen(src, t.Columns[p].Type, orders[i]); n > 0 {
				src = src[n:]
				continue
			}
		}
		d, rest, err := DecodeKey(src, t.Columns[p].Type, orders[i])
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", t.Columns[p].Name, err)
		}
		row[p], src = d, rest
	}
	return src, nil
}

// newRow returns storage for the next row: a fresh row, or with
// ReuseRows the buffer the pending row does not hold, cleared.
func (f *RowFetcher) newRow() []types.Datum {
	if !f.ReuseRows {
		return make([]types.Datum, len(f.t.Columns))
	}
	b := &f.rowBufs[0]
	if f.keyRow != nil && len(*b) > 0 && &(*b)[0] == &f.keyRow[0] {
		b = &f.rowBufs[1]
	}
	if *b == nil {
		*b = make([]types.Datum, len(f.t.Columns))
	}
	clear(*b)
	return *b
}

// addColumn adds the column entry kv, whose key ends in suffix, to the
// pending row.
func (f *RowFetcher) addColumn(kv *kvpb.KeyValue, suffix []byte) error {
	f.pendingCols = true
	f.see(kv.Value)
	id, err := DecodeColumnSuffix(suffix)
	if err != nil {
		return fmt.Errorf("key %q: %w", kv.Key, err)
	}
	f.merger.AddColumn(id, kv.Value, kv.Timestamp)
	return nil
}

// Finish emits the pending row, if it exists (column entries without a
// row-key value are leftovers of a deleted row and read as nothing).
func (f *RowFetcher) Finish(emit func(row []types.Datum) error) error {
	if f.pending == nil {
		return nil
	}
	defer func() {
		f.pending, f.keyRow, f.pendingCols, f.found = nil, nil, false, 0
		f.merger.Reset()
	}()
	if f.KeyOnly != nil && !f.pendingCols && f.merger.Exists() {
		f.KeyOnly.Add(f.pending)
	}
	if n := len(f.needles); n > 0 && f.found != 1<<n-1 {
		return nil // a row the caller does not want (SetNeedles)
	}
	row := f.keyRow
	if f.noValues {
		if !f.merger.Exists() {
			return nil
		}
		return emit(f.project(row))
	}
	vals, ok, err := f.merger.Row(f.vals)
	if err != nil {
		return fmt.Errorf("row %q: %w", f.pending, err)
	}
	f.vals = vals
	if !ok {
		return nil
	}
	for i, p := range f.t.valuePos {
		row[p] = vals[i]
	}
	return emit(f.project(row))
}

// project clears the columns not needed, in place: row is freshly
// allocated per row and handed to emit, which owns it.
func (f *RowFetcher) project(row []types.Datum) []types.Datum {
	if f.drop == nil {
		return row
	}
	for p, d := range f.drop {
		if d {
			row[p] = nil
		}
	}
	return row
}

// DecodeRows decodes one complete scan's KVs into rows.
func (f *RowFetcher) DecodeRows(kvs []kvpb.KeyValue) ([][]types.Datum, error) {
	var rows [][]types.Datum
	emit := func(r []types.Datum) error { rows = append(rows, r); return nil }
	if err := f.Add(kvs, emit); err != nil {
		return nil, err
	}
	if err := f.Finish(emit); err != nil {
		return nil, err
	}
	return rows, nil
}

// Layout returns the table and index the fetcher decodes.
func (f *RowFetcher) Layout() (*TableLayout, *IndexLayout) { return f.t, f.idx }

// KeyOnlyRows is a statement's knowledge of which rows of one table are
// stored as their row key alone: a fetcher adds the rows it read so, and a
// RowWriter deletes such a row with one point deletion instead of a range
// deletion over its span (which costs an iterator and a scan per row), and
// forgets a row it writes any other way. Only a statement that is the
// sole writer of the table between its reads and its deletes may share
// one between its fetchers and its writer: a column entry written by
// another writer at the same timestamp would survive the point deletion
// and reappear in a row inserted later in the transaction (invariant 3).
// The zero value is empty and ready. Not safe for concurrent use.
type KeyOnlyRows struct {
	Table uint32
	keys  map[string]struct{}
}

// Add records that rowKey's span holds only rowKey.
func (s *KeyOnlyRows) Add(rowKey []byte) {
	if s.keys == nil {
		s.keys = map[string]struct{}{}
	}
	s.keys[string(rowKey)] = struct{}{}
}

// Has reports whether rowKey was recorded and not forgotten since.
func (s *KeyOnlyRows) Has(rowKey []byte) bool {
	_, ok := s.keys[string(rowKey)]
	return ok
}

// Forget drops rowKey (it was written).
func (s *KeyOnlyRows) Forget(rowKey []byte) { delete(s.keys, string(rowKey)) }
