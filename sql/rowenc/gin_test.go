package rowenc_test

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/cockroachdb/apd/v3"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

// randJSON makes a small random jsonb value over few keys and values, so
// that random pairs often contain one another.
func randJSON(r *rand.Rand, depth int) types.JSON {
	keysAt := []string{"a", "b", "c", "aa", strings.Repeat("long", 40)}
	strs := []string{"a", "x", "y", "", strings.Repeat("z", 200)}
	k := r.IntN(8)
	if depth <= 0 && k >= 6 {
		k = r.IntN(6)
	}
	switch k {
	case 0:
		return types.JSONNullValue
	case 1:
		return types.JSONBoolValue(r.IntN(2) == 0)
	case 2:
		d, _, _ := apd.NewFromString([]string{"1", "1.0", "2", "-0", "3.50"}[r.IntN(5)])
		return types.JSONNumberValue(d)
	case 3, 4, 5:
		return types.JSONStringValue(strs[r.IntN(len(strs))])
	case 6:
		var el []types.JSON
		for range r.IntN(4) {
			el = append(el, randJSON(r, depth-1))
		}
		return types.JSONArrayValue(el...)
	default:
		var ps []types.JSONPair
		for range r.IntN(4) {
			ps = append(ps, types.JSONPair{Key: keysAt[r.IntN(len(keysAt))], Value: randJSON(r, depth-1)})
		}
		return types.JSONObjectValue(ps...)
	}
}

// prune returns a random part of j that j contains (keys and elements
// dropped, recursively).
func prune(r *rand.Rand, j types.JSON) types.JSON {
	switch j.Kind {
	case types.JSONObject:
		var ps []types.JSONPair
		for _, p := range j.Pairs {
			if r.IntN(3) > 0 {
				ps = append(ps, types.JSONPair{Key: p.Key, Value: prune(r, p.Value)})
			}
		}
		return types.JSONObjectValue(ps...)
	case types.JSONArray:
		var el []types.JSON
		for _, e := range j.Elems {
			if r.IntN(3) > 0 {
				el = append(el, prune(r, e))
			}
		}
		return types.JSONArrayValue(el...)
	}
	return j
}

func tokenSet(t *testing.T, opclass string, d types.Datum) map[string]bool {
	t.Helper()
	toks, err := rowenc.InvertedTokens(opclass, d)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, tok := range toks {
		out[string(tok)] = true
	}
	return out
}

// TestInvertedTokensSuperset: whenever a row satisfies a predicate the
// planner answers with a GIN index, the row has the tokens the lookup
// asks for, so the scan (then rechecked) misses no row.
func TestInvertedTokensSuperset(t *testing.T) {
	r := rand.New(rand.NewPCG(18, 1))
	contains, exists, pairs := 0, 0, 0
	for range 20000 {
		doc := randJSON(r, 3)
		var q types.JSON
		switch r.IntN(3) {
		case 0:
			q = randJSON(r, 2)
		case 1:
			q = prune(r, doc)
		default:
			// A top-level scalar, which an array contains when an
			// element equals it.
			q = randJSON(r, 0)
		}
		pairs++
		d, qd := &types.DJSON{JSON: doc}, &types.DJSON{JSON: q}
		if doc.Contains(q) {
			contains++
			for _, oc := range []string{rowenc.JSONBOps, rowenc.JSONBPathOps} {
				have := tokenSet(t, oc, d)
				for tok := range tokenSet(t, oc, qd) {
					if !have[tok] {
						t.Fatalf("%s: %s @> %s, but the row lacks token %q", oc, doc, q, tok)
					}
				}
			}
		}
		for _, key := range []string{"a", "b", "x", "", strings.Repeat("z", 200)} {
			if doc.Exists(key) {
				exists++
				if !tokenSet(t, rowenc.JSONBOps, d)[string(rowenc.JSONKeyToken(key))] {
					t.Fatalf("%s ? %q, but the row lacks its key token", doc, key)
				}
			}
		}
	}
	if contains < pairs/10 || exists < pairs/10 {
		t.Fatalf("too few positive cases to mean anything: %d contained, %d exists of %d", contains, exists, pairs)
	}
	// Arrays: @> needs every element's token, && one of them.
	for range 5000 {
		mk := func() *types.DArray {
			a := &types.DArray{Elem: types.Int8}
			for range r.IntN(5) {
				if r.IntN(6) == 0 {
					a.Elems = append(a.Elems, types.DNull)
				} else {
					a.Elems = append(a.Elems, types.DInt(r.IntN(6)))
				}
			}
			return a
		}
		a, b := mk(), mk()
		ta, tb := tokenSet(t, rowenc.ArrayOps, a), tokenSet(t, rowenc.ArrayOps, b)
		all, any := true, false
		for tok := range tb {
			all = all && ta[tok]
			any = any || ta[tok]
		}
		containsAll, overlap := true, false
		for _, y := range b.Elems {
			found := false
			for _, x := range a.Elems {
				if !types.IsNull(x) && !types.IsNull(y) && types.Compare(x, y) == 0 {
					found, overlap = true, true
				}
			}
			containsAll = containsAll && found
		}
		if containsAll && !all || overlap && !any {
			t.Fatalf("%v vs %v: contains %v overlap %v, tokens all %v any %v", a, b, containsAll, overlap, all, any)
		}
	}
}

