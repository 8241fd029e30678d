package builtins

import (
	"strconv"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// More array functions: array_dims, array_ndims, array_fill and
// trim_array, over Cairn's one-dimensional arrays (lower bound 1, or 0 for
// the vector types), plus octet_length(character), which counts a char(n)
// value's padding as PostgreSQL's bpcharoctetlen does.

// maxArrayElems is PostgreSQL's MaxArraySize.
const maxArrayElems = 134217727

func init() {
	aa, i4, text := AnyArray, types.Int4, types.Text
	i4arr := types.MustArray(i4)
	fn := func(name string, args []*types.T, ret ReturnFunc, strict bool, f Fn) {
		registerFn(name, Overload{Args: args, Return: ret, Strict: strict, Fn: f})
	}
	fn("array_dims", []*types.T{aa}, Fixed(text), true, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		x := arr(a[0])
		if len(x.Elems) == 0 {
			return types.DNull, nil
		}
		lo := x.Lower()
		return types.DString("[" + strconv.Itoa(lo) + ":" + strconv.Itoa(lo+len(x.Elems)-1) + "]"), nil
	})
	fn("array_ndims", []*types.T{aa}, Fixed(i4), true, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		if len(arr(a[0]).Elems) == 0 {
			return types.DNull, nil
		}
		return types.DInt(1), nil
	})
	fill := func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		if types.IsNull(a[1]) || (len(a) > 2 && types.IsNull(a[2])) {
			return nil, pgerror.New(pgerrcode.NullValueNotAllowedDataException, "dimension array or low bound array cannot be null")
		}
		dims := arr(a[1]).Elems
		if len(a) > 2 && len(arr(a[2]).Elems) != len(dims) {
			return nil, pgerror.New(pgerrcode.ArraySubscriptError, "wrong number of array subscripts").
				WithDetail("Low bound array has different size than dimensions array.")
		}
		if len(dims) == 0 {
			return types.NewArray(datumType(a[0])), nil
		}
		if len(dims) > 1 {
			return nil, pgerror.New(pgerrcode.FeatureNotSupported, "multidimensional arrays are not supported")
		}
		if types.IsNull(dims[0]) || (len(a) > 2 && types.IsNull(arr(a[2]).Elems[0])) {
			return nil, pgerror.New(pgerrcode.NullValueNotAllowedDataException, "dimension values cannot be null")
		}
		n := i64(dims[0])
		if n < 0 || n > maxArrayElems {
			return nil, pgerror.New(pgerrcode.ProgramLimitExceeded, "array size exceeds the maximum allowed (%d)", maxArrayElems)
		}
		if len(a) > 2 && i64(arr(a[2]).Elems[0]) != 1 && n > 0 {
			return nil, pgerror.New(pgerrcode.FeatureNotSupported, "arrays with a lower bound other than 1 are not supported")
		}
		elems := make([]types.Datum, n)
		for i := range elems {
			elems[i] = a[0]
		}
		return types.NewArray(datumType(a[0]), elems...), nil
	}
	// The result is an array of the first argument's type
	// (array_fill(anyelement, int[]) -> anyarray).
	elemArray := arrayOfArg(0)
	fn("array_fill", []*types.T{AnyElement, i4arr}, elemArray, false, fill)
	fn("array_fill", []*types.T{AnyElement, i4arr, i4arr}, elemArray, false, fill)
	fn("trim_array", []*types.T{aa, i4}, SameAsArg(0), true, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		x, n := arr(a[0]), i64(a[1])
		if n < 0 || n > int64(len(x.Elems)) {
			return nil, pgerror.New(pgerrcode.ArraySubscriptError, "number of elements to trim must be between 0 and %d", len(x.Elems))
		}
		return &types.DArray{Elem: x.Elem, Elems: append([]types.Datum(nil), x.Elems[:int64(len(x.Elems))-n]...), ZeroBased: x.ZeroBased}, nil
	})
	// array_position(a, x, start) searches from subscript start on.
	fn("array_position", []*types.T{AnyCompatibleArray, AnyCompatible, i4}, Fixed(i4), false, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		if types.IsNull(a[0]) {
			return types.DNull, nil
		}
		if types.IsNull(a[2]) {
			return nil, pgerror.New(pgerrcode.NullValueNotAllowedDataException, "initial position must not be null")
		}
		x := arr(a[0])
		for i := max(int(i64(a[2]))-x.Lower(), 0); i < len(x.Elems); i++ {
			if notDistinct(x.Elems[i], a[1]) {
				return types.DInt(i + x.Lower()), nil
			}
		}
		return types.DNull, nil
	})
	fn("octet_length", []*types.T{types.BPChar}, Fixed(i4), true, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return types.DInt(len(str(a[0]))), nil
	})
}

// arrayOfArg is a ReturnFunc for the array of argument i's type; nil (the
// resolver's 0A000) when that type is itself an array, as Cairn has no
// multidimensional arrays.
func arrayOfArg(i int) ReturnFunc {
	return func(a []*types.T) *types.T {
		t, err := types.MakeArray(a[i])
		if err != nil {
			return nil
		}
		return t
	}
}
