package rowenc

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
)

// Writes receives a RowWriter's KV operations; *kv.Batch implements it.
// An interface rather than kv.Batch itself so that this package, which
// MVCC GC also uses to repack rows, stays below the KV client.
type Writes interface {
	Put(key, value []byte)
	CPut(key, value, expected []byte, expectExists bool)
	Del(key []byte)
	DelRange(start, end []byte)
}

// GeneratedKeyWrites is a Writes that takes a CPut of a key the writer
// generated to be new (kv.Batch.CPutGenerated: a buffering transaction
// checks its condition when the write is sent rather than at the
// statement). A Writes without it gets a plain CPut.
type GeneratedKeyWrites interface {
	CPutGenerated(key, value []byte)
}

// SeenEmptyWrites is a Writes that takes a DeleteRange of a span the
// writer's statement read, under its lock, and found empty
// (kv.Batch.DelRangeSeenEmpty: a buffering transaction then sends no
// DeleteRange at commit). A Writes without it gets a plain DelRange.
type SeenEmptyWrites interface {
	DelRangeSeenEmpty(start, end []byte)
}

// delRangeSeenEmpty adds a deletion of [start, end), read empty, to b.
func delRangeSeenEmpty(b Writes, start, end []byte) {
	if s, ok := b.(SeenEmptyWrites); ok {
		s.DelRangeSeenEmpty(start, end)
		return
	}
	b.DelRange(start, end)
}

// cputGenerated adds a CPut expecting no value of a generated key to b.
func cputGenerated(b Writes, key, value []byte) {
	if g, ok := b.(GeneratedKeyWrites); ok {
		g.CPutGenerated(key, value)
		return
	}
	b.CPut(key, value, nil, false)
}

// PrimaryEntry is what the primary index holds for a row: the row key's
// value (a packed row, or a liveness entry when unpacked) and, unpacked,
// one column entry per non-NULL value column.
type PrimaryEntry struct {
	Key, Value []byte
	Columns    []KV
}

// KV is one key and its value.
type KV struct{ Key, Value []byte }

// EncodePrimaryRow encodes row for t's primary index: packed when packed
// is set and the packed row fits sizeLimit (0: no limit), else unpacked.
func (t *TableLayout) EncodePrimaryRow(row []types.Datum, packed bool, sizeLimit int) (PrimaryEntry, error) {
	// Room for a typical key and packed row up front: growing them from
	// nil a few bytes at a time was a tenth of a bulk COPY's CPU.
	key, err := t.PrimaryKey(make([]byte, 0, 32), row)
	if err != nil {
		return PrimaryEntry{}, err
	}
	vals := t.values(row)
	if packed {
		v, err := PackRow(make([]byte, 0, 64), t.Schema, vals, sizeLimit)
		if err == nil {
			return PrimaryEntry{Key: key, Value: v}, nil
		}
		if !errors.Is(err, ErrRowTooLarge) {
			return PrimaryEntry{}, fmt.Errorf("table %q: %w", t.Name, err)
		}
	}
	live, cols, err := EncodeUnpackedRow(t.Schema, vals)
	if err != nil {
		return PrimaryEntry{}, fmt.Errorf("table %q: %w", t.Name, err)
	}
	e := PrimaryEntry{Key: key, Value: live}
	for _, c := range cols {
		e.Columns = append(e.Columns, KV{Key: ColumnKey(nil, key, c.ID), Value: c.Value})
	}
	return e, nil
}

// values picks row's value columns in Schema.Live() order.
func (t *TableLayout) values(row []types.Datum) []types.Datum {
	out := make([]types.Datum, len(t.valuePos))
	for i, p := range t.valuePos {
		out[i] = row[p]
	}
	return out
}

