package builtins

import (
	"math/big"
	"testing"
	"unicode/utf8"

	"github.com/jackc/pgerrcode"
	"pgregory.net/rapid"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// decode(encode(b, f), f) == b for every format.
func TestEncodeDecodeRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := rapid.SliceOf(rapid.Byte()).Draw(t, "bytes")
		f := rapid.SampledFrom([]string{"hex", "base64", "escape"}).Draw(t, "format")
		s, err := encode(b, f)
		if err != nil {
			t.Fatal(err)
		}
		back, err := decode(s, f)
		if err != nil {
			t.Fatalf("decode(%q, %s): %v", s, f, err)
		}
		if string(back) != string(b) {
			t.Fatalf("%s round trip: %x -> %q -> %x", f, b, s, back)
		}
	})
}

// lpad/rpad always return exactly n characters, keep the string's prefix,
// and put it at the right end (lpad) or the left (rpad).
func TestPadLength(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.StringN(0, 20, -1).Draw(t, "s")
		fill := rapid.StringN(1, 4, -1).Draw(t, "fill")
		n := rapid.Int64Range(0, 40).Draw(t, "n")
		for _, left := range []bool{true, false} {
			p, err := pad(s, n, fill, left)
			if err != nil {
				t.Fatalf("pad(%q, %d, %q, left=%v): %v", s, n, fill, left, err)
			}
			if got := int64(utf8.RuneCountInString(p)); got != n {
				t.Fatalf("pad(%q, %d, %q, left=%v) = %q has %d characters", s, n, fill, left, p, got)
			}
			rs := []rune(s)
			keep := string(rs[:min(int64(len(rs)), n)])
			pr := []rune(p)
			if left && int64(len(rs)) < n && string(pr[n-int64(len(rs)):]) != s ||
				!left && string(pr[:len([]rune(keep))]) != keep {
				t.Fatalf("pad(%q, %d, %q, left=%v) = %q misplaces the string", s, n, fill, left, p)
			}
		}
	})
}

// Integer operators agree with exact arithmetic, or fail with 22003 (out
// of the result width) or 22012 (division by zero), never silently wrap.
func TestIntArithmeticMatchesBigInt(t *testing.T) {
	ops := []string{"+", "-", "*", "/", "%"}
	rapid.Check(t, func(t *rapid.T) {
		l := rapid.SampledFrom(intTypes).Draw(t, "left")
		r := rapid.SampledFrom(intTypes).Draw(t, "right")
		op := rapid.SampledFrom(ops).Draw(t, "op")
		lo, hi := intBounds(l.Width)
		a := rapid.OneOf(rapid.Int64Range(lo, hi), rapid.SampledFrom([]int64{lo, hi, 0, -1, 1})).Draw(t, "a")
		lo, hi = intBounds(r.Width)
		b := rapid.OneOf(rapid.Int64Range(lo, hi), rapid.SampledFrom([]int64{lo, hi, 0, -1, 1})).Draw(t, "b")
		res, err := LookupBinaryOp(op, l, r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := res.Eval(nil, []types.Datum{types.DInt(a), types.DInt(b)})
		x, y := big.NewInt(a), big.NewInt(b)
		if b == 0 && (op == "/" || op == "%") {
			if pgerror.Code(err) != pgerrcode.DivisionByZero {
				t.Fatalf("%d %s 0: %v", a, op, err)
			}
			return
		}
		want := new(big.Int)
		switch op {
		case "+":
			want.Add(x, y)
		case "-":
			want.Sub(x, y)
		case "*":
			want.Mul(x, y)
		case "/":
			want.Quo(x, y)
		case "%":
			want.Rem(x, y)
		}
		lo, hi = intBounds(res.Return.Width)
		if want.Cmp(big.NewInt(lo)) < 0 || want.Cmp(big.NewInt(hi)) > 0 {
			if pgerror.Code(err) != pgerrcode.NumericValueOutOfRange {
				t.Fatalf("%d %s %d = %v (%v), want 22003", a, op, b, got, err)
			}
			return
		}
		if err != nil || int64(got.(types.DInt)) != want.Int64() {
			t.Fatalf("%d %s %d = %v (%v), want %s", a, op, b, got, err, want)
		}
	})
}

// Numeric division is correctly rounded at the scale it reports: the
// exact quotient lies within half a unit of the last digit.
func TestNumericDivisionRounding(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := rapid.Int64Range(-1e12, 1e12).Draw(t, "a")
		b := rapid.Int64Range(-1e6, 1e6).Filter(func(v int64) bool { return v != 0 }).Draw(t, "b")
		sa := rapid.Int32Range(0, 6).Draw(t, "scaleA")
		da, db := decFromInt(a), decFromInt(b)
		da.Exponent -= sa
		res, err := LookupBinaryOp("/", types.Numeric, types.Numeric)
		if err != nil {
			t.Fatal(err)
		}
		q, err := res.Eval(nil, []types.Datum{da, db})
		if err != nil {
			t.Fatal(err)
		}
		qd := q.(*types.DDecimal)
		// |q*b - a| <= |b| * 10^-scale / 2, checked in integers scaled
		// by 2*10^(scale+sa).
		scale := int64(-qd.Exponent)
		qc := new(big.Int).Set(qd.Coeff.MathBigInt())
		if qd.Negative {
			qc.Neg(qc)
		}
		ten := big.NewInt(10)
		lhs := new(big.Int).Mul(qc, big.NewInt(b))                      // q*b * 10^scale
		lhs.Mul(lhs, new(big.Int).Exp(ten, big.NewInt(int64(sa)), nil)) // * 10^sa
		rhs := new(big.Int).Mul(big.NewInt(a), new(big.Int).Exp(ten, big.NewInt(scale), nil))
		diff := new(big.Int).Sub(lhs, rhs)
		diff.Abs(diff).Mul(diff, big.NewInt(2))
		bound := new(big.Int).Mul(big.NewInt(b), new(big.Int).Exp(ten, big.NewInt(int64(sa)), nil))
		bound.Abs(bound)
		if diff.Cmp(bound) > 0 {
			t.Fatalf("%s / %d = %s is not correctly rounded", da, b, qd)
		}
	})
}
