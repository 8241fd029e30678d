package builtins

import (
	"math"

	"github.com/cockroachdb/apd/v3"

	"github.com/cairn-db/cairn/sql/types"
)

// Aggregate accumulates one group's values.
//
// The executor's contract (invariant 5):
//   - It calls Add once per input row, in the order an aggregate ORDER BY
//     asks for (it sorts first) and only for distinct argument tuples under
//     DISTINCT (it deduplicates first). FILTER is the executor's too.
//   - Add receives every row, NULLs included: accumulators of strict
//     aggregates skip NULL inputs themselves, exactly as Postgres does, and
//     array_agg/jsonb_agg keep them.
//   - Result may be called any number of times, between Adds (window
//     frames that only grow reuse one accumulator); it does not change the
//     state. With no rows added it returns the aggregate of an empty set
//     (NULL, or 0 for count).
//   - Add's args are not retained beyond the datums themselves, which are
//     immutable (sql/types invariant 5).
type Aggregate interface {
	Add(ctx EvalContext, args []types.Datum) error
	Result() (types.Datum, error)
}

// Merger is implemented by aggregates whose partial states combine, so
// tablets can pre-aggregate (partial aggregation) and the gateway merges.
// other must be an accumulator of the same overload.
type Merger interface {
	Merge(other Aggregate) error
}

func registerAgg(name string, args []*types.T, ret ReturnFunc, mk func(args []*types.T) Aggregate) {
	registerFn(name, Overload{Args: args, Return: ret, Class: AggregateClass, NewAggregate: mk, Volatility: Immutable})
}

func init() {
	registerAgg("count", nil, Fixed(types.Int8), func([]*types.T) Aggregate { return &countAgg{star: true} })
	registerAgg("count", []*types.T{Any}, Fixed(types.Int8), func([]*types.T) Aggregate { return &countAgg{} })

	for _, t := range []*types.T{types.Int2, types.Int4} {
		registerAgg("sum", []*types.T{t}, Fixed(types.Int8), func([]*types.T) Aggregate { return &intSumAgg{} })
		registerAgg("avg", []*types.T{t}, Fixed(types.Numeric), func([]*types.T) Aggregate { return &decSumAgg{avg: true} })
	}
	registerAgg("sum", []*types.T{types.Int8}, Fixed(types.Numeric), func([]*types.T) Aggregate { return &decSumAgg{} })
	registerAgg("avg", []*types.T{types.Int8}, Fixed(types.Numeric), func([]*types.T) Aggregate { return &decSumAgg{avg: true} })
	registerAgg("sum", []*types.T{types.Numeric}, Fixed(types.Numeric), func([]*types.T) Aggregate { return &decSumAgg{} })
	registerAgg("avg", []*types.T{types.Numeric}, Fixed(types.Numeric), func([]*types.T) Aggregate { return &decSumAgg{avg: true} })
	registerAgg("sum", []*types.T{types.Float4}, Fixed(types.Float4), func([]*types.T) Aggregate { return &floatAgg{kind: "sum", f4: true} })
	registerAgg("sum", []*types.T{types.Float8}, Fixed(types.Float8), func([]*types.T) Aggregate { return &floatAgg{kind: "sum"} })
	registerAgg("sum", []*types.T{types.Interval}, Fixed(types.Interval), func([]*types.T) Aggregate { return &intervalSumAgg{} })
	registerAgg("avg", []*types.T{types.Interval}, Fixed(types.Interval), func([]*types.T) Aggregate { return &intervalSumAgg{avg: true} })
	for _, t := range []*types.T{types.Float4, types.Float8} {
		registerAgg("avg", []*types.T{t}, Fixed(types.Float8), func([]*types.T) Aggregate { return &floatAgg{kind: "avg"} })
	}
	for _, name := range []string{"stddev", "stddev_samp", "stddev_pop", "variance", "var_samp", "var_pop"} {
		kind := map[string]string{"stddev": "stddev_samp", "variance": "var_samp"}[name]
		if kind == "" {
			kind = name
		}
		for _, t := range []*types.T{types.Float4, types.Float8} {
			registerAgg(name, []*types.T{t}, Fixed(types.Float8), func([]*types.T) Aggregate { return &floatAgg{kind: kind} })
		}
		for _, t := range append([]*types.T{types.Numeric}, intTypes...) {
			registerAgg(name, []*types.T{t}, Fixed(types.Numeric), func([]*types.T) Aggregate { return &decVarAgg{kind: kind} })
		}
	}
	minmax := []*types.T{types.Int2, types.Int4, types.Int8, types.Float4, types.Float8, types.Numeric,
		types.Text, types.BPChar, types.Bytea, types.Date, types.Time, types.Timestamp, types.TimestampTZ,
		types.Interval, types.UUID, types.Oid, types.Bool, types.JSONB}
	for _, t := range append(minmax, AnyArray, AnyEnum) {
		registerAgg("min", []*types.T{t}, SameAsArg(0), func([]*types.T) Aggregate { return &minMaxAgg{dir: -1} })
		registerAgg("max", []*types.T{t}, SameAsArg(0), func([]*types.T) Aggregate { return &minMaxAgg{dir: 1} })
	}
	for _, name := range []string{"bool_and", "every"} {
		registerAgg(name, []*types.T{types.Bool}, Fixed(types.Bool), func([]*types.T) Aggregate { return &boolAgg{and: true} })
	}
	registerAgg("bool_or", []*types.T{types.Bool}, Fixed(types.Bool), func([]*types.T) Aggregate { return &boolAgg{} })
	for _, t := range intTypes {
		registerAgg("bit_and", []*types.T{t}, SameAsArg(0), func([]*types.T) Aggregate { return &bitAgg{and: true} })
		registerAgg("bit_or", []*types.T{t}, SameAsArg(0), func([]*types.T) Aggregate { return &bitAgg{} })
	}
	registerAgg("string_agg", []*types.T{types.Text, types.Text}, Fixed(types.Text), func([]*types.T) Aggregate { return &stringAgg{} })
	registerAgg("string_agg", []*types.T{types.Bytea, types.Bytea}, Fixed(types.Bytea), func([]*types.T) Aggregate { return &stringAgg{bytes: true} })
	registerAgg("array_agg", []*types.T{AnyElement}, arrayOfArg(0),
		func(a []*types.T) Aggregate { return &arrayAgg{elem: a[0]} })
	registerAgg("jsonb_agg", []*types.T{AnyElement}, Fixed(types.JSONB), func(a []*types.T) Aggregate { return &jsonbAgg{typ: a[0]} })
	registerAgg("jsonb_object_agg", []*types.T{Any, Any}, Fixed(types.JSONB), func(a []*types.T) Aggregate { return &jsonbObjectAgg{kt: a[0], vt: a[1]} })
}

