package types

import (
	"math"
	"time"

	"github.com/cockroachdb/apd/v3"
)

// Datum is one SQL value. The concrete types below are small values (an
// int64, a string header, a pointer) so the executor moves datums without
// allocating; the few variable-size kinds (numeric, jsonb, arrays) are
// pointers and must be treated as immutable once built, which lets rows
// share them.
//
// A Datum does not carry its full SQL type: int2, int4 and int8 are all
// DInt, and text, varchar(n) and char(n) are all DString. The column's *T
// supplies the rest wherever it matters (range checks, float4 printing,
// wire OIDs), which keeps datums one word or two and makes cross-width
// comparison free.
type Datum interface {
	// Family returns the family of the value (UnknownFamily for NULL).
	Family() Family
	// String returns the Postgres text form, assuming the widest type of the
	// family (float8 for floats) and UTC for timestamptz. Use Format when
	// the column type or session zone matters.
	String() string
}

type dNull struct{}

// DNull is the SQL NULL. Compare it with ==, or use IsNull.
var DNull Datum = dNull{}

func (dNull) Family() Family { return UnknownFamily }
func (dNull) String() string { return "NULL" }

// IsNull reports whether d is NULL (a nil interface counts as NULL too).
func IsNull(d Datum) bool { return d == nil || d == DNull }

// DBool is a boolean.
type DBool bool

// DInt is an int2, int4 or int8; the column type bounds its range.
type DInt int64

// DFloat is a float4 or float8. float4 values are always stored already
// rounded to float32 precision.
type DFloat float64

// DDecimal is a numeric. NaN and ±Infinity are apd's special forms; a zero
// is never negative.
type DDecimal struct{ apd.Decimal }

// DString is a text, varchar or bpchar value; bpchar values are stored padded
// to their declared length, as Postgres stores them.
type DString string

// DBytes is a bytea value (the string holds raw bytes).
type DBytes string

// DDate counts days since 1970-01-01; math.MinInt32 and math.MaxInt32 are
// -infinity and infinity.
type DDate int32

// DTime is a time of day in microseconds since midnight (0 to 24h inclusive).
type DTime int64

// DTimestamp is a timestamp without time zone: microseconds since
// 1970-01-01 00:00:00 on the wall clock; math.MinInt64 and math.MaxInt64
// are -infinity and infinity.
type DTimestamp int64

// DTimestampTZ is an instant: microseconds since the Unix epoch in UTC, with
// the same infinities as DTimestamp.
type DTimestampTZ int64

// DInterval is a Postgres interval: months, days and microseconds kept
// apart because their lengths vary.
type DInterval struct {
	Months int32
	Days   int32
	Micros int64
}

// DUUID is a uuid.
type DUUID [16]byte

// DJSON is a jsonb value.
type DJSON struct{ JSON }

// DJSONText is a json value: its input text exactly as written (checked
// to be valid JSON), as PostgreSQL's json type keeps it.
type DJSONText string

// DOid is an oid.
type DOid uint32

// DArray is a one-dimensional array with lower bound 1. Elems may hold DNull.
type DArray struct {
	Elem  *T
	Elems []Datum
	// ZeroBased arrays are subscripted from 0 (int2vector, oidvector and
	// what is cast from them); the others from 1. See vector.go.
	ZeroBased bool
}

func (DBool) Family() Family        { return BoolFamily }
func (DInt) Family() Family         { return IntFamily }
func (DFloat) Family() Family       { return FloatFamily }
func (*DDecimal) Family() Family    { return NumericFamily }
func (DString) Family() Family      { return StringFamily }
func (DBytes) Family() Family       { return BytesFamily }
func (DDate) Family() Family        { return DateFamily }
func (DTime) Family() Family        { return TimeFamily }
func (DTimestamp) Family() Family   { return TimestampFamily }
func (DTimestampTZ) Family() Family { return TimestampTZFamily }
func (DInterval) Family() Family    { return IntervalFamily }
func (DUUID) Family() Family        { return UUIDFamily }
func (*DJSON) Family() Family       { return JSONBFamily }
func (DJSONText) Family() Family    { return JSONTextFamily }
func (DOid) Family() Family         { return OidFamily }
func (*DArray) Family() Family      { return ArrayFamily }

