package builtins

import (
	"math/big"

	"github.com/cockroachdb/apd/v3"

	"github.com/cairn-db/cairn/sql/types"
)

// Numeric arithmetic follows Postgres's display-scale rules: + and - keep
// the larger input scale, * adds the scales, / uses select_div_scale (at
// least 16 significant digits), and results are rounded half away from
// zero. apd computes exactly and rounding is done here once, so no result
// is rounded twice.

// exactCtx never rounds within Postgres's numeric range; errors are
// checked through conditions, not traps.
var exactCtx = func() *apd.Context {
	c := apd.BaseContext.WithPrecision(147455)
	c.Rounding = apd.RoundHalfUp
	c.MaxExponent = 147455
	c.MinExponent = -147455
	c.Traps = 0
	return c
}()

const (
	minSigDigits   = 16   // NUMERIC_MIN_SIG_DIGITS
	maxDisplay     = 1000 // NUMERIC_MAX_DISPLAY_SCALE
	maxResultScale = 2000 // NUMERIC_MAX_RESULT_SCALE
)

func dscale(d *apd.Decimal) int32 { return max(0, -d.Exponent) }

func newDec(d *apd.Decimal) *types.DDecimal { return types.NewDecimal(d) }

func decFromInt(i int64) *types.DDecimal {
	var d apd.Decimal
	d.SetInt64(i)
	return newDec(&d)
}

// checkNumeric rejects results beyond Postgres's numeric format.
func checkNumeric(d *apd.Decimal) error {
	if d.Form != apd.Finite || d.IsZero() {
		return nil
	}
	if d.NumDigits()+int64(d.Exponent) > 131072 {
		return errNumericFormat
	}
	return nil
}

// roundTo rounds d in place to scale digits after the point (half away
// from zero), padding with zeros when it has fewer.
func roundTo(d *apd.Decimal, scale int32) {
	if d.Form != apd.Finite {
		return
	}
	_, _ = exactCtx.Quantize(d, d, -scale)
}

func isNaN(d *apd.Decimal) bool { return d.Form == apd.NaN || d.Form == apd.NaNSignaling }

var decNaN = &apd.Decimal{Form: apd.NaN}

type decOp func(r, a, b *apd.Decimal) error

func numAdd(r, a, b *apd.Decimal) error {
	if isNaN(a) || isNaN(b) || a.Form == apd.Infinite && b.Form == apd.Infinite && a.Negative != b.Negative {
		r.Set(decNaN)
		return nil
	}
	_, err := exactCtx.Add(r, a, b)
	roundTo(r, max(dscale(a), dscale(b)))
	return err
}

func numSub(r, a, b *apd.Decimal) error {
	var nb apd.Decimal
	nb.Neg(b)
	return numAdd(r, a, &nb)
}

func numMul(r, a, b *apd.Decimal) error {
	if isNaN(a) || isNaN(b) {
		r.Set(decNaN)
		return nil
	}
	if a.Form == apd.Infinite || b.Form == apd.Infinite {
		if a.IsZero() || b.IsZero() {
			r.Set(decNaN)
			return nil
		}
		r.Set(&apd.Decimal{Form: apd.Infinite, Negative: a.Negative != b.Negative})
		return nil
	}
	_, err := exactCtx.Mul(r, a, b)
	roundTo(r, min(dscale(a)+dscale(b), maxResultScale))
	return err
}

// nbaseWeight returns Postgres's base-10000 weight and first base-10000
// digit of a nonzero finite decimal, which select_div_scale works from.
func nbaseWeight(d *apd.Decimal) (weight int64, first int64) {
	adj := d.NumDigits() + int64(d.Exponent) - 1 // exponent of the leading digit
	weight = adj / 4
	if adj < 0 && adj%4 != 0 {
		weight--
	}
	// The leading base-10000 digit holds the decimal digits from adj down
	// to 4*weight.
	n := adj - 4*weight + 1
	digits := d.Coeff.String()
	for int64(len(digits)) < n {
		digits += "0"
	}
	for _, c := range digits[:n] {
		first = first*10 + int64(c-'0')
	}
	return weight, first
}

// divScale is Postgres's select_div_scale.
func divScale(a, b *apd.Decimal) int32 {
	var w1, f1, w2, f2 int64
	if a.Form == apd.Finite && !a.IsZero() {
		w1, f1 = nbaseWeight(a)
	}
	if b.Form == apd.Finite && !b.IsZero() {
		w2, f2 = nbaseWeight(b)
	}
	qweight := w1 - w2
	if f1 <= f2 {
		qweight--
	}
	rscale := int64(minSigDigits) - qweight*4
	rscale = max(rscale, int64(dscale(a)), int64(dscale(b)), 0)
	return int32(min(rscale, maxDisplay))
}

