package rowenc_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

// opRecorder lists the writes a RowWriter makes in its row's span.
type opRecorder struct {
	row []byte
	ops []string
}

func (r *opRecorder) in(k []byte) bool { return bytes.HasPrefix(k, r.row) }

func (r *opRecorder) name(k []byte) string {
	if bytes.Equal(k, r.row) {
		return "row"
	}
	if bytes.Equal(k, keys.Next(r.row)) {
		return "row+0"
	}
	if bytes.Equal(k, keys.PrefixEnd(r.row)) {
		return "end"
	}
	return "col"
}

func (r *opRecorder) Put(k, _ []byte) {
	if r.in(k) {
		r.ops = append(r.ops, "put "+r.name(k))
	}
}
func (r *opRecorder) CPut(k, _, _ []byte, _ bool) {
	if r.in(k) {
		r.ops = append(r.ops, "cput "+r.name(k))
	}
}
func (r *opRecorder) Del(k []byte) {
	if r.in(k) {
		r.ops = append(r.ops, "del "+r.name(k))
	}
}
func (r *opRecorder) DelRange(s, e []byte) {
	if r.in(s) {
		r.ops = append(r.ops, "delrange "+r.name(s)+" "+r.name(e))
	}
}

func (r *opRecorder) DelRangeSeenEmpty(s, e []byte) {
	if r.in(s) {
		r.ops = append(r.ops, "delrange-seen-empty "+r.name(s)+" "+r.name(e))
	}
}

// TestWholeRowUpdate: with WholeRow (and packed rows), an update of one
// column of a row packed in at most WholeRowMax bytes writes the packed
// row and deletes the rest of the row's span (every key of the span
// decided by the write: kv's write buffer then answers a read of the row
// alone); a larger row, a writer without WholeRow and one without packed
// rows write the column entry. A row the statement read as its row key
// alone (KeyOnly) deletes the rest of its span as one read empty
// (SeenEmptyWrites), and forgets the row. Every form reads back the new
// row.
func TestWholeRowUpdate(t *testing.T) {
	big := strings.Repeat("x", rowenc.WholeRowMax)
	for _, tc := range []struct {
		name             string
		packed, wholeRow bool
		keyOnly          bool
		d                string
		want             string
	}{
		{"small row", true, true, false, "p", "delrange row+0 end,put row"},
		{"small row read as its row key", true, true, true, "p", "delrange-seen-empty row+0 end,put row"},
		{"row over WholeRowMax", true, true, false, big, "put col"},
		{"row over WholeRowMax read as its row key", true, true, true, big, "put col"},
		{"without WholeRow", true, false, false, "p", "put col"},
		{"unpacked", false, true, false, "p", "put col"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := newKVDB(t)
			l := mustLayout(t, testTable(104))
			w := newWriter(l, tc.packed, 0)
			old, new := row(1, "x", 5, tc.d), row(1, "x", 6, tc.d)
			if err := write(t, db, w, ins(old)); err != nil {
				t.Fatal(err)
			}
			key, err := l.PrimaryKey(nil, old)
			if err != nil {
				t.Fatal(err)
			}
			w.WholeRow = tc.wholeRow
			if tc.keyOnly {
				w.KeyOnly = &rowenc.KeyOnlyRows{}
				w.KeyOnly.Add(key)
			}
			rec := &opRecorder{row: key}
			if err := w.Update(rec, old, new); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(rec.ops, ","); got != tc.want {
				t.Errorf("writes %q, want %q", got, tc.want)
			}
			if w.KeyOnly != nil && w.KeyOnly.Has(key) {
				t.Error("the written row is still key-only")
			}
			if err := write(t, db, w, upd(old, new)); err != nil {
				t.Fatal(err)
			}
			if got, want := rowsString(fetch(t, db, l, &l.Primary, nil)), rowsString([][]types.Datum{new}); got != want {
				t.Errorf("rows = %s, want %s", got, want)
			}
			checkIndexes(t, db, l, [][]types.Datum{new})
		})
	}
}