// RowWriter turns one row change into the KV operations that make it,
// on the primary index and every secondary index, and adds them to a
// Writes (a kv.Batch). The caller runs the batch in its transaction and
// passes any error through TableLayout.ConvertWriteError, which turns a
// failed uniqueness condition into SQLSTATE 23505.
//
// What it writes:
//
//   - insert: a ConditionalPut (expecting no value) of the row key, so a
//     duplicate primary key fails; unique index entries likewise; other
//     entries are Puts.
//   - update, same primary key: nothing for the primary index if no value
//     column changed; column entries for the changed ones if some did (a
//     partial update, or any update while packing is off); a new packed
//     row if every value column changed and packing is on, after deleting
//     the row's column entries (ones this transaction wrote would share
//     the new row's timestamp and override it, rowenc invariant 3): when
//     KeyOnly says the row was read as its row key alone, that deletion
//     is a SeenEmptyWrites one. Index entries change only for indexes
//     whose entry (key or value) changed.
//   - update of the primary key: a delete then an insert.
//   - delete: the row's whole span (row key and column entries), or only
//     its row key when KeyOnly says the span holds nothing else, and its
//     index entries.
//
// Delete-only indexes get deletions only.
type RowWriter struct {
	Table *TableLayout
	// PackedRows and PackedSizeLimit are the storage.packed_rows.enabled
	// and storage.packed_rows.size_limit settings (0: no limit).
	PackedRows      bool
	PackedSizeLimit int
	// InPartialIndex decides whether a row belongs to a partial index
	// (evaluates its predicate). Required when the table has one.
	InPartialIndex func(idx *IndexLayout, row []types.Datum) (bool, error)
	// KeyOnly, when set, lists rows known to be stored as their row key
	// alone: deleting one deletes that key rather than the row's span, and
	// a rewrite of one whole deletes the rest of its span through
	// SeenEmptyWrites when b takes it. Any write of a row forgets it.
	KeyOnly *KeyOnlyRows
	// WholeRow, when set with PackedRows, makes an update of some of a
	// row's value columns rewrite the row whole when its packed row is at
	// most WholeRowMax bytes: the packed row at the row key and a
	// deletion of the rest of the row's span (its column entries), as an
	// update of every value column writes, instead of a column entry per
	// changed column. A transaction that buffers its writes then holds
	// every key of the row's span, so a later read of the row in it is
	// answered without KV (kv.Txn.BufferServesReads). The old and new
	// rows must be whole (every column read).
	WholeRow bool
	// Arena, when set, holds the row keys and packed rows that inserts
	// write: encoded in the writer's scratch buffers and copied into the
	// arena's chunks, instead of two allocations (and a slice of values)
	// per row. A bulk load sets it (sql/exec).
	Arena *ByteArena
	// keyBuf, valBuf and vals are the scratch buffers Arena's inserts
	// encode in, and checked the size check Write passes them through.
	keyBuf, valBuf []byte
	vals           []types.Datum
	checked        sizeChecked
}

// ByteArena hands out copies of byte slices carved from chunks of
// arenaChunk bytes. A chunk is never written again once carved, so a
// copy stays valid, and unchanged, for as long as anything holds it
// (which keeps its whole chunk alive). A copy's capacity is its length:
// appending to it reallocates rather than overwriting the next copy.
// Not safe for concurrent use.
type ByteArena struct {
	chunk []byte
}

// arenaChunk is the size of a ByteArena's chunks; larger copies are
// allocated alone.
const arenaChunk = 64 << 10

// Copy returns a copy of b in the arena.
func (a *ByteArena) Copy(b []byte) []byte {
	if len(b) > cap(a.chunk)-len(a.chunk) {
		if len(b) > arenaChunk/8 {
			return append([]byte(nil), b...)
		}
		a.chunk = make([]byte, 0, arenaChunk)
	}
	n := len(a.chunk)
	a.chunk = append(a.chunk, b...)
	return a.chunk[n:len(a.chunk):len(a.chunk)]
}

// encodePrimary is t.EncodePrimaryRow(row, ...) with the writer's
// settings, through the arena when there is one.
func (w *RowWriter) encodePrimary(row []types.Datum) (PrimaryEntry, error) {
	t := w.Table
	if w.Arena == nil || !w.PackedRows {
		return t.EncodePrimaryRow(row, w.PackedRows, w.PackedSizeLimit)
	}
	key, err := t.PrimaryKey(w.keyBuf[:0], row)
	if err != nil {
		return PrimaryEntry{}, err
	}
	w.keyBuf = key
	w.vals = w.vals[:0]
	for _, p := range t.valuePos {
		w.vals = append(w.vals, row[p])
	}
	v, err := PackRow(w.valBuf[:0], t.Schema, w.vals, w.PackedSizeLimit)
	clear(w.vals)
	if err != nil {
		if errors.Is(err, ErrRowTooLarge) {
			return t.EncodePrimaryRow(row, w.PackedRows, w.PackedSizeLimit)
		}
		return PrimaryEntry{}, fmt.Errorf("table %q: %w", t.Name, err)
	}
	w.valBuf = v
	return PrimaryEntry{Key: w.Arena.Copy(key), Value: w.Arena.Copy(v)}, nil
}

