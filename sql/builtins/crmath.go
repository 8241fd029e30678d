package builtins

import (
	"math"
	"math/big"
	"sync"
)

// Correctly rounded float8 elementary functions. Postgres calls the C
// library, and glibc's exp, log, pow, sin, cos, tan and atan return the
// correctly rounded result (or one within a hair of it); Go's math
// package is up to an ulp off, which clients see in the 17th digit
// (Postgres prints shortest round-trip digits). So these compute in high
// precision (big.Float series) and
// round once. Non-finite inputs and results, and arguments too large to
// reduce, fall back to the math package, whose special-case results are
// the C library's.

func normalFinite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) && x != 0 }

func crExp(x float64) float64 {
	m := math.Exp(x)
	if !normalFinite(x) || math.IsInf(m, 0) || m == 0 || math.Abs(x) < 1e-10 {
		return m
	}
	return toF(expBig(bf(x)))
}

func crLog(x float64) float64 {
	m := math.Log(x)
	if !normalFinite(x) || x < 0 || x == 1 {
		return m
	}
	return toF(lnBig(bf(x)))
}

// crLog10 is glibc's __ieee754_log10 (e_log10.c) over a correctly
// rounded log: glibc's log10 is not correctly rounded, and Postgres's
// answers are its answers. The float64() conversions keep Go from fusing
// the multiply-adds.
func crLog10(x float64) float64 {
	if !normalFinite(x) || x < 0 {
		return math.Log10(x)
	}
	const (
		ivln10    = 4.34294481903251816668e-01
		log10_2hi = 3.01029995663611771306e-01
		log10_2lo = 3.69423907715893078616e-13
	)
	bits := math.Float64bits(x)
	hx := int32(bits >> 32)
	k := int32(0)
	if hx < 0x00100000 { // subnormal
		k -= 54
		x *= 1.80143985094819840000e+16
		bits = math.Float64bits(x)
		hx = int32(bits >> 32)
	}
	k += (hx >> 20) - 1023
	i := int32(uint32(k) & 0x80000000 >> 31)
	hx = hx&0x000fffff | (0x3ff-i)<<20
	y := float64(k + i)
	x = math.Float64frombits(uint64(uint32(hx))<<32 | bits&0xffffffff)
	z := float64(y*log10_2lo) + float64(ivln10*crLog(x))
	return z + float64(y*log10_2hi)
}

func crPow(a, b float64) float64 {
	m := math.Pow(a, b)
	if !normalFinite(a) || !normalFinite(b) || math.IsInf(m, 0) || m == 0 || math.IsNaN(m) || b == 1 || a == 1 {
		return m
	}
	if b == math.Trunc(b) && math.Abs(b) <= 64 && a == math.Trunc(a) && math.Abs(a) < 1<<20 && m == math.Trunc(m) && math.Abs(m) < 1<<53 {
		return m // an exactly representable integer power
	}
	// Only integer exponents reach here with a < 0 (the caller rejects
	// the others); the sign is the exponent's parity.
	l := lnBig(bf(math.Abs(a)))
	f := toF(expBig(l.Mul(l, bf(b))))
	if a < 0 && math.Mod(b, 2) != 0 {
		f = -f
	}
	if math.IsInf(f, 0) || f == 0 {
		return m
	}
	return f
}

var ln2Once sync.Once
var bigLn2 *big.Float

// lnBig is ln(z) for z > 0: z = m * 2^e with m in [1, 2), and
// ln m = 2 atanh((m-1)/(m+1)), whose series converges fast there.
func lnBig(z *big.Float) *big.Float {
	ln2Once.Do(func() { bigLn2 = atanhSeries(new(big.Float).SetPrec(trigPrec).Quo(bf(1), bf(3))) })
	m := new(big.Float).SetPrec(trigPrec)
	e := z.MantExp(m) // z = m * 2^e, m in [0.5, 1)
	m.SetMantExp(m, 1)
	e--
	s := new(big.Float).SetPrec(trigPrec).Sub(m, bf(1))
	s.Quo(s, new(big.Float).SetPrec(trigPrec).Add(m, bf(1)))
	r := atanhSeries(s)
	return r.Add(r, new(big.Float).SetPrec(trigPrec).Mul(bigLn2, bf(float64(e))))
}

// atanhSeries is 2 atanh(s) = 2 (s + s^3/3 + s^5/5 + ...).
func atanhSeries(s *big.Float) *big.Float {
	s2 := new(big.Float).SetPrec(trigPrec).Mul(s, s)
	sum := new(big.Float).SetPrec(trigPrec).Set(s)
	term := new(big.Float).SetPrec(trigPrec).Set(s)
	for n := int64(1); n < 200 && term.Sign() != 0 && term.MantExp(nil) > -trigPrec-8; n++ {
		term.Mul(term, s2)
		sum.Add(sum, new(big.Float).SetPrec(trigPrec).Quo(term, bf(float64(2*n+1))))
	}
	return sum.Mul(sum, bf(2))
}

