package builtins

import (
	"math"

	"github.com/cockroachdb/apd/v3"

	"github.com/cairn-db/cairn/sql/types"
)

// cbrtGlibc is glibc's cbrt (sysdeps/ieee754/dbl-64/s_cbrt.c), which
// Postgres's cbrt(float8) calls: a polynomial first guess refined by one
// Halley step. It is not correctly rounded (cbrt(27) is
// 3.0000000000000004 there), and clients see the last digit, so Cairn
// computes exactly what Postgres on Linux prints rather than Go's
// math.Cbrt. The float64() conversions keep Go from fusing multiply-adds,
// which would round differently from the C code.
func cbrtGlibc(x float64) float64 {
	if x == 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return x + x
	}
	factor := [5]float64{1.0 / 1.5874010519681994748, 1.0 / 1.2599210498948731648, 1.0,
		1.2599210498948731648, 1.5874010519681994748}
	xm, xe := math.Frexp(math.Abs(x))
	u := 0.354895765043919860 + float64((1.50819193781584896+
		float64((-2.11499494167371287+
			float64((2.44693122563534430+
				float64((-1.83469277483613086+
					float64((0.784932344976639262-float64(0.145263899385486377*xm))*xm))*xm))*xm))*xm))*xm)
	t2 := float64(u*u) * u
	ym := float64(u*(t2+float64(2.0*xm))) / (float64(2.0*t2) + xm) * factor[2+xe%3]
	r := math.Ldexp(ym, xe/3)
	if x < 0 {
		return -r
	}
	return r
}

// decScale is a numeric's display scale, as scale() reports it.
func decScale(d *apd.Decimal) int32 {
	if d.Exponent < 0 {
		return -d.Exponent
	}
	return 0
}

// decTrim drops d's trailing fractional zeros (trim_scale).
func decTrim(d *apd.Decimal) *apd.Decimal {
	r := new(apd.Decimal).Set(d)
	for r.Exponent < 0 && r.Coeff.Sign() != 0 {
		var q, m apd.BigInt
		q.QuoRem(&r.Coeff, apd.NewBigInt(10), &m)
		if m.Sign() != 0 {
			break
		}
		r.Coeff.Set(&q)
		r.Exponent++
	}
	if r.Coeff.Sign() == 0 && r.Exponent < 0 {
		r.Exponent = 0
	}
	return r
}

func init() {
	fl("cbrt", pure(cbrtGlibc))

	// scale, min_scale and trim_scale read a numeric's display scale;
	// NaN and the infinities have none (NULL).
	finite := func(d *apd.Decimal) bool { return d.Form == apd.Finite }
	scaleFn := func(f func(d *apd.Decimal) int32) Fn {
		return func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			d := toDecimal(a[0])
			if !finite(d) {
				return types.DNull, nil
			}
			return types.DInt(f(d)), nil
		}
	}
	n := []*types.T{types.Numeric}
	registerFn("scale", Overload{Args: n, Return: Fixed(types.Int4), Strict: true, Fn: scaleFn(decScale)})
	registerFn("min_scale", Overload{Args: n, Return: Fixed(types.Int4), Strict: true,
		Fn: scaleFn(func(d *apd.Decimal) int32 { return decScale(decTrim(d)) })})
	registerFn("trim_scale", Overload{Args: n, Return: Fixed(types.Numeric), Strict: true,
		Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			d := toDecimal(a[0])
			if !finite(d) {
				return a[0], nil
			}
			return newDec(decTrim(d)), nil
		}})
}
