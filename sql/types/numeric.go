package types

import (
	"github.com/cockroachdb/apd/v3"
)

// decimalCtx is the arithmetic context for numeric: Postgres rounds half
// away from zero, and allows up to 131072 digits before the point and 16383
// after; apd needs a precision, so allow that many digits.
var decimalCtx = func() *apd.Context {
	c := apd.BaseContext.WithPrecision(147455)
	c.Rounding = apd.RoundHalfUp
	c.MaxExponent = 147455
	c.MinExponent = -147455
	return c
}()

// numericInRange reports whether d fits Postgres's numeric format: at most
// 131072 digits before the point and 16383 after. Checking before any
// rescaling also keeps hostile input like 1e999999999 from allocating.
func numericInRange(d *apd.Decimal) bool {
	if d.Form != apd.Finite {
		return true
	}
	if d.IsZero() {
		return d.Exponent >= -16383 && d.Exponent <= 131072
	}
	return d.NumDigits()+int64(d.Exponent) <= 131072 && d.Exponent >= -16383
}

// checkNumericTypmod rejects infinities for a constrained numeric, as
// Postgres does; NaN is allowed in any numeric.
func checkNumericTypmod(t *T, d *DDecimal) error {
	if t.Precision > 0 && d.Form == apd.Infinite {
		return errNumericOverflow(t.Precision, t.Scale, true)
	}
	return nil
}

// applyNumericTypmod rounds d in place to t's scale and checks that it fits
// t's precision (22003 "numeric field overflow" otherwise).
func applyNumericTypmod(t *T, d *DDecimal) error {
	if t.Precision == 0 || d.Form != apd.Finite {
		return checkNumericTypmod(t, d)
	}
	if _, err := decimalCtx.Quantize(&d.Decimal, &d.Decimal, -t.Scale); err != nil {
		return errNumericOverflow(t.Precision, t.Scale, false)
	}
	normalizeZero(&d.Decimal)
	if !d.IsZero() && d.NumDigits()+int64(d.Exponent) > int64(t.Precision-t.Scale) {
		return errNumericOverflow(t.Precision, t.Scale, false)
	}
	if t.Scale < 0 {
		// A negative scale rounds to tens, hundreds...; print without it.
		_, _ = decimalCtx.Quantize(&d.Decimal, &d.Decimal, 0)
	}
	return nil
}
