// Package typestest provides rapid generators of SQL types and datums for
// property tests in sql/types, sql/rowenc and the layers above. It is
// imported only by tests.
package typestest

import (
	"math"
	"strings"

	"github.com/cockroachdb/apd/v3"
	"pgregory.net/rapid"

	"github.com/cairn-db/cairn/sql/types"
)

// ScalarType draws one of the built-in scalar types (no unknown).
func ScalarType() *rapid.Generator[*types.T] {
	return rapid.SampledFrom([]*types.T{types.Bool, types.Int2, types.Int4, types.Int8,
		types.Float4, types.Float8, types.Numeric, types.Text, types.VarChar, types.Bytea,
		types.Date, types.Time, types.Timestamp, types.TimestampTZ, types.Interval,
		types.UUID, types.JSONB, types.Oid, types.JSONText})
}

// Type draws a scalar type or, one time in five, an array of one.
func Type() *rapid.Generator[*types.T] {
	return rapid.Custom(func(t *rapid.T) *types.T {
		s := ScalarType().Draw(t, "scalar")
		if rapid.IntRange(0, 4).Draw(t, "array") == 0 {
			return types.MustArray(s)
		}
		return s
	})
}

// Datum draws a non-NULL value of typ, favouring edge cases (extremes,
// zero, NaN, infinities, empty strings, NUL-free text).
func Datum(typ *types.T) *rapid.Generator[types.Datum] {
	return rapid.Custom(func(t *rapid.T) types.Datum { return draw(t, typ) })
}

// NullableDatum draws DNull one time in four, else Datum(typ).
func NullableDatum(typ *types.T) *rapid.Generator[types.Datum] {
	return rapid.Custom(func(t *rapid.T) types.Datum {
		if rapid.IntRange(0, 3).Draw(t, "null") == 0 {
			return types.DNull
		}
		return draw(t, typ)
	})
}

func draw(t *rapid.T, typ *types.T) types.Datum {
	switch typ.Family {
	case types.BoolFamily:
		return types.DBool(rapid.Bool().Draw(t, "b"))
	case types.IntFamily:
		switch typ.Width {
		case 16:
			return types.DInt(rapid.Int16().Draw(t, "i"))
		case 32:
			return types.DInt(rapid.Int32().Draw(t, "i"))
		}
		return types.DInt(rapid.Int64().Draw(t, "i"))
	case types.FloatFamily:
		f := rapid.OneOf(rapid.Float64(), rapid.SampledFrom([]float64{0, math.Copysign(0, -1),
			math.NaN(), math.Inf(1), math.Inf(-1), math.MaxFloat64, -math.SmallestNonzeroFloat64, 1e15, 1e-5})).Draw(t, "f")
		if typ.Width == 32 {
			f = float64(float32(f))
		}
		return types.DFloat(f)
	case types.NumericFamily:
		return drawDecimal(t)
	case types.StringFamily:
		return types.DString(drawText(t))
	case types.BytesFamily:
		return types.DBytes(rapid.SliceOfN(rapid.Byte(), 0, 12).Draw(t, "bytes"))
	case types.DateFamily:
		return types.DDate(rapid.OneOf(rapid.Int32Range(-2440588, 2145042905),
			rapid.SampledFrom([]int32{0, -1, math.MinInt32, math.MaxInt32})).Draw(t, "date"))
	case types.TimeFamily:
		return types.DTime(rapid.Int64Range(0, 86400e6).Draw(t, "time"))
	case types.TimestampFamily:
		return types.DTimestamp(drawTimestamp(t))
	case types.TimestampTZFamily:
		return types.DTimestampTZ(drawTimestamp(t))
	case types.IntervalFamily:
		return types.DInterval{
			Months: rapid.Int32Range(-1e6, 1e6).Draw(t, "months"),
			Days:   rapid.Int32Range(-1e6, 1e6).Draw(t, "days"),
			Micros: rapid.Int64Range(-1e15, 1e15).Draw(t, "micros"),
		}
	case types.UUIDFamily:
		var u types.DUUID
		copy(u[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "uuid"))
		return u
	case types.JSONBFamily:
		return types.NewJSON(drawJSON(t, 0))
	case types.JSONTextFamily:
		// json keeps its text: vary the spacing around a jsonb value's.
		s := drawJSON(t, 0).String()
		if rapid.Bool().Draw(t, "spaced") {
			s = " " + strings.ReplaceAll(s, ", ", " ,  ") + "\n"
		}
		return types.DJSONText(s)
	case types.OidFamily:
		return types.DOid(rapid.Uint32().Draw(t, "oid"))
	case types.ArrayFamily:
		n := rapid.IntRange(0, 4).Draw(t, "n")
		a := types.NewArray(typ.Elem)
		for range n {
			a.Elems = append(a.Elems, NullableDatum(typ.Elem).Draw(t, "elem"))
		}
		return a
	}
	panic("typestest: no generator for " + typ.Name())
}

