package types

import (
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
)

func TestRecordText(t *testing.T) {
	rec := MakeRecord([]Field{{"a", Int4}, {"b", Text}, {"c", Text}, {"d", Text}, {"e", Text}})
	for _, tc := range []struct {
		elems []Datum
		want  string
	}{
		{[]Datum{DInt(1), DString("x"), DNull, DString(""), DString(`q"b\s`)}, `(1,x,,"","q""b\\s")`},
		{[]Datum{DNull, DString("a b"), DString("(p)"), DString("c,d"), DString("\t")}, "(,\"a b\",\"(p)\",\"c,d\",\"\t\")"},
	} {
		if got := Format(nil, rec, &DTuple{T: rec, Elems: tc.elems}); got != tc.want {
			t.Errorf("Format(%v) = %s, want %s", tc.elems, got, tc.want)
		}
	}
}

// TestRecordBinary: record_send's form, as pgx (which asks for it)
// decodes it.
func TestRecordBinary(t *testing.T) {
	rec := MakeRecord([]Field{{"x", Int2}, {"n", Int4}, {"s", Text}})
	b, err := EncodeBinary(nil, rec, &DTuple{T: rec, Elems: []Datum{DInt(7), DNull, DString("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	m := pgtype.NewMap()
	typ, _ := m.TypeForOID(pgtype.RecordOID)
	got, err := typ.Codec.DecodeValue(m, pgtype.RecordOID, pgtype.BinaryFormatCode, b)
	if err != nil {
		t.Fatal(err)
	}
	if want := []any{int16(7), nil, "hi"}; !reflect.DeepEqual(got, want) {
		t.Errorf("decoded %#v, want %#v", got, want)
	}
}

func TestRecordCompare(t *testing.T) {
	rec := MakeRecord([]Field{{"a", Int4}, {"b", Int4}})
	r := func(a, b Datum) *DTuple { return &DTuple{T: rec, Elems: []Datum{a, b}} }
	for _, tc := range []struct {
		x, y *DTuple
		want int
	}{
		{r(DInt(1), DInt(2)), r(DInt(1), DInt(3)), -1},
		{r(DInt(2), DInt(0)), r(DInt(1), DInt(9)), 1},
		{r(DInt(1), DNull), r(DInt(1), DInt(9)), 1}, // NULL sorts above a value
		{r(DInt(1), DNull), r(DInt(1), DNull), 0},
	} {
		if got := Compare(tc.x, tc.y); got != tc.want {
			t.Errorf("Compare(%v, %v) = %d, want %d", tc.x, tc.y, got, tc.want)
		}
	}
}
