package rowenc_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

func ins(r []types.Datum) [2][]types.Datum    { return [2][]types.Datum{nil, r} }
func upd(o, n []types.Datum) [2][]types.Datum { return [2][]types.Datum{o, n} }
func del(r []types.Datum) [2][]types.Datum    { return [2][]types.Datum{r, nil} }

func TestRowWriterRoundTrip(t *testing.T) {
	for _, packed := range []bool{false, true} {
		name := "unpacked"
		if packed {
			name = "packed"
		}
		t.Run(name, func(t *testing.T) {
			db := newKVDB(t)
			l := mustLayout(t, testTable(104))
			w := newWriter(l, packed, 0)
			r1, r2 := row(1, "x", 5, "p"), row(2, nil, -1, nil)
			if err := write(t, db, w, ins(r1), ins(r2)); err != nil {
				t.Fatal(err)
			}
			check := func(want string) {
				t.Helper()
				if got := rowsString(fetch(t, db, l, &l.Primary, nil)); got != want {
					t.Errorf("rows = %s, want %s", got, want)
				}
			}
			check("(1,x,5,p) (2,NULL,-1,NULL)")
			primary := func() (packedRows, colEntries int) {
				for _, kv := range scan(t, db, l.IndexSpan(&l.Primary)) {
					p, rest, err := rowenc.DecodeKeyPrefix(kv.Key)
					if err != nil {
						t.Fatal(err)
					}
					if p.Index != l.Primary.ID {
						continue
					}
					if _, suffix, _ := rowenc.DecodeKey(rest, types.Int8, rowenc.Asc); len(suffix) > 0 {
						colEntries++
					} else if rowenc.IsPacked(kv.Value) {
						packedRows++
					}
				}
				return
			}
			pr, ce := primary()
			if packed && (pr != 2 || ce != 0) || !packed && (pr != 0 || ce != 4) {
				t.Errorf("after insert: %d packed rows, %d column entries", pr, ce)
			}
			// A partial update writes column entries, whatever the format.
			r1b := row(1, "x", 6, "p")
			if err := write(t, db, w, upd(r1, r1b)); err != nil {
				t.Fatal(err)
			}
			check("(1,x,6,p) (2,NULL,-1,NULL)")
			_, ce2 := primary()
			if ce2 != ce+1 && !(ce2 == ce && !packed) {
				t.Errorf("partial update: column entries %d -> %d", ce, ce2)
			}
			// Partial update then full update in one transaction: the new
			// packed row must win over the transaction's own column entry.
			r1c, r1d := row(1, "y", 6, "p"), row(1, "z", 7, "q")
			if err := write(t, db, w, upd(r1b, r1c), upd(r1c, r1d)); err != nil {
				t.Fatal(err)
			}
			check("(1,z,7,q) (2,NULL,-1,NULL)")
			if packed {
				if pr, ce := primary(); pr != 2 || ce != 0 {
					t.Errorf("full update: %d packed rows, %d column entries", pr, ce)
				}
			}
			// Delete then re-insert in one transaction reads only the new row.
			r2b := row(2, "w", nil, nil)
			if err := write(t, db, w, upd(r2, row(2, nil, 9, nil)), del(row(2, nil, 9, nil)), ins(r2b)); err != nil {
				t.Fatal(err)
			}
			check("(1,z,7,q) (2,w,NULL,NULL)")
			// Primary key change: delete + insert.
			if err := write(t, db, w, upd(r2b, row(3, "w", nil, nil))); err != nil {
				t.Fatal(err)
			}
			check("(1,z,7,q) (3,w,NULL,NULL)")
			// Projection keeps only the needed columns.
			if got := rowsString(fetch(t, db, l, &l.Primary, []rowenc.ColumnID{1, 3})); got != "(1,-,7,-) (3,-,NULL,-)" {
				t.Errorf("projected rows = %s", got)
			}
			if err := write(t, db, w, del(r1d)); err != nil {
				t.Fatal(err)
			}
			check("(3,w,NULL,NULL)")
			checkIndexes(t, db, l, [][]types.Datum{row(3, "w", nil, nil)})
		})
	}
}