type countAgg struct {
	star bool
	n    int64
}

func (a *countAgg) Add(_ EvalContext, args []types.Datum) error {
	if a.star || !types.IsNull(args[0]) {
		a.n++
	}
	return nil
}
func (a *countAgg) Result() (types.Datum, error) { return types.DInt(a.n), nil }
func (a *countAgg) Merge(o Aggregate) error      { a.n += o.(*countAgg).n; return nil }

// intSumAgg is sum(int2/int4): an int8 that cannot overflow for fewer than
// 2^32 rows, checked anyway.
type intSumAgg struct {
	sum  int64
	seen bool
}

func (a *intSumAgg) Add(_ EvalContext, args []types.Datum) error {
	if types.IsNull(args[0]) {
		return nil
	}
	r, of, _ := intArith('+', a.sum, int64(args[0].(types.DInt)))
	if of {
		return errIntRange(64)
	}
	a.sum, a.seen = r, true
	return nil
}
func (a *intSumAgg) Result() (types.Datum, error) {
	if !a.seen {
		return types.DNull, nil
	}
	return types.DInt(a.sum), nil
}
func (a *intSumAgg) Merge(o Aggregate) error {
	b := o.(*intSumAgg)
	if b.seen {
		return a.Add(nil, []types.Datum{types.DInt(b.sum)})
	}
	return nil
}

