package rowenc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strconv"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/types"
)

// Table data keys (DESIGN §5):
//
//	0x03 | group (ordered int) | bucket (2 bytes, big-endian) | table (ordered int) | index (ordered int) | key columns [| column ID]
//
// The group and bucket come first so that a table group is one span and
// each bucket range of it a sub-span a tablet can hold: all tables of a
// colocated database share their database's group and bucket 0, and a
// hash-partitioned table's rows spread over the 65536 buckets of its own
// group. Local indexes sit next to their rows (same group and bucket);
// global indexes use their own group and bucket 0.

// NumBuckets is the size of the hash space a hash-partitioned table's rows
// are spread over; tablets split it into ranges.
const NumBuckets = 1 << 16

// Bucket returns the bucket of row in t's group: 0 unless t is hash
// partitioned, else a 16-bit hash of the key encodings of its hash
// columns (HashColumnIDs). The hash is CRC-32 (IEEE) folded to 16
// bits: stable across releases and platforms, which placement depends on,
// and cheap.
func (t *TableLayout) Bucket(row []types.Datum) (uint16, error) {
	if t.HashColumns == 0 {
		return 0, nil
	}
	var buf [64]byte
	b := buf[:0]
	for _, p := range t.hashPos {
		var err error
		if b, err = EncodeKey(b, row[p], Asc); err != nil {
			return 0, fmt.Errorf("hash column %q: %w", t.Columns[p].Name, err)
		}
	}
	return HashBucket(b), nil
}

// HashColumnIDs returns the primary-key columns a row's bucket is hashed
// from: HashColumn when it is set, else the leading HashColumns (none
// for a table that is not hash partitioned). The slice may be the
// layout's own: callers must not change it.
func (t *TableLayout) HashColumnIDs() []ColumnID {
	if t.HashColumn != 0 {
		return []ColumnID{t.HashColumn}
	}
	return t.Primary.KeyColumns[:t.HashColumns]
}

// HashBucket folds the CRC-32 of the hash columns' key encodings to the
// 16-bit bucket space. The planner uses it to derive the bucket of an
// equality predicate.
func HashBucket(encodedHashColumns []byte) uint16 {
	h := crc32.ChecksumIEEE(encodedHashColumns)
	return uint16(h>>16) ^ uint16(h)
}

// GroupPrefix appends the key prefix of table group g.
func GroupPrefix(dst []byte, g uint64) []byte {
	return appendOrderedInt(append(dst, keys.TableDataMin...), int64(g))
}

// IndexPrefix appends the prefix of idx's entries in bucket b (ignored
// for global indexes, which have only bucket 0).
func (t *TableLayout) IndexPrefix(dst []byte, idx *IndexLayout, b uint16) []byte {
	g := t.GroupID
	if !idx.Local {
		g, b = idx.GroupID, 0
	}
	dst = binary.BigEndian.AppendUint16(GroupPrefix(dst, g), b)
	return EncodeTableIndexPrefix(dst, t.ID, idx.keyID())
}

// keyID is the index ID idx's keys carry.
func (idx *IndexLayout) keyID() uint32 {
	if idx.KeyID != 0 {
		return idx.KeyID
	}
	return idx.ID
}

// bucketed reports whether idx's entries spread over buckets.
func (t *TableLayout) bucketed(idx *IndexLayout) bool { return idx.Local && t.HashColumns > 0 }

// PrimaryKey appends the primary-index key of row.
func (t *TableLayout) PrimaryKey(dst []byte, row []types.Datum) ([]byte, error) {
	if err := t.checkRow(row); err != nil {
		return nil, err
	}
	b, err := t.Bucket(row)
	if err != nil {
		return nil, err
	}
	dst = t.IndexPrefix(dst, &t.Primary, b)
	return encodeColumns(dst, t, row, t.Primary.keyPos, t.Primary.KeyOrders)
}

func encodeColumns(dst []byte, t *TableLayout, row []types.Datum, pos []int, orders []Order) ([]byte, error) {
	for i, p := range pos {
		var err error
		if dst, err = EncodeKey(dst, row[p], orders[i]); err != nil {
			return nil, fmt.Errorf("column %q: %w", t.Columns[p].Name, err)
		}
	}
	return dst, nil
}

