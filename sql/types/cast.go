package types

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cockroachdb/apd/v3"
	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
)

// CastKind is the weakest context in which a cast may be applied, as
// pg_cast.castcontext records it.
type CastKind uint8

// Cast contexts, from the most permissive to none.
const (
	CastNone CastKind = iota
	CastExplicit
	CastAssignment
	CastImplicit
)

// CastKindOf returns the context in which from may be cast to to,
// following Postgres's pg_cast for Cairn's types: widening numeric casts
// and the date/time promotions are implicit; narrowing ones, anything to a
// string type (by its output function) and timestamptz to timestamp are
// assignment casts; string to anything (by its input function), bool↔int4
// and jsonb to scalars are explicit only.
func CastKindOf(from, to *T) CastKind {
	if from.Family == UnknownFamily {
		return CastImplicit // an untyped literal takes any type
	}
	if from.Identical(to) || from.Family == to.Family && from.Oid == to.Oid {
		return CastImplicit // same type, possibly another typmod
	}
	ff, tf := from.Family, to.Family
	switch {
	case ff == ArrayFamily && tf == ArrayFamily:
		return CastKindOf(from.Elem, to.Elem)
	case tf == StringFamily:
		if ff == StringFamily {
			// "char" converts implicitly to text only, and other strings
			// to it by assignment (pg_cast), so that "char" = text is
			// text = text rather than ambiguous.
			if to.Oid == Char.Oid || from.Oid == Char.Oid && to.Oid != Text.Oid {
				return CastAssignment
			}
			return CastImplicit
		}
		return CastAssignment
	case ff == StringFamily:
		if to.Oid == RegClass.Oid && from.Oid == Text.Oid {
			return CastImplicit // pg_cast's text → regclass, for nextval('s'::text)
		}
		return CastExplicit
	}
	switch ff {
	case IntFamily:
		switch tf {
		case IntFamily:
			if to.Width > from.Width {
				return CastImplicit
			}
			return CastAssignment
		case FloatFamily, NumericFamily:
			return CastImplicit
		case OidFamily:
			// pg_cast: int2, int4 and int8 all become oid and the reg*
			// types implicitly, so that oid = smallint (SQLAlchemy's
			// reflection compares attnum-like int2 columns with oids)
			// resolves to oid = oid.
			return CastImplicit
		case BoolFamily:
			if from.Width == 32 {
				return CastExplicit
			}
		}
	case FloatFamily:
		switch tf {
		case FloatFamily:
			if to.Width > from.Width {
				return CastImplicit
			}
			return CastAssignment
		case IntFamily, NumericFamily:
			return CastAssignment
		}
	case NumericFamily:
		switch tf {
		case FloatFamily:
			return CastImplicit
		case IntFamily:
			return CastAssignment
		}
	case BoolFamily:
		if tf == IntFamily && to.Width == 32 {
			return CastExplicit
		}
	case OidFamily:
		if tf == IntFamily && to.Width >= 32 {
			return CastAssignment
		}
		// oid and each reg* alias type coerce implicitly into one another;
		// two different alias types do not (pg_cast has no such entry).
		if tf == OidFamily && (!IsReg(from) || !IsReg(to)) {
			return CastImplicit
		}
	case DateFamily:
		if tf == TimestampFamily || tf == TimestampTZFamily {
			return CastImplicit
		}
	case TimestampFamily:
		switch tf {
		case TimestampTZFamily:
			return CastImplicit
		case DateFamily, TimeFamily:
			return CastAssignment
		}
	case TimestampTZFamily:
		switch tf {
		case TimestampFamily, DateFamily, TimeFamily:
			return CastAssignment
		}
	case TimeFamily:
		if tf == IntervalFamily {
			return CastImplicit
		}
	case IntervalFamily:
		if tf == TimeFamily {
			return CastAssignment
		}
	case JSONBFamily:
		switch tf {
		case BoolFamily, IntFamily, FloatFamily, NumericFamily:
			return CastExplicit
		case JSONTextFamily:
			return CastAssignment
		}
	case JSONTextFamily:
		if tf == JSONBFamily {
			return CastAssignment
		}
	}
	return CastNone
}

// ImplicitCastAllowed reports whether from coerces to to without a cast
// (operator arguments, UNION/CASE branches).
func ImplicitCastAllowed(from, to *T) bool { return CastKindOf(from, to) >= CastImplicit }

