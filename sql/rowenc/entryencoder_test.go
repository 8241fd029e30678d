package rowenc_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

// wideTable is w(id int8, k text, a int8, b text, c float8, d float4, e
// bool, f date, g timestamptz, h uuid, i bytea, j numeric, o oid) with
// primary key (id, k DESC) and an index of each shape an index build
// meets: see the names.
func wideTable(id catalog.ID) *catalog.Table {
	col := func(cid rowenc.ColumnID, name string, t *types.T) catalog.Column {
		return catalog.Column{ID: cid, Name: name, Type: t, Nullable: cid > 2}
	}
	gid := uint64(id)
	ix := func(iid catalog.IndexID, name string, unique bool, keys []rowenc.ColumnID, dirs []rowenc.Order, store ...rowenc.ColumnID) catalog.Index {
		return catalog.Index{ID: iid, Name: name, Unique: unique, Kind: catalog.IndexBTree, State: catalog.IndexPublic,
			Placement: catalog.IndexGlobal, GroupID: gid + uint64(iid), KeyColumnIDs: keys, KeyDirections: dirs, StoreColumnIDs: store}
	}
	A, D, AF, DL := rowenc.Asc, rowenc.Desc, rowenc.AscNullsFirst, rowenc.DescNullsLast
	return &catalog.Table{
		ID: id, DatabaseID: catalog.PostgresDatabaseID, SchemaID: catalog.PublicSchemaID, Name: "w", Version: 1,
		Columns: []catalog.Column{
			col(1, "id", types.Int8), col(2, "k", types.Text), col(3, "a", types.Int8), col(4, "b", types.Text),
			col(5, "c", types.Float8), col(6, "d", types.Float4), col(7, "e", types.Bool), col(8, "f", types.Date),
			col(9, "g", types.TimestampTZ), col(10, "h", types.UUID), col(11, "i", types.Bytea), col(12, "j", types.Numeric),
			col(13, "o", types.Oid),
		},
		NextColumnID: 14,
		PrimaryIndex: catalog.Index{ID: 1, Name: "w_pkey", Unique: true, Kind: catalog.IndexBTree, State: catalog.IndexPublic,
			KeyColumnIDs: []rowenc.ColumnID{1, 2}, KeyDirections: []rowenc.Order{A, D}},
		Indexes: []catalog.Index{
			ix(2, "w_a", false, []rowenc.ColumnID{3}, []rowenc.Order{A}),
			ix(3, "w_b_unique_storing", true, []rowenc.ColumnID{4}, []rowenc.Order{A}, 5, 12, 11),
			ix(4, "w_c_desc_with_pk", false, []rowenc.ColumnID{5, 1}, []rowenc.Order{D, A}),
			ix(5, "w_many_types", false, []rowenc.ColumnID{6, 7, 8, 9, 10, 11, 13}, []rowenc.Order{AF, DL, A, D, A, D, A}),
			ix(6, "w_k_same_order_unique", true, []rowenc.ColumnID{2, 3}, []rowenc.Order{D, DL}),
			ix(7, "w_k_other_order", false, []rowenc.ColumnID{2}, []rowenc.Order{A}),
			ix(8, "w_numeric_key", false, []rowenc.ColumnID{12}, []rowenc.Order{A}),
		},
		NextIndexID:  9,
		Partitioning: catalog.Partitioning{Kind: catalog.PartitionRange},
		GroupID:      gid,
		RowFormat:    catalog.RowFormat{Packed: true, SchemaVersion: 1},
	}
}

// wideRow is a random row of wideTable with primary key (id, k): NULLs,
// negative numbers, zero bytes inside strings, -0 and NaN.
func wideRow(rng *rand.Rand, id int64, k string) []types.Datum {
	r := wideRowValues(rng, id, k)
	if b, ok := r[3].(types.DString); ok { // w_b_unique_storing's key
		r[3] = types.DString(fmt.Sprintf("%s\x00%d/%s", b, id, k))
	}
	return r
}