// decSumAgg is sum/avg over int8 and numeric (ints summed exactly as
// numeric, as Postgres does). Ints are summed in an int64 while the sum
// fits (PostgreSQL's int8 sum keeps an int128 for the same reason): an
// apd addition per row allocated, and was most of a sum's cost. The
// first overflow or non-int input moves the sum to sum, exactly.
type decSumAgg struct {
	avg  bool
	isum int64       // the sum so far, while !dec
	dec  bool        // the sum is in sum, not isum
	sum  apd.Decimal // the sum so far, once dec
	n    int64
}

func toDecimal(d types.Datum) *apd.Decimal {
	switch v := d.(type) {
	case types.DInt:
		return apd.New(int64(v), 0)
	case *types.DDecimal:
		return &v.Decimal
	case types.DFloat:
		var r apd.Decimal
		_, _ = r.SetFloat64(float64(v))
		return &r
	}
	panic("builtins: not a number: " + d.Family().String())
}

// toDec moves the int64 sum into sum.
func (a *decSumAgg) toDec() {
	if !a.dec {
		a.sum.SetInt64(a.isum)
		a.dec = true
	}
}

func (a *decSumAgg) Add(_ EvalContext, args []types.Datum) error {
	if types.IsNull(args[0]) {
		return nil
	}
	if v, ok := args[0].(types.DInt); ok && !a.dec {
		if s, ok := addInt64(a.isum, int64(v)); ok {
			a.isum = s
			a.n++
			return nil
		}
	}
	if a.n == 0 {
		a.sum.Set(toDecimal(args[0]))
		a.dec = true
	} else {
		a.toDec()
		if err := numAdd(&a.sum, &a.sum, toDecimal(args[0])); err != nil {
			return err
		}
	}
	a.n++
	return checkNumeric(&a.sum)
}

// addInt64 is a+b, and false if it overflows.
func addInt64(a, b int64) (int64, bool) {
	s := a + b
	return s, (s > a) == (b > 0)
}

func (a *decSumAgg) Result() (types.Datum, error) {
	if a.n == 0 {
		return types.DNull, nil
	}
	sum := &a.sum
	if !a.dec {
		sum = apd.New(a.isum, 0)
	}
	if !a.avg {
		return newDec(sum), nil
	}
	var r apd.Decimal
	if err := numDiv(&r, sum, apd.New(a.n, 0)); err != nil {
		return nil, err
	}
	return newDec(&r), nil
}

func (a *decSumAgg) Merge(o Aggregate) error {
	b := o.(*decSumAgg)
	if b.n == 0 {
		return nil
	}
	if !a.dec && !b.dec {
		if s, ok := addInt64(a.isum, b.isum); ok {
			a.isum = s
			a.n += b.n
			return nil
		}
	}
	bsum := &b.sum
	if !b.dec {
		bsum = apd.New(b.isum, 0)
	}
	if a.n == 0 {
		a.sum.Set(bsum)
		a.dec = true
	} else {
		a.toDec()
		if err := numAdd(&a.sum, &a.sum, bsum); err != nil {
			return err
		}
	}
	a.n += b.n
	return nil
}

// floatAgg keeps Postgres's float8_accum state (N, Sx, Sxx) with the
// Youngs-Cramer update, so variances match Postgres to the last bit.
type floatAgg struct {
	kind       string // sum, avg, var_pop, var_samp, stddev_pop, stddev_samp
	f4         bool
	n, sx, sxx float64
}

func (a *floatAgg) Add(_ EvalContext, args []types.Datum) error {
	if types.IsNull(args[0]) {
		return nil
	}
	x := float64(args[0].(types.DFloat))
	a.n++
	a.sx += x
	if a.n > 1 {
		tmp := x*a.n - a.sx
		a.sxx += tmp * tmp / (a.n * (a.n - 1))
		if math.IsInf(a.sxx, 0) && !math.IsInf(x, 0) && !math.IsInf(a.sx, 0) {
			return errFloatOverflow
		}
	} else if math.IsInf(x, 0) || math.IsNaN(x) {
		a.sxx = math.NaN()
	}
	return nil
}

