package rowenc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/types"
)

// IndexEntryEncoder turns a forward scan of a table's primary index into
// one secondary index's entries, as an index build's backfill reads them:
// the entries AppendIndexEntry gives the rows a RowFetcher decodes, without
// decoding the rows.
//
// A row whose primary-index KVs are one packed row (the common case: a row
// inserted, or rewritten whole, and not updated column by column since) is
// encoded straight from its bytes: the primary-key columns' key bytes are
// copied from the row key (their orders are the same in every index
// suffix), the packed row's columns the index does not need are passed
// over, not decoded, each key
// column's value bytes are turned into its key bytes without a Datum, and
// stored columns' value bytes are copied into the entry's packed value as
// they are (a value's encoding depends only on its type). No allocation per
// row.
//
// Every other row goes through a RowFetcher and AppendIndexEntry, the
// reference path: an unpacked row or one with column entries, a row split
// across two pages (the last row of every page: the next page may hold
// its column entries), a packed row under a version that lacks a needed
// column with a default, a value the fast path would have to reject
// (corrupt: the reference path returns the error). An encoder whose index
// or table the fast path does not cover (inverted, hash-bucketed entries,
// a key column of a type below, a primary-key column in a different order
// or stored) sends every row that way.
//
// Invariants:
//  1. For any scan, the entries emitted are exactly those of the
//     reference path (a RowFetcher of the columns the index needs, then
//     AppendIndexEntry), as bytes, and it fails where that path fails
//     (TestIndexEntryEncoderMatchesFetcher, FuzzIndexEntryEncoder).
//  2. A row's KVs are never split between the paths: a KV that extends
//     the fetcher's pending row goes to the fetcher.
//
// Key columns the fast path encodes, and primary-key columns it copies:
// bool, int, oid, float, text, bytea, date, time, timestamp, timestamptz,
// uuid. Not safe for concurrent use.
type IndexEntryEncoder struct {
	t   *TableLayout
	idx *IndexLayout
	s   *Schema
	f   *RowFetcher // the reference path

	// fast is false when no row can take the fast path.
	fast bool
	// tableIndex is the primary index's table and index IDs as its keys
	// hold them after the group and bucket.
	tableIndex []byte
	prefix     []byte // the index's entry prefix (bucket 0)
	pkTypes    []*types.T
	pkOrders   []Order
	keySrc     []entrySource // per key column of idx
	suffixPK   []int         // per suffix column: its primary-key position
	storeSlot  []int         // per stored column: its slot
	slotCol    []int         // per slot: its index into s.Columns
	plans      map[uint32]*versionPlan

	// Per row scratch.
	pkSpans      [][2]int
	slots        []valueSpan
	key, value   []byte
	skey, svalue []byte
	emit         func(key, value []byte) error
	slowEmit     func(row []types.Datum) error

	curKey             []byte // the row key fastRow encodes
	fastRows, slowRows int64
}

// entrySource says where a key column of the index comes from: a
// primary-key column of the row key (pk >= 0, its bytes copied) or a
// value slot (transcoded under order).
type entrySource struct {
	pk    int
	slot  int
	order Order
	typ   *types.T
}

// valueSpan is one needed value of a packed row: its bytes, nil for NULL.
type valueSpan struct {
	b   []byte
	set bool // not NULL
}

// versionPlan is how a packed row written under one schema version is
// walked: the slot of each stored column (-1: not needed).
type versionPlan struct {
	layout []int
	slot   []int
	slow   bool // a needed column is missing and has a default
}

// NewIndexEntryEncoder returns an encoder of idx's entries (a secondary,
// non-inverted index of t) from t's primary-index KVs.
func NewIndexEntryEncoder(t *TableLayout, idx *IndexLayout) (*IndexEntryEncoder, error) {
	if idx.primary || idx.Inverted != "" {
		return nil, fmt.Errorf("rowenc: no entry encoder for index %q: it is primary or inverted", idx.Name)
	}
	needed := append(append(append([]ColumnID(nil), t.Primary.KeyColumns...), idx.KeyColumns...), idx.StoreColumns...)
	f, err := NewRowFetcher(t, &t.Primary, needed)
	if err != nil {
		return nil, err
	}
	f.ReuseRows = true
	e := &IndexEntryEncoder{t: t, idx: idx, s: t.Schema, f: f, plans: map[uint32]*versionPlan{}}
	e.slowEmit = func(row []types.Datum) error {
		e.slowRows++
		var err error
		if e.skey, e.svalue, _, err = t.AppendIndexEntry(e.skey[:0], e.svalue[:0], idx, row); err != nil {
			return err
		}
		return e.emit(e.skey, e.svalue)
	}
	e.fast = e.plan()
	return e, nil
}