// quoRound returns a/b rounded half away from zero to scale digits, using
// integer arithmetic so the result is correctly rounded.
func quoRound(r, a, b *apd.Decimal, scale int32) {
	num := new(big.Int).Set(a.Coeff.MathBigInt())
	den := new(big.Int).Set(b.Coeff.MathBigInt())
	// a/b * 10^scale = ca/cb * 10^(ea - eb + scale)
	e := int64(a.Exponent) - int64(b.Exponent) + int64(scale)
	ten := big.NewInt(10)
	if e >= 0 {
		num.Mul(num, new(big.Int).Exp(ten, big.NewInt(e), nil))
	} else {
		den.Mul(den, new(big.Int).Exp(ten, big.NewInt(-e), nil))
	}
	q, m := new(big.Int).QuoRem(num, den, new(big.Int))
	if m.Sign() != 0 && new(big.Int).Lsh(m, 1).CmpAbs(den) >= 0 {
		q.Add(q, big.NewInt(1))
	}
	r.Coeff.SetMathBigInt(q)
	r.Exponent = -scale
	r.Form = apd.Finite
	r.Negative = a.Negative != b.Negative && q.Sign() != 0
}

func numDiv(r, a, b *apd.Decimal) error {
	if isNaN(a) || isNaN(b) {
		r.Set(decNaN)
		return nil
	}
	if b.Form == apd.Finite && b.IsZero() {
		return errDivByZero
	}
	switch {
	case a.Form == apd.Infinite && b.Form == apd.Infinite:
		r.Set(decNaN)
		return nil
	case a.Form == apd.Infinite:
		r.Set(&apd.Decimal{Form: apd.Infinite, Negative: a.Negative != b.Negative})
		return nil
	case b.Form == apd.Infinite:
		r.SetInt64(0)
		return nil
	}
	quoRound(r, a, b, divScale(a, b))
	return nil
}

// numDivTrunc is integer division truncated toward zero (div()).
func numDivTrunc(r, a, b *apd.Decimal) error {
	if isNaN(a) || isNaN(b) {
		r.Set(decNaN)
		return nil
	}
	if b.Form == apd.Finite && b.IsZero() {
		return errDivByZero
	}
	if a.Form != apd.Finite || b.Form != apd.Finite {
		r.Set(decNaN)
		return nil
	}
	_, err := exactCtx.QuoInteger(r, a, b)
	roundTo(r, 0)
	return err
}

// numMod is Postgres's numeric %: the sign of the dividend, the larger scale.
func numMod(r, a, b *apd.Decimal) error {
	if isNaN(a) || isNaN(b) {
		r.Set(decNaN)
		return nil
	}
	if b.Form == apd.Finite && b.IsZero() {
		return errDivByZero
	}
	if a.Form == apd.Infinite {
		r.Set(decNaN)
		return nil
	}
	if b.Form == apd.Infinite {
		r.Set(a)
		return nil
	}
	_, err := exactCtx.Rem(r, a, b)
	roundTo(r, max(dscale(a), dscale(b)))
	return err
}

// numPow is numeric ^ numeric. Integral exponents are exact (rounded to
// Postgres's scale); others go through apd's Pow at 16+ significant
// digits.
func numPow(r, a, b *apd.Decimal) error {
	if isNaN(a) || isNaN(b) {
		if isNaN(a) && b.Form == apd.Finite && b.IsZero() || isNaN(b) && a.Cmp(apd.New(1, 0)) == 0 {
			r.SetInt64(1)
			return nil
		}
		r.Set(decNaN)
		return nil
	}
	if a.IsZero() && b.Negative {
		return errInvalidArg("zero raised to a negative power is undefined")
	}
	var bi apd.Decimal
	_, _ = exactCtx.RoundToIntegralValue(&bi, b)
	if a.Negative && bi.Cmp(b) != 0 {
		return errInvalidArg("a negative number raised to a non-integer power yields a complex result")
	}
	ctx := apd.BaseContext.WithPrecision(40)
	ctx.Rounding = apd.RoundHalfUp
	ctx.MaxExponent, ctx.MinExponent, ctx.Traps = 147455, -147455, 0
	if _, err := ctx.Pow(r, a, b); err != nil {
		return errNumericFormat
	}
	if r.Form == apd.Infinite {
		return errNumericFormat
	}
	// power_var's result scale: 16 significant digits, at least the
	// inputs' scales.
	scale := int64(minSigDigits)
	if bi.Cmp(b) == 0 {
		// Integer exponents: power_var_int at 16 digits after the point.
		if e, err := b.Int64(); err == nil && e >= 0 && e < 10000 {
			_, _ = exactCtx.Pow(r, a, b)
		}
	} else if !r.IsZero() {
		scale = int64(minSigDigits) - (r.NumDigits() + int64(r.Exponent) - 1)
	}
	scale = max(scale, int64(dscale(a)), int64(dscale(b)), 0)
	roundTo(r, int32(min(scale, maxDisplay)))
	return checkNumeric(r)
}
