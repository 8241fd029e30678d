package rowenc

import (
	"bytes"
	"testing"

	"github.com/cockroachdb/apd/v3"

	"github.com/cairn-db/cairn/sql/types"
)

// TestSkipMatchesValue: skipping a value (a column a projected fetch
// does not need) passes over exactly the bytes decoding it would read,
// for every family a packed row holds, so the columns after it decode
// from the right place; and a value cut short fails as decoding does.
func TestSkipMatchesValue(t *testing.T) {
	js, err := types.ParseJSON(`{"a": [1, "x", null]}`)
	if err != nil {
		t.Fatal(err)
	}
	intArr, err := types.MakeArray(types.Int8)
	if err != nil {
		t.Fatal(err)
	}
	dec, _, err := apd.NewFromString("-12345.678900")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		t *types.T
		d types.Datum
	}{
		{types.Bool, types.DBool(true)},
		{types.Int8, types.DInt(-1 << 40)},
		{types.Int4, types.DInt(7)},
		{types.Oid, types.DOid(4000000000)},
		{types.Float4, types.DFloat(1.5)},
		{types.Float8, types.DFloat(-2.25)},
		{types.Numeric, types.NewDecimal(dec)},
		{types.Text, types.DString("héllo\x00")},
		{types.Text, types.DString("")},
		{types.Bytea, types.DBytes("\x00\xff")},
		{types.Date, types.DDate(-20000)},
		{types.Time, types.DTime(86399999999)},
		{types.Timestamp, types.DTimestamp(1 << 50)},
		{types.TimestampTZ, types.DTimestampTZ(-5)},
		{types.Interval, types.DInterval{Months: 14, Days: -3, Micros: 1e9}},
		{types.UUID, types.DUUID([]byte("0123456789abcdef"))},
		{types.JSONB, types.NewJSON(js)},
		{types.JSONText, types.DJSONText(`{"b" : 1}`)},
		{intArr, types.NewArray(types.Int8, types.DInt(1), types.DNull, types.DInt(3))},
	} {
		enc, err := appendValue(nil, tc.t, tc.d)
		if err != nil {
			t.Fatalf("%s %v: %v", tc.t.Name(), tc.d, err)
		}
		after := []byte{0xab, 0xcd}
		r := valueReader{b: append(bytes.Clone(enc), after...)}
		if err := r.skip(tc.t); err != nil {
			t.Fatalf("%s %v: skip: %v", tc.t.Name(), tc.d, err)
		}
		if !bytes.Equal(r.b, after) {
			t.Errorf("%s %v: skip left %x, want %x", tc.t.Name(), tc.d, r.b, after)
		}
		if len(enc) > 1 {
			short, full := valueReader{b: enc[:len(enc)-1]}, valueReader{b: enc[:len(enc)-1]}
			_, verr := full.value(tc.t)
			if serr := short.skip(tc.t); (serr == nil) != (verr == nil) {
				t.Errorf("%s %v cut short: skip says %v, value says %v", tc.t.Name(), tc.d, serr, verr)
			}
		}
	}
}