// ginTable is g(k int8 DESC primary key, j jsonb, arr int4[]) with GIN
// indexes on j (jsonb_ops and jsonb_path_ops) and arr.
func ginTable(id catalog.ID) *catalog.Table {
	gin := func(iid catalog.IndexID, name string, col rowenc.ColumnID, oc string) catalog.Index {
		return catalog.Index{ID: iid, Name: name, Kind: catalog.IndexGIN, Opclass: oc, State: catalog.IndexPublic,
			Placement: catalog.IndexGlobal, GroupID: uint64(id) + uint64(iid),
			KeyColumnIDs: []rowenc.ColumnID{col}, KeyDirections: []rowenc.Order{rowenc.Asc}}
	}
	return &catalog.Table{
		ID: id, DatabaseID: catalog.PostgresDatabaseID, SchemaID: catalog.PublicSchemaID, Name: "g", Version: 1,
		Columns: []catalog.Column{
			{ID: 1, Name: "k", Type: types.Int8},
			{ID: 2, Name: "j", Type: types.JSONB, Nullable: true},
			{ID: 3, Name: "arr", Type: types.MustArray(types.Int4), Nullable: true},
		},
		NextColumnID: 4,
		PrimaryIndex: catalog.Index{ID: 1, Name: "g_pkey", Unique: true, Kind: catalog.IndexBTree, State: catalog.IndexPublic,
			KeyColumnIDs: []rowenc.ColumnID{1}, KeyDirections: []rowenc.Order{rowenc.Desc}},
		Indexes: []catalog.Index{
			gin(2, "g_j_idx", 2, rowenc.JSONBOps),
			gin(3, "g_j_path", 2, rowenc.JSONBPathOps),
			gin(4, "g_arr_idx", 3, rowenc.ArrayOps),
		},
		NextIndexID:  5,
		Partitioning: catalog.Partitioning{Kind: catalog.PartitionRange},
		GroupID:      uint64(id),
		RowFormat:    catalog.RowFormat{Packed: true, SchemaVersion: 1},
	}
}

// mapWrites applies a RowWriter's writes to a map.
type mapWrites map[string]string

func (m mapWrites) Put(k, v []byte)             { m[string(k)] = string(v) }
func (m mapWrites) CPut(k, v, _ []byte, _ bool) { m[string(k)] = string(v) }
func (m mapWrites) Del(k []byte)                { delete(m, string(k)) }
func (m mapWrites) DelRange(start, end []byte) {
	for k := range m {
		if k >= string(start) && k < string(end) {
			delete(m, k)
		}
	}
}

