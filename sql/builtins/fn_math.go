package builtins

import (
	"math"
	"math/big"

	"github.com/cockroachdb/apd/v3"

	"github.com/cairn-db/cairn/sql/types"
)

// Math functions. Float versions follow C's libm as Postgres's do; numeric
// versions are exact where Postgres's are (abs, ceil, floor, round, trunc,
// mod, div, gcd, lcm, factorial).

func numFn(name string, args []*types.T, f func(a []*apd.Decimal) (*apd.Decimal, error)) {
	registerFn(name, Overload{Args: args, Return: Fixed(types.Numeric), Strict: true,
		Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			ds := make([]*apd.Decimal, len(a))
			for i, d := range a {
				ds[i] = toDecimal(d)
			}
			r, err := f(ds)
			if err != nil {
				return nil, err
			}
			return newDec(r), checkNumeric(r)
		}})
}

func fl(name string, f func(x float64) (float64, error)) {
	registerFn(name, Overload{Args: []*types.T{types.Float8}, Return: Fixed(types.Float8), Strict: true,
		Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			r, err := f(float64(a[0].(types.DFloat)))
			if err != nil {
				return nil, err
			}
			return types.DFloat(r), nil
		}})
}

func pure(f func(float64) float64) func(float64) (float64, error) {
	return func(x float64) (float64, error) { return f(x), nil }
}

// quantize rounds x to scale digits after the point (before it when
// negative) with the given rounding, keeping trailing zeros as Postgres's
// display scale does.
func quantize(x *apd.Decimal, scale int64, rounding apd.Rounder) *apd.Decimal {
	r := new(apd.Decimal)
	if x.Form != apd.Finite {
		return r.Set(x)
	}
	scale = min(max(scale, -maxDisplay), maxDisplay)
	c := *exactCtx
	c.Rounding = rounding
	_, _ = c.Quantize(r, x, int32(-scale))
	if scale < 0 {
		_, _ = c.Quantize(r, r, 0)
	}
	return r
}

