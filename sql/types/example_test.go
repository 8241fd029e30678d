package types_test

import (
	"fmt"
	"time"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// Casting follows Postgres: float to int rounds half to even, numeric(p,s)
// rounds and checks its precision, timestamptz prints in the session zone.
func ExampleCast() {
	i, _ := types.Cast(nil, types.DFloat(2.5), types.Float8, types.Int4)
	fmt.Println(i)

	n52, _ := types.MakeNumeric(5, 2)
	d, _ := types.ParseDatum(nil, types.Numeric, "123.456")
	r, _ := types.Cast(nil, d, types.Numeric, n52)
	fmt.Println(r)
	_, err := types.Cast(nil, types.DInt(1000), types.Int4, n52)
	fmt.Println(pgerror.Code(err), err)

	tokyo, _ := time.LoadLocation("Asia/Tokyo")
	ctx := &types.Context{Location: tokyo}
	ts, _ := types.ParseDatum(ctx, types.TimestampTZ, "2024-01-02 03:04:05.5+00")
	fmt.Println(types.Format(ctx, types.TimestampTZ, ts))
	// Output:
	// 2
	// 123.46
	// 22003 numeric field overflow
	// 2024-01-02 12:04:05.5+09
}

func ExampleJSON_Contains() {
	doc, _ := types.ParseJSON(`{"tags": ["a", "b"], "n": 1.50}`)
	want, _ := types.ParseJSON(`{"tags": ["b"]}`)
	fmt.Println(doc, doc.Contains(want))
	// Output: {"n": 1.50, "tags": ["a", "b"]} true
}