// TestInvertedRowWriterModel: after random inserts, updates and deletes,
// each GIN index holds exactly the entries of the live rows' tokens, and
// every entry names its row's primary key.
func TestInvertedRowWriterModel(t *testing.T) {
	l := mustLayout(t, ginTable(300))
	w := &rowenc.RowWriter{Table: l, PackedRows: true}
	r := rand.New(rand.NewPCG(18, 2))
	store := mapWrites{}
	live := map[int64][]types.Datum{}
	mkRow := func(k int64) []types.Datum {
		row := []types.Datum{types.DInt(k), types.DNull, types.DNull}
		if r.IntN(5) > 0 {
			row[1] = &types.DJSON{JSON: randJSON(r, 3)}
		}
		if r.IntN(5) > 0 {
			a := &types.DArray{Elem: types.Int4}
			for range r.IntN(4) {
				a.Elems = append(a.Elems, types.DInt(r.IntN(5)))
			}
			row[2] = a
		}
		return row
	}
	for range 3000 {
		k := int64(r.IntN(40))
		old := live[k]
		var err error
		switch {
		case old == nil:
			row := mkRow(k)
			err = w.Insert(store, row)
			live[k] = row
		case r.IntN(4) == 0:
			err = w.Delete(store, old)
			delete(live, k)
		default:
			row := mkRow(k)
			err = w.Update(store, old, row)
			live[k] = row
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range l.Secondary {
		idx := &l.Secondary[i]
		want := map[string]bool{}
		for _, row := range live {
			ents, err := l.EncodeIndexEntries(nil, idx, row)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				want[string(e.Key)] = true
				pk, err := l.InvertedPrimaryKey(e.Key)
				if err != nil {
					t.Fatal(err)
				}
				back := make([]types.Datum, len(l.Columns))
				if err := l.DecodeInvertedPrimaryKey(pk, back); err != nil {
					t.Fatal(err)
				}
				if types.Compare(back[0], row[0]) != 0 {
					t.Fatalf("entry of row %v decodes to key %v", row[0], back[0])
				}
			}
		}
		span := l.IndexSpan(idx)
		var got []string
		for k := range store {
			if k >= string(span.Key) && k < string(span.EndKey) {
				got = append(got, k)
			}
		}
		sort.Strings(got)
		var wantKeys []string
		for k := range want {
			wantKeys = append(wantKeys, k)
		}
		sort.Strings(wantKeys)
		if !slices.Equal(got, wantKeys) {
			t.Fatalf("index %s: %d entries stored, %d expected", idx.Name, len(got), len(wantKeys))
		}
		if len(got) == 0 {
			t.Fatalf("index %s holds nothing: the test wrote no token", idx.Name)
		}
		// A token's span holds the entries of exactly the rows with
		// that token.
		col := l.ColumnPos(idx.KeyColumns[0])
		for _, row := range live {
			toks, err := rowenc.InvertedTokens(idx.Inverted, row[col])
			if err != nil {
				t.Fatal(err)
			}
			for _, tok := range toks {
				sp, err := l.InvertedTokenSpan(idx, 0, tok)
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for _, k := range got {
					if k >= string(sp.Key) && k < string(sp.EndKey) {
						n++
					}
				}
				holders := 0
				for _, other := range live {
					ot, _ := rowenc.InvertedTokens(idx.Inverted, other[col])
					if slices.ContainsFunc(ot, func(x []byte) bool { return bytes.Equal(x, tok) }) {
						holders++
					}
				}
				if n != holders {
					t.Fatalf("index %s token %q: %d entries in its span, %d rows hold it", idx.Name, tok, n, holders)
				}
			}
		}
	}
}

// TestInvertedEntriesEncoding: each GIN entry's key is the index prefix,
// the token as a bytea key column (EncodeKey) and the primary key, its
// value 0, for tokens with and without NUL bytes (array_ops of small
// integers); the entries share their arrays (EncodeIndexEntries
// allocates keys and values once per row), so appending to one key or
// changing one value must leave every other entry as it was.
func TestInvertedEntriesEncoding(t *testing.T) {
	l := mustLayout(t, ginTable(301))
	arr := &types.DArray{Elem: types.Int4}
	for _, v := range []int{0, 1, 256, -1, 65536} {
		arr.Elems = append(arr.Elems, types.DInt(v))
	}
	row := []types.Datum{types.DInt(7), &types.DJSON{JSON: randJSON(rand.New(rand.NewPCG(1, 2)), 3)}, arr}
	pk, err := rowenc.EncodeKey(nil, types.DInt(7), rowenc.Desc)
	if err != nil {
		t.Fatal(err)
	}
	for i := range l.Secondary {
		idx := &l.Secondary[i]
		col := row[1]
		if idx.Inverted == rowenc.ArrayOps {
			col = row[2]
		}
		toks, err := rowenc.InvertedTokens(idx.Inverted, col)
		if err != nil {
			t.Fatal(err)
		}
		if len(toks) == 0 {
			t.Fatalf("index %s: no tokens", idx.Name)
		}
		ents, err := l.EncodeIndexEntries(nil, idx, row)
		if err != nil {
			t.Fatal(err)
		}
		if len(ents) != len(toks) {
			t.Fatalf("index %s: %d entries for %d tokens", idx.Name, len(ents), len(toks))
		}
		want := make([]rowenc.IndexEntry, len(toks))
		for j, tok := range toks {
			k, err := rowenc.EncodeKey(l.IndexPrefix(nil, idx, 0), types.DBytes(tok), rowenc.Asc)
			if err != nil {
				t.Fatal(err)
			}
			want[j] = rowenc.IndexEntry{Key: append(k, pk...), Value: []byte{0}}
		}
		check := func(what string) {
			t.Helper()
			for j := range ents {
				if !bytes.Equal(ents[j].Key, want[j].Key) || !bytes.Equal(ents[j].Value, want[j].Value) {
					t.Fatalf("index %s, %s: entry %d is %x=%x, want %x=%x", idx.Name, what, j, ents[j].Key, ents[j].Value, want[j].Key, want[j].Value)
				}
			}
		}
		check("as encoded")
		for j := range ents {
			_ = append(ents[j].Key, 0xee, 0xee, 0xee)
			_ = append(ents[j].Value, 0xee)
		}
		check("after appending to each")
		ents[0].Value[0] = 9
		want[0].Value = []byte{9}
		check("after changing the first value")
	}
}
