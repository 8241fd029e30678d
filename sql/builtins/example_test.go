package builtins_test

import (
	"fmt"

	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/types"
)

// The binder resolves a call once; the executor evaluates it per row with
// arguments cast to ArgTypes.
func ExampleResolveFunc() {
	r, err := builtins.ResolveFunc("lpad", []*types.T{types.VarChar, types.Int4, types.Unknown})
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Overload.Signature(), "->", r.Return)
	d, err := r.Eval(&builtins.FixedContext{}, []types.Datum{types.DString("7"), types.DInt(3), types.DString("0")})
	fmt.Println(d, err)

	_, err = builtins.ResolveFunc("lpad", []*types.T{types.Int4})
	fmt.Println(err)
	// Output:
	// lpad(text, integer, text) -> text
	// 007 <nil>
	// function lpad(integer) does not exist
}

// An aggregate is an accumulator fed row by row.
func ExampleAggregate() {
	r, _ := builtins.ResolveFunc("avg", []*types.T{types.Int4})
	acc := r.Overload.NewAggregate(r.ArgTypes)
	for _, v := range []types.Datum{types.DInt(1), types.DNull, types.DInt(2)} {
		_ = acc.Add(nil, []types.Datum{v})
	}
	res, _ := acc.Result()
	fmt.Println(res)
	// Output: 1.5000000000000000
}

// ShardBucket is the bucket of a hash-sharded index a key lands in: the
// same as the shard column's expression mod(fnv32(datums_to_bytes(k)), 8).
func ExampleShardBucket() {
	b, err := builtins.ShardBucket(8, types.DInt(42))
	fmt.Println(b, err)
	// Output: 3 <nil>
}