// Insert adds the writes of inserting row to b.
func (w *RowWriter) Insert(b Writes, row []types.Datum) error { return w.Write(b, nil, row) }

// Delete adds the writes of deleting row to b.
func (w *RowWriter) Delete(b Writes, row []types.Datum) error { return w.Write(b, row, nil) }

// Update adds the writes of changing old into new to b.
func (w *RowWriter) Update(b Writes, old, new []types.Datum) error { return w.Write(b, old, new) }

// WholeRowMax bounds the packed rows RowWriter.WholeRow rewrites whole:
// a larger row's partial update writes its column entries, not the row's
// every byte again.
const WholeRowMax = 512

// MaxValueSize is the largest value a row change may write: the tablets'
// limit (tablet.DefaultMaxValueSize). A row whose packed value, column
// entry or index entry is larger is refused here with 54000, before
// anything reaches KV, rather than failing there as an internal error.
const MaxValueSize = 64 << 20

// sizeChecked passes writes through to Writes and remembers the first
// value over MaxValueSize.
type sizeChecked struct {
	Writes
	tooBig int
}

func (c *sizeChecked) Put(key, value []byte) {
	c.check(value)
	c.Writes.Put(key, value)
}

func (c *sizeChecked) CPut(key, value, expected []byte, expectExists bool) {
	c.check(value)
	c.Writes.CPut(key, value, expected, expectExists)
}

func (c *sizeChecked) CPutGenerated(key, value []byte) {
	c.check(value)
	cputGenerated(c.Writes, key, value)
}

func (c *sizeChecked) DelRangeSeenEmpty(start, end []byte) {
	delRangeSeenEmpty(c.Writes, start, end)
}

func (c *sizeChecked) check(v []byte) {
	if len(v) > MaxValueSize && c.tooBig == 0 {
		c.tooBig = len(v)
	}
}

// Write adds the writes of changing old into new to b: old nil inserts
// new, new nil deletes old. Rows are full rows in Table.Columns order.
// A row too large to store is 54000 (program_limit_exceeded), as
// PostgreSQL reports a row over its limit; b then holds writes the caller
// must not send (it fails the statement).
func (w *RowWriter) Write(b Writes, old, new []types.Datum) error {
	if new == nil {
		return w.write(b, old, nil)
	}
	if w.Arena != nil {
		// A writer with an arena is one goroutine's (a bulk load's):
		// its size check is reused, not two allocations per row.
		w.checked = sizeChecked{Writes: b}
		err := w.write(&w.checked, old, new)
		tooBig := w.checked.tooBig
		w.checked = sizeChecked{}
		if err != nil {
			return err
		}
		return tooBigErr(tooBig)
	}
	return w.sizeChecked(b, func(c Writes) error { return w.write(c, old, new) })
}

// InsertGenerated adds the writes of inserting row, whose primary key the
// caller generated to be new (a unique_rowid() rowid it did not take
// from the user), to b: as Write(b, nil, row), except that the row key's
// CPut is a GeneratedKeyWrites one when b takes it. The key's uniqueness
// is still checked, when the write is sent.
func (w *RowWriter) InsertGenerated(b Writes, row []types.Datum) error {
	return w.sizeChecked(b, func(c Writes) error { return w.insert(c, row, true) })
}

// sizeChecked runs write against b through a sizeChecked and turns a
// value over MaxValueSize into 54000.
func (w *RowWriter) sizeChecked(b Writes, write func(Writes) error) error {
	c := sizeChecked{Writes: b}
	if err := write(&c); err != nil {
		return err
	}
	return tooBigErr(c.tooBig)
}

