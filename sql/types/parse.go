package types

import (
	"encoding/hex"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cockroachdb/apd/v3"
	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
)

// ParseDatum reads s as t's input function does, including t's modifier
// (numeric(p,s) rounds and may overflow; varchar(n)/char(n) reject values
// too long unless the excess is spaces; char(n) pads). Errors carry
// Postgres's SQLSTATE: 22P02 bad syntax, 22003 numeric range, 22007/22008
// date and time, 22001 length, 22021 invalid UTF-8.
func ParseDatum(ctx *Context, t *T, s string) (Datum, error) {
	if !utf8.ValidString(s) || (t.Family != BytesFamily && strings.IndexByte(s, 0) >= 0) {
		return nil, errInvalidUTF8(s)
	}
	switch t.Family {
	case EnumFamily:
		return ParseEnum(t, s)
	case BoolFamily:
		b, ok := parseBool(s)
		if !ok {
			return nil, errInvalidSyntax(t, s)
		}
		return DBool(b), nil
	case IntFamily:
		return parseInt(t, s)
	case FloatFamily:
		return parseFloat(t, s)
	case NumericFamily:
		d, err := parseDecimal(t, s)
		if err != nil {
			return nil, err
		}
		return d, nil
	case StringFamily:
		return AssignmentCast(ctx, DString(s), Text, t)
	case BytesFamily:
		return parseBytea(t, s)
	case DateFamily, TimeFamily, TimestampFamily, TimestampTZFamily:
		return parseDateTime(ctx, t, s)
	case IntervalFamily:
		return parseInterval(t, s)
	case UUIDFamily:
		u, ok := parseUUID(s)
		if !ok {
			return nil, errInvalidSyntax(t, s)
		}
		return u, nil
	case JSONBFamily:
		j, err := ParseJSON(s)
		if err != nil {
			return nil, err
		}
		return NewJSON(j), nil
	case JSONTextFamily:
		// json only checks the syntax: a \u0000 escape, which jsonb cannot
		// hold as text, is valid json.
		if _, err := ParseJSON(s); err != nil && pgerror.Code(err) != pgerrcode.UntranslatableCharacter {
			return nil, err
		}
		return DJSONText(s), nil
	case OidFamily:
		if IsReg(t) {
			return parseReg(ctx, t, s)
		}
		v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 32)
		if err != nil {
			if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
				return nil, errInputOutOfRange(t, s)
			}
			return nil, errInvalidSyntax(t, s)
		}
		return DOid(v), nil
	case ArrayFamily:
		if IsVector(t) {
			return parseVector(t, s)
		}
		return parseArray(ctx, t, s)
	case UnknownFamily:
		return DString(s), nil
	}
	return nil, pgerror.New(pgerrcode.FeatureNotSupported, "cannot parse type %s", t.Name())
}

// parseUUID accepts what uuid_in accepts: 32 hex digits, optionally in
// braces, with an optional hyphen after any group of four digits (so the
// canonical 8-4-4-4-12 form, no hyphens at all, and Postgres's other
// spellings), surrounded by nothing else.
func parseUUID(s string) (DUUID, bool) {
	var u DUUID
	src := s
	braces := strings.HasPrefix(src, "{")
	if braces {
		src = src[1:]
	}
	for i := 0; i < 16; i++ {
		if len(src) < 2 {
			return u, false
		}
		hi, ok1 := unhex(src[0])
		lo, ok2 := unhex(src[1])
		if !ok1 || !ok2 {
			return u, false
		}
		u[i] = hi<<4 | lo
		src = src[2:]
		if i%2 == 1 && i < 15 && strings.HasPrefix(src, "-") {
			src = src[1:]
		}
	}
	if braces {
		if !strings.HasPrefix(src, "}") {
			return u, false
		}
		src = src[1:]
	}
	return u, src == ""
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// parseBool accepts what boolin accepts: any case, surrounding spaces, and
// unique prefixes of true/false/yes/no, plus on/off (two letters at least)
// and 1/0.
func parseBool(s string) (bool, bool) {
	v := strings.ToLower(strings.TrimSpace(s))
	if v == "" {
		return false, false
	}
	switch {
	case strings.HasPrefix("true", v), strings.HasPrefix("yes", v), v == "1":
		return true, true
	case strings.HasPrefix("false", v), strings.HasPrefix("no", v), v == "0":
		return false, true
	case len(v) >= 2 && strings.HasPrefix("on", v) && v != "o":
		return true, true
	case len(v) >= 2 && strings.HasPrefix("off", v):
		return false, true
	}
	return false, false
}

func intBounds(t *T) (int64, int64) {
	switch t.Width {
	case 16:
		return math.MinInt16, math.MaxInt16
	case 32:
		return math.MinInt32, math.MaxInt32
	}
	return math.MinInt64, math.MaxInt64
}

func parseInt(t *T, s string) (Datum, error) {
	v := strings.TrimSpace(s)
	// strconv accepts a leading '+', as Postgres does; reject what it
	// accepts and Postgres does not (underscores need base 0 only).
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return nil, errInputOutOfRange(t, s)
		}
		return nil, errInvalidSyntax(t, s)
	}
	lo, hi := intBounds(t)
	if n < lo || n > hi {
		return nil, errInputOutOfRange(t, s)
	}
	return DInt(n), nil
}