// checkIndexes fails the test if indexMismatch finds a difference.
func checkIndexes(t *testing.T, db *kv.DB, l *rowenc.TableLayout, rows [][]types.Datum) {
	t.Helper()
	if msg := indexMismatch(t, db, l, rows); msg != "" {
		t.Error(msg)
	}
}

// indexMismatch compares every secondary index's stored entries with a
// recomputation from rows (the table's contents) and describes the first
// difference, or returns "".
func indexMismatch(t *testing.T, db *kv.DB, l *rowenc.TableLayout, rows [][]types.Datum) string {
	for i := range l.Secondary {
		idx := &l.Secondary[i]
		var want []string
		for _, r := range rows {
			if in, _ := cPositive(idx, r); idx.Partial && !in {
				continue
			}
			e, err := l.EncodeIndexEntry(idx, r)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, string(e.Key)+"="+string(e.Value))
		}
		var got []string
		for _, kv := range scan(t, db, l.IndexSpan(idx)) {
			if p, _, _ := rowenc.DecodeKeyPrefix(kv.Key); p.Index == idx.ID && p.Table == l.ID {
				got = append(got, string(kv.Key)+"="+string(kv.Value))
			}
		}
		sortStrings(want)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			return fmt.Sprintf("index %s holds %d entries %q, want %d %q", idx.Name, len(got), got, len(want), want)
		}
	}
	return ""
}

func TestMixedFormatsAndSizeLimit(t *testing.T) {
	db := newKVDB(t)
	l := mustLayout(t, testTable(104))
	unpackedW, packedW := newWriter(l, false, 0), newWriter(l, true, 16)
	r1, r2 := row(1, "a", 1, "d"), row(2, "b", 2, strings.Repeat("long", 10))
	if err := write(t, db, unpackedW, ins(r1)); err != nil {
		t.Fatal(err)
	}
	// r2 exceeds the 16-byte limit and is stored unpacked.
	if err := write(t, db, packedW, ins(r2)); err != nil {
		t.Fatal(err)
	}
	for _, kv := range scan(t, db, l.IndexSpan(&l.Primary)) {
		if rowenc.IsPacked(kv.Value) {
			t.Errorf("key %q holds a packed row; both rows should be unpacked", kv.Key)
		}
	}
	// Rows written unpacked are updated with packing on, partially and
	// fully; both read back.
	r1b := row(1, "a", 5, "d")
	r1c := row(1, "z", 6, "e")
	if err := write(t, db, packedW, upd(r1, r1b)); err != nil {
		t.Fatal(err)
	}
	if err := write(t, db, packedW, upd(r1b, r1c)); err != nil {
		t.Fatal(err)
	}
	got := rowsString(fetch(t, db, l, &l.Primary, nil))
	want := rowsString([][]types.Datum{r1c, r2})
	if got != want {
		t.Errorf("rows = %s, want %s", got, want)
	}
	checkIndexes(t, db, l, [][]types.Datum{r1c, r2})
}

func TestUniqueViolation(t *testing.T) {
	db := newKVDB(t)
	l := mustLayout(t, testTable(104))
	w := newWriter(l, true, 0)
	if err := write(t, db, w, ins(row(1, "x", 1, nil)), ins(row(2, nil, 1, nil)), ins(row(3, nil, 1, nil))); err != nil {
		t.Fatalf("NULLs in a unique index must not conflict: %v", err)
	}
	tests := []struct {
		change      [2][]types.Datum
		msg, detail string
	}{
		{ins(row(1, "y", 1, nil)), `duplicate key value violates unique constraint "t_pkey"`, "Key (a)=(1) already exists."},
		{ins(row(4, "x", 1, nil)), `duplicate key value violates unique constraint "t_b_key"`, "Key (b)=(x) already exists."},
		{upd(row(2, nil, 1, nil), row(2, "x", 1, nil)), `duplicate key value violates unique constraint "t_b_key"`, "Key (b)=(x) already exists."},
	}
	for _, tc := range tests {
		err := write(t, db, w, tc.change)
		var pe *pgerror.Error
		if !errors.As(err, &pe) || pe.Code != pgerrcode.UniqueViolation || pe.Message != tc.msg || pe.Detail != tc.detail {
			t.Errorf("%v: got %v (%+v), want %s / %s", tc.change, err, pe, tc.msg, tc.detail)
		}
	}
	if got := rowsString(fetch(t, db, l, &l.Primary, nil)); got != "(1,x,1,NULL) (2,NULL,1,NULL) (3,NULL,1,NULL)" {
		t.Errorf("failed writes changed the table: %s", got)
	}
}