// tooBigErr is the error of a row whose value of tooBig bytes is over
// MaxValueSize (none when tooBig is 0).
func tooBigErr(tooBig int) error {
	if tooBig > 0 {
		return pgerror.New(pgerrcode.ProgramLimitExceeded, "row is too big: size %d, maximum size %d", tooBig, MaxValueSize)
	}
	return nil
}

func (w *RowWriter) write(b Writes, old, new []types.Datum) error {
	t := w.Table
	switch {
	case old == nil && new == nil:
		return nil
	case old == nil:
		return w.insert(b, new, false)
	case new == nil:
		return w.delete(b, old)
	}
	oldKey, err := t.PrimaryKey(nil, old)
	if err != nil {
		return err
	}
	newKey, err := t.PrimaryKey(nil, new)
	if err != nil {
		return err
	}
	if !bytes.Equal(oldKey, newKey) {
		if err := w.delete(b, old); err != nil {
			return err
		}
		return w.insert(b, new, false)
	}
	if err := w.updatePrimary(b, newKey, old, new); err != nil {
		return err
	}
	for i := range t.Secondary {
		if err := w.updateIndex(b, &t.Secondary[i], old, new); err != nil {
			return err
		}
	}
	return nil
}

// insert adds the writes of inserting row; generated: its primary key was
// generated to be new (InsertGenerated).
func (w *RowWriter) insert(b Writes, row []types.Datum, generated bool) error {
	t := w.Table
	e, err := w.encodePrimary(row)
	if err != nil {
		return err
	}
	if w.KeyOnly != nil {
		w.KeyOnly.Forget(e.Key)
	}
	if generated {
		cputGenerated(b, e.Key, e.Value)
	} else {
		b.CPut(e.Key, e.Value, nil, false)
	}
	for _, c := range e.Columns {
		b.Put(c.Key, c.Value)
	}
	for i := range t.Secondary {
		idx := &t.Secondary[i]
		if idx.DeleteOnly {
			continue
		}
		if idx.Inverted != "" {
			ents, err := w.invertedEntries(idx, row)
			if err != nil {
				return err
			}
			for _, e := range ents {
				b.Put(e.Key, e.Value)
			}
			continue
		}
		ie, ok, err := w.entry(idx, row)
		if err != nil {
			return err
		}
		if ok {
			putEntry(b, ie)
		}
	}
	return nil
}

func (w *RowWriter) delete(b Writes, row []types.Datum) error {
	t := w.Table
	key, err := t.PrimaryKey(nil, row)
	if err != nil {
		return err
	}
	if w.KeyOnly != nil && w.KeyOnly.Has(key) {
		b.Del(key)
		w.KeyOnly.Forget(key)
	} else {
		b.DelRange(key, keys.PrefixEnd(key))
	}
	for i := range t.Secondary {
		if idx := &t.Secondary[i]; idx.Inverted != "" {
			ents, err := w.invertedEntries(idx, row)
			if err != nil {
				return err
			}
			for _, e := range ents {
				b.Del(e.Key)
			}
			continue
		}
		ie, ok, err := w.entry(&t.Secondary[i], row)
		if err != nil {
			return err
		}
		if ok {
			b.Del(ie.Key)
		}
	}
	return nil
}