// GroupSpan is the span of table group g: every bucket of every table in
// it.
func GroupSpan(g uint64) kvpb.Span {
	p := GroupPrefix(nil, g)
	return kvpb.Span{Key: p, EndKey: keys.PrefixEnd(p)}
}

// BucketSpan is the span of buckets [lo, hi] of group g, for every table
// in the group: what a tablet of a hash-partitioned group holds.
func BucketSpan(g uint64, lo, hi uint16) kvpb.Span {
	p := GroupPrefix(nil, g)
	start := binary.BigEndian.AppendUint16(bytes.Clone(p), lo)
	end := keys.PrefixEnd(binary.BigEndian.AppendUint16(bytes.Clone(p), hi))
	return kvpb.Span{Key: start, EndKey: end}
}

// IndexBucketSpan is the exact span of idx's entries in bucket b.
func (t *TableLayout) IndexBucketSpan(idx *IndexLayout, b uint16) kvpb.Span {
	p := t.IndexPrefix(nil, idx, b)
	return kvpb.Span{Key: p, EndKey: keys.PrefixEnd(p)}
}

// IndexSpan is one span holding every entry of idx. It is exact unless
// idx spreads over buckets (a local index of a hash-partitioned table):
// then it is the whole group, which also holds the table's other local
// indexes (and, in a shared group, other tables), and a RowFetcher skips
// their keys. A reader that wants exact spans scans IndexBucketSpan per
// bucket range.
func (t *TableLayout) IndexSpan(idx *IndexLayout) kvpb.Span {
	if t.bucketed(idx) {
		return GroupSpan(t.GroupID)
	}
	return t.IndexBucketSpan(idx, 0)
}

// TableSpans lists spans holding all of t's data: its primary and local
// indexes (one span, exact unless bucketed, see IndexSpan), then each
// global index. They may hold other tables' data (a shared hash group):
// what clears a table uses FreeSpans.
func (t *TableLayout) TableSpans() []kvpb.Span {
	var out []kvpb.Span
	if t.HashColumns > 0 {
		out = append(out, GroupSpan(t.GroupID))
	} else {
		p := EncodeTableIndexPrefix(binary.BigEndian.AppendUint16(GroupPrefix(nil, t.GroupID), 0), t.ID, 0)
		p = p[:len(p)-1] // the table prefix, without the index
		out = append(out, kvpb.Span{Key: p, EndKey: keys.PrefixEnd(p)})
	}
	for i := range t.Secondary {
		if idx := &t.Secondary[i]; !idx.Local {
			out = append(out, t.IndexBucketSpan(idx, 0))
		}
	}
	return out
}

// FreeSpans lists spans holding all of t's data and nothing of another
// table: what DROP TABLE clears. They are TableSpans, except that a table
// in a shared hash group (SharedGroup) has one span per bucket,
// group/b/table, instead of its group's.
func (t *TableLayout) FreeSpans() []kvpb.Span {
	out := t.TableSpans()
	if t.HashColumns == 0 || !t.SharedGroup {
		return out
	}
	spans := make([]kvpb.Span, 0, NumBuckets+len(out)-1)
	for b := range NumBuckets {
		p := EncodeTableIndexPrefix(binary.BigEndian.AppendUint16(GroupPrefix(nil, t.GroupID), uint16(b)), t.ID, 0)
		p = p[:len(p)-1] // the table prefix, without the index
		spans = append(spans, kvpb.Span{Key: p, EndKey: keys.PrefixEnd(p)})
	}
	return append(spans, out[1:]...)
}

// StorageSpans lists spans holding exactly t's storage as this layout
// names it, and nothing of another table or of another storage of this
// one (a table moved or rewritten has fresh storage IDs beside the old
// ones until the old are freed): the whole group of a hash-partitioned
// table with a group of its own, one span per bucket and local index of
// one in a shared group (SharedGroup), else the primary and local
// indexes' spans; then each global index.
func (t *TableLayout) StorageSpans() []kvpb.Span {
	var out []kvpb.Span
	var bucketed []*IndexLayout
	switch {
	case t.HashColumns > 0 && t.SharedGroup:
		bucketed = append(bucketed, &t.Primary)
	case t.HashColumns > 0:
		out = append(out, GroupSpan(t.GroupID))
	default:
		out = append(out, t.IndexSpan(&t.Primary))
	}
	for i := range t.Secondary {
		idx := &t.Secondary[i]
		switch {
		case !t.bucketed(idx):
			out = append(out, t.IndexSpan(idx))
		case t.SharedGroup:
			bucketed = append(bucketed, idx)
		}
		// Otherwise in the group span above.
	}
	if len(bucketed) == 0 {
		return out
	}
	spans := make([]kvpb.Span, 0, NumBuckets*len(bucketed)+len(out))
	for b := range NumBuckets {
		for _, idx := range bucketed {
			spans = append(spans, t.IndexBucketSpan(idx, uint16(b)))
		}
	}
	return append(spans, out...)
}