// plan fills the fast path's tables and says whether it applies.
func (e *IndexEntryEncoder) plan() bool {
	t, idx := e.t, e.idx
	if t.bucketed(idx) {
		return false // the entry's bucket is the row's: Bucket of a Datum row
	}
	e.tableIndex = EncodeTableIndexPrefix(nil, t.ID, t.Primary.keyID())
	e.prefix = t.IndexPrefix(nil, idx, 0)
	pkOf := map[int]int{} // row position -> primary-key column
	for i, p := range t.Primary.keyPos {
		typ := t.Columns[p].Type
		if !keySkippable(typ) {
			return false
		}
		e.pkTypes = append(e.pkTypes, typ)
		e.pkOrders = append(e.pkOrders, t.Primary.KeyOrders[i])
		pkOf[p] = i
	}
	e.pkSpans = make([][2]int, len(e.pkTypes))
	slotOf := map[int]int{} // index into s.Columns -> slot
	slot := func(p int) (int, bool) {
		id := t.Columns[p].ID
		j := -1
		for _, k := range e.s.live {
			if e.s.Columns[k].ID == id {
				j = k
			}
		}
		if j < 0 {
			return 0, false // not a live value column
		}
		if s, ok := slotOf[j]; ok {
			return s, true
		}
		slotOf[j] = len(e.slotCol)
		e.slotCol = append(e.slotCol, j)
		return slotOf[j], true
	}
	for i, p := range idx.keyPos {
		typ := t.Columns[p].Type
		if k, ok := pkOf[p]; ok {
			if idx.KeyOrders[i] != t.Primary.KeyOrders[k] {
				return false
			}
			e.keySrc = append(e.keySrc, entrySource{pk: k, slot: -1, order: idx.KeyOrders[i], typ: typ})
			continue
		}
		if !keyTranscodable(typ) {
			return false
		}
		s, ok := slot(p)
		if !ok {
			return false
		}
		e.keySrc = append(e.keySrc, entrySource{pk: -1, slot: s, order: idx.KeyOrders[i], typ: typ})
	}
	for i, p := range idx.suffixPos {
		k, ok := pkOf[p]
		if !ok || idx.suffixOrder[i] != t.Primary.KeyOrders[k] {
			return false
		}
		e.suffixPK = append(e.suffixPK, k)
	}
	for _, p := range idx.storePos {
		if _, ok := pkOf[p]; ok {
			return false // a key column's value encoding is not in the row
		}
		s, ok := slot(p)
		if !ok {
			return false
		}
		e.storeSlot = append(e.storeSlot, s)
	}
	e.slots = make([]valueSpan, len(e.slotCol))
	return true
}

// versionPlan returns the plan for packed rows of version v (nil: none).
func (e *IndexEntryEncoder) versionPlan(v uint32) *versionPlan {
	if p, ok := e.plans[v]; ok {
		return p
	}
	var p *versionPlan
	if layout, err := e.s.layout(v); err == nil && v >= e.s.History.OldestPacked {
		p = &versionPlan{layout: layout, slot: make([]int, len(layout))}
		for k := range p.slot {
			p.slot[k] = -1
		}
		for s, j := range e.slotCol {
			found := false
			for k, lj := range layout {
				if lj == j {
					p.slot[k], found = s, true
				}
			}
			if !found && e.s.Columns[j].Default != nil {
				p.slow = true
			}
		}
	}
	e.plans[v] = p
	return p
}