func drawTimestamp(t *rapid.T) int64 {
	return rapid.OneOf(
		rapid.Int64Range(-210866803200000000, 9223371244800000000-1),
		rapid.Int64Range(-1e12, 1e12),
		rapid.SampledFrom([]int64{0, math.MinInt64, math.MaxInt64})).Draw(t, "ts")
}

func drawText(t *rapid.T) string {
	return rapid.OneOf(
		rapid.StringMatching(`[a-c ]{0,6}`),
		rapid.StringOfN(rapid.Rune().Filter(func(r rune) bool { return r != 0 }), 0, 8, -1),
	).Draw(t, "s")
}

func drawDecimal(t *rapid.T) *types.DDecimal {
	switch rapid.IntRange(0, 9).Draw(t, "special") {
	case 0:
		d := &types.DDecimal{}
		d.Form = apd.NaN
		return d
	case 1:
		d := &types.DDecimal{}
		d.Form, d.Negative = apd.Infinite, rapid.Bool().Draw(t, "neg")
		return d
	}
	digits := rapid.StringMatching(`[0-9]{1,30}`).Draw(t, "digits")
	exp := rapid.Int32Range(-20, 0).Draw(t, "exp")
	d, _, err := apd.NewFromString(digits + "E" + itoa(int(exp)))
	if err != nil {
		panic(err)
	}
	d.Negative = rapid.Bool().Draw(t, "neg") && !d.IsZero()
	return types.NewDecimal(d)
}

func itoa(i int) string {
	if i < 0 {
		return "-" + itoa(-i)
	}
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

func drawJSON(t *rapid.T, depth int) types.JSON {
	kinds := 4
	if depth < 2 {
		kinds = 6
	}
	switch rapid.IntRange(0, kinds-1).Draw(t, "kind") {
	case 0:
		return types.JSONNullValue
	case 1:
		return types.JSONBoolValue(rapid.Bool().Draw(t, "b"))
	case 2:
		return types.JSONNumberValue(&drawDecimalFinite(t).Decimal)
	case 3:
		return types.JSONStringValue(strings.ToValidUTF8(drawText(t), ""))
	case 4:
		n := rapid.IntRange(0, 3).Draw(t, "n")
		var elems []types.JSON
		for range n {
			elems = append(elems, drawJSON(t, depth+1))
		}
		return types.JSONArrayValue(elems...)
	}
	n := rapid.IntRange(0, 3).Draw(t, "n")
	var pairs []types.JSONPair
	for range n {
		pairs = append(pairs, types.JSONPair{Key: rapid.StringMatching(`[a-d]{0,3}`).Draw(t, "key"), Value: drawJSON(t, depth+1)})
	}
	return types.JSONObjectValue(pairs...)
}

func drawDecimalFinite(t *rapid.T) *types.DDecimal {
	digits := rapid.StringMatching(`[0-9]{1,20}`).Draw(t, "digits")
	exp := rapid.Int32Range(-10, 0).Draw(t, "exp")
	d, _, err := apd.NewFromString(digits + "E" + itoa(int(exp)))
	if err != nil {
		panic(err)
	}
	d.Negative = rapid.Bool().Draw(t, "neg") && !d.IsZero()
	return types.NewDecimal(d)
}