// AssignmentCastAllowed reports whether a from value may be stored in a to
// column (INSERT, UPDATE SET).
func AssignmentCastAllowed(from, to *T) bool { return CastKindOf(from, to) >= CastAssignment }

// Cast converts d, a value of type from, to type to as an explicit CAST
// does. Values too long for varchar(n)/char(n) are truncated, numerics are
// rounded to to's scale, and out-of-range numbers are 22003. A cast
// Postgres does not have is 42846. from matters where a datum does not say
// everything (float4 keeps 6 digits into numeric, char(n) loses its padding
// into text, int4 wraps into oid); nil means the datum's widest type.
func Cast(ctx *Context, d Datum, from, to *T) (Datum, error) {
	return castDatum(ctx, d, from, to, true)
}

// AssignmentCast converts d for storage in a column of type to: like Cast
// except that a string too long for to is 22001 unless the excess is all
// spaces (SQL's rule). It does not check AssignmentCastAllowed; the binder
// does, once per statement.
func AssignmentCast(ctx *Context, d Datum, from, to *T) (Datum, error) {
	return castDatum(ctx, d, from, to, false)
}

func castDatum(ctx *Context, d Datum, from, to *T, explicit bool) (Datum, error) {
	if IsNull(d) {
		return DNull, nil
	}
	if from == nil || from.Family == UnknownFamily {
		from = datumType(d)
	}
	switch to.Family {
	case StringFamily:
		return castToString(ctx, d, from, to, explicit)
	case UnknownFamily:
		return d, nil
	}
	switch v := d.(type) {
	case DString:
		if to.Family == StringFamily {
			break
		}
		return ParseDatum(ctx, to, string(v))
	case DBool:
		switch to.Family {
		case BoolFamily:
			return v, nil
		case IntFamily:
			if v {
				return DInt(1), nil
			}
			return DInt(0), nil
		}
	case DInt:
		return castInt(v, from, to)
	case DFloat:
		return castFloat(v, from, to)
	case *DDecimal:
		return castDecimal(v, to)
	case DOid:
		switch to.Family {
		case OidFamily:
			return v, nil
		case IntFamily:
			if to.Width == 32 {
				return DInt(int32(uint32(v))), nil // binary coercion, as Postgres
			}
			return castInt(DInt(v), Int8, to)
		}
	case DBytes:
		if to.Family == BytesFamily {
			return v, nil
		}
	case DEnum:
		// Only to the same enum type (CastKindOf has no other): the value
		// is found again among to's members, so a label renamed since the
		// value was read prints as it now is.
		if to.Family == EnumFamily && (from.Family != EnumFamily || from.Oid == to.Oid) {
			return EnumFromPhysRep(to, []byte(v.PhysRep))
		}
	case DUUID:
		if to.Family == UUIDFamily {
			return v, nil
		}
	case DDate:
		return castDate(ctx, v, to)
	case DTimestamp:
		return castTimestamp(ctx, int64(v), false, to)
	case DTimestampTZ:
		return castTimestamp(ctx, int64(v), true, to)
	case DTime:
		switch to.Family {
		case TimeFamily:
			return roundTime(to, v), nil
		case IntervalFamily:
			return DInterval{Micros: int64(v)}, nil
		}
	case DInterval:
		switch to.Family {
		case IntervalFamily:
			return v, nil
		case TimeFamily:
			us := v.Micros % microsPerDay
			if us < 0 {
				us += microsPerDay
			}
			return roundTime(to, DTime(us)), nil
		}
	case *DJSON:
		return castJSON(v, to)
	case DJSONText:
		switch to.Family {
		case JSONTextFamily:
			return v, nil
		case JSONBFamily:
			return ParseDatum(ctx, to, string(v))
		}
	case *DArray:
		if to.Family == ArrayFamily {
			out := &DArray{Elem: to.Elem, Elems: make([]Datum, len(v.Elems)), ZeroBased: v.ZeroBased || IsVector(to)}
			for i, e := range v.Elems {
				c, err := castDatum(ctx, e, from.Elem, to.Elem, explicit)
				if err != nil {
					return nil, err
				}
				out.Elems[i] = c
			}
			return out, nil
		}
	}
	return nil, errCannotCast(datumType(d), to)
}

