package types

import (
	"encoding/hex"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"
)

// Format returns d's text form exactly as Postgres's output function for t
// prints it (DateStyle ISO, IntervalStyle postgres, bytea_output hex,
// extra_float_digits 1). NULL prints as "NULL", which only arrays use;
// pgwire sends NULL as a null field instead.
func Format(ctx *Context, t *T, d Datum) string {
	return string(AppendFormat(nil, ctx, t, d))
}

// AppendFormat appends Format's result to dst.
func AppendFormat(dst []byte, ctx *Context, t *T, d Datum) []byte {
	switch v := d.(type) {
	case dNull:
		return append(dst, "NULL"...)
	case DEnum:
		return append(dst, v.Label...)
	case DBool:
		if v {
			return append(dst, 't')
		}
		return append(dst, 'f')
	case DInt:
		return strconv.AppendInt(dst, int64(v), 10)
	case DFloat:
		bits := 64
		if t != nil && t.Family == FloatFamily && t.Width == 32 {
			bits = 32
		}
		return appendFloat(dst, float64(v), bits)
	case *DDecimal:
		return appendDecimal(dst, &v.Decimal)
	case DString:
		return append(dst, v...)
	case DBytes:
		dst = append(dst, `\x`...)
		return hex.AppendEncode(dst, []byte(v))
	case DDate:
		return appendDate(dst, v)
	case DTime:
		return appendTimeOfDay(dst, int64(v))
	case DTimestamp:
		if s, ok := infinityName(int64(v)); ok {
			return append(dst, s...)
		}
		return appendTimestamp(dst, microsToTime(int64(v)), false)
	case DTimestampTZ:
		if s, ok := infinityName(int64(v)); ok {
			return append(dst, s...)
		}
		return appendTimestamp(dst, microsToTime(int64(v)).In(ctx.location()), true)
	case DInterval:
		return appendInterval(dst, v)
	case DUUID:
		return append(dst, uuid.UUID(v).String()...)
	case *DJSON:
		return v.JSON.appendText(dst)
	case DJSONText:
		return append(dst, v...)
	case DOid:
		if t != nil && IsReg(t) {
			return appendReg(dst, ctx, t, v)
		}
		return strconv.AppendUint(dst, uint64(v), 10)
	case *DArray:
		if t != nil && IsVector(t) {
			return appendVector(dst, v)
		}
		return appendArray(appendBounds(dst, v), ctx, v)
	case *DTuple:
		return appendRecord(dst, ctx, v)
	}
	panic("types.Format: unknown datum " + d.Family().String())
}

// FormatUsesContext reports whether AppendFormat may read its Context
// to print d (a timestamptz's time zone, a reg* type's names, inside an
// array or record): when it does not, a caller may pass nil and skip
// making one (a session's point SELECT of an int made the catalog
// resolver for each row it sent).
func FormatUsesContext(d Datum) bool {
	switch d.(type) {
	case dNull, DEnum, DBool, DInt, DFloat, *DDecimal, DString, DBytes, DDate, DTime, DTimestamp,
		DInterval, DUUID, *DJSON, DJSONText:
		return false
	}
	return true
}

// appendFloat prints the shortest decimal that reads back as the same float
// of the given width, choosing plain or exponent notation as Postgres's
// Ryu-based float8out/float4out do: plain when -4 <= exponent < 15 (float8)
// or < 6 (float4), else d.ddde±XX.
func appendFloat(dst []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	case math.IsInf(f, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(f, -1):
		return append(dst, "-Infinity"...)
	}
	e := strconv.FormatFloat(f, 'e', -1, bits)
	_, expStr, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expStr)
	limit := 15
	if bits == 32 {
		limit = 6
	}
	if exp < -4 || exp >= limit {
		return append(dst, e...)
	}
	return strconv.AppendFloat(dst, f, 'f', -1, bits)
}

func appendDecimal(dst []byte, d *apd.Decimal) []byte {
	switch d.Form {
	case apd.NaN, apd.NaNSignaling:
		return append(dst, "NaN"...)
	case apd.Infinite:
		if d.Negative {
			return append(dst, "-Infinity"...)
		}
		return append(dst, "Infinity"...)
	}
	if d.IsZero() && d.Negative {
		c := *d
		c.Negative = false
		d = &c
	}
	if d.Exponent > 0 {
		// Postgres numerics have no negative scale: 1E+2 is 100.
		var c apd.Decimal
		_, _ = decimalCtx.Quantize(&c, d, 0)
		d = &c
	}
	return append(dst, d.Text('f')...)
}

func infinityName(us int64) (string, bool) {
	switch us {
	case TimestampNegInfinity:
		return "-infinity", true
	case TimestampPosInfinity:
		return "infinity", true
	}
	return "", false
}

func appendDate(dst []byte, d DDate) []byte {
	switch d {
	case DateNegInfinity:
		return append(dst, "-infinity"...)
	case DatePosInfinity:
		return append(dst, "infinity"...)
	}
	t := time.Unix(int64(d)*86400, 0).UTC()
	dst = appendYMD(dst, t)
	if t.Year() <= 0 {
		dst = append(dst, " BC"...)
	}
	return dst
}

