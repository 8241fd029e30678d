package builtins

import (
	"math"
	"math/bits"

	"github.com/cockroachdb/apd/v3"

	"github.com/cairn-db/cairn/sql/types"
)

// Arithmetic operators on int2/int4/int8, float4/float8 and numeric, with
// Postgres's overflow (22003) and division-by-zero (22012) errors. Mixed
// integer widths have their own operators returning the wider type, as in
// pg_operator (int24pl, int48mul, ...), so `int2col + 1` stays integer.

var intTypes = []*types.T{types.Int2, types.Int4, types.Int8}

func intBounds(width int32) (int64, int64) {
	switch width {
	case 16:
		return math.MinInt16, math.MaxInt16
	case 32:
		return math.MinInt32, math.MaxInt32
	}
	return math.MinInt64, math.MaxInt64
}

func checkInt(v int64, width int32) (types.Datum, error) {
	lo, hi := intBounds(width)
	if v < lo || v > hi {
		return nil, errIntRange(width)
	}
	return types.DInt(v), nil
}

// intArith computes a op b in int64 and reports int64 overflow; narrower
// widths are checked by the caller.
func intArith(op byte, a, b int64) (int64, bool, error) {
	switch op {
	case '+':
		r := a + b
		return r, (a >= 0) == (b >= 0) && (r >= 0) != (a >= 0), nil
	case '-':
		r := a - b
		return r, (a >= 0) != (b >= 0) && (r >= 0) != (a >= 0), nil
	case '*':
		hi, lo := bits.Mul64(uint64(absU(a)), uint64(absU(b)))
		neg := (a < 0) != (b < 0)
		if hi != 0 || lo > math.MaxInt64 && !(neg && lo == 1<<63) {
			return 0, true, nil
		}
		if neg {
			return -int64(lo), false, nil
		}
		return int64(lo), false, nil
	case '/':
		if b == 0 {
			return 0, false, errDivByZero
		}
		if b == -1 {
			return -a, a == math.MinInt64, nil
		}
		return a / b, false, nil
	case '%':
		if b == 0 {
			return 0, false, errDivByZero
		}
		if b == -1 {
			return 0, false, nil
		}
		return a % b, false, nil
	}
	panic("builtins: unknown int operator " + string(op))
}

func absU(a int64) uint64 {
	if a < 0 {
		return uint64(-a) // MinInt64 wraps to 1<<63, which is its magnitude
	}
	return uint64(a)
}

func intOp(op byte, width int32) Fn {
	return func(_ EvalContext, args []types.Datum) (types.Datum, error) {
		r, overflow, err := intArith(op, int64(args[0].(types.DInt)), int64(args[1].(types.DInt)))
		if err != nil {
			return nil, err
		}
		if overflow {
			return nil, errIntRange(width)
		}
		return checkInt(r, width)
	}
}

// checkFloat applies Postgres's float overflow/underflow checks: an
// infinite result from finite inputs overflows, a zero result from nonzero
// inputs (where zero is impossible) underflows.
func checkFloat(r float64, width int32, inf bool, zeroOK bool) (types.Datum, error) {
	if width == 32 {
		r = float64(float32(r))
	}
	if math.IsInf(r, 0) && !inf {
		return nil, errFloatOverflow
	}
	if r == 0 && !zeroOK {
		return nil, errFloatUnderflow
	}
	return types.DFloat(r), nil
}

func floatOp(op byte, width int32) Fn {
	return func(_ EvalContext, args []types.Datum) (types.Datum, error) {
		a, b := float64(args[0].(types.DFloat)), float64(args[1].(types.DFloat))
		inf := math.IsInf(a, 0) || math.IsInf(b, 0)
		switch op {
		case '+':
			return checkFloat(a+b, width, inf, true)
		case '-':
			return checkFloat(a-b, width, inf, true)
		case '*':
			return checkFloat(a*b, width, inf, a == 0 || b == 0)
		case '/':
			if b == 0 {
				return nil, errDivByZero
			}
			return checkFloat(a/b, width, inf, a == 0 || math.IsInf(b, 0))
		}
		panic("builtins: unknown float operator")
	}
}

func numOp(f decOp) Fn {
	return func(_ EvalContext, args []types.Datum) (types.Datum, error) {
		var r apd.Decimal
		if err := f(&r, &args[0].(*types.DDecimal).Decimal, &args[1].(*types.DDecimal).Decimal); err != nil {
			return nil, err
		}
		if err := checkNumeric(&r); err != nil {
			return nil, err
		}
		return newDec(&r), nil
	}
}

// floatPow is Postgres's dpow, with its error cases.
func floatPow(_ EvalContext, args []types.Datum) (types.Datum, error) {
	a, b := float64(args[0].(types.DFloat)), float64(args[1].(types.DFloat))
	if a == 0 && b < 0 {
		return nil, errInvalidArg("zero raised to a negative power is undefined")
	}
	if a < 0 && math.Floor(b) != b && !math.IsInf(b, 0) {
		return nil, errInvalidArg("a negative number raised to a non-integer power yields a complex result")
	}
	r := crPow(a, b)
	return checkFloat(r, 64, math.IsInf(a, 0) || math.IsInf(b, 0), a == 0 || math.Abs(a) < 1 && b > 0 || math.Abs(a) > 1 && b < 0 || math.IsInf(b, 0))
}