func wideRowValues(rng *rand.Rand, id int64, k string) []types.Datum {
	null := func() bool { return rng.IntN(5) == 0 }
	r := []types.Datum{types.DInt(id), types.DString(k)}
	str := func() types.Datum {
		if null() {
			return types.DNull
		}
		b := make([]byte, rng.IntN(12))
		for i := range b {
			b[i] = []byte{0, 1, 0xff, 'a', 'z'}[rng.IntN(5)]
		}
		return types.DString(b)
	}
	r = append(r, pick(null(), types.DInt(rng.Int64N(1<<40)-1<<39)), str())
	r = append(r, pick(null(), types.DFloat([]float64{0, math.Copysign(0, -1), math.NaN(), math.Inf(-1), rng.NormFloat64() * 1e6}[rng.IntN(5)])))
	r = append(r, pick(null(), types.DFloat(float32(rng.NormFloat64()))))
	r = append(r, pick(null(), types.DBool(rng.IntN(2) == 0)))
	r = append(r, pick(null(), types.DDate(rng.Int32N(200000)-100000)))
	r = append(r, pick(null(), types.DTimestampTZ(rng.Int64N(1<<50)-1<<49)))
	var u types.DUUID
	for i := range u {
		u[i] = byte(rng.IntN(256))
	}
	r = append(r, pick(null(), u))
	b := str()
	if s, ok := b.(types.DString); ok {
		b = types.DBytes(s)
	}
	r = append(r, b)
	dec := &types.DDecimal{}
	dec.SetFinite(rng.Int64N(100000)-50000, -int32(rng.IntN(4)))
	r = append(r, pick(null(), types.Datum(dec)))
	return append(r, pick(null(), types.DOid(rng.Uint32())))
}

func pick(null bool, d types.Datum) types.Datum {
	if null {
		return types.DNull
	}
	return d
}

