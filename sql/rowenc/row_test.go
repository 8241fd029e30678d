package rowenc

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/cairn-db/cairn/sql/types/typestest"
)

func ts(w int64) hlc.Timestamp { return hlc.Timestamp{WallTime: w} }

func mustSchema(t interface{ Fatal(...any) }, version uint32, cols ...Column) *Schema {
	s, err := NewSchema(version, cols)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func rowString(row []types.Datum) string {
	var parts []string
	for _, d := range row {
		if types.IsNull(d) {
			parts = append(parts, "NULL")
		} else {
			parts = append(parts, d.String())
		}
	}
	return fmt.Sprint(parts)
}

// TestPackRoundTripEveryType: a row holding a random value (or NULL) of
// every storable type packs and unpacks to equal, identically printed
// values, and so does each value as a column entry.
func TestPackRoundTripEveryType(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 12).Draw(t, "ncols")
		var cols []Column
		var row []types.Datum
		for i := range n {
			typ := typestest.Type().Draw(t, "type")
			cols = append(cols, Column{ID: ColumnID(i*3 + 1), Type: typ})
			row = append(row, typestest.NullableDatum(typ).Draw(t, "d"))
		}
		s := mustSchema(t, 0, cols...)
		packed, err := PackRow(nil, s, row, 0)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeRow(s, packed, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := range row {
			want := types.Format(nil, cols[i].Type, row[i])
			if types.Compare(got[i], row[i]) != 0 || types.Format(nil, cols[i].Type, got[i]) != want {
				t.Fatalf("column %d (%s): packed %s, got %s", i, cols[i].Type, want, types.Format(nil, cols[i].Type, got[i]))
			}
			cv, err := EncodeColumnValue(nil, cols[i].Type, row[i])
			if err != nil {
				t.Fatal(err)
			}
			d, err := decodeColumnValue(cols[i].Type, cv)
			if err != nil || types.Format(nil, cols[i].Type, d) != want {
				t.Fatalf("column entry %d (%s): wrote %s, got %v (%v)", i, cols[i].Type, want, d, err)
			}
		}
	})
}