// expBig is e^z: z = k ln2 + r, e^r by its series on r/256 squared back.
func expBig(z *big.Float) *big.Float {
	lnBig(bf(2)) // initializes bigLn2
	kf := new(big.Float).SetPrec(trigPrec).Quo(z, bigLn2)
	kv, _ := kf.Float64()
	k := math.Round(kv)
	r := new(big.Float).SetPrec(trigPrec).Mul(bigLn2, bf(k))
	r.Sub(z, r)
	r.SetMantExp(r, -8)
	sum := bf(1)
	term := bf(1)
	for n := 1; n < 60 && term.Sign() != 0 && term.MantExp(nil) > -trigPrec-8; n++ {
		term.Mul(term, r)
		term.Quo(term, bf(float64(n)))
		sum.Add(sum, term)
	}
	for i := 0; i < 8; i++ {
		sum.Mul(sum, sum)
	}
	return sum.SetMantExp(sum, int(k))
}

// Trigonometry over big.Float.

const trigPrec = 128

var piOnce sync.Once
var bigPi *big.Float // 1200 bits, enough to reduce any |x| < 2^900

func pi() *big.Float {
	piOnce.Do(func() {
		// Machin: pi = 16 atan(1/5) - 4 atan(1/239).
		const prec = 1300
		at := func(inv int64) *big.Float {
			x := new(big.Float).SetPrec(prec).Quo(big.NewFloat(1).SetPrec(prec), new(big.Float).SetPrec(prec).SetInt64(inv))
			x2 := new(big.Float).SetPrec(prec).Mul(x, x)
			sum := new(big.Float).SetPrec(prec).Set(x)
			term := new(big.Float).SetPrec(prec).Set(x)
			eps := new(big.Float).SetMantExp(big.NewFloat(1), -prec-8)
			for n := int64(3); ; n += 2 {
				term.Mul(term, x2)
				t := new(big.Float).SetPrec(prec).Quo(term, new(big.Float).SetPrec(prec).SetInt64(n))
				if (n/2)%2 == 1 {
					sum.Sub(sum, t)
				} else {
					sum.Add(sum, t)
				}
				if t.Cmp(eps) < 0 {
					return sum
				}
			}
		}
		p := new(big.Float).SetPrec(prec).Mul(big.NewFloat(16).SetPrec(prec), at(5))
		p.Sub(p, new(big.Float).SetPrec(prec).Mul(big.NewFloat(4).SetPrec(prec), at(239)))
		bigPi = p
	})
	return bigPi
}

func bf(x float64) *big.Float { return new(big.Float).SetPrec(trigPrec).SetFloat64(x) }

// sinCosSeries returns sin(r) and cos(r) for |r| <= pi/4.
func sinCosSeries(r *big.Float) (*big.Float, *big.Float) {
	r2 := new(big.Float).SetPrec(trigPrec).Mul(r, r)
	sin, cos := new(big.Float).SetPrec(trigPrec).Set(r), big.NewFloat(1).SetPrec(trigPrec)
	st, ct := new(big.Float).SetPrec(trigPrec).Set(r), big.NewFloat(1).SetPrec(trigPrec)
	for n := int64(1); n < 60 && st.Sign() != 0 && st.MantExp(nil) > -trigPrec-8; n++ {
		st.Mul(st, r2)
		st.Quo(st, bf(float64((2*n)*(2*n+1))))
		ct.Mul(ct, r2)
		ct.Quo(ct, bf(float64((2*n-1)*(2*n))))
		if n%2 == 1 {
			sin.Sub(sin, st)
			cos.Sub(cos, ct)
		} else {
			sin.Add(sin, st)
			cos.Add(cos, ct)
		}
	}
	return sin, cos
}

// reduce returns r in [-pi/4, pi/4] and k mod 4 with x = r + k*pi/2.
func reduce(x float64) (*big.Float, int, bool) {
	if math.Abs(x) > 0x1p1000 {
		return nil, 0, false
	}
	// The reduction needs pi to the argument's magnitude plus the
	// result's precision; most arguments are small.
	prec := uint(trigPrec + 64)
	if math.Abs(x) > 0x1p30 {
		prec = 1300
	}
	X := new(big.Float).SetPrec(prec).SetFloat64(x)
	half := new(big.Float).SetPrec(prec).Set(pi())
	half.Quo(half, big.NewFloat(2))
	q := new(big.Float).SetPrec(prec).Quo(X, half)
	// k = round(q)
	q.Add(q, big.NewFloat(0.5))
	k, _ := q.Int(nil)
	if q.Sign() < 0 && !q.IsInt() {
		k.Sub(k, big.NewInt(1))
	}
	kf := new(big.Float).SetPrec(prec).SetInt(k)
	r := new(big.Float).SetPrec(prec).Sub(X, kf.Mul(kf, half))
	m := new(big.Int).Mod(k, big.NewInt(4))
	return new(big.Float).SetPrec(trigPrec).Set(r), int(m.Int64()), true
}

