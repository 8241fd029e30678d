// Package copyfmt splits and builds the data of COPY FROM STDIN and COPY TO
// STDOUT in PostgreSQL's three formats: text, CSV and binary.
//
// The pgwire server hands a session the raw CopyData stream; the SQL layer
// uses this package to turn it into rows of fields (and rows back into
// bytes), then converts fields to datums with the column types it knows.
// copyfmt knows nothing about types or columns and touches nothing else.
//
// Invariants:
//
//  1. A field is []byte; a nil field is SQL NULL, a non-nil empty field is
//     the empty string. Text and CSV fields are the de-escaped text form,
//     binary fields the type's binary send format.
//  2. For every row r of any fields, reading AppendRow(r) with the same
//     Options yields r again (round trip), in all three formats.
//  3. Reader never holds more than one row plus its bufio buffer; a row
//     larger than Options.MaxRowSize is an error, not an allocation.
//  4. Malformed input is an error with SQLSTATE 22P04 (bad_copy_file_format)
//     and never a panic.
package copyfmt

import (
	"errors"
	"fmt"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/jackc/pgerrcode"
)

// Format is the COPY format.
type Format int

// The COPY formats.
const (
	Text Format = iota
	CSV
	Binary
)

func (f Format) String() string {
	switch f {
	case Text:
		return "text"
	case CSV:
		return "csv"
	case Binary:
		return "binary"
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// DefaultMaxRowSize bounds one row read by Reader.
const DefaultMaxRowSize = 64 << 20

// Options are the COPY options that shape rows and fields.
type Options struct {
	Format    Format
	Delimiter byte   // default tab (text) or comma (CSV)
	Null      string // default `\N` (text) or "" (CSV); nil-able via NullSet
	NullSet   bool   // Null was given explicitly (so "" is honoured in text)
	Quote     byte   // CSV only; default '"'
	Escape    byte   // CSV only; default Quote
	Header    bool   // first line is a header (text and CSV)
	// MaxRowSize bounds one row in bytes (default DefaultMaxRowSize).
	MaxRowSize int
}

// ErrOptions is wrapped by Validate for inconsistent options.
var ErrOptions = errors.New("copyfmt: invalid COPY options")

// withDefaults fills zero values with PostgreSQL's defaults.
func (o Options) withDefaults() Options {
	switch o.Format {
	case Text:
		if o.Delimiter == 0 {
			o.Delimiter = '\t'
		}
		if !o.NullSet && o.Null == "" {
			o.Null = `\N`
		}
	case CSV:
		if o.Delimiter == 0 {
			o.Delimiter = ','
		}
		if o.Quote == 0 {
			o.Quote = '"'
		}
		if o.Escape == 0 {
			o.Escape = o.Quote
		}
	}
	if o.MaxRowSize <= 0 {
		o.MaxRowSize = DefaultMaxRowSize
	}
	return o
}

// Validate reports options PostgreSQL would reject, with SQLSTATE 22023.
func (o Options) Validate() error {
	o = o.withDefaults()
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %w", ErrOptions, pgerror.New(pgerrcode.InvalidParameterValue, format, args...))
	}
	switch o.Format {
	case Text, CSV:
		if o.Delimiter == '\n' || o.Delimiter == '\r' {
			return bad("COPY delimiter cannot be newline or carriage return")
		}
		if o.Format == Text && (o.Delimiter == '\\' || (o.Delimiter >= 'a' && o.Delimiter <= 'z') || (o.Delimiter >= '0' && o.Delimiter <= '9') || o.Delimiter == '.') {
			return bad("COPY delimiter cannot be %q", o.Delimiter)
		}
		if o.Format == CSV && (o.Delimiter == o.Quote) {
			return bad("COPY delimiter and quote must be different")
		}
		for _, c := range []byte(o.Null) {
			if c == '\n' || c == '\r' {
				return bad("COPY null representation cannot use newline or carriage return")
			}
		}
	case Binary:
		if o.Header {
			return nil // binary has its own header; HEADER is accepted and ignored there
		}
	default:
		return bad("COPY format %q not recognized", o.Format)
	}
	if o.Format != CSV && (o.Quote != 0 || o.Escape != 0) {
		return bad("COPY quote and escape are available only in CSV mode")
	}
	return nil
}

func badFormat(format string, args ...any) error {
	return pgerror.New(pgerrcode.BadCopyFileFormat, format, args...)
}