// datumType names a datum's widest type, for error messages.
func datumType(d Datum) *T {
	switch d.Family() {
	case IntFamily:
		return Int8
	case FloatFamily:
		return Float8
	case StringFamily:
		return Text
	case ArrayFamily:
		return MustArray(d.(*DArray).Elem)
	case RecordFamily:
		return d.(*DTuple).T
	}
	for _, t := range Scalars {
		if t.Family == d.Family() {
			return t
		}
	}
	return Unknown
}

func castToString(ctx *Context, d Datum, from, to *T, explicit bool) (Datum, error) {
	var s string
	if v, ok := d.(DString); ok {
		s = string(v)
		if from.Oid == BPChar.Oid && to.Oid != BPChar.Oid {
			s = string(BPCharTrim(v))
		}
	} else if v, ok := d.(DBool); ok {
		// booltext spells the words out; only boolout abbreviates.
		s = strconv.FormatBool(bool(v))
	} else {
		s = Format(ctx, from, d)
	}
	switch to.Oid {
	case Name.Oid:
		return DString(clipName(s)), nil
	case Char.Oid:
		// charin keeps the first byte (a multibyte character is cut, as
		// in PostgreSQL with a UTF-8 database, where "char" is a byte).
		if len(s) > 1 {
			s = s[:1]
		}
		return DString(s), nil
	}
	r, err := checkLength(s, to, explicit)
	if err != nil || to.Oid != BPChar.Oid || to.Width == 0 {
		return r, err
	}
	// char(n) stores its values padded to n characters.
	if n := utf8.RuneCountInString(string(r.(DString))); n < int(to.Width) {
		return DString(string(r.(DString)) + strings.Repeat(" ", int(to.Width)-n)), nil
	}
	return r, nil
}

// checkLength enforces varchar(n)/char(n): truncate on explicit casts;
// on assignment, truncate only if the excess is spaces, else 22001.
func checkLength(s string, to *T, explicit bool) (Datum, error) {
	if to.Width == 0 || len(s) <= int(to.Width) {
		return DString(s), nil
	}
	n := 0
	for i := range s {
		if n == int(to.Width) {
			if !explicit && strings.TrimRight(s[i:], " ") != "" {
				return nil, errStringTooLong(to)
			}
			return DString(s[:i]), nil
		}
		n++
	}
	return DString(s), nil
}