// Add encodes the entries of the rows kvs complete (a page of a forward
// scan of the primary index, in key order) and calls emit with each; key
// and value are valid only during the call.
func (e *IndexEntryEncoder) Add(kvs []kvpb.KeyValue, emit func(key, value []byte) error) error {
	e.emit = emit
	for i := 0; i < len(kvs); {
		kv := &kvs[i]
		if p := e.f.pending; p != nil && len(kv.Key) > len(p) && bytes.HasPrefix(kv.Key, p) {
			// Invariant 2: a column entry of the fetcher's row.
			if err := e.f.Add(kvs[i:i+1], e.slowEmit); err != nil {
				return err
			}
			i++
			continue
		}
		if !e.fast {
			return e.f.Add(kvs[i:], e.slowEmit)
		}
		ours, rowKey := e.splitKey(kv.Key)
		if !ours {
			i++ // another table's or index's key: the fetcher skips it too
			continue
		}
		// (The next key extends this one only if longer: compared
		// first, a next row key of the same length is not compared
		// byte by byte over the prefix every key of the table shares.)
		if next := kvs[min(i+1, len(kvs)-1)].Key; !rowKey || i == len(kvs)-1 || len(next) > len(kv.Key) && bytes.HasPrefix(next, kv.Key) {
			// A column entry, a row with column entries, or the page's
			// last row: the reference path.
			if err := e.f.Add(kvs[i:i+1], e.slowEmit); err != nil {
				return err
			}
			i++
			continue
		}
		e.curKey = kv.Key
		ok, err := e.fastRow(kv.Value)
		if err != nil {
			return err
		}
		if !ok {
			if err := e.f.Add(kvs[i:i+1], e.slowEmit); err != nil {
				return err
			}
		}
		i++
	}
	return nil
}

// Finish encodes the last row, if pending.
func (e *IndexEntryEncoder) Finish(emit func(key, value []byte) error) error {
	e.emit = emit
	return e.f.Finish(e.slowEmit)
}

// Rows says how many rows were encoded on the fast path and through the
// reference path.
func (e *IndexEntryEncoder) Rows() (fast, slow int64) { return e.fastRows, e.slowRows }

// splitKey says whether key is a key of t's primary index (ours) and, if
// so, whether it is a row key (no column suffix), with e.pkSpans set to
// its primary-key columns' bytes. A key it cannot parse is reported as
// ours and not a row key, for the reference path to judge.
func (e *IndexEntryEncoder) splitKey(key []byte) (ours, rowKey bool) {
	if !bytes.HasPrefix(key, keys.TableDataMin) {
		return true, false
	}
	i := len(keys.TableDataMin)
	n := orderedIntLen(key, i)
	if n == 0 {
		return true, false
	}
	i += n + 2 // the group, then the bucket
	if len(key) < i || !bytes.HasPrefix(key[i:], e.tableIndex) {
		return false, false
	}
	i += len(e.tableIndex)
	for c, typ := range e.pkTypes {
		n := keyColumnLen(key[i:], typ, e.pkOrders[c])
		if n == 0 {
			return true, false
		}
		e.pkSpans[c] = [2]int{i, i + n}
		i += n
	}
	return true, i == len(key)
}

// fastRow emits the entry of a row whose one KV is the row key holding
// value, its primary-key columns at e.pkSpans of e.curKey. ok is
// false when the reference path must take the row.
func (e *IndexEntryEncoder) fastRow(value []byte) (ok bool, err error) {
	key := e.curKey
	if len(value) == 0 {
		e.fastRows++
		return true, nil // deleted: no entry
	}
	if value[0] != tagPacked {
		return false, nil
	}
	r := valueReader{b: value[1:]}
	v, err := r.uvarint()
	if err != nil || v > math.MaxUint32 {
		return false, nil
	}
	p := e.versionPlan(uint32(v))
	if p == nil || p.slow {
		return false, nil
	}
	n, err := r.uvarint()
	if err != nil || n > uint64(len(p.layout)) {
		return false, nil
	}
	bm, err := r.fixed(int((n + 7) / 8))
	if err != nil {
		return false, nil
	}
	clear(e.slots)
	// Every column is walked, the ones not needed passed over, so that a
	// row the reference path would find corrupt goes to it.
	for k := range int(n) {
		if bm[k/8]&(1<<(k%8)) == 0 {
			continue
		}
		typ := e.s.Columns[p.layout[k]].Type
		start := r.b
		if err := r.skip(typ); err != nil {
			return false, nil
		}
		if s := p.slot[k]; s >= 0 {
			e.slots[s] = valueSpan{b: start[:len(start)-len(r.b)], set: true}
		}
	}
	if len(r.b) != 0 {
		return false, nil
	}

	// The key: prefix, key columns, then the primary-key columns not
	// among them (AppendIndexEntry's layout).
	out := append(e.key[:0], e.prefix...)
	unique := e.idx.Unique
	for _, src := range e.keySrc {
		if src.pk >= 0 {
			sp := e.pkSpans[src.pk]
			out = append(out, key[sp[0]:sp[1]]...)
			continue
		}
		vs := e.slots[src.slot]
		if !vs.set {
			unique = false
			if src.order&NullsFirst != 0 {
				out = append(out, markerNullFirst)
			} else {
				out = append(out, markerNullLast)
			}
			continue
		}
		out = append(out, markerValue)
		start := len(out)
		if out, ok = appendKeyFromValue(out, src.typ, vs.b); !ok {
			return false, nil
		}
		if src.order&Descending != 0 {
			invert(out[start:])
		}
	}
	keyEnd := len(out)
	for _, k := range e.suffixPK {
		sp := e.pkSpans[k]
		out = append(out, key[sp[0]:sp[1]]...)
	}
	val := e.value[:0]
	if unique {
		val = binary.AppendUvarint(val, uint64(len(out)-keyEnd))
		val = append(val, out[keyEnd:]...)
		out = out[:keyEnd]
	} else {
		val = binary.AppendUvarint(val, 0)
	}
	// The stored columns as PackRow packs them under the index's
	// version-0 schema: their value bytes are those of the row.
	val = append(val, tagPacked)
	val = binary.AppendUvarint(val, uint64(e.idx.storeSchema.Version))
	sn := len(e.storeSlot)
	for sn > 0 && !e.slots[e.storeSlot[sn-1]].set {
		sn--
	}
	val = binary.AppendUvarint(val, uint64(sn))
	bmAt := len(val)
	val = append(val, make([]byte, (sn+7)/8)...)
	for i, s := range e.storeSlot[:sn] {
		if vs := e.slots[s]; vs.set {
			val[bmAt+i/8] |= 1 << (i % 8)
			val = append(val, vs.b...)
		}
	}
	e.key, e.value = out, val
	e.fastRows++
	return true, e.emit(out, val)
}