func (d DBool) String() string        { return Format(nil, Bool, d) }
func (d DInt) String() string         { return Format(nil, Int8, d) }
func (d DFloat) String() string       { return Format(nil, Float8, d) }
func (d *DDecimal) String() string    { return Format(nil, Numeric, d) }
func (d DString) String() string      { return string(d) }
func (d DBytes) String() string       { return Format(nil, Bytea, d) }
func (d DDate) String() string        { return Format(nil, Date, d) }
func (d DTime) String() string        { return Format(nil, Time, d) }
func (d DTimestamp) String() string   { return Format(nil, Timestamp, d) }
func (d DTimestampTZ) String() string { return Format(nil, TimestampTZ, d) }
func (d DInterval) String() string    { return Format(nil, Interval, d) }
func (d DUUID) String() string        { return Format(nil, UUID, d) }
func (d *DJSON) String() string       { return d.JSON.String() }
func (d DJSONText) String() string    { return string(d) }
func (d DOid) String() string         { return Format(nil, Oid, d) }
func (d *DArray) String() string      { return Format(nil, MustArray(d.Elem), d) }

// Infinite dates and timestamps, named for readability at call sites.
const (
	DateNegInfinity      = DDate(math.MinInt32)
	DatePosInfinity      = DDate(math.MaxInt32)
	TimestampNegInfinity = math.MinInt64
	TimestampPosInfinity = math.MaxInt64
)

// Ranges accepted: Julian day 0 (4714-11-24 BC), as in Postgres, up to,
// excluding, 5874898-01-01 for dates and 294247-01-01 for timestamps.
// Postgres counts timestamps from 2000 and reaches 294277; counting from 1970
// in an int64 costs the last 30 of those years, and keeps every conversion to
// time.Time and pgtype simple.
const (
	unixEpochJulian = 2440588
	minDateDays     = -unixEpochJulian
	maxDateDays     = 2147483494 - unixEpochJulian // exclusive
	microsPerSec    = 1_000_000
	microsPerDay    = 86_400 * microsPerSec
	minTimestamp    = int64(minDateDays) * microsPerDay
	maxTimestamp    = int64(9223371244800000000) // 294247-01-01, exclusive
)

// NewDecimal returns a DDecimal holding a copy of d.
func NewDecimal(d *apd.Decimal) *DDecimal {
	r := &DDecimal{}
	r.Set(d)
	normalizeZero(&r.Decimal)
	return r
}

// NewJSON wraps a JSON value as a datum.
func NewJSON(j JSON) *DJSON { return &DJSON{j} }

// NewArray builds an array datum of elem values.
func NewArray(elem *T, elems ...Datum) *DArray { return &DArray{Elem: elem, Elems: elems} }

// TimestampFromTime converts t to a DTimestamp using its wall clock fields.
func TimestampFromTime(t time.Time) DTimestamp {
	y, m, d := t.Date()
	wall := time.Date(y, m, d, t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
	return DTimestamp(wall.Unix()*microsPerSec + int64(wall.Nanosecond()/1000))
}

// TimestampTZFromTime converts an instant to a DTimestampTZ.
func TimestampTZFromTime(t time.Time) DTimestampTZ {
	return DTimestampTZ(t.Unix()*microsPerSec + int64(t.Nanosecond()/1000))
}

// Time returns the wall clock of a finite timestamp as a UTC time.Time.
func (d DTimestamp) Time() time.Time { return microsToTime(int64(d)) }

// Time returns a finite timestamptz as a time.Time in UTC.
func (d DTimestampTZ) Time() time.Time { return microsToTime(int64(d)) }

func microsToTime(us int64) time.Time {
	sec := floorDiv(us, microsPerSec)
	return time.Unix(sec, (us-sec*microsPerSec)*1000).UTC()
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// Context carries the session settings that change how values are parsed,
// printed and cast. A nil *Context means UTC.
type Context struct {
	// Location is the session TimeZone, used for timestamptz text and for
	// casts between timestamptz and timestamp/date.
	Location *time.Location
	// Reg resolves catalog names for the reg* types (regclass, regproc,
	// regnamespace); nil: names cannot be resolved and OIDs print as
	// numbers.
	Reg RegResolver
}

func (c *Context) location() *time.Location {
	if c == nil || c.Location == nil {
		return time.UTC
	}
	return c.Location
}