// encodeAll runs an IndexEntryEncoder of idx over kvs cut into pages of
// size page (0: one page) and returns its entries as sorted strings.
func encodeAll(t *testing.T, l *rowenc.TableLayout, idx *rowenc.IndexLayout, kvs []kvpb.KeyValue, page int) (out []string, fast, slow int64) {
	t.Helper()
	e, err := rowenc.NewIndexEntryEncoder(l, idx)
	if err != nil {
		t.Fatal(err)
	}
	emit := func(k, v []byte) error { out = append(out, fmt.Sprintf("%x=%x", k, v)); return nil }
	if page == 0 {
		page = len(kvs) + 1
	}
	for p := range slices.Chunk(kvs, page) {
		if err := e.Add(p, emit); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Finish(emit); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	fast, slow = e.Rows()
	return out, fast, slow
}

// referenceEntries is what the reference path gives: every row a full
// RowFetcher decodes, encoded by AppendIndexEntry.
func referenceEntries(t *testing.T, l *rowenc.TableLayout, idx *rowenc.IndexLayout, kvs []kvpb.KeyValue) []string {
	t.Helper()
	f, err := rowenc.NewRowFetcher(l, &l.Primary, nil)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := f.DecodeRows(kvs)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rows {
		k, v, _, err := l.AppendIndexEntry(nil, nil, idx, r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%x=%x", k, v))
	}
	slices.Sort(out)
	return out
}

// TestIndexEntryEncoderMatchesFetcher (invariant 1 of IndexEntryEncoder):
// over rows packed, unpacked, updated column by column, deleted, and
// packed under an older schema version, read in pages of every size from
// one KV (every row split across pages) to the whole scan, the encoder
// emits the reference path's entries byte for byte, for an index of each
// shape; and the rows that can take the fast path do.
func TestIndexEntryEncoderMatchesFetcher(t *testing.T) {
	db := newKVDB(t)
	v1 := wideTable(150)
	l1 := mustLayout(t, v1)
	rng := rand.New(rand.NewPCG(18, 6))
	packed, unpacked := newWriter(l1, true, 0), newWriter(l1, false, 0)
	var live [][]types.Datum
	for i := range 300 {
		r := wideRow(rng, int64(i%100-50), fmt.Sprintf("k\x00%d", i/100))
		w := packed
		if i%10 == 3 {
			w = unpacked
		}
		if err := write(t, db, w, ins(r)); err != nil {
			t.Fatal(err)
		}
		live = append(live, r)
	}
	// Column entries newer than the packed row (a partial update), and
	// deletions of packed and unpacked rows.
	for i := 0; i < len(live); i += 7 {
		n := slices.Clone(live[i])
		n[2] = types.DInt(int64(i) * 1000)
		if err := write(t, db, packed, upd(live[i], n)); err != nil {
			t.Fatal(err)
		}
		live[i] = n
	}
	for i := 5; i < len(live); i += 11 {
		if err := write(t, db, packed, del(live[i])); err != nil {
			t.Fatal(err)
		}
	}

	// ALTER TABLE w ADD COLUMN x int8 DEFAULT 7, ADD COLUMN y text: rows
	// packed under version 1 lack both (x reads 7, y NULL); then more
	// rows under version 2 and indexes on the new columns.
	v2, err := catalog.Clone(v1)
	if err != nil {
		t.Fatal(err)
	}
	seven := "7"
	xID, err := v2.AddColumn(catalog.Column{Name: "x", Type: types.Int8, Nullable: true, MissingValue: &seven})
	if err != nil {
		t.Fatal(err)
	}
	yID, err := v2.AddColumn(catalog.Column{Name: "y", Type: types.Text, Nullable: true})
	if err != nil {
		t.Fatal(err)
	}
	v2.Indexes = append(v2.Indexes,
		catalog.Index{ID: 9, Name: "w_x_defaulted", Kind: catalog.IndexBTree, State: catalog.IndexPublic, Placement: catalog.IndexGlobal,
			GroupID: 159, KeyColumnIDs: []rowenc.ColumnID{xID}, KeyDirections: []rowenc.Order{rowenc.Asc}},
		catalog.Index{ID: 10, Name: "w_y_added", Kind: catalog.IndexBTree, State: catalog.IndexPublic, Placement: catalog.IndexGlobal,
			GroupID: 160, KeyColumnIDs: []rowenc.ColumnID{yID}, KeyDirections: []rowenc.Order{rowenc.Asc}, StoreColumnIDs: []rowenc.ColumnID{3}})
	v2.NextIndexID = 11
	l2 := mustLayout(t, v2)
	w2 := newWriter(l2, true, 0)
	for i := range 40 {
		r := append(wideRow(rng, int64(i), "v2"), types.DInt(int64(i)), pick(i%3 == 0, types.DString(fmt.Sprint(i))))
		if err := write(t, db, w2, ins(r)); err != nil {
			t.Fatal(err)
		}
	}

	kvs := scan(t, db, l2.IndexSpan(&l2.Primary))
	// Whether each index's rows can take the fast path at all; of
	// w_x_defaulted's, only those packed under version 2 (the others
	// read x's default, a Datum).
	fastIndex := map[string]bool{
		"w_a": true, "w_b_unique_storing": true, "w_c_desc_with_pk": true, "w_many_types": true,
		"w_k_same_order_unique": true, "w_k_other_order": false, "w_numeric_key": false,
		"w_x_defaulted": true, "w_y_added": true,
	}
	for i := range l2.Secondary {
		idx := &l2.Secondary[i]
		want := referenceEntries(t, l2, idx, kvs)
		if len(want) < 300 {
			t.Fatalf("index %s: %d reference entries, want the 300 live rows'", idx.Name, len(want))
		}
		for _, page := range []int{1, 2, 3, 7, 64, 0} {
			got, fast, slow := encodeAll(t, l2, idx, kvs, page)
			if !slices.Equal(got, want) {
				t.Errorf("index %s, pages of %d: entries differ from the reference path's:\n got %v\nwant %v", idx.Name, page, got, want)
				continue
			}
			switch {
			case !fastIndex[idx.Name] && fast != 0:
				t.Errorf("index %s, pages of %d: %d rows on the fast path, want none", idx.Name, page, fast)
			case idx.Name == "w_x_defaulted" && (fast > 40 || page >= 3 && fast == 0):
				t.Errorf("index %s, pages of %d: %d rows on the fast path, want some of the 40 packed under version 2", idx.Name, page, fast)
			case idx.Name != "w_x_defaulted" && fastIndex[idx.Name] && page >= 3 && fast < int64(len(want))/2:
				t.Errorf("index %s, pages of %d: %d of %d rows on the fast path (%d through the reference path)", idx.Name, page, fast, len(want), slow)
			case page == 1 && fast != 0:
				// Every row is its page's last: the next page may hold
				// its column entries.
				t.Errorf("index %s, pages of one KV: %d rows on the fast path, want none", idx.Name, fast)
			}
		}
	}
}

// TestIndexEntryEncoderReportsCorruption: a packed row the fast path
// cannot read goes to the reference path, which reports it, rather than
// being encoded or dropped.
func TestIndexEntryEncoderReportsCorruption(t *testing.T) {
	db := newKVDB(t)
	l := mustLayout(t, wideTable(151))
	rng := rand.New(rand.NewPCG(1, 2))
	if err := write(t, db, newWriter(l, true, 0), ins(wideRow(rng, 1, "a")), ins(wideRow(rng, 2, "b"))); err != nil {
		t.Fatal(err)
	}
	kvs := scan(t, db, l.IndexSpan(&l.Primary))
	if len(kvs) != 2 {
		t.Fatalf("%d KVs, want 2 packed rows", len(kvs))
	}
	kvs[0].Value = append(slices.Clone(kvs[0].Value[:len(kvs[0].Value)-1]), 0xff, 0xff) // a value running past the row
	e, err := rowenc.NewIndexEntryEncoder(l, &l.Secondary[0])
	if err != nil {
		t.Fatal(err)
	}
	emit := func(k, v []byte) error { return nil }
	err = e.Add(kvs, emit)
	if err == nil {
		err = e.Finish(emit)
	}
	if err == nil {
		t.Fatal("a corrupt packed row was encoded without an error")
	}
}

// FuzzIndexEntryEncoder: on a row key and value of arbitrary bytes (after
// wideTable's primary-index prefix), followed by a well-formed row so
// that the first is not its page's last, the encoder never panics, fails
// where the reference path fails, and otherwise emits its entries
// (invariant 1 of IndexEntryEncoder; rowenc invariant 4).
func FuzzIndexEntryEncoder(f *testing.F) {
	tbl := wideTable(152)
	if err := tbl.Validate(); err != nil {
		f.Fatal(err)
	}
	l, err := tbl.Layout()
	if err != nil {
		f.Fatal(err)
	}
	prefix := l.IndexPrefix(nil, &l.Primary, 0)
	rng := rand.New(rand.NewPCG(3, 4))
	pk := func(r []types.Datum) []byte {
		k, err := l.PrimaryKey(nil, r)
		if err != nil {
			f.Fatal(err)
		}
		return k[len(prefix):]
	}
	pack := func(r []types.Datum) []byte {
		v, err := rowenc.PackRow(nil, l.Schema, r[2:], 0)
		if err != nil {
			f.Fatal(err)
		}
		return v
	}
	r1, r2 := wideRow(rng, 1, "a\x00b"), wideRow(rng, -7, "")
	f.Add(pk(r1), pack(r1))
	f.Add(pk(r2), pack(r2))
	f.Add(pk(r2), rowenc.EncodeLiveness(nil, 1))
	last := wideRow(rng, 1<<40, "zz")
	lastKV := kvpb.KeyValue{Key: append(slices.Clone(prefix), pk(last)...), Value: pack(last)}
	f.Fuzz(func(t *testing.T, key, value []byte) {
		kvs := []kvpb.KeyValue{{Key: append(slices.Clone(prefix), key...), Value: value}, lastKV}
		if slices.Compare(kvs[0].Key, lastKV.Key) >= 0 {
			return // pages are in key order
		}
		for i := range l.Secondary {
			idx := &l.Secondary[i]
			// The reference path decodes the columns the index needs, as
			// an index build did before the encoder.
			rf, err := rowenc.NewRowFetcher(l, &l.Primary, slices.Concat(l.Primary.KeyColumns, idx.KeyColumns, idx.StoreColumns))
			if err != nil {
				t.Fatal(err)
			}
			rows, refErr := rf.DecodeRows(kvs)
			var want []string
			for _, r := range rows {
				if refErr != nil {
					break
				}
				k, v, _, err := l.AppendIndexEntry(nil, nil, idx, r)
				if err != nil {
					refErr = err
					break
				}
				want = append(want, fmt.Sprintf("%x=%x", k, v))
			}
			e, err := rowenc.NewIndexEntryEncoder(l, idx)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			emit := func(k, v []byte) error { got = append(got, fmt.Sprintf("%x=%x", k, v)); return nil }
			err = e.Add(kvs, emit)
			if err == nil {
				err = e.Finish(emit)
			}
			slices.Sort(got)
			slices.Sort(want)
			switch {
			case refErr != nil && err == nil:
				t.Fatalf("index %s: the reference path fails (%v), the encoder emitted %v", idx.Name, refErr, got)
			case refErr == nil && err != nil:
				t.Fatalf("index %s: the encoder fails (%v), the reference path emits %v", idx.Name, err, want)
			case refErr == nil && !slices.Equal(got, want):
				t.Fatalf("index %s: encoder %v, reference %v", idx.Name, got, want)
			}
		}
	})
}