// orderedIntLen is the length of the ordered varint at key[i:], 0 if
// there is none.
func orderedIntLen(key []byte, i int) int {
	if i >= len(key) {
		return 0
	}
	m := key[i]
	var n int
	switch {
	case m >= 0x80 && m <= 0x88:
		n = 1 + int(m-0x80)
	case m >= 0x78 && m < 0x80:
		n = 1 + int(0x80-m)
	default:
		return 0
	}
	if i+n > len(key) {
		return 0
	}
	return n
}

// keySkippable says whether keyColumnLen measures a key column of typ.
func keySkippable(typ *types.T) bool { return directKeyFamily(typ) }

// keyTranscodable says whether appendKeyFromValue encodes values of typ.
func keyTranscodable(typ *types.T) bool { return directKeyFamily(typ) }

// directKeyFamily is the families the encoder handles from bytes: the
// key columns keyColumnLen measures and the values appendKeyFromValue
// turns into key bodies are the same families, listed once.
func directKeyFamily(typ *types.T) bool {
	switch typ.Family {
	case types.BoolFamily, types.IntFamily, types.OidFamily, types.FloatFamily, types.StringFamily,
		types.BytesFamily, types.DateFamily, types.TimeFamily, types.TimestampFamily,
		types.TimestampTZFamily, types.UUIDFamily:
		return true
	}
	return false
}

// keyColumnLen is the length of the key column of typ under o at the
// start of b (marker and body), 0 if b does not start with one in the
// form EncodeKey writes: its bytes are copied into index entries, where
// the reference path would decode and encode it again, so a body that
// decodes but is not canonical (an integer in more bytes than needed, a
// float's other NaNs or -0) is left to the reference path too.
func keyColumnLen(b []byte, typ *types.T, o Order) int {
	if len(b) == 0 {
		return 0
	}
	switch b[0] {
	case markerNullFirst, markerNullLast:
		return 1
	case markerValue:
	default:
		return 0
	}
	var inv byte
	if o&Descending != 0 {
		inv = 0xff
	}
	body := b[1:]
	n := 0
	switch typ.Family {
	case types.BoolFamily:
		if len(body) == 0 || body[0]^inv > 1 {
			return 0
		}
		n = 1
	case types.IntFamily, types.OidFamily:
		if n = orderedIntCanonicalLen(body, inv); n == 0 {
			return 0
		}
		if typ.Family == types.OidFamily && (body[0]^inv < 0x80 || n > 5) {
			return 0 // an oid is in [0, 2^32)
		}
	case types.FloatFamily:
		if len(body) < 8 {
			return 0
		}
		u := binary.BigEndian.Uint64(body) ^ uint64(inv)*0x0101010101010101
		if floatKeyBits(floatFromKeyBits(u)) != u {
			return 0
		}
		n = 8
	case types.TimeFamily, types.TimestampFamily, types.TimestampTZFamily:
		n = 8
	case types.DateFamily:
		n = 4
	case types.UUIDFamily:
		n = 16
	case types.StringFamily, types.BytesFamily:
		// 0x00 0x01 ends it, 0x00 0xff is an escaped 0x00 (complemented
		// under DESC).
		for i := 0; ; {
			j := bytes.IndexByte(body[i:], inv)
			if j < 0 || i+j+1 >= len(body) {
				return 0
			}
			i += j
			switch body[i+1] ^ inv {
			case 0x01:
				return 1 + i + 2
			case 0xff:
				i += 2
			default:
				return 0
			}
		}
	default:
		return 0
	}
	if n > len(body) {
		return 0
	}
	return 1 + n
}

