package types

import (
	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
)

// Every user-facing error this package returns is built here, so messages
// match Postgres's wording and codes in one place.

func errInvalidSyntax(t *T, s string) error {
	return pgerror.New(pgerrcode.InvalidTextRepresentation, "invalid input syntax for type %s: \"%s\"", t.Name(), s)
}

func errInputOutOfRange(t *T, s string) error {
	return pgerror.New(pgerrcode.NumericValueOutOfRange, "value \"%s\" is out of range for type %s", s, t.Name())
}

func errIntOutOfRange(t *T) error {
	return pgerror.New(pgerrcode.NumericValueOutOfRange, "%s out of range", t.Name())
}

func errFloatOutOfRange(s string, t *T) error {
	return pgerror.New(pgerrcode.NumericValueOutOfRange, "\"%s\" is out of range for type %s", s, t.Name())
}

func errNumericOverflow(p, s int32, infinite bool) error {
	e := pgerror.New(pgerrcode.NumericValueOutOfRange, "numeric field overflow")
	if !infinite {
		return e.WithDetail("A field with precision %d, scale %d must round to an absolute value less than 10^%d.", p, s, p-s)
	}
	return e.WithDetail("A field with precision %d, scale %d cannot hold an infinite value.", p, s)
}

func errDatetimeSyntax(t *T, s string) error {
	// Postgres's date/time input errors use the short type names.
	name := map[Family]string{DateFamily: "date", TimeFamily: "time", TimestampFamily: "timestamp",
		TimestampTZFamily: "timestamp with time zone", IntervalFamily: "interval"}[t.Family]
	return pgerror.New(pgerrcode.InvalidDatetimeFormat, "invalid input syntax for type %s: \"%s\"", name, s)
}

func errDatetimeField(s string) error {
	return pgerror.New(pgerrcode.DatetimeFieldOverflow, "date/time field value out of range: \"%s\"", s)
}

func errDatetimeRange(t *T) error {
	name := t.Name()
	switch t.Family {
	case TimestampFamily, TimestampTZFamily:
		name = "timestamp"
	}
	return pgerror.New(pgerrcode.DatetimeFieldOverflow, "%s out of range", name)
}

func errIntervalRange() error {
	return pgerror.New(pgerrcode.IntervalFieldOverflow, "interval out of range")
}

func errStringTooLong(t *T) error {
	return pgerror.New(pgerrcode.StringDataRightTruncationDataException, "value too long for type %s", t.Name())
}

func errInvalidUTF8(s string) error {
	// Postgres names the offending bytes; the first invalid one suffices.
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return pgerror.New(pgerrcode.CharacterNotInRepertoire, `invalid byte sequence for encoding "UTF8": 0x00`)
		}
	}
	bad := firstInvalidUTF8(s)
	return pgerror.New(pgerrcode.CharacterNotInRepertoire, `invalid byte sequence for encoding "UTF8": 0x%02x`, bad)
}

func errCannotCast(from, to *T) error {
	return pgerror.New(pgerrcode.CannotCoerce, "cannot cast type %s to %s", from.Name(), to.Name())
}

func errDatatypeMismatch(format string, args ...any) error {
	return pgerror.New(pgerrcode.DatatypeMismatch, format, args...)
}