func toF(b *big.Float) float64 { f, _ := b.Float64(); return f }

func crSin(x float64) float64 {
	if !normalFinite(x) || math.Abs(x) < 1e-8 {
		return math.Sin(x) // tiny: sin x rounds to x (or Go's value is exact enough)
	}
	r, k, ok := reduce(x)
	if !ok {
		return math.Sin(x)
	}
	s, c := sinCosSeries(r)
	switch k {
	case 0:
		return toF(s)
	case 1:
		return toF(c)
	case 2:
		return -toF(s)
	}
	return -toF(c)
}

func crCos(x float64) float64 {
	if !normalFinite(x) {
		return math.Cos(x)
	}
	r, k, ok := reduce(x)
	if !ok {
		return math.Cos(x)
	}
	s, c := sinCosSeries(r)
	switch k {
	case 0:
		return toF(c)
	case 1:
		return -toF(s)
	case 2:
		return -toF(c)
	}
	return toF(s)
}

func crTan(x float64) float64 {
	if !normalFinite(x) || math.Abs(x) < 1e-8 {
		return math.Tan(x)
	}
	r, k, ok := reduce(x)
	if !ok {
		return math.Tan(x)
	}
	s, c := sinCosSeries(r)
	if k%2 == 1 {
		return toF(new(big.Float).SetPrec(trigPrec).Quo(c, s.Neg(s)))
	}
	return toF(new(big.Float).SetPrec(trigPrec).Quo(s, c))
}

// atanBig is atan(z) for z >= 0.
func atanBig(z *big.Float) *big.Float {
	one := big.NewFloat(1).SetPrec(trigPrec)
	if z.Cmp(one) > 0 {
		inv := new(big.Float).SetPrec(trigPrec).Quo(one, z)
		h := new(big.Float).SetPrec(trigPrec).Quo(pi(), big.NewFloat(2))
		return h.Sub(h, atanBig(inv))
	}
	// Halve the angle three times: atan z = 2 atan(z / (1 + sqrt(1 + z^2))).
	y := new(big.Float).SetPrec(trigPrec).Set(z)
	for i := 0; i < 3; i++ {
		t := new(big.Float).SetPrec(trigPrec).Mul(y, y)
		t.Add(t, one)
		t.Sqrt(t)
		t.Add(t, one)
		y.Quo(y, t)
	}
	y2 := new(big.Float).SetPrec(trigPrec).Mul(y, y)
	sum := new(big.Float).SetPrec(trigPrec).Set(y)
	term := new(big.Float).SetPrec(trigPrec).Set(y)
	for n := int64(1); n < 80 && term.Sign() != 0 && term.MantExp(nil) > -trigPrec-8; n++ {
		term.Mul(term, y2)
		t := new(big.Float).SetPrec(trigPrec).Quo(term, bf(float64(2*n+1)))
		if n%2 == 1 {
			sum.Sub(sum, t)
		} else {
			sum.Add(sum, t)
		}
	}
	return sum.Mul(sum, big.NewFloat(8))
}

func crAtan(x float64) float64 {
	if !normalFinite(x) || math.Abs(x) < 1e-8 {
		return math.Atan(x)
	}
	a := atanBig(bf(math.Abs(x)))
	return math.Copysign(toF(a), x)
}

func crAsin(x float64) float64 {
	if !normalFinite(x) || math.Abs(x) >= 1 || math.Abs(x) < 1e-8 {
		return math.Asin(x)
	}
	X := bf(math.Abs(x))
	d := new(big.Float).SetPrec(trigPrec).Mul(X, X)
	d.Sub(big.NewFloat(1).SetPrec(trigPrec), d)
	d.Sqrt(d)
	return math.Copysign(toF(atanBig(X.Quo(X, d))), x)
}

func crAcos(x float64) float64 {
	if math.IsNaN(x) || math.Abs(x) >= 1 {
		return math.Acos(x)
	}
	X := bf(math.Abs(x))
	d := new(big.Float).SetPrec(trigPrec).Mul(X, X)
	d.Sub(big.NewFloat(1).SetPrec(trigPrec), d)
	d.Sqrt(d)
	h := new(big.Float).SetPrec(trigPrec).Quo(pi(), big.NewFloat(2))
	var as *big.Float
	if x == 0 {
		return toF(h)
	}
	as = atanBig(X.Quo(X, d))
	if x < 0 {
		return toF(h.Add(h, as))
	}
	return toF(h.Sub(h, as))
}

func crAtan2(y, x float64) float64 {
	if !normalFinite(x) || !normalFinite(y) {
		return math.Atan2(y, x)
	}
	q := new(big.Float).SetPrec(trigPrec).Quo(bf(math.Abs(y)), bf(math.Abs(x)))
	a := atanBig(q)
	if x < 0 {
		p := new(big.Float).SetPrec(trigPrec).Set(pi())
		a = p.Sub(p, a)
	}
	return math.Copysign(toF(a), y)
}