// orderedIntCanonicalLen is the length of the ordered varint at the start
// of b (complemented by inv) if it is the one appendOrderedInt writes for
// its value, else 0.
func orderedIntCanonicalLen(b []byte, inv byte) int {
	if len(b) == 0 {
		return 0
	}
	m := b[0] ^ inv
	switch {
	case m == 0x80:
		return 1 // zero
	case m > 0x80 && m <= 0x88:
		n := int(m - 0x80)
		// No leading zero byte, and at most 63 bits.
		if len(b) <= n || b[1]^inv == 0 || n == 8 && b[1]^inv >= 0x80 {
			return 0
		}
		return 1 + n
	case m >= 0x78 && m < 0x80:
		n := int(0x80 - m)
		// The sign bit set in the first byte, and no leading 0xff byte
		// that the next byte's sign bit would make redundant.
		if len(b) <= n || b[1]^inv < 0x80 || n > 1 && b[1]^inv == 0xff && b[2]^inv >= 0x80 {
			return 0
		}
		return 1 + n
	}
	return 0
}

// appendKeyFromValue appends the ascending key body of the value of typ
// whose value encoding is v (one whole value): what appendKeyBody appends
// for the Datum valueReader.value decodes from v. ok is false when v is
// not a well-formed value of typ (the reference path reports it).
func appendKeyFromValue(dst []byte, typ *types.T, v []byte) ([]byte, bool) {
	r := valueReader{b: v}
	switch typ.Family {
	case types.BoolFamily:
		if len(v) != 1 || v[0] > 1 {
			return dst, false
		}
		return append(dst, v[0]), true
	case types.IntFamily:
		x, err := r.varint()
		return appendOrderedInt(dst, x), err == nil
	case types.OidFamily:
		x, err := r.uvarint()
		return appendOrderedInt(dst, int64(x)), err == nil && x <= math.MaxUint32
	case types.FloatFamily:
		var f float64
		switch {
		case typ.Width == 32 && len(v) == 4:
			f = float64(math.Float32frombits(binary.LittleEndian.Uint32(v)))
		case typ.Width != 32 && len(v) == 8:
			f = math.Float64frombits(binary.LittleEndian.Uint64(v))
		default:
			return dst, false
		}
		return binary.BigEndian.AppendUint64(dst, floatKeyBits(f)), true
	case types.StringFamily, types.BytesFamily:
		n, err := r.uvarint()
		if err != nil || n != uint64(len(r.b)) {
			return dst, false
		}
		return appendEscapedBytes(dst, r.b), true
	case types.DateFamily:
		x, err := r.int32()
		return binary.BigEndian.AppendUint32(dst, uint32(x)^(1<<31)), err == nil
	case types.TimeFamily, types.TimestampFamily, types.TimestampTZFamily:
		x, err := r.varint()
		return appendFixedInt(dst, x), err == nil
	case types.UUIDFamily:
		if len(v) != 16 {
			return dst, false
		}
		return append(dst, v...), true
	}
	return dst, false
}

// appendEscapedBytes is appendEscaped of a byte slice.
func appendEscapedBytes(dst, s []byte) []byte {
	for {
		i := bytes.IndexByte(s, 0)
		if i < 0 {
			break
		}
		dst = append(dst, s[:i]...)
		dst = append(dst, 0x00, 0xff)
		s = s[i+1:]
	}
	dst = append(dst, s...)
	return append(dst, 0x00, 0x01)
}
