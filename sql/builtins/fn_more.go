package builtins

import (
	"crypto/sha256"
	"crypto/sha512"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cockroachdb/apd/v3"
	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// Functions PostgreSQL 15 users reach for that the family files lacked:
// numeric gcd/lcm, date_bin, overlay, sha224/384/512, bytea bit and byte
// access, string_to_table, quote_literal/quote_nullable of any type,
// degree-based and hyperbolic trigonometry, timeofday, parse_ident and
// the encoding information functions.

// decGCD is Euclid's algorithm over numerics (Postgres's numeric gcd):
// the result has the larger scale of the two and is never negative.
func decGCD(a, b *apd.Decimal) (*apd.Decimal, error) {
	x, y := new(apd.Decimal).Abs(a), new(apd.Decimal).Abs(b)
	for !y.IsZero() {
		var r apd.Decimal
		if _, err := apd.BaseContext.WithPrecision(1000).Rem(&r, x, y); err != nil {
			return nil, errInternal("gcd: %w", err)
		}
		x, y = y, &r
	}
	scale := max(decScale(a), decScale(b))
	return quantize(x, int64(scale), apd.RoundHalfUp), nil
}

// dateBin is Postgres's timestamp_bin: the start of the stride-wide bin,
// counted from origin, that ts falls in.
func dateBin(stride types.DInterval, ts, origin int64) (int64, error) {
	if stride.Months != 0 {
		return 0, pgerror.New(pgerrcode.FeatureNotSupported, "timestamps cannot be binned into intervals containing months or years")
	}
	us := int64(stride.Days)*microsPerDay + stride.Micros
	if us <= 0 {
		return 0, pgerror.New(pgerrcode.DatetimeFieldOverflow, "stride must be greater than zero")
	}
	if isInfTS(origin) {
		return 0, errTimestampRange
	}
	diff := ts - origin
	delta := diff - diff%us
	if origin > ts && us > 1 {
		delta -= us // the bin's start, also when the origin is later
	}
	r := origin + delta
	if (delta > 0) != (r > origin) && delta != 0 {
		return 0, errTimestampRange
	}
	return r, nil
}

// overlay replaces count characters of s from start (1-based) with repl.
func overlay(s, repl string, start, count int64) (string, error) {
	if start <= 0 || count < 0 {
		return "", pgerror.New(pgerrcode.SubstringError, "negative substring length not allowed")
	}
	rs := []rune(s)
	from := min(start-1, int64(len(rs)))
	to := min(from+count, int64(len(rs)))
	if from+count < from { // overflow
		to = int64(len(rs))
	}
	return string(rs[:from]) + repl + string(rs[to:]), nil
}

func overlayBytes(s, repl string, start, count int64) (string, error) {
	if start <= 0 || count < 0 {
		return "", pgerror.New(pgerrcode.SubstringError, "negative substring length not allowed")
	}
	from := min(start-1, int64(len(s)))
	to := min(from+count, int64(len(s)))
	return s[:from] + repl + s[to:], nil
}

func errByteIndex(n, size int64) error {
	return pgerror.New(pgerrcode.ArraySubscriptError, "index %d out of valid range, 0..%d", n, size-1)
}

// parseIdent splits a possibly qualified SQL name as Postgres's
// parse_ident: quoted parts keep their case, others are lowered.
func parseIdent(s string, strict bool) ([]string, error) {
	bad := func() error {
		return errInvalidParam("string is not a valid identifier: \"%s\"", s)
	}
	var parts []string
	i := 0
	for {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n') {
			i++
		}
		if i < len(s) && s[i] == '"' {
			var b strings.Builder
			i++
			for {
				j := strings.IndexByte(s[i:], '"')
				if j < 0 {
					return nil, errInvalidParam("string is not a valid identifier: \"%s\"", s).
						WithDetail("String has unclosed double quotes.")
				}
				b.WriteString(s[i : i+j])
				i += j + 1
				if i < len(s) && s[i] == '"' {
					b.WriteByte('"')
					i++
					continue
				}
				break
			}
			if b.Len() == 0 {
				return nil, errInvalidParam("string is not a valid identifier: \"%s\"", s).
					WithDetail("Quoted identifier must not be empty.")
			}
			parts = append(parts, b.String())
		} else {
			j := i
			for j < len(s) {
				r, n := utf8.DecodeRuneInString(s[j:])
				if r == '_' || r == '$' && j > i || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' && j > i || r >= 0x80 {
					j += n
					continue
				}
				break
			}
			if j == i {
				if len(parts) == 0 && i >= len(s) || i < len(s) && s[i] == '.' {
					return nil, errInvalidParam("string is not a valid identifier: \"%s\"", s).
						WithDetail("No valid identifier before \".\".")
				}
				if len(parts) > 0 {
					return nil, errInvalidParam("string is not a valid identifier: \"%s\"", s).
						WithDetail("No valid identifier after \".\".")
				}
				return nil, bad()
			}
			parts = append(parts, strings.ToLower(s[i:j]))
			i = j
		}
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n') {
			i++
		}
		if i < len(s) && s[i] == '.' {
			i++
			continue
		}
		if i < len(s) && strict {
			return nil, bad()
		}
		return parts, nil
	}
}