// appendYMD prints a proleptic Gregorian date; year 0 is 1 BC, as the
// caller's " BC" suffix expects.
func appendYMD(dst []byte, t time.Time) []byte {
	y := t.Year()
	if y <= 0 {
		y = 1 - y
	}
	dst = appendPadded(dst, int64(y), 4)
	dst = append(dst, '-')
	dst = appendPadded(dst, int64(t.Month()), 2)
	dst = append(dst, '-')
	return appendPadded(dst, int64(t.Day()), 2)
}

func appendPadded(dst []byte, v int64, width int) []byte {
	s := strconv.FormatInt(v, 10)
	for i := len(s); i < width; i++ {
		dst = append(dst, '0')
	}
	return append(dst, s...)
}

// appendTimeOfDay prints HH:MM:SS with a fraction trimmed of trailing zeros.
func appendTimeOfDay(dst []byte, us int64) []byte {
	h := us / (3600 * microsPerSec)
	us -= h * 3600 * microsPerSec
	m := us / (60 * microsPerSec)
	us -= m * 60 * microsPerSec
	dst = appendPadded(dst, h, 2)
	dst = append(dst, ':')
	dst = appendPadded(dst, m, 2)
	dst = append(dst, ':')
	return appendSeconds(dst, us)
}

func appendSeconds(dst []byte, us int64) []byte {
	dst = appendPadded(dst, us/microsPerSec, 2)
	if frac := us % microsPerSec; frac != 0 {
		s := strconv.FormatInt(frac+microsPerSec, 10)[1:] // six digits
		dst = append(dst, '.')
		dst = append(dst, strings.TrimRight(s, "0")...)
	}
	return dst
}

func appendTimestamp(dst []byte, t time.Time, withZone bool) []byte {
	dst = appendYMD(dst, t)
	dst = append(dst, ' ')
	tod := int64(t.Hour())*3600*microsPerSec + int64(t.Minute())*60*microsPerSec +
		int64(t.Second())*microsPerSec + int64(t.Nanosecond()/1000)
	dst = appendTimeOfDay(dst, tod)
	if withZone {
		_, off := t.Zone()
		sign := byte('+')
		if off < 0 {
			sign, off = '-', -off
		}
		dst = append(dst, sign)
		dst = appendPadded(dst, int64(off/3600), 2)
		if off%3600 != 0 {
			dst = append(dst, ':')
			dst = appendPadded(dst, int64(off%3600/60), 2)
			if off%60 != 0 {
				dst = append(dst, ':')
				dst = appendPadded(dst, int64(off%60), 2)
			}
		}
	}
	if t.Year() <= 0 {
		dst = append(dst, " BC"...)
	}
	return dst
}

// appendInterval follows Postgres's EncodeInterval for IntervalStyle
// postgres: "1 year 2 mons -3 days +04:05:06.5"; a field after a negative
// one gets an explicit "+"; the zero interval is "00:00:00".
func appendInterval(dst []byte, iv DInterval) []byte {
	years, mons := iv.Months/12, iv.Months%12
	isBefore, isZero := false, true
	field := func(v int64, unit string) {
		if v == 0 {
			return
		}
		if !isZero {
			dst = append(dst, ' ')
		}
		if isBefore && v > 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, v, 10)
		dst = append(dst, ' ')
		dst = append(dst, unit...)
		if v != 1 {
			dst = append(dst, 's')
		}
		isBefore, isZero = v < 0, false
	}
	field(int64(years), "year")
	field(int64(mons), "mon")
	field(int64(iv.Days), "day")
	if isZero || iv.Micros != 0 {
		us := iv.Micros
		neg := us < 0
		if !isZero {
			dst = append(dst, ' ')
		}
		switch {
		case neg:
			dst = append(dst, '-')
		case isBefore:
			dst = append(dst, '+')
		}
		// Negate in uint64 so math.MinInt64 survives.
		u := uint64(us)
		if neg {
			u = -u
		}
		h := u / (3600 * microsPerSec)
		u -= h * 3600 * microsPerSec
		m := u / (60 * microsPerSec)
		u -= m * 60 * microsPerSec
		if h < 10 {
			dst = append(dst, '0')
		}
		dst = strconv.AppendUint(dst, h, 10)
		dst = append(dst, ':')
		dst = appendPadded(dst, int64(m), 2)
		dst = append(dst, ':')
		dst = appendSeconds(dst, int64(u))
	}
	return dst
}

// appendArray prints {a,b,NULL}, double-quoting elements that are empty,
// spell NULL, or contain braces, commas, quotes, backslashes or spaces.
func appendArray(dst []byte, ctx *Context, a *DArray) []byte {
	dst = append(dst, '{')
	var buf []byte
	for i, e := range a.Elems {
		if i > 0 {
			dst = append(dst, ',')
		}
		if IsNull(e) {
			dst = append(dst, "NULL"...)
			continue
		}
		buf = AppendFormat(buf[:0], ctx, a.Elem, e)
		if !arrayElemNeedsQuotes(buf) {
			dst = append(dst, buf...)
			continue
		}
		dst = append(dst, '"')
		for _, c := range buf {
			if c == '"' || c == '\\' {
				dst = append(dst, '\\')
			}
			dst = append(dst, c)
		}
		dst = append(dst, '"')
	}
	return append(dst, '}')
}

func arrayElemNeedsQuotes(s []byte) bool {
	if len(s) == 0 || strings.EqualFold(string(s), "null") {
		return true
	}
	for _, c := range s {
		switch c {
		case '{', '}', ',', '"', '\\', ' ', '\t', '\n', '\r', '\v', '\f':
			return true
		}
	}
	return false
}