func (a *floatAgg) Result() (types.Datum, error) {
	if a.n == 0 {
		return types.DNull, nil
	}
	var r float64
	switch a.kind {
	case "sum":
		r = a.sx
		if a.f4 {
			r = float64(float32(r))
		}
	case "avg":
		r = a.sx / a.n
	case "var_pop":
		r = a.sxx / a.n
	case "stddev_pop":
		r = math.Sqrt(a.sxx / a.n)
	case "var_samp", "stddev_samp":
		if a.n == 1 {
			return types.DNull, nil
		}
		r = a.sxx / (a.n - 1)
		if a.kind == "stddev_samp" {
			r = math.Sqrt(r)
		}
	}
	return types.DFloat(r), nil
}

// decVarAgg is variance/stddev over ints and numerics, computed exactly
// from N, Σx and Σx² with Postgres's numeric_stddev_internal scales.
type decVarAgg struct {
	kind        string
	n           int64
	sumX, sumX2 apd.Decimal
}

func (a *decVarAgg) Add(_ EvalContext, args []types.Datum) error {
	if types.IsNull(args[0]) {
		return nil
	}
	x := toDecimal(args[0])
	var x2 apd.Decimal
	if err := numMul(&x2, x, x); err != nil {
		return err
	}
	if err := numAdd(&a.sumX, &a.sumX, x); err != nil {
		return err
	}
	a.n++
	return numAdd(&a.sumX2, &a.sumX2, &x2)
}

func (a *decVarAgg) Result() (types.Datum, error) {
	sample := a.kind == "var_samp" || a.kind == "stddev_samp"
	if a.n == 0 || sample && a.n == 1 {
		return types.DNull, nil
	}
	if isNaN(&a.sumX) || isNaN(&a.sumX2) {
		return newDec(decNaN), nil
	}
	n := apd.New(a.n, 0)
	var sq, nx2, num apd.Decimal
	_, _ = exactCtx.Mul(&sq, &a.sumX, &a.sumX)
	_, _ = exactCtx.Mul(&nx2, n, &a.sumX2)
	_, _ = exactCtx.Sub(&num, &nx2, &sq)
	if num.Sign() <= 0 {
		return decFromInt(0), nil
	}
	den := apd.New(a.n*(a.n-1), 0)
	if !sample {
		den = apd.New(a.n*a.n, 0)
	}
	scale := divScale(&num, den)
	var r apd.Decimal
	quoRound(&r, &num, den, scale)
	if a.kind == "stddev_pop" || a.kind == "stddev_samp" {
		ctx := apd.BaseContext.WithPrecision(uint32(r.NumDigits()) + uint32(scale) + 10)
		_, _ = ctx.Sqrt(&r, &r)
		roundTo(&r, scale)
	}
	return newDec(&r), nil
}

type intervalSumAgg struct {
	avg bool
	sum types.DInterval
	n   int64
}

func (a *intervalSumAgg) Add(_ EvalContext, args []types.Datum) error {
	if types.IsNull(args[0]) {
		return nil
	}
	s, err := intervalAdd(a.sum, args[0].(types.DInterval))
	if err != nil {
		return err
	}
	a.sum = s
	a.n++
	return nil
}

func (a *intervalSumAgg) Result() (types.Datum, error) {
	if a.n == 0 {
		return types.DNull, nil
	}
	if !a.avg {
		return a.sum, nil
	}
	return intervalDiv(a.sum, float64(a.n))
}

type minMaxAgg struct {
	dir int
	v   types.Datum
}

func (a *minMaxAgg) Add(_ EvalContext, args []types.Datum) error {
	x := args[0]
	if types.IsNull(x) {
		return nil
	}
	if a.v == nil || types.Compare(x, a.v)*a.dir > 0 {
		a.v = x
	}
	return nil
}
func (a *minMaxAgg) Result() (types.Datum, error) {
	if a.v == nil {
		return types.DNull, nil
	}
	return a.v, nil
}
func (a *minMaxAgg) Merge(o Aggregate) error {
	if b := o.(*minMaxAgg); b.v != nil {
		return a.Add(nil, []types.Datum{b.v})
	}
	return nil
}

type boolAgg struct {
	and, seen, v bool
}