func parseFloat(t *T, s string) (Datum, error) {
	v := strings.TrimSpace(s)
	bits := int(t.Width)
	// Every special spelling has an n; the lower-casing (an allocation)
	// is for them only, not for each number of a COPY.
	if strings.ContainsAny(v, "nN") {
		switch strings.ToLower(strings.TrimPrefix(v, "+")) {
		case "nan":
			return DFloat(math.NaN()), nil
		case "infinity", "inf":
			return DFloat(math.Inf(1)), nil
		case "-infinity", "-inf":
			return DFloat(math.Inf(-1)), nil
		}
	}
	if v == "" {
		return nil, errInvalidSyntax(t, s)
	}
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c >= '0' && c <= '9', c == '.', c == 'e', c == 'E', c == '+', c == '-':
		default:
			return nil, errInvalidSyntax(t, s)
		}
	}
	f, err := strconv.ParseFloat(v, bits)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return nil, errFloatOutOfRange(v, t)
		}
		return nil, errInvalidSyntax(t, s)
	}
	if f == 0 {
		if mant, _, _ := strings.Cut(strings.ToLower(v), "e"); strings.ContainsAny(mant, "123456789") {
			return nil, errFloatOutOfRange(v, t) // underflow, which Postgres rejects too
		}
	}
	return DFloat(f), nil
}

func parseDecimal(t *T, s string) (*DDecimal, error) {
	v := strings.TrimSpace(s)
	d := &DDecimal{}
	switch strings.ToLower(strings.TrimPrefix(v, "+")) {
	case "nan":
		d.Form = apd.NaN
		return d, checkNumericTypmod(t, d)
	case "infinity", "inf":
		d.Form = apd.Infinite
		return d, checkNumericTypmod(t, d)
	case "-infinity", "-inf":
		d.Form, d.Negative = apd.Infinite, true
		return d, checkNumericTypmod(t, d)
	}
	if v == "" || strings.IndexFunc(v, func(r rune) bool { return !strings.ContainsRune("0123456789.eE+-", r) }) >= 0 {
		return nil, errInvalidSyntax(t, s)
	}
	if _, _, err := d.SetString(v); err != nil {
		return nil, errInvalidSyntax(t, s)
	}
	if !numericInRange(&d.Decimal) {
		return nil, errInputOutOfRange(t, s)
	}
	if d.Exponent > 0 {
		// Postgres numerics carry no negative scale: 1e3 is stored as 1000.
		if _, err := decimalCtx.Quantize(&d.Decimal, &d.Decimal, 0); err != nil {
			return nil, errInputOutOfRange(t, s)
		}
	}
	normalizeZero(&d.Decimal)
	return d, applyNumericTypmod(t, d)
}