// clipName cuts s to the NameDataLen-1 bytes a name holds, at a character
// boundary (namein's pg_mbcliplen): identifiers and name values longer
// than 63 bytes are truncated silently, never rejected.
func clipName(s string) string {
	if len(s) < NameDataLen {
		return s
	}
	n := NameDataLen - 1
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// NameByte is name subscripting (PostgreSQL stores a name as a fixed
// char[NAMEDATALEN] and lets it be subscripted like an array counted from
// 0): byte i of s as a "char", "" past its end and NULL outside the
// storage.
func NameByte(s DString, i int64) Datum {
	switch {
	case i < 0 || i >= NameDataLen:
		return DNull
	case i >= int64(len(s)):
		return DString("")
	}
	return DString(s[i : i+1])
}

// BPCharTrim returns a char(n) value without its padding, which is how
// Postgres compares, concatenates and casts it to text.
func BPCharTrim(s DString) DString { return DString(strings.TrimRight(string(s), " ")) }

func castInt(v DInt, from, to *T) (Datum, error) {
	switch to.Family {
	case IntFamily:
		lo, hi := intBounds(to)
		if int64(v) < lo || int64(v) > hi {
			return nil, errIntOutOfRange(to)
		}
		return v, nil
	case FloatFamily:
		if to.Width == 32 {
			return DFloat(float32(v)), nil
		}
		return DFloat(v), nil
	case NumericFamily:
		d := &DDecimal{}
		d.SetInt64(int64(v))
		return d, applyNumericTypmod(to, d)
	case BoolFamily:
		return DBool(v != 0), nil
	case OidFamily:
		if from.Width == 32 {
			return DOid(uint32(int32(v))), nil // binary coercion: -1 is 4294967295
		}
		if v < 0 || v > math.MaxUint32 {
			return nil, pgerror.New(pgerrcode.NumericValueOutOfRange, "OID out of range")
		}
		return DOid(uint32(v)), nil
	}
	return nil, errCannotCast(Int8, to)
}

func castFloat(v DFloat, from, to *T) (Datum, error) {
	f := float64(v)
	switch to.Family {
	case FloatFamily:
		if to.Width == 32 {
			g := float32(f)
			if math.IsInf(float64(g), 0) && !math.IsInf(f, 0) {
				return nil, pgerror.New(pgerrcode.NumericValueOutOfRange, "value out of range: overflow")
			}
			if g == 0 && f != 0 {
				return nil, pgerror.New(pgerrcode.NumericValueOutOfRange, "value out of range: underflow")
			}
			return DFloat(g), nil
		}
		return v, nil
	case IntFamily:
		// Postgres rounds half to even here (rint), unlike numeric.
		r := math.RoundToEven(f)
		lo, hi := intBounds(to)
		if math.IsNaN(r) || r < float64(lo) || r >= -float64(lo) || int64(r) > hi {
			return nil, errIntOutOfRange(to)
		}
		return DInt(int64(r)), nil
	case NumericFamily:
		d := &DDecimal{}
		switch {
		case math.IsNaN(f):
			d.Form = apd.NaN
		case math.IsInf(f, 0):
			d.Form, d.Negative = apd.Infinite, f < 0
		default:
			// Postgres's float8_numeric keeps DBL_DIG (15) significant
			// digits, float4_numeric FLT_DIG (6).
			digits := 14
			if from.Family == FloatFamily && from.Width == 32 {
				digits = 5
			}
			if _, _, err := d.SetString(strconv.FormatFloat(f, 'e', digits, 64)); err != nil {
				return nil, err
			}
			var r apd.Decimal
			r.Reduce(&d.Decimal)
			d.Decimal = r
			if d.Exponent > 0 {
				_, _ = decimalCtx.Quantize(&d.Decimal, &d.Decimal, 0)
			}
			normalizeZero(&d.Decimal)
		}
		return d, applyNumericTypmod(to, d)
	}
	return nil, errCannotCast(Float8, to)
}

func castDecimal(v *DDecimal, to *T) (Datum, error) {
	switch to.Family {
	case NumericFamily:
		if to.Precision == 0 {
			return v, nil
		}
		d := NewDecimal(&v.Decimal)
		return d, applyNumericTypmod(to, d)
	case FloatFamily:
		f := decimalToFloat(&v.Decimal)
		if math.IsInf(f, 0) && v.Form == apd.Finite {
			return nil, pgerror.New(pgerrcode.NumericValueOutOfRange, "value out of range: overflow")
		}
		if to.Width == 32 {
			return castFloat(DFloat(f), Float8, to)
		}
		return DFloat(f), nil
	case IntFamily:
		if v.Form != apd.Finite {
			return nil, pgerror.New(pgerrcode.FeatureNotSupported, "cannot convert %s to %s", Format(nil, Numeric, v), to.Name())
		}
		var r apd.Decimal
		if _, err := decimalCtx.RoundToIntegralValue(&r, &v.Decimal); err != nil {
			return nil, errIntOutOfRange(to)
		}
		n, err := r.Int64()
		if err != nil {
			return nil, errIntOutOfRange(to)
		}
		return castInt(DInt(n), Int8, to)
	}
	return nil, errCannotCast(Numeric, to)
}

func castDate(ctx *Context, v DDate, to *T) (Datum, error) {
	var us int64
	switch v {
	case DateNegInfinity:
		us = TimestampNegInfinity
	case DatePosInfinity:
		us = TimestampPosInfinity
	default:
		us = int64(v) * microsPerDay
	}
	switch to.Family {
	case DateFamily:
		return v, nil
	case TimestampFamily:
		return DTimestamp(us), nil
	case TimestampTZFamily:
		if us == TimestampNegInfinity || us == TimestampPosInfinity {
			return DTimestampTZ(us), nil
		}
		return DTimestampTZ(wallToUTC(us, ctx.location())), nil
	}
	return nil, errCannotCast(Date, to)
}

func castTimestamp(ctx *Context, us int64, tz bool, to *T) (Datum, error) {
	from := Timestamp
	if tz {
		from = TimestampTZ
	}
	inf := us == TimestampNegInfinity || us == TimestampPosInfinity
	wall := us
	if tz && !inf && to.Family != TimestampTZFamily {
		wall = utcToWall(us, ctx.location())
	}
	switch to.Family {
	case TimestampFamily:
		return DTimestamp(roundTimestamp(to, wall)), nil
	case TimestampTZFamily:
		if !tz && !inf {
			return DTimestampTZ(roundTimestamp(to, wallToUTC(us, ctx.location()))), nil
		}
		return DTimestampTZ(roundTimestamp(to, us)), nil
	case DateFamily:
		switch {
		case us == TimestampNegInfinity:
			return DateNegInfinity, nil
		case us == TimestampPosInfinity:
			return DatePosInfinity, nil
		}
		return DDate(floorDiv(wall, microsPerDay)), nil
	case TimeFamily:
		if inf {
			return nil, errDatetimeRange(from)
		}
		return roundTime(to, DTime(wall-floorDiv(wall, microsPerDay)*microsPerDay)), nil
	}
	return nil, errCannotCast(from, to)
}

func castJSON(v *DJSON, to *T) (Datum, error) {
	j := v.JSON
	switch to.Family {
	case JSONBFamily:
		return v, nil
	case JSONTextFamily:
		return DJSONText(j.String()), nil
	case BoolFamily:
		if j.Kind == JSONBool {
			return DBool(j.Bool), nil
		}
	case IntFamily, FloatFamily, NumericFamily:
		if j.Kind == JSONNumber {
			return castDecimal(&DDecimal{*j.Num}, to)
		}
	default:
		return nil, errCannotCast(JSONB, to)
	}
	return nil, pgerror.New(pgerrcode.InvalidParameterValue, "cannot cast jsonb %s to type %s", j.Kind, to.Name())
}

// Category is pg_type.typcategory and typispreferred: the category drives
// common-type resolution here and overload resolution in sql/builtins.
func (t *T) Category() (cat byte, preferred bool) {
	switch t.Family {
	case BoolFamily:
		return 'B', true
	case IntFamily, NumericFamily:
		return 'N', false
	case FloatFamily:
		return 'N', t.Width == 64
	case OidFamily:
		return 'N', !IsReg(t)
	case StringFamily:
		if t.Oid == Char.Oid {
			return 'Z', false // an internal type in pg_type, as "char" is
		}
		return 'S', t.Oid == Text.Oid
	case DateFamily, TimeFamily, TimestampFamily:
		return 'D', false
	case TimestampTZFamily:
		return 'D', true
	case IntervalFamily:
		return 'T', true
	case ArrayFamily:
		return 'A', false
	case EnumFamily:
		return 'E', false
	case UnknownFamily:
		return 'X', false
	}
	return 'U', false
}

// CommonType resolves the type of UNION/CASE/VALUES branches and of
// operators' mixed arguments as Postgres's select_common_type does:
// untyped literals adopt the others' type (text if all are untyped); the
// types must share a category; a later type wins when the current one is
// not preferred and coerces implicitly to it but not back; every input must
// then coerce implicitly to the winner. what names the construct for the
// error message ("UNION", "CASE"); a mismatch is 42804.
func CommonType(what string, ts ...*T) (*T, error) {
	var res *T
	allSame := true
	for _, t := range ts {
		if t.Family == UnknownFamily {
			continue
		}
		if res == nil {
			res = t
			continue
		}
		if !t.Identical(res) {
			allSame = false
		}
		if t.Family == res.Family && t.Oid == res.Oid {
			continue
		}
		rc, rp := res.Category()
		tc, _ := t.Category()
		if rc != tc {
			return nil, errDatatypeMismatch("%stypes %s and %s cannot be matched", prefix(what), res.Name(), t.Name())
		}
		if !rp && ImplicitCastAllowed(res, t) && !ImplicitCastAllowed(t, res) {
			res = t
		}
	}
	if res == nil {
		return Text, nil
	}
	for _, t := range ts {
		if !ImplicitCastAllowed(t, res) {
			return nil, errDatatypeMismatch("%scould not convert type %s to %s", prefix(what), t.Name(), res.Name())
		}
	}
	if !allSame {
		res = baseType(res)
	}
	return res, nil
}

func prefix(what string) string {
	if what == "" {
		return ""
	}
	return what + " "
}

// baseType drops a type's modifiers (varchar(3) → varchar).
func baseType(t *T) *T {
	if t.Family == ArrayFamily {
		return MustArray(baseType(t.Elem))
	}
	if u, ok := OidToType(t.Oid); ok {
		return u
	}
	return t
}