func TestSecondaryIndexFetch(t *testing.T) {
	db := newKVDB(t)
	l := mustLayout(t, testTable(104))
	w := newWriter(l, true, 0)
	if err := write(t, db, w, ins(row(1, "x", 1, "p")), ins(row(2, "y", 3, "q")), ins(row(3, nil, -2, "r"))); err != nil {
		t.Fatal(err)
	}
	cases := map[uint32]string{
		2: "(1,x,-,-) (2,y,-,-) (3,NULL,-,-)", // unique on b: PK in value (or key for NULL)
		3: "(2,-,3,q) (1,-,1,p) (3,-,-2,r)",   // c DESC storing d
		4: "(1,-,-,p) (2,-,-,q)",              // partial: c > 0
	}
	for id, want := range cases {
		idx := l.Index(id)
		if got := rowsString(fetch(t, db, l, idx, nil)); got != want {
			t.Errorf("index %s rows = %s, want %s", idx.Name, got, want)
		}
	}
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && bytes.Compare([]byte(s[j]), []byte(s[j-1])) < 0; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// The detail of a composite key lists every key column, in index order,
// whatever the columns' directions.
func TestUniqueViolationCompositeKey(t *testing.T) {
	db := newKVDB(t)
	l := mustLayout(t, pairTable(800, 800, rowenc.Desc, rowenc.Asc, catalog.Partitioning{Kind: catalog.PartitionRange}, false))
	w := &rowenc.RowWriter{Table: l, PackedRows: true}
	if err := write(t, db, w, ins(pairRow(-3, "it's", 1))); err != nil {
		t.Fatal(err)
	}
	err := write(t, db, w, ins(pairRow(-3, "it's", 2)))
	var pe *pgerror.Error
	if !errors.As(err, &pe) || pe.Message != `duplicate key value violates unique constraint "p_pkey"` || pe.Detail != "Key (k, s)=(-3, it's) already exists." {
		t.Errorf("got %v (%+v)", err, pe)
	}
}

// A row too large for a KV value is refused with 54000, whether it arrives
// by insert or by update.
func TestRowTooBig(t *testing.T) {
	db := newKVDB(t)
	tbl := pairTable(810, 810, rowenc.Asc, rowenc.Asc, catalog.Partitioning{Kind: catalog.PartitionRange}, false)
	// v holds text here and no index covers it: only the row's value grows.
	tbl.Columns[2].Type = types.Text
	tbl.Indexes = nil
	l := mustLayout(t, tbl)
	w := &rowenc.RowWriter{Table: l, PackedRows: true}
	row := func(k int64, v string) []types.Datum {
		return []types.Datum{types.DInt(k), types.DString("s"), types.DString(v)}
	}
	huge := strings.Repeat("x", rowenc.MaxValueSize+1)
	if err := write(t, db, w, ins(row(1, "small"))); err != nil {
		t.Fatal(err)
	}
	if err := write(t, db, w, ins(row(2, huge))); pgerror.Code(err) != pgerrcode.ProgramLimitExceeded {
		t.Fatalf("insert of a huge row: got %v, want 54000", err)
	}
	if err := write(t, db, w, upd(row(1, "small"), row(1, huge))); pgerror.Code(err) != pgerrcode.ProgramLimitExceeded {
		t.Fatalf("update to a huge row: got %v, want 54000", err)
	}
	// A bulk load's writer (an arena, its size check reused): the same,
	// and the next row is written.
	w.Arena = &rowenc.ByteArena{}
	if err := write(t, db, w, ins(row(3, huge))); pgerror.Code(err) != pgerrcode.ProgramLimitExceeded {
		t.Fatalf("insert of a huge row through an arena: got %v, want 54000", err)
	}
	if err := write(t, db, w, ins(row(3, "small"))); err != nil {
		t.Fatalf("insert of a small row through an arena after a huge one: %v", err)
	}
}