// KeyPrefix is the decoded prefix of a table data key.
type KeyPrefix struct {
	Group  uint64
	Bucket uint16
	Table  uint32
	Index  uint32
}

// DecodeKeyPrefix splits a table data key into its prefix and the rest
// (key columns and any column suffix).
func DecodeKeyPrefix(key []byte) (KeyPrefix, []byte, error) {
	var p KeyPrefix
	if !bytes.HasPrefix(key, keys.TableDataMin) {
		return p, nil, corrupt("not a table data key")
	}
	r := keyReader{b: key[len(keys.TableDataMin):]}
	g, err := r.orderedInt()
	if err != nil || g < 0 {
		return p, nil, corrupt("group")
	}
	bucket, err := r.bigEndian(2, 0)
	if err != nil {
		return p, nil, err
	}
	tbl, err := r.orderedInt()
	if err != nil || tbl < 0 || tbl > int64(^uint32(0)) {
		return p, nil, corrupt("table")
	}
	idx, err := r.orderedInt()
	if err != nil || idx < 0 || idx > int64(^uint32(0)) {
		return p, nil, corrupt("index")
	}
	p = KeyPrefix{Group: uint64(g), Bucket: uint16(bucket), Table: uint32(tbl), Index: uint32(idx)}
	return p, r.b, nil
}

// LeaseDomain names the set of tablets whose leases the lease balancer
// keeps spread over the nodes as one (store.LeaseBalancerConfig.Domain),
// from a tablet's span: the index it holds ("g<group>/t<table>/i<index>"),
// so the bucket tablets of a hash-sharded index, and the tablets an index
// was split into, are one domain; else its table group ("g<group>": a
// table that is one tablet, or the bucket ranges of a hash-partitioned
// table, which start at a group and bucket alone); else "" (system keys,
// the start of table data: no domain). The index is the start key's,
// else the end key's when the tablet holds part of it: bucket 0 of a
// hash-sharded index starts at its group's first key (the splits
// include the group's bounds) and ends inside the index, at bucket 1.
func LeaseDomain(start, end []byte) string {
	g, table, index, n := decodeDomain(start)
	switch {
	case n == 0:
		return ""
	case n >= 3:
		return domainName(g, table, index, 3)
	}
	if eg, et, ei, en := decodeDomain(end); en == 4 && eg == g {
		return domainName(eg, et, ei, 3)
	}
	return domainName(g, table, index, n)
}

// decodeDomain reads the group, bucket, table and index of a table data
// key as far as they go: n is how many of group, table, index (and, as
// 4, index with more key after it) it holds, 0 for no table data.
func decodeDomain(k []byte) (g, table, index int64, n int) {
	if !bytes.HasPrefix(k, keys.TableDataMin) || len(k) == len(keys.TableDataMin) {
		return 0, 0, 0, 0
	}
	r := keyReader{b: k[len(keys.TableDataMin):]}
	var err error
	if g, err = r.orderedInt(); err != nil || g < 0 {
		return 0, 0, 0, 0
	}
	if _, err := r.bigEndian(2, 0); err != nil {
		return g, 0, 0, 1
	}
	if table, err = r.orderedInt(); err != nil || table < 0 {
		return g, 0, 0, 1
	}
	if index, err = r.orderedInt(); err != nil || index < 0 {
		return g, table, 0, 2
	}
	if len(r.b) == 0 {
		return g, table, index, 3
	}
	return g, table, index, 4
}

func domainName(g, table, index int64, n int) string {
	d := "g" + strconv.FormatInt(g, 10)
	if n >= 2 {
		d += "/t" + strconv.FormatInt(table, 10)
	}
	if n >= 3 {
		d += "/i" + strconv.FormatInt(index, 10)
	}
	return d
}
