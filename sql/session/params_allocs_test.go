package session

import (
	"testing"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// TestParseParam checks that a text parameter decodes to what
// types.ParseDatum makes of it, the integers intParam takes included, and
// that an int8 parameter costs one allocation (its datum), not two (the
// string ParseDatum needs was one).
func TestParseParam(t *testing.T) {
	for _, tc := range []struct {
		typ *types.T
		in  string
	}{
		{types.Int8, "54321"},
		{types.Int8, "-7"},
		{types.Int8, "0"},
		{types.Int8, "000123"},
		{types.Int8, "999999999999999999"},   // 18 digits: intParam
		{types.Int8, "9223372036854775807"},  // 19: ParseDatum
		{types.Int8, "-9223372036854775808"}, // 19: ParseDatum
		{types.Int8, "9223372036854775808"},  // out of range
		{types.Int8, "+5"},
		{types.Int8, " 5 "},
		{types.Int8, "-"},
		{types.Int8, ""},
		{types.Int8, "1_000"},
		{types.Int8, "12a"},
		{types.Int4, "2147483647"},
		{types.Int4, "2147483648"},
		{types.Int4, "-2147483648"},
		{types.Int4, "-2147483649"},
		{types.Int2, "32767"},
		{types.Int2, "32768"},
		{types.Int2, "-32769"},
		{types.Text, "123"},
		{types.Float8, "123"},
	} {
		want, wantErr := types.ParseDatum(nil, tc.typ, tc.in)
		got, err := decodeParams(nil, []*types.T{tc.typ}, [][]byte{[]byte(tc.in)}, nil, nil)
		if (err == nil) != (wantErr == nil) || (err != nil && pgerror.Code(err) != pgerror.Code(wantErr)) {
			t.Errorf("%s %q: error %v, want %v", tc.typ, tc.in, err, wantErr)
			continue
		}
		if err == nil && (got[0] != want) {
			t.Errorf("%s %q: %#v, want %#v", tc.typ, tc.in, got[0], want)
		}
	}

	dst := make([]types.Datum, 1)
	vals := [][]byte{[]byte("54321")}
	pts := []*types.T{types.Int8}
	if n := testing.AllocsPerRun(100, func() { _, _ = decodeParams(nil, pts, vals, nil, dst) }); n > 1 {
		t.Fatalf("%v allocations for an int8 parameter, want 1", n)
	}
}