func init() {
	for _, op := range []byte{'+', '-', '*', '/', '%'} {
		var ovs []Overload
		for _, l := range intTypes {
			for _, r := range intTypes {
				w := max(l.Width, r.Width)
				ret := l
				if r.Width > l.Width {
					ret = r
				}
				ovs = append(ovs, Overload{Args: []*types.T{l, r}, Return: Fixed(ret), Fn: intOp(op, w), Strict: true})
			}
		}
		if op != '%' {
			for _, l := range []*types.T{types.Float4, types.Float8} {
				for _, r := range []*types.T{types.Float4, types.Float8} {
					w := max(l.Width, r.Width)
					ret := types.Float8
					if w == 32 {
						ret = types.Float4
					}
					ovs = append(ovs, Overload{Args: []*types.T{l, r}, Return: Fixed(ret), Fn: floatOp(op, w), Strict: true})
				}
			}
		}
		f := map[byte]decOp{'+': numAdd, '-': numSub, '*': numMul, '/': numDiv, '%': numMod}[op]
		ovs = append(ovs, Overload{Args: []*types.T{types.Numeric, types.Numeric}, Return: Fixed(types.Numeric), Fn: numOp(f), Strict: true})
		registerBinary(string(op), ovs...)
	}
	registerBinary("^",
		Overload{Args: []*types.T{types.Float8, types.Float8}, Return: Fixed(types.Float8), Fn: floatPow, Strict: true},
		Overload{Args: []*types.T{types.Numeric, types.Numeric}, Return: Fixed(types.Numeric), Fn: numOp(numPow), Strict: true},
	)

	// Prefix operators: -x, +x and @x (absolute value).
	for _, t := range intTypes {
		w := t.Width
		registerUnary("-", Overload{Args: []*types.T{t}, Return: Fixed(t), Strict: true, Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			v := int64(a[0].(types.DInt))
			if v == math.MinInt64 {
				return nil, errIntRange(w)
			}
			return checkInt(-v, w)
		}})
		registerUnary("+", Overload{Args: []*types.T{t}, Return: Fixed(t), Strict: true, Fn: identity})
		registerUnary("@", Overload{Args: []*types.T{t}, Return: Fixed(t), Strict: true, Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			return intAbs(a[0], w)
		}})
	}
	for _, t := range []*types.T{types.Float4, types.Float8} {
		registerUnary("-", Overload{Args: []*types.T{t}, Return: Fixed(t), Strict: true, Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			return -a[0].(types.DFloat), nil
		}})
		registerUnary("+", Overload{Args: []*types.T{t}, Return: Fixed(t), Strict: true, Fn: identity})
		registerUnary("@", Overload{Args: []*types.T{t}, Return: Fixed(t), Strict: true, Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			return types.DFloat(math.Abs(float64(a[0].(types.DFloat)))), nil
		}})
	}
	registerUnary("-", Overload{Args: []*types.T{types.Numeric}, Return: Fixed(types.Numeric), Strict: true, Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		var r apd.Decimal
		r.Neg(&a[0].(*types.DDecimal).Decimal)
		return newDec(&r), nil
	}})
	registerUnary("+", Overload{Args: []*types.T{types.Numeric}, Return: Fixed(types.Numeric), Strict: true, Fn: identity})
	registerUnary("@", Overload{Args: []*types.T{types.Numeric}, Return: Fixed(types.Numeric), Strict: true, Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		var r apd.Decimal
		r.Abs(&a[0].(*types.DDecimal).Decimal)
		return newDec(&r), nil
	}})
	registerUnary("|/", Overload{Args: []*types.T{types.Float8}, Return: Fixed(types.Float8), Strict: true, Fn: floatSqrt})
	registerUnary("||/", Overload{Args: []*types.T{types.Float8}, Return: Fixed(types.Float8), Strict: true, Fn: floatFn(math.Cbrt)})

	// Bitwise operators on integers.
	for _, t := range intTypes {
		w := t.Width
		for _, op := range []string{"&", "|", "#"} {
			op := op
			registerBinary(op, Overload{Args: []*types.T{t, t}, Return: Fixed(t), Strict: true, Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
				x, y := a[0].(types.DInt), a[1].(types.DInt)
				switch op {
				case "&":
					return x & y, nil
				case "|":
					return x | y, nil
				}
				return x ^ y, nil
			}})
		}
		registerUnary("~", Overload{Args: []*types.T{t}, Return: Fixed(t), Strict: true, Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			return ^a[0].(types.DInt), nil
		}})
		for _, op := range []string{"<<", ">>"} {
			op := op
			registerBinary(op, Overload{Args: []*types.T{t, types.Int4}, Return: Fixed(t), Strict: true, Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
				x, n := int64(a[0].(types.DInt)), uint(int64(a[1].(types.DInt))%int64(w)+int64(w))%uint(w)
				var r int64
				if op == "<<" {
					r = x << n
				} else {
					r = x >> n
				}
				// Postgres shifts in the type's width, wrapping silently.
				switch w {
				case 16:
					r = int64(int16(r))
				case 32:
					r = int64(int32(r))
				}
				return types.DInt(r), nil
			}})
		}
	}
}

func identity(_ EvalContext, a []types.Datum) (types.Datum, error) { return a[0], nil }

func intAbs(d types.Datum, w int32) (types.Datum, error) {
	v := int64(d.(types.DInt))
	if v < 0 {
		if v == math.MinInt64 {
			return nil, errIntRange(w)
		}
		v = -v
	}
	return checkInt(v, w)
}

func floatSqrt(_ EvalContext, a []types.Datum) (types.Datum, error) {
	v := float64(a[0].(types.DFloat))
	if v < 0 {
		return nil, errInvalidArg("cannot take square root of a negative number")
	}
	return types.DFloat(math.Sqrt(v)), nil
}

func floatFn(f func(float64) float64) Fn {
	return func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return types.DFloat(f(float64(a[0].(types.DFloat)))), nil
	}
}