func (a *boolAgg) Add(_ EvalContext, args []types.Datum) error {
	if types.IsNull(args[0]) {
		return nil
	}
	b := bool(args[0].(types.DBool))
	if !a.seen {
		a.v, a.seen = b, true
	} else if a.and {
		a.v = a.v && b
	} else {
		a.v = a.v || b
	}
	return nil
}
func (a *boolAgg) Result() (types.Datum, error) {
	if !a.seen {
		return types.DNull, nil
	}
	return types.DBool(a.v), nil
}
func (a *boolAgg) Merge(o Aggregate) error {
	if b := o.(*boolAgg); b.seen {
		return a.Add(nil, []types.Datum{types.DBool(b.v)})
	}
	return nil
}

type bitAgg struct {
	and, seen bool
	v         types.DInt
}

func (a *bitAgg) Add(_ EvalContext, args []types.Datum) error {
	if types.IsNull(args[0]) {
		return nil
	}
	x := args[0].(types.DInt)
	switch {
	case !a.seen:
		a.v, a.seen = x, true
	case a.and:
		a.v &= x
	default:
		a.v |= x
	}
	return nil
}
func (a *bitAgg) Result() (types.Datum, error) {
	if !a.seen {
		return types.DNull, nil
	}
	return a.v, nil
}
func (a *bitAgg) Merge(o Aggregate) error {
	if b := o.(*bitAgg); b.seen {
		return a.Add(nil, []types.Datum{b.v})
	}
	return nil
}

// stringAgg puts the delimiter before every value but the first; a NULL
// value is skipped, a NULL delimiter counts as empty.
type stringAgg struct {
	bytes bool
	buf   []byte
	seen  bool
}

func (a *stringAgg) Add(_ EvalContext, args []types.Datum) error {
	if types.IsNull(args[0]) {
		return nil
	}
	if a.seen && !types.IsNull(args[1]) {
		a.buf = append(a.buf, rawString(args[1])...)
	}
	a.buf = append(a.buf, rawString(args[0])...)
	a.seen = true
	return nil
}
func (a *stringAgg) Result() (types.Datum, error) {
	if !a.seen {
		return types.DNull, nil
	}
	if a.bytes {
		return types.DBytes(a.buf), nil
	}
	return types.DString(a.buf), nil
}

func rawString(d types.Datum) string {
	switch v := d.(type) {
	case types.DString:
		return string(v)
	case types.DBytes:
		return string(v)
	}
	return d.String()
}

type arrayAgg struct {
	elem  *types.T
	elems []types.Datum
}

func (a *arrayAgg) Add(_ EvalContext, args []types.Datum) error {
	a.elems = append(a.elems, args[0])
	return nil
}
func (a *arrayAgg) Result() (types.Datum, error) {
	if len(a.elems) == 0 {
		return types.DNull, nil
	}
	// Clip so a later Add cannot write into a returned array's backing store.
	return types.NewArray(a.elem, a.elems[:len(a.elems):len(a.elems)]...), nil
}
func (a *arrayAgg) Merge(o Aggregate) error {
	a.elems = append(a.elems, o.(*arrayAgg).elems...)
	return nil
}

type jsonbAgg struct {
	typ   *types.T
	elems []types.JSON
}

func (a *jsonbAgg) Add(ctx EvalContext, args []types.Datum) error {
	j, err := toJSON(ctx, args[0], a.typ)
	if err != nil {
		return err
	}
	a.elems = append(a.elems, j)
	return nil
}
func (a *jsonbAgg) Result() (types.Datum, error) {
	if len(a.elems) == 0 {
		return types.DNull, nil
	}
	return types.NewJSON(types.JSONArrayValue(a.elems[:len(a.elems):len(a.elems)]...)), nil
}

type jsonbObjectAgg struct {
	kt, vt *types.T
	pairs  []types.JSONPair
}

func (a *jsonbObjectAgg) Add(ctx EvalContext, args []types.Datum) error {
	if types.IsNull(args[0]) {
		return errInvalidParam("field name must not be null")
	}
	k, err := jsonKeyText(ctx, args[0], a.kt)
	if err != nil {
		return err
	}
	v, err := toJSON(ctx, args[1], a.vt)
	if err != nil {
		return err
	}
	a.pairs = append(a.pairs, types.JSONPair{Key: k, Value: v})
	return nil
}
func (a *jsonbObjectAgg) Result() (types.Datum, error) {
	if len(a.pairs) == 0 {
		return types.DNull, nil
	}
	return types.NewJSON(types.JSONObjectValue(a.pairs...)), nil
}
