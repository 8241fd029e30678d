package rowenc

import (
	"encoding/binary"
	"fmt"

	"github.com/cairn-db/cairn/sql/types"
)

// IndexEntry is the KV pair one secondary index holds for one row.
type IndexEntry struct {
	Key, Value []byte
	// Unique: the key holds only the index's columns, so writing it must
	// fail if another row holds it (a ConditionalPut expecting no value).
	Unique bool
}

// Secondary index entries:
//
//	key   = index prefix | index key columns [| primary-key columns not among them]
//	value = uvarint n | n bytes of those primary-key columns | packed stored columns
//
// A non-unique index, or a unique one whose key has a NULL (NULLs are
// distinct, as in Postgres), puts the primary-key columns in the key, which
// makes every entry's key distinct; n is then 0. A unique index puts them in
// the value, so a second row with the same key collides. Stored columns
// are a packed row (PackRow) under a version-0 schema of StoreColumns.

// EncodeIndexEntry returns idx's entry for row. idx must be a secondary
// index of t; for partial indexes the caller decides membership.
func (t *TableLayout) EncodeIndexEntry(idx *IndexLayout, row []types.Datum) (IndexEntry, error) {
	key, value, unique, err := t.AppendIndexEntry(nil, nil, idx, row)
	if err != nil {
		return IndexEntry{}, err
	}
	return IndexEntry{Key: key, Value: value, Unique: unique}, nil
}

// AppendIndexEntry is EncodeIndexEntry appending the entry's key to key
// and its value to value: a caller that encodes many entries (an index
// build) reuses two buffers instead of allocating three per entry.
func (t *TableLayout) AppendIndexEntry(key, value []byte, idx *IndexLayout, row []types.Datum) (k, v []byte, unique bool, err error) {
	if idx.primary {
		return nil, nil, false, fmt.Errorf("rowenc: EncodeIndexEntry of the primary index %q", idx.Name)
	}
	if idx.Inverted != "" {
		return nil, nil, false, fmt.Errorf("rowenc: EncodeIndexEntry of the inverted index %q (EncodeIndexEntries)", idx.Name)
	}
	if err := t.checkRow(row); err != nil {
		return nil, nil, false, err
	}
	var bucket uint16
	if t.bucketed(idx) {
		if bucket, err = t.Bucket(row); err != nil {
			return nil, nil, false, err
		}
	}
	key = t.IndexPrefix(key, idx, bucket)
	if key, err = encodeColumns(key, t, row, idx.keyPos, idx.KeyOrders); err != nil {
		return nil, nil, false, err
	}
	unique = idx.Unique
	if unique {
		for _, p := range idx.keyPos {
			if types.IsNull(row[p]) {
				unique = false
				break
			}
		}
	}
	// The primary-key columns not in the key follow it; a unique entry
	// moves them to its value.
	n := len(key)
	if key, err = encodeColumns(key, t, row, idx.suffixPos, idx.suffixOrder); err != nil {
		return nil, nil, false, err
	}
	if unique {
		value = binary.AppendUvarint(value, uint64(len(key)-n))
		value = append(value, key[n:]...)
		key = key[:n]
	} else {
		value = binary.AppendUvarint(value, 0)
	}
	var stored []types.Datum
	if len(idx.storePos) > 0 {
		stored = make([]types.Datum, len(idx.storePos))
		for i, p := range idx.storePos {
			stored[i] = row[p]
		}
	}
	if value, err = PackRow(value, idx.storeSchema, stored, 0); err != nil {
		return nil, nil, false, fmt.Errorf("index %q stored columns: %w", idx.Name, err)
	}
	return key, value, unique, nil
}

// decodeIndexEntry fills row's index key, primary-key and stored columns
// from one secondary index entry; rest is the key after the prefix.
func (t *TableLayout) decodeIndexEntry(idx *IndexLayout, rest, value []byte, row []types.Datum) error {
	var err error
	if rest, err = decodeColumns(rest, t, row, idx.keyPos, idx.KeyOrders); err != nil {
		return err
	}
	r := valueReader{b: value}
	n, err := r.uvarint()
	if err != nil {
		return err
	}
	if n > uint64(len(r.b)) {
		return corrupt("index value primary key length")
	}
	extra, _ := r.fixed(int(n))
	suffix := rest
	if len(extra) > 0 {
		if len(rest) > 0 {
			return corrupt("index entry has its primary key in both key and value")
		}
		suffix = extra
	}
	if suffix, err = decodeColumns(suffix, t, row, idx.suffixPos, idx.suffixOrder); err != nil {
		return err
	}
	if len(suffix) != 0 {
		return corrupt("trailing bytes after index entry key")
	}
	if len(idx.storePos) == 0 && len(r.b) == 0 {
		return nil
	}
	stored := make([]types.Datum, len(idx.storePos))
	if err := decodeBase(idx.storeSchema, r.b, stored); err != nil {
		return fmt.Errorf("index %q stored columns: %w", idx.Name, err)
	}
	for i, p := range idx.storePos {
		row[p] = stored[i]
	}
	return nil
}

func decodeColumns(src []byte, t *TableLayout, row []types.Datum, pos []int, orders []Order) ([]byte, error) {
	for i, p := range pos {
		d, rest, err := DecodeKey(src, t.Columns[p].Type, orders[i])
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", t.Columns[p].Name, err)
		}
		row[p], src = d, rest
	}
	return src, nil
}