func init() {
	n, f8, i4 := types.Numeric, types.Float8, types.Int4
	for _, t := range intTypes {
		w := t.Width
		registerFn("abs", Overload{Args: []*types.T{t}, Return: Fixed(t), Strict: true, Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			return intAbs(a[0], w)
		}})
	}
	fl("abs", pure(math.Abs))
	// abs(real) keeps its argument's type, as PostgreSQL's float4abs does.
	registerFn("abs", Overload{Args: []*types.T{types.Float4}, Return: Fixed(types.Float4), Strict: true,
		Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			return types.DFloat(math.Abs(float64(a[0].(types.DFloat)))), nil
		}})
	numFn("abs", []*types.T{n}, func(a []*apd.Decimal) (*apd.Decimal, error) { return new(apd.Decimal).Abs(a[0]), nil })
	for _, name := range []string{"ceil", "ceiling"} {
		fl(name, pure(math.Ceil))
		numFn(name, []*types.T{n}, func(a []*apd.Decimal) (*apd.Decimal, error) { return quantize(a[0], 0, apd.RoundCeiling), nil })
	}
	fl("floor", pure(math.Floor))
	numFn("floor", []*types.T{n}, func(a []*apd.Decimal) (*apd.Decimal, error) { return quantize(a[0], 0, apd.RoundFloor), nil })
	fl("round", pure(math.RoundToEven)) // rint(): half to even for float8
	numFn("round", []*types.T{n}, func(a []*apd.Decimal) (*apd.Decimal, error) { return quantize(a[0], 0, apd.RoundHalfUp), nil })
	numFn("round", []*types.T{n, i4}, func(a []*apd.Decimal) (*apd.Decimal, error) {
		s, _ := a[1].Int64()
		return quantize(a[0], s, apd.RoundHalfUp), nil
	})
	fl("trunc", pure(math.Trunc))
	numFn("trunc", []*types.T{n}, func(a []*apd.Decimal) (*apd.Decimal, error) { return quantize(a[0], 0, apd.RoundDown), nil })
	numFn("trunc", []*types.T{n, i4}, func(a []*apd.Decimal) (*apd.Decimal, error) {
		s, _ := a[1].Int64()
		return quantize(a[0], s, apd.RoundDown), nil
	})
	for _, t := range intTypes {
		registerFn("mod", Overload{Args: []*types.T{t, t}, Return: Fixed(t), Strict: true, Fn: intOp('%', t.Width)})
	}
	numFn("mod", []*types.T{n, n}, func(a []*apd.Decimal) (*apd.Decimal, error) {
		r := new(apd.Decimal)
		return r, numMod(r, a[0], a[1])
	})
	numFn("div", []*types.T{n, n}, func(a []*apd.Decimal) (*apd.Decimal, error) {
		r := new(apd.Decimal)
		return r, numDivTrunc(r, a[0], a[1])
	})
	for _, name := range []string{"power", "pow"} {
		registerFn(name, Overload{Args: []*types.T{f8, f8}, Return: Fixed(f8), Strict: true, Fn: floatPow})
		numFn(name, []*types.T{n, n}, func(a []*apd.Decimal) (*apd.Decimal, error) {
			r := new(apd.Decimal)
			return r, numPow(r, a[0], a[1])
		})
	}
	fl("sqrt", func(x float64) (float64, error) {
		if x < 0 {
			return 0, errInvalidArg("cannot take square root of a negative number")
		}
		return math.Sqrt(x), nil
	})
	numFn("sqrt", []*types.T{n}, numSqrt)
	fl("exp", func(x float64) (float64, error) {
		r := crExp(x)
		if math.IsInf(r, 0) && !math.IsInf(x, 0) {
			return 0, errFloatOverflow
		}
		return r, nil
	})
	logf := func(f func(float64) float64) func(float64) (float64, error) {
		return func(x float64) (float64, error) {
			switch {
			case x == 0:
				return 0, errLog("cannot take logarithm of zero")
			case x < 0:
				return 0, errLog("cannot take logarithm of a negative number")
			}
			return f(x), nil
		}
	}
	fl("ln", logf(crLog))
	fl("log", logf(crLog10))
	fl("log10", logf(crLog10))
	fl("sign", func(x float64) (float64, error) {
		switch {
		case x > 0:
			return 1, nil
		case x < 0:
			return -1, nil
		}
		return 0, nil
	})
	numFn("sign", []*types.T{n}, func(a []*apd.Decimal) (*apd.Decimal, error) {
		if isNaN(a[0]) {
			return new(apd.Decimal).Set(decNaN), nil
		}
		return apd.New(int64(a[0].Sign()), 0), nil
	})
	registerFn("pi", Overload{Return: Fixed(f8), Fn: func(EvalContext, []types.Datum) (types.Datum, error) { return types.DFloat(math.Pi), nil }})
	fl("degrees", pure(func(x float64) float64 { return x * (180 / math.Pi) }))
	fl("radians", pure(func(x float64) float64 { return x * (math.Pi / 180) }))
	for name, f := range map[string]func(float64) float64{"sin": crSin, "cos": crCos, "tan": crTan, "atan": crAtan} {
		fl(name, pure(f))
	}
	for name, f := range map[string]func(float64) float64{"asin": crAsin, "acos": crAcos} {
		fl(name, func(x float64) (float64, error) {
			if x < -1 || x > 1 {
				return 0, errInvalidParam("input is out of range")
			}
			return f(x), nil
		})
	}
	registerFn("atan2", Overload{Args: []*types.T{f8, f8}, Return: Fixed(f8), Strict: true, Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return types.DFloat(crAtan2(float64(a[0].(types.DFloat)), float64(a[1].(types.DFloat)))), nil
	}})
	registerFn("random", Overload{Return: Fixed(f8), Volatility: Volatile, Fn: func(ctx EvalContext, _ []types.Datum) (types.Datum, error) {
		return types.DFloat(ctx.Rand().Float64()), nil
	}})
	registerFn("setseed", Overload{Args: []*types.T{f8}, Return: Fixed(types.Unknown), Volatility: Volatile, Strict: true,
		Fn: func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
			s := float64(a[0].(types.DFloat))
			if s < -1 || s > 1 || math.IsNaN(s) {
				return nil, errInvalidParam("setseed parameter %g is out of allowed range [-1,1]", s)
			}
			ctx.SetSeed(math.Float64bits(s))
			return types.DNull, nil
		}})
	registerFn("width_bucket", Overload{Args: []*types.T{f8, f8, f8, i4}, Return: Fixed(i4), Strict: true,
		Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			x, lo, hi, cnt := float64(a[0].(types.DFloat)), float64(a[1].(types.DFloat)), float64(a[2].(types.DFloat)), i64(a[3])
			if cnt <= 0 {
				return nil, pgerrorWidthBucket("count must be greater than zero")
			}
			if lo == hi {
				return nil, pgerrorWidthBucket("lower bound cannot equal upper bound")
			}
			var r int64
			switch {
			case lo < hi && x < lo, lo > hi && x > lo:
				r = 0
			case lo < hi && x >= hi, lo > hi && x <= hi:
				r = cnt + 1
			case lo < hi:
				r = int64(float64(cnt)*(x-lo)/(hi-lo)) + 1
			default:
				r = int64(float64(cnt)*(lo-x)/(lo-hi)) + 1
			}
			return checkInt(r, 32)
		}})
	for _, t := range []*types.T{types.Int4, types.Int8} {
		w := t.Width
		registerFn("gcd", Overload{Args: []*types.T{t, t}, Return: Fixed(t), Strict: true, Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			g, err := gcd(i64(a[0]), i64(a[1]), w)
			if err != nil {
				return nil, err
			}
			return types.DInt(g), nil
		}})
		registerFn("lcm", Overload{Args: []*types.T{t, t}, Return: Fixed(t), Strict: true, Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			x, y := i64(a[0]), i64(a[1])
			if x == 0 || y == 0 {
				return types.DInt(0), nil
			}
			g, err := gcd(x, y, w)
			if err != nil {
				return nil, err
			}
			r, of, _ := intArith('*', x/g, y)
			if of {
				return nil, errIntRange(w)
			}
			return intAbs(types.DInt(r), w)
		}})
	}
	registerFn("factorial", Overload{Args: []*types.T{types.Int8}, Return: Fixed(n), Strict: true, Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		v := i64(a[0])
		if v < 0 {
			return nil, errInvalidParam("factorial of a negative number is undefined")
		}
		if v > 32177 {
			return nil, errNumericFormat
		}
		r := apd.New(1, 0)
		for i := int64(2); i <= v; i++ {
			_, _ = exactCtx.Mul(r, r, apd.New(i, 0))
		}
		return newDec(r), nil
	}})
}