// regrAgg is Postgres's float8_regr_accum state (Youngs-Cramer update,
// as float8_regr_accum computes it, so results match to the last digit)
// with one final function per regression aggregate. Arguments are
// (Y, X); a row with either NULL is skipped.
type regrAgg struct {
	final                    func(a *regrAgg) types.Datum
	n, sx, sy, sxx, syy, sxy float64
}

func (a *regrAgg) Add(_ EvalContext, args []types.Datum) error {
	if types.IsNull(args[0]) || types.IsNull(args[1]) {
		return nil
	}
	y, x := float64(args[0].(types.DFloat)), float64(args[1].(types.DFloat))
	old := a.n
	a.n++
	a.sx += x
	a.sy += y
	if old > 0 {
		tx := float64(x*a.n) - a.sx
		ty := float64(y*a.n) - a.sy
		scale := 1.0 / float64(a.n*old)
		a.sxx += float64(tx*tx) * scale
		a.syy += float64(ty*ty) * scale
		a.sxy += float64(tx*ty) * scale
	} else {
		// Postgres makes the sums NaN right away for a NaN or infinite
		// first input, so later rows cannot turn them finite again.
		if math.IsNaN(x) || math.IsInf(x, 0) {
			a.sxx, a.sxy = math.NaN(), math.NaN()
		}
		if math.IsNaN(y) || math.IsInf(y, 0) {
			a.syy, a.sxy = math.NaN(), math.NaN()
		}
	}
	return nil
}

func (a *regrAgg) Result() (types.Datum, error) { return a.final(a), nil }

func f8OrNull(ok bool, v float64) types.Datum {
	if !ok {
		return types.DNull
	}
	return types.DFloat(v)
}