func (w *RowWriter) updatePrimary(b Writes, key []byte, old, new []types.Datum) error {
	t := w.Table
	// keyOnly: the statement read the row as its row key alone (no column
	// entries), so the deletion of the rest of its span below deletes
	// nothing there.
	keyOnly := false
	if w.KeyOnly != nil {
		keyOnly = w.KeyOnly.Has(key)
		w.KeyOnly.Forget(key)
	}
	live := t.Schema.Live()
	var changed []ColumnValue
	for i, p := range t.valuePos {
		ov, err := EncodeColumnValue(nil, live[i].Type, old[p])
		if err != nil {
			return fmt.Errorf("column %q: %w", t.Columns[p].Name, err)
		}
		nv, err := EncodeColumnValue(nil, live[i].Type, new[p])
		if err != nil {
			return fmt.Errorf("column %q: %w", t.Columns[p].Name, err)
		}
		if !bytes.Equal(ov, nv) {
			changed = append(changed, ColumnValue{ID: live[i].ID, Value: nv})
		}
	}
	if len(changed) == 0 {
		return nil
	}
	if w.PackedRows && (len(changed) == len(live) || w.WholeRow) {
		e, err := t.EncodePrimaryRow(new, true, w.PackedSizeLimit)
		if err != nil {
			return err
		}
		if len(changed) == len(live) || len(e.Columns) == 0 && len(e.Value) <= WholeRowMax {
			if keyOnly {
				delRangeSeenEmpty(b, keys.Next(key), keys.PrefixEnd(key))
			} else {
				b.DelRange(keys.Next(key), keys.PrefixEnd(key))
			}
			b.Put(e.Key, e.Value)
			for _, c := range e.Columns {
				b.Put(c.Key, c.Value)
			}
			return nil
		}
	}
	for _, c := range changed {
		b.Put(ColumnKey(nil, key, c.ID), c.Value)
	}
	return nil
}

func (w *RowWriter) updateIndex(b Writes, idx *IndexLayout, old, new []types.Datum) error {
	if idx.Inverted != "" {
		return w.updateInverted(b, idx, old, new)
	}
	oe, oldIn, err := w.entry(idx, old)
	if err != nil {
		return err
	}
	ne, newIn, err := w.entry(idx, new)
	if err != nil {
		return err
	}
	newIn = newIn && !idx.DeleteOnly
	sameKey := oldIn && newIn && bytes.Equal(oe.Key, ne.Key)
	if sameKey {
		if !bytes.Equal(oe.Value, ne.Value) {
			b.Put(ne.Key, ne.Value)
		}
		return nil
	}
	if oldIn {
		b.Del(oe.Key)
	}
	if newIn {
		putEntry(b, ne)
	}
	return nil
}

// entry returns idx's entry for row and whether row belongs in idx.
func (w *RowWriter) entry(idx *IndexLayout, row []types.Datum) (IndexEntry, bool, error) {
	if idx.Partial {
		if w.InPartialIndex == nil {
			return IndexEntry{}, false, fmt.Errorf("rowenc: partial index %q needs RowWriter.InPartialIndex", idx.Name)
		}
		in, err := w.InPartialIndex(idx, row)
		if err != nil || !in {
			return IndexEntry{}, false, err
		}
	}
	e, err := w.Table.EncodeIndexEntry(idx, row)
	return e, err == nil, err
}

func putEntry(b Writes, e IndexEntry) {
	if e.Unique {
		b.CPut(e.Key, e.Value, nil, false)
		return
	}
	b.Put(e.Key, e.Value)
}

// invertedEntries returns an inverted index's entries for row (none when
// a partial index does not hold it).
func (w *RowWriter) invertedEntries(idx *IndexLayout, row []types.Datum) ([]IndexEntry, error) {
	if idx.Partial {
		if w.InPartialIndex == nil {
			return nil, fmt.Errorf("rowenc: partial index %q needs RowWriter.InPartialIndex", idx.Name)
		}
		in, err := w.InPartialIndex(idx, row)
		if err != nil || !in {
			return nil, err
		}
	}
	return w.Table.EncodeIndexEntries(nil, idx, row)
}

// updateInverted changes an inverted index's entries of a row whose
// primary key stays: the tokens it lost are deleted, the tokens it gained
// written (none in delete-only), the ones it kept left alone.
func (w *RowWriter) updateInverted(b Writes, idx *IndexLayout, old, new []types.Datum) error {
	oe, err := w.invertedEntries(idx, old)
	if err != nil {
		return err
	}
	ne, err := w.invertedEntries(idx, new)
	if err != nil {
		return err
	}
	if idx.DeleteOnly {
		ne = nil
	}
	kept := make(map[string]bool, len(oe))
	for _, e := range oe {
		kept[string(e.Key)] = false
	}
	for _, e := range ne {
		if _, ok := kept[string(e.Key)]; ok {
			kept[string(e.Key)] = true
			continue
		}
		b.Put(e.Key, e.Value)
	}
	for _, e := range oe {
		if !kept[string(e.Key)] {
			b.Del(e.Key)
		}
	}
	return nil
}