// parseBytea reads the hex format (\x followed by pairs of hex digits,
// whitespace allowed between pairs) and the escape format (\\ and \nnn
// octal escapes, other bytes literal).
func parseBytea(t *T, s string) (Datum, error) {
	if strings.HasPrefix(s, `\x`) || strings.HasPrefix(s, `\X`) {
		h := strings.Map(func(r rune) rune {
			if r == ' ' || r == '\t' || r == '\n' || r == '\r' {
				return -1
			}
			return r
		}, s[2:])
		b, err := hex.DecodeString(h)
		if err != nil {
			return nil, errInvalidSyntax(t, s)
		}
		return DBytes(b), nil
	}
	var out []byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		switch {
		case i+1 < len(s) && s[i+1] == '\\':
			out = append(out, '\\')
			i++
		case i+3 < len(s) && isOctal(s[i+1]) && s[i+1] <= '3' && isOctal(s[i+2]) && isOctal(s[i+3]):
			out = append(out, (s[i+1]-'0')<<6|(s[i+2]-'0')<<3|(s[i+3]-'0'))
			i += 3
		default:
			return nil, errInvalidSyntax(t, s)
		}
	}
	return DBytes(out), nil
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// arrayBounds reads the explicit bounds in front of an array literal,
// [lo:hi]={...} (or [hi]= for [1:hi]), returning the literal after the
// "=" and the element count the bounds give. Cairn's arrays start at 1:
// another lower bound, or bounds for several dimensions, are 0A000.
func arrayBounds(v, s string) (string, int, error) {
	bad := func(detail string) error {
		return pgerror.New(pgerrcode.InvalidTextRepresentation, "malformed array literal: \"%s\"", s).WithDetail("%s", detail)
	}
	end := strings.IndexByte(v, ']')
	if end < 0 {
		return "", 0, bad("Missing \"]\" after array dimensions.")
	}
	dims := strings.TrimSpace(v[1:end])
	rest := strings.TrimSpace(v[end+1:])
	if strings.HasPrefix(rest, "[") {
		return "", 0, pgerror.New(pgerrcode.FeatureNotSupported, "multidimensional arrays are not supported")
	}
	if !strings.HasPrefix(rest, "=") {
		return "", 0, bad("Missing \"=\" after array dimensions.")
	}
	lo, hi := "1", dims
	if l, h, ok := strings.Cut(dims, ":"); ok {
		lo, hi = strings.TrimSpace(l), strings.TrimSpace(h)
	}
	l, err1 := strconv.Atoi(lo)
	h, err2 := strconv.Atoi(hi)
	if err1 != nil || err2 != nil {
		return "", 0, bad("\"[\" must introduce explicitly-specified array dimensions.")
	}
	if h < l {
		return "", 0, pgerror.New(pgerrcode.ArraySubscriptError, "upper bound cannot be less than lower bound")
	}
	if l != 1 {
		return "", 0, pgerror.New(pgerrcode.FeatureNotSupported, "arrays with a lower bound other than 1 are not supported")
	}
	return strings.TrimSpace(rest[1:]), h - l + 1, nil
}

// parseArray reads a one-dimensional array literal: {a,"b c",NULL}. Unquoted
// elements are trimmed; NULL (any case, unquoted) is a null element;
// backslash escapes the next character.
func parseArray(ctx *Context, t *T, s string) (Datum, error) {
	v := strings.TrimSpace(s)
	bad := func() error {
		return pgerror.New(pgerrcode.InvalidTextRepresentation, "malformed array literal: \"%s\"", s)
	}
	want := -1 // the element count explicit bounds ask for
	if strings.HasPrefix(v, "[") {
		var err error
		if v, want, err = arrayBounds(v, s); err != nil {
			return nil, err
		}
	}
	if len(v) < 2 || v[0] != '{' || v[len(v)-1] != '}' {
		return nil, bad()
	}
	if want >= 0 {
		d, err := parseArray(ctx, t, v)
		if err == nil && len(d.(*DArray).Elems) != want {
			err = pgerror.New(pgerrcode.InvalidTextRepresentation, "malformed array literal: \"%s\"", s).
				WithDetail("Specified array dimensions do not match array contents.")
		}
		return d, err
	}
	body := v[1 : len(v)-1]
	arr := &DArray{Elem: t.Elem}
	if strings.TrimSpace(body) == "" {
		return arr, nil
	}
	i := 0
	for {
		for i < len(body) && isArraySpace(body[i]) {
			i++
		}
		var elem []byte
		quoted := false
		if i < len(body) && body[i] == '{' {
			return nil, pgerror.New(pgerrcode.FeatureNotSupported, "multidimensional arrays are not supported")
		}
		if i < len(body) && body[i] == '"' {
			quoted = true
			i++
			for {
				if i >= len(body) {
					return nil, bad()
				}
				c := body[i]
				if c == '\\' && i+1 < len(body) {
					elem = append(elem, body[i+1])
					i += 2
					continue
				}
				i++
				if c == '"' {
					break
				}
				elem = append(elem, c)
			}
			for i < len(body) && isArraySpace(body[i]) {
				i++
			}
		} else {
			for i < len(body) && body[i] != ',' {
				c := body[i]
				if c == '"' || c == '{' || c == '}' {
					return nil, bad()
				}
				if c == '\\' && i+1 < len(body) {
					elem = append(elem, body[i+1])
					i += 2
					continue
				}
				elem = append(elem, c)
				i++
			}
			elem = []byte(strings.TrimRight(string(elem), " \t\n\r\v\f"))
			if len(elem) == 0 {
				return nil, bad()
			}
		}
		if !quoted && strings.EqualFold(string(elem), "null") {
			arr.Elems = append(arr.Elems, DNull)
		} else {
			d, err := ParseDatum(ctx, t.Elem, string(elem))
			if err != nil {
				return nil, err
			}
			arr.Elems = append(arr.Elems, d)
		}
		if i >= len(body) {
			return arr, nil
		}
		if body[i] != ',' {
			return nil, bad()
		}
		i++
	}
}

func isArraySpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

func firstInvalidUTF8(s string) byte {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 {
			return s[i]
		}
		i += n
	}
	return 0
}