func gcd(a, b int64, w int32) (int64, error) {
	for b != 0 {
		a, b = b, a%b
	}
	if a == math.MinInt64 || w == 32 && a == math.MinInt32 {
		return 0, errIntRange(w)
	}
	if a < 0 {
		a = -a
	}
	return a, nil
}

// numSqrt is sqrt(numeric), correctly rounded at Postgres's result scale:
// about 16 significant digits, at least the input's scale.
func numSqrt(a []*apd.Decimal) (*apd.Decimal, error) {
	x := a[0]
	if isNaN(x) {
		return new(apd.Decimal).Set(decNaN), nil
	}
	if x.Sign() < 0 {
		return nil, errInvalidArg("cannot take square root of a negative number")
	}
	if x.Form == apd.Infinite {
		return new(apd.Decimal).Set(x), nil
	}
	var weight int64
	if !x.IsZero() {
		weight, _ = nbaseWeight(x)
	}
	sweight := (weight+1)*4/2 - 1
	rscale := min(max(int64(minSigDigits)-sweight, int64(dscale(x)), 0), maxDisplay)
	// sqrt(c * 10^e) * 10^rscale = sqrt(c * 10^(e + 2*rscale)); the
	// exponent is non-negative because rscale >= dscale(x).
	n := new(big.Int).Set(x.Coeff.MathBigInt())
	n.Mul(n, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(x.Exponent)+2*rscale), nil))
	r := new(big.Int).Sqrt(n)
	// Round half up: sqrt(n) >= r + 1/2 iff n > r^2 + r.
	if new(big.Int).Sub(n, new(big.Int).Mul(r, r)).Cmp(r) > 0 {
		r.Add(r, big.NewInt(1))
	}
	res := new(apd.Decimal)
	res.Coeff.SetMathBigInt(r)
	res.Exponent = -int32(rscale)
	return res, nil
}