func init() {
	text, i4, f8, n, bytea := types.Text, types.Int4, types.Float8, types.Numeric, types.Bytea

	registerFn("gcd", Overload{Args: []*types.T{n, n}, Return: Fixed(n), Strict: true,
		Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			x, y := toDecimal(a[0]), toDecimal(a[1])
			if isNaN(x) || isNaN(y) {
				return newDec(decNaN), nil
			}
			if x.Form != apd.Finite || y.Form != apd.Finite {
				return nil, errInvalidParam("cannot compute gcd of infinite values")
			}
			g, err := decGCD(x, y)
			if err != nil {
				return nil, err
			}
			return newDec(g), nil
		}})
	registerFn("lcm", Overload{Args: []*types.T{n, n}, Return: Fixed(n), Strict: true,
		Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			x, y := toDecimal(a[0]), toDecimal(a[1])
			if isNaN(x) || isNaN(y) {
				return newDec(decNaN), nil
			}
			if x.Form != apd.Finite || y.Form != apd.Finite {
				return nil, errInvalidParam("cannot compute lcm of infinite values")
			}
			scale := int64(max(decScale(x), decScale(y)))
			if x.IsZero() || y.IsZero() {
				return newDec(quantize(apd.New(0, 0), scale, apd.RoundHalfUp)), nil
			}
			g, err := decGCD(x, y)
			if err != nil {
				return nil, err
			}
			var q, r apd.Decimal
			c := apd.BaseContext.WithPrecision(1000)
			if _, err := c.Quo(&q, x, g); err != nil {
				return nil, errInternal("lcm: %w", err)
			}
			if _, err := c.Mul(&r, &q, y); err != nil {
				return nil, errInternal("lcm: %w", err)
			}
			r.Abs(&r)
			return newDec(quantize(&r, scale, apd.RoundHalfUp)), nil
		}})

	// date_bin(stride, source, origin).
	registerFn("date_bin",
		Overload{Args: []*types.T{types.Interval, types.Timestamp, types.Timestamp}, Return: Fixed(types.Timestamp), Strict: true,
			Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
				ts := int64(a[1].(types.DTimestamp))
				if isInfTS(ts) {
					return a[1], nil
				}
				r, err := dateBin(a[0].(types.DInterval), ts, int64(a[2].(types.DTimestamp)))
				if err != nil {
					return nil, err
				}
				return checkTimestamp(types.DTimestamp(r))
			}},
		Overload{Args: []*types.T{types.Interval, types.TimestampTZ, types.TimestampTZ}, Return: Fixed(types.TimestampTZ), Strict: true,
			Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
				ts := int64(a[1].(types.DTimestampTZ))
				if isInfTS(ts) {
					return a[1], nil
				}
				r, err := dateBin(a[0].(types.DInterval), ts, int64(a[2].(types.DTimestampTZ)))
				if err != nil {
					return nil, err
				}
				return checkTimestamp(types.DTimestampTZ(r))
			}})

	// overlay(s PLACING r FROM start [FOR count]).
	for _, t := range []*types.T{text, bytea} {
		isBytes := t == bytea
		ov := func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			s, r := str(a[0]), str(a[1])
			var count int64
			if len(a) > 3 {
				count = i64(a[3])
			} else if isBytes {
				count = int64(len(r))
			} else {
				count = int64(utf8.RuneCountInString(r))
			}
			if isBytes {
				out, err := overlayBytes(s, r, i64(a[2]), count)
				return types.DBytes(out), err
			}
			out, err := overlay(s, r, i64(a[2]), count)
			return types.DString(out), err
		}
		registerFn("overlay",
			Overload{Args: []*types.T{t, t, i4, i4}, Return: Fixed(t), Strict: true, Fn: ov},
			Overload{Args: []*types.T{t, t, i4}, Return: Fixed(t), Strict: true, Fn: ov})
	}

	digestFn := func(f func([]byte) []byte) Fn {
		return func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			return types.DBytes(f([]byte(str(a[0])))), nil
		}
	}
	registerFn("sha224", Overload{Args: []*types.T{bytea}, Return: Fixed(bytea), Strict: true,
		Fn: digestFn(func(b []byte) []byte { s := sha256.Sum224(b); return s[:] })})
	registerFn("sha384", Overload{Args: []*types.T{bytea}, Return: Fixed(bytea), Strict: true,
		Fn: digestFn(func(b []byte) []byte { s := sha512.Sum384(b); return s[:] })})
	registerFn("sha512", Overload{Args: []*types.T{bytea}, Return: Fixed(bytea), Strict: true,
		Fn: digestFn(func(b []byte) []byte { s := sha512.Sum512(b); return s[:] })})

	// Byte and bit access to bytea; bits are numbered from the least
	// significant bit of the first byte, as in Postgres.
	registerFn("get_byte", Overload{Args: []*types.T{bytea, i4}, Return: Fixed(i4), Strict: true,
		Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			s, k := str(a[0]), i64(a[1])
			if k < 0 || k >= int64(len(s)) {
				return nil, errByteIndex(k, int64(len(s)))
			}
			return types.DInt(s[k]), nil
		}})
	registerFn("set_byte", Overload{Args: []*types.T{bytea, i4, i4}, Return: Fixed(bytea), Strict: true,
		Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			b, k := []byte(str(a[0])), i64(a[1])
			if k < 0 || k >= int64(len(b)) {
				return nil, errByteIndex(k, int64(len(b)))
			}
			b[k] = byte(i64(a[2]))
			return types.DBytes(b), nil
		}})
	registerFn("get_bit", Overload{Args: []*types.T{bytea, types.Int8}, Return: Fixed(i4), Strict: true,
		Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			s, k := str(a[0]), i64(a[1])
			if k < 0 || k >= 8*int64(len(s)) {
				return nil, errByteIndex(k, 8*int64(len(s)))
			}
			return types.DInt(s[k/8] >> (k % 8) & 1), nil
		}})
	registerFn("set_bit", Overload{Args: []*types.T{bytea, types.Int8, i4}, Return: Fixed(bytea), Strict: true,
		Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			b, k, v := []byte(str(a[0])), i64(a[1]), i64(a[2])
			if k < 0 || k >= 8*int64(len(b)) {
				return nil, errByteIndex(k, 8*int64(len(b)))
			}
			if v != 0 && v != 1 {
				return nil, errInvalidParam("new bit must be 0 or 1")
			}
			b[k/8] = b[k/8]&^(1<<(k%8)) | byte(v)<<(k%8)
			return types.DBytes(b), nil
		}})
	registerFn("bit_count", Overload{Args: []*types.T{bytea}, Return: Fixed(types.Int8), Strict: true,
		Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			n := 0
			for _, c := range []byte(str(a[0])) {
				for ; c != 0; c &= c - 1 {
					n++
				}
			}
			return types.DInt(n), nil
		}})

	// string_to_table is string_to_array as rows.
	for _, nargs := range []int{2, 3} {
		registerFn("string_to_table", Overload{Args: []*types.T{text, text, text}[:nargs], Class: Generator, Return: Fixed(text),
			Columns: func([]*types.T) []Column { return []Column{{"string_to_table", text}} },
			SRF: func(ctx EvalContext, a []types.Datum) (RowIter, error) {
				if types.IsNull(a[0]) {
					return &sliceIter{}, nil
				}
				arr, err := Lookup("string_to_array")[nargs-2].Fn(ctx, a)
				if err != nil || types.IsNull(arr) {
					return &sliceIter{}, err
				}
				it := &sliceIter{}
				for _, e := range arr.(*types.DArray).Elems {
					it.rows = append(it.rows, []types.Datum{e})
				}
				return it, nil
			}})
	}

	// quote_literal and quote_nullable of any value quote its text form.
	quoteAny := func(nullable bool) Overload {
		return Overload{Args: []*types.T{AnyElement}, Return: Fixed(text), Strict: !nullable, Volatility: Stable,
			Bind: func(at, _ []*types.T) Fn {
				t := at[0]
				return func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
					if types.IsNull(a[0]) {
						return types.DString("NULL"), nil
					}
					return types.DString(QuoteLiteral(types.Format(ctx.Types(), t, a[0]))), nil
				}
			}}
	}
	registerFn("quote_literal", quoteAny(false))
	registerFn("quote_nullable", quoteAny(true))

	// Trigonometry in degrees. Postgres makes the exact angles exact
	// (sind(30) = 0.5); rounding the result to 15 significant digits and
	// back where it is within an ulp of a "nice" value gives the same
	// outputs for the usual angles.
	deg := func(f func(float64) float64) func(float64) (float64, error) {
		return func(x float64) (float64, error) {
			if math.IsInf(x, 0) {
				return 0, errTrigRange
			}
			v := f(x)
			if math.Abs(v) < 1e-12 {
				return 0, nil // a multiple of 90 degrees: exactly 0, as in Postgres
			}
			return snapDeg(v), nil
		}
	}
	fl("sind", deg(func(x float64) float64 { return math.Sin(math.Mod(x, 360) * math.Pi / 180) }))
	fl("cosd", deg(func(x float64) float64 { return math.Cos(math.Mod(x, 360) * math.Pi / 180) }))
	fl("tand", deg(func(x float64) float64 {
		m := math.Mod(x, 360)
		if math.Mod(m, 180) == 90 || math.Mod(m, 180) == -90 {
			return math.Inf(int(math.Copysign(1, math.Sin(m*math.Pi/180))))
		}
		return math.Tan(m * math.Pi / 180)
	}))
	fl("cotd", deg(func(x float64) float64 {
		m := math.Mod(x, 360)
		if math.Mod(m, 180) == 0 {
			return math.Inf(1)
		}
		return 1 / math.Tan(m*math.Pi/180)
	}))
	inv := func(f func(float64) float64) func(float64) (float64, error) {
		return func(x float64) (float64, error) {
			if x < -1 || x > 1 {
				return 0, errTrigRange
			}
			return snapDeg(f(x) * 180 / math.Pi), nil
		}
	}
	fl("asind", inv(math.Asin))
	fl("acosd", inv(math.Acos))
	fl("atand", pure(func(x float64) float64 { return snapDeg(math.Atan(x) * 180 / math.Pi) }))
	registerFn("atan2d", Overload{Args: []*types.T{f8, f8}, Return: Fixed(f8), Strict: true,
		Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			return types.DFloat(snapDeg(math.Atan2(float64(a[0].(types.DFloat)), float64(a[1].(types.DFloat))) * 180 / math.Pi)), nil
		}})
	fl("cot", pure(func(x float64) float64 { return 1 / crTan(x) }))
	fl("sinh", pure(math.Sinh))
	fl("cosh", pure(math.Cosh))
	fl("tanh", pure(math.Tanh))
	fl("asinh", pure(math.Asinh))
	fl("acosh", func(x float64) (float64, error) {
		if x < 1 {
			return 0, errTrigRange
		}
		return math.Acosh(x), nil
	})
	fl("atanh", func(x float64) (float64, error) {
		if x < -1 || x > 1 {
			return 0, errTrigRange
		}
		return math.Atanh(x), nil
	})

	// Regression and correlation aggregates, (Y, X).
	regr := map[string]func(a *regrAgg) types.Datum{
		"regr_count": func(a *regrAgg) types.Datum { return types.DInt(int64(a.n)) },
		"regr_sxx":   func(a *regrAgg) types.Datum { return f8OrNull(a.n >= 1, a.sxx) },
		"regr_syy":   func(a *regrAgg) types.Datum { return f8OrNull(a.n >= 1, a.syy) },
		"regr_sxy":   func(a *regrAgg) types.Datum { return f8OrNull(a.n >= 1, a.sxy) },
		"regr_avgx":  func(a *regrAgg) types.Datum { return f8OrNull(a.n >= 1, a.sx/a.n) },
		"regr_avgy":  func(a *regrAgg) types.Datum { return f8OrNull(a.n >= 1, a.sy/a.n) },
		"covar_pop":  func(a *regrAgg) types.Datum { return f8OrNull(a.n >= 1, a.sxy/a.n) },
		"covar_samp": func(a *regrAgg) types.Datum { return f8OrNull(a.n >= 2, a.sxy/(a.n-1)) },
		"corr": func(a *regrAgg) types.Datum {
			return f8OrNull(a.n >= 1 && a.sxx != 0 && a.syy != 0, a.sxy/math.Sqrt(a.sxx*a.syy))
		},
		"regr_r2": func(a *regrAgg) types.Datum {
			if a.n >= 1 && a.sxx != 0 && a.syy == 0 {
				return types.DFloat(1)
			}
			return f8OrNull(a.n >= 1 && a.sxx != 0, (a.sxy*a.sxy)/(a.sxx*a.syy))
		},
		"regr_slope": func(a *regrAgg) types.Datum { return f8OrNull(a.n >= 1 && a.sxx != 0, a.sxy/a.sxx) },
		"regr_intercept": func(a *regrAgg) types.Datum {
			return f8OrNull(a.n >= 1 && a.sxx != 0, (a.sy-a.sx*a.sxy/a.sxx)/a.n)
		},
	}
	for name, final := range regr {
		ret := f8
		if name == "regr_count" {
			ret = types.Int8
		}
		registerAgg(name, []*types.T{f8, f8}, Fixed(ret), func([]*types.T) Aggregate { return &regrAgg{final: final} })
	}

	registerFn("timeofday", Overload{Return: Fixed(text), Volatility: Volatile,
		Fn: func(ctx EvalContext, _ []types.Datum) (types.Datum, error) {
			return types.DString(time.Now().In(location(ctx)).Format("Mon Jan 02 15:04:05.000000 2006 MST")), nil
		}})
	for _, nargs := range []int{1, 2} {
		registerFn("parse_ident", Overload{Args: []*types.T{text, types.Bool}[:nargs], Return: Fixed(types.MustArray(text)), Strict: true,
			Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
				strict := len(a) < 2 || bool(a[1].(types.DBool))
				parts, err := parseIdent(str(a[0]), strict)
				if err != nil {
					return nil, err
				}
				out := types.NewArray(text)
				for _, p := range parts {
					out.Elems = append(out.Elems, types.DString(p))
				}
				return out, nil
			}})
	}
	for _, name := range []string{"getdatabaseencoding", "pg_client_encoding"} {
		registerFn(name, Overload{Return: Fixed(text), Volatility: Stable,
			Fn: func(EvalContext, []types.Datum) (types.Datum, error) { return types.DString("UTF8"), nil }})
	}
}

var errTrigRange = pgerror.New(pgerrcode.NumericValueOutOfRange, "input is out of range")

// snapDeg rounds a degree-trigonometry result to the nearest value with
// 15 significant digits when that is within a few ulps, so sind(30) is
// 0.5 and atand(1) is 45 exactly, as Postgres's careful implementation
// gives for the angles people use.
func snapDeg(v float64) float64 {
	if v == 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return v
	}
	exp := math.Floor(math.Log10(math.Abs(v)))
	scale := math.Pow(10, 14-exp)
	r := math.Round(v*scale) / scale
	if math.Abs(r-v) <= 4*math.Abs(math.Nextafter(v, math.Inf(1))-v) {
		return r
	}
	return v
}