// TestNullsAreAlmostFree measures what NULLs cost: nothing when trailing,
// one bit elsewhere.
func TestNullsAreAlmostFree(t *testing.T) {
	var cols []Column
	for i := range 100 {
		cols = append(cols, Column{ID: ColumnID(i + 1), Type: types.Int8})
	}
	s := mustSchema(t, 7, cols...)
	row := make([]types.Datum, 100)
	for i := range row {
		row[i] = types.DNull
	}
	allNull, err := PackRow(nil, s, row, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(allNull) > 3 {
		t.Errorf("100 NULL columns packed to %d bytes, want <= 3 (tag, version, count)", len(allNull))
	}
	row[49] = types.DInt(5)
	one, _ := PackRow(nil, s, row, 0)
	// tag + version + count + 7 bitmap bytes + 1 value byte.
	if len(one) > 11 {
		t.Errorf("one int among 99 NULLs packed to %d bytes, want <= 11", len(one))
	}
	row[99] = types.DInt(5)
	last, _ := PackRow(nil, s, row, 0)
	if len(last) > 3+13+2 {
		t.Errorf("two ints among 98 NULLs packed to %d bytes, want <= 18", len(last))
	}
	got, err := DecodeRow(s, one, nil)
	if err != nil || types.Compare(got[49], types.DInt(5)) != 0 || !types.IsNull(got[50]) || !types.IsNull(got[0]) {
		t.Fatalf("decoded %s, %v", rowString(got), err)
	}
}

// TestMerge covers the merge rules one at a time.
func TestMerge(t *testing.T) {
	a := Column{ID: 1, Type: types.Int8}
	b := Column{ID: 2, Type: types.Text}
	c := Column{ID: 3, Type: types.Bool, Default: types.DBool(true), Added: 2}
	dropped := Column{ID: 4, Type: types.Float8, Added: 0, Dropped: 3}
	stillThere := dropped
	stillThere.Dropped = 0
	v1 := mustSchema(t, 1, a, b, stillThere)
	v3 := mustSchema(t, 3, a, b, c, dropped)

	packedV1, err := PackRow(nil, v1, []types.Datum{types.DInt(1), types.DString("x"), types.DFloat(2.5)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	col := func(typ *types.T, d types.Datum) []byte {
		v, err := EncodeColumnValue(nil, typ, d)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	type entry struct {
		id ColumnID
		v  []byte
		ts int64
	}
	tests := []struct {
		name    string
		schema  *Schema
		base    []byte
		baseTS  int64
		entries []entry
		want    string // rowString, or "absent"
	}{
		{"packed as written", v1, packedV1, 10, nil, "[1 x 2.5]"},
		{"old row under new schema: added column reads default, dropped skipped", v3, packedV1, 10, nil, "[1 x t]"},
		{"newer column entry wins", v3, packedV1, 10, []entry{{2, col(types.Text, types.DString("y")), 11}}, "[1 y t]"},
		{"same-timestamp entry applies", v3, packedV1, 10, []entry{{1, col(types.Int8, types.DInt(9)), 10}}, "[9 x t]"},
		{"older entry is a previous incarnation", v3, packedV1, 10, []entry{{1, col(types.Int8, types.DInt(9)), 9}}, "[1 x t]"},
		{"column set to NULL", v3, packedV1, 10, []entry{{2, col(types.Text, types.DNull), 12}}, "[1 NULL t]"},
		{"entry for added column", v3, packedV1, 10, []entry{{3, col(types.Bool, types.DBool(false)), 12}}, "[1 x f]"},
		{"entry for dropped column ignored", v3, packedV1, 10, []entry{{4, col(types.Float8, types.DFloat(1)), 12}}, "[1 x t]"},
		{"entry for unknown column ignored", v3, packedV1, 10, []entry{{99, []byte{0xee}, 12}}, "[1 x t]"},
		{"newest of two entries wins", v3, packedV1, 10, []entry{
			{1, col(types.Int8, types.DInt(3)), 13}, {1, col(types.Int8, types.DInt(2)), 12}}, "[3 x t]"},
		{"deleted row", v3, nil, 10, []entry{{1, col(types.Int8, types.DInt(3)), 13}}, "absent"},
		{"unpacked row: liveness plus entries", v3, EncodeLiveness(nil, 1), 10, []entry{
			{1, col(types.Int8, types.DInt(4)), 10}}, "[4 NULL t]"},
		{"unpacked row at current version: missing entries are NULL", v3, EncodeLiveness(nil, 3), 10, nil, "[NULL NULL NULL]"},
	}
	m := NewRowMerger(v3)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m.s = tc.schema
			m.Reset()
			m.SetBase(tc.base, ts(tc.baseTS))
			for _, e := range tc.entries {
				m.AddColumn(e.id, e.v, ts(e.ts))
			}
			row, ok, err := m.Row(nil)
			if err != nil {
				t.Fatal(err)
			}
			got := "absent"
			if ok {
				got = rowString(row)
			}
			if got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestSchemaErrors(t *testing.T) {
	a := Column{ID: 1, Type: types.Int8}
	if _, err := NewSchema(1, []Column{a, a}); err == nil {
		t.Error("duplicate IDs accepted")
	}
	if _, err := NewSchema(1, []Column{{ID: 1, Type: types.Int8, Added: 2}}); err == nil {
		t.Error("column from the future accepted")
	}
	if _, err := NewSchema(1, []Column{{ID: 1}}); err == nil {
		t.Error("untyped column accepted")
	}
	s := mustSchema(t, 1, a)
	if _, err := PackRow(nil, s, nil, 0); !errors.Is(err, ErrRowShape) {
		t.Errorf("short row: %v", err)
	}
	newer := mustSchema(t, 2, a)
	packed, _ := PackRow(nil, newer, []types.Datum{types.DInt(1)}, 0)
	if _, err := DecodeRow(s, packed, nil); !errors.Is(err, ErrSchemaTooOld) {
		t.Errorf("row from a newer schema: %v", err)
	}
	big := mustSchema(t, 1, Column{ID: 1, Type: types.Text})
	if _, err := PackRow(nil, big, []types.Datum{types.DString(string(make([]byte, 100)))}, 64); !errors.Is(err, ErrRowTooLarge) {
		t.Errorf("oversized row: %v", err)
	}
}

// TestMergeModel runs random histories of inserts (packed, or unpacked when
// over a random size limit or packing is off), partial updates, full
// rewrites, deletes, repacks and ADD/DROP COLUMN, and checks every read
// against a plain map of column values.
func TestMergeModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		type stored struct {
			v  []byte
			ts hlc.Timestamp
		}
		var (
			cols    []Column
			version uint32
			nextID  ColumnID = 1
			now     int64
			base    *stored                  // row key's newest value; nil = never written
			entries = map[ColumnID]stored{}  // column keys' newest values
			model   map[ColumnID]types.Datum // nil = row absent
		)
		schema := func() *Schema { return mustSchema(t, version, cols...) }
		addColumn := func(def bool) {
			typ := typestest.ScalarType().Draw(t, "type")
			c := Column{ID: nextID, Type: typ, Added: version}
			if def {
				c.Default = typestest.Datum(typ).Draw(t, "default")
			}
			nextID++
			cols = append(cols, c)
			if model != nil {
				model[c.ID] = types.DNull
				if c.Default != nil {
					model[c.ID] = c.Default
				}
			}
		}
		addColumn(false)
		live := func() []Column { return schema().Live() }
		randomRow := func() []types.Datum {
			var row []types.Datum
			for _, c := range live() {
				row = append(row, typestest.NullableDatum(c.Type).Draw(t, "v"))
			}
			return row
		}
		writeFull := func(row []types.Datum) {
			now++
			s := schema()
			limit := rapid.SampledFrom([]int{0, 0, 8, 40}).Draw(t, "limit")
			packed, err := PackRow(nil, s, row, limit)
			switch {
			case err == nil && rapid.IntRange(0, 4).Draw(t, "packing off") > 0:
				base = &stored{packed, ts(now)}
			case err == nil || errors.Is(err, ErrRowTooLarge):
				liveness, cvs, err := EncodeUnpackedRow(s, row)
				if err != nil {
					t.Fatal(err)
				}
				base = &stored{liveness, ts(now)}
				for _, cv := range cvs {
					entries[cv.ID] = stored{cv.Value, ts(now)}
				}
			default:
				t.Fatal(err)
			}
			model = map[ColumnID]types.Datum{}
			for i, c := range s.Live() {
				model[c.ID] = row[i]
			}
		}
		for step := range rapid.IntRange(1, 30).Draw(t, "steps") {
			_ = step
			switch op := rapid.IntRange(0, 6).Draw(t, "op"); {
			case op == 0 || model == nil && op <= 3:
				writeFull(randomRow())
			case op == 1 && model != nil: // partial update
				now++
				for _, c := range live() {
					if rapid.Bool().Draw(t, "update") {
						d := typestest.NullableDatum(c.Type).Draw(t, "v")
						v, err := EncodeColumnValue(nil, c.Type, d)
						if err != nil {
							t.Fatal(err)
						}
						entries[c.ID] = stored{v, ts(now)}
						model[c.ID] = d
					}
				}
			case op == 2 && model != nil: // delete
				now++
				base = &stored{nil, ts(now)}
				model = nil
			case op == 3 && model != nil: // repack, as GC does
				m := NewRowMerger(schema())
				m.SetBase(base.v, base.ts)
				for id, e := range entries {
					m.AddColumn(id, e.v, e.ts)
				}
				out, ok, err := m.Repack(nil, 0)
				if err != nil || !ok {
					t.Fatalf("repack: %v %v", ok, err)
				}
				now++
				base = &stored{out, ts(now)}
			case op == 4: // ADD COLUMN, maybe with a default
				version++
				addColumn(rapid.Bool().Draw(t, "default"))
			case op == 5 && len(live()) > 1: // DROP COLUMN
				version++
				l := live()
				victim := l[rapid.IntRange(0, len(l)-1).Draw(t, "victim")].ID
				for i := range cols {
					if cols[i].ID == victim {
						cols[i].Dropped = version
					}
				}
				if model != nil {
					delete(model, victim)
				}
			}
			// Read back and compare with the model.
			s := schema()
			m := NewRowMerger(s)
			if base != nil {
				m.SetBase(base.v, base.ts)
			}
			keys := slices.Collect(func(yield func(ColumnID) bool) {
				for id := range entries {
					if !yield(id) {
						return
					}
				}
			})
			slices.Sort(keys)
			for _, id := range keys {
				m.AddColumn(id, entries[id].v, entries[id].ts)
			}
			row, ok, err := m.Row(nil)
			if err != nil {
				t.Fatal(err)
			}
			if ok != (model != nil) {
				t.Fatalf("row exists = %v, model says %v", ok, model != nil)
			}
			for i, c := range s.Live() {
				if ok && types.Compare(row[i], model[c.ID]) != 0 {
					t.Fatalf("column %d (%s): read %s, model %s", c.ID, c.Type, row[i], model[c.ID])
				}
			}
		}
	})
}

// FuzzDecodeRow: arbitrary row and column values never make decoding panic.
func FuzzDecodeRow(f *testing.F) {
	cols := []Column{
		{ID: 1, Type: types.Int8},
		{ID: 2, Type: types.Text},
		{ID: 3, Type: types.Numeric, Dropped: 2},
		{ID: 4, Type: types.MustArray(types.Float8), Added: 1},
		{ID: 5, Type: types.JSONB, Added: 2, Default: types.NewJSON(types.JSONNullValue)},
		{ID: 6, Type: types.Interval, Added: 2},
	}
	s, err := NewSchema(2, cols)
	if err != nil {
		f.Fatal(err)
	}
	oldCols := slices.Clone(cols[:4])
	oldCols[2].Dropped = 0
	old, err := NewSchema(1, oldCols)
	if err != nil {
		f.Fatal(err)
	}
	p1, _ := PackRow(nil, old, []types.Datum{types.DInt(-3), types.DString("héllo"), typestest.Datum(types.Numeric).Example(3),
		types.NewArray(types.Float8, types.DFloat(1.5), types.DNull)}, 0)
	p2, _ := PackRow(nil, s, []types.Datum{types.DNull, types.DString(""), types.DNull, types.NewJSON(types.JSONStringValue("x")), types.DInterval{Months: 1, Micros: -5}}, 0)
	f.Add(p1, []byte{tagColumn, 4})
	f.Add(p2, []byte{tagColumnNull})
	f.Add(EncodeLiveness(nil, 1), []byte{tagColumn, 0x80})
	f.Fuzz(func(t *testing.T, base, col []byte) {
		_, _ = DecodeRow(s, base, []ColumnValue{{ID: 2, Value: col}})
		_, _ = DecodeRow(s, base, []ColumnValue{{ID: 4, Value: col}})
		_, _ = DecodeRow(s, base, []ColumnValue{{ID: 6, Value: col}})
		_, _ = DecodeColumnSuffix(col)
	})
}