// estimateLnDweight is Postgres's estimate_ln_dweight: the decimal weight
// of ln(x), which fixes the result scale of ln, log and log10.
func estimateLnDweight(x *apd.Decimal) int64 {
	if x.Sign() <= 0 || x.Form != apd.Finite {
		return 0
	}
	if x.Cmp(apd.New(9, -1)) >= 0 && x.Cmp(apd.New(11, -1)) <= 0 {
		var d apd.Decimal
		_, _ = exactCtx.Sub(&d, x, apd.New(1, 0))
		if d.IsZero() {
			return 0
		}
		return d.NumDigits() + int64(d.Exponent) - 1
	}
	f, _ := x.Float64()
	lnv := math.Log(f)
	if math.IsInf(f, 1) || f == 0 {
		// Beyond float range: ln from the exponent alone.
		lnv = float64(x.NumDigits()+int64(x.Exponent)-1) * math.Ln10
	}
	return int64(math.Log10(math.Abs(lnv)))
}

// lnDecimal computes ln(x) rounded to scale digits after the point.
func lnDecimal(x *apd.Decimal, scale int64) (*apd.Decimal, error) {
	switch {
	case x.IsZero():
		return nil, errLog("cannot take logarithm of zero")
	case x.Sign() < 0:
		return nil, errLog("cannot take logarithm of a negative number")
	}
	c := apd.BaseContext.WithPrecision(uint32(scale) + 40)
	c.Rounding = apd.RoundHalfUp
	r := new(apd.Decimal)
	if _, err := c.Ln(r, x); err != nil {
		return nil, errNumericFormat
	}
	roundTo(r, int32(scale))
	return r, nil
}

func numLog(base, x *apd.Decimal) (*apd.Decimal, error) {
	for _, v := range []*apd.Decimal{base, x} {
		if v.IsZero() {
			return nil, errLog("cannot take logarithm of zero")
		}
		if v.Sign() < 0 {
			return nil, errLog("cannot take logarithm of a negative number")
		}
	}
	if isNaN(base) || isNaN(x) {
		return new(apd.Decimal).Set(decNaN), nil
	}
	dw := estimateLnDweight(x) - estimateLnDweight(base)
	rscale := min(max(int64(minSigDigits)-dw, int64(dscale(base)), int64(dscale(x)), 0), maxDisplay)
	c := apd.BaseContext.WithPrecision(uint32(rscale) + 40)
	c.Rounding = apd.RoundHalfUp
	var lb, lx apd.Decimal
	_, _ = c.Ln(&lb, base)
	_, _ = c.Ln(&lx, x)
	if lb.IsZero() {
		return nil, errDivByZero
	}
	r := new(apd.Decimal)
	_, _ = c.Quo(r, &lx, &lb)
	roundTo(r, int32(rscale))
	return r, nil
}

func init() {
	n := types.Numeric
	numFn("ln", []*types.T{n}, func(a []*apd.Decimal) (*apd.Decimal, error) {
		if isNaN(a[0]) {
			return new(apd.Decimal).Set(decNaN), nil
		}
		rscale := min(max(int64(minSigDigits)-estimateLnDweight(a[0]), int64(dscale(a[0])), 0), maxDisplay)
		return lnDecimal(a[0], rscale)
	})
	for _, name := range []string{"log", "log10"} {
		numFn(name, []*types.T{n}, func(a []*apd.Decimal) (*apd.Decimal, error) { return numLog(apd.New(10, 0), a[0]) })
	}
	numFn("log", []*types.T{n, n}, func(a []*apd.Decimal) (*apd.Decimal, error) { return numLog(a[0], a[1]) })
	numFn("exp", []*types.T{n}, func(a []*apd.Decimal) (*apd.Decimal, error) {
		x := a[0]
		if isNaN(x) {
			return new(apd.Decimal).Set(decNaN), nil
		}
		f, _ := x.Float64()
		w := min(max(f*0.434294481903252, -maxResultScale), maxResultScale)
		rscale := min(max(int64(minSigDigits)-int64(w), int64(dscale(x)), 0), maxDisplay)
		if w > 131072 {
			return nil, errNumericFormat
		}
		c := apd.BaseContext.WithPrecision(uint32(max(w, 0)) + uint32(rscale) + 40)
		c.Rounding = apd.RoundHalfUp
		c.MaxExponent, c.MinExponent = 147455, -147455
		r := new(apd.Decimal)
		if _, err := c.Exp(r, x); err != nil {
			return nil, errNumericFormat
		}
		roundTo(r, int32(rscale))
		return r, nil
	})
}
