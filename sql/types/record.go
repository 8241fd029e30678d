package types

import (
	"encoding/binary"

	"github.com/jackc/pgx/v5/pgtype"
)

// Records: anonymous composite values, PostgreSQL's record type (OID
// 2249). Cairn makes them where PostgreSQL does for clients' catalog
// queries: ROW(a, b) outside a comparison, and a set-returning function of
// several columns called in a select list (pgjdbc's
// information_schema._pg_expandarray(indkey), read back as (keys).x). A
// record is a value only: it cannot be stored in a table column or be read
// from a client, and goes to clients as text or in record_send's binary
// form (pgx asks for that).
//
// Invariants:
//  1. A *DTuple has exactly len(T.Fields) elements, element i of type
//     T.Fields[i].T (or NULL).
//  2. Records compare field by field with Compare's rules (a NULL field
//     sorts above any value), then by length, as PostgreSQL's record_cmp
//     orders records of the same shape.

// Field is one named field of a record type.
type Field struct {
	Name string
	T    *T
}

// MakeRecord returns the record type with the given fields.
func MakeRecord(fields []Field) *T {
	return &T{Family: RecordFamily, Oid: pgtype.RecordOID, Fields: fields}
}

// FieldIndex returns the position of the field named name, or -1.
func (t *T) FieldIndex(name string) int {
	for i, f := range t.Fields {
		if f.Name == name {
			return i
		}
	}
	return -1
}

// DTuple is a record value of type T.
type DTuple struct {
	T     *T
	Elems []Datum
}

// Family implements Datum.
func (*DTuple) Family() Family { return RecordFamily }

// String implements Datum: record_out's text, (a,b,).
func (d *DTuple) String() string { return Format(nil, d.T, d) }

// appendRecord prints (a,"b c",) as PostgreSQL's record_out does: a NULL
// field is empty, and a field that is empty or contains a quote,
// backslash, parenthesis, comma or white space is double-quoted, with
// quotes and backslashes doubled.
func appendRecord(dst []byte, ctx *Context, r *DTuple) []byte {
	dst = append(dst, '(')
	var buf []byte
	for i, e := range r.Elems {
		if i > 0 {
			dst = append(dst, ',')
		}
		if IsNull(e) {
			continue
		}
		var ft *T
		if r.T != nil && i < len(r.T.Fields) {
			ft = r.T.Fields[i].T
		}
		buf = AppendFormat(buf[:0], ctx, ft, e)
		if !recordFieldNeedsQuotes(buf) {
			dst = append(dst, buf...)
			continue
		}
		dst = append(dst, '"')
		for _, c := range buf {
			if c == '"' || c == '\\' {
				dst = append(dst, c)
			}
			dst = append(dst, c)
		}
		dst = append(dst, '"')
	}
	return append(dst, ')')
}

func recordFieldNeedsQuotes(s []byte) bool {
	if len(s) == 0 {
		return true
	}
	for _, c := range s {
		switch c {
		case '"', '\\', '(', ')', ',', ' ', '\t', '\n', '\r', '\v', '\f':
			return true
		}
	}
	return false
}

func compareRecords(x, y *DTuple) int {
	for i := range min(len(x.Elems), len(y.Elems)) {
		if c := Compare(x.Elems[i], y.Elems[i]); c != 0 {
			return c
		}
	}
	switch {
	case len(x.Elems) < len(y.Elems):
		return -1
	case len(x.Elems) > len(y.Elems):
		return 1
	}
	return 0
}

// appendRecordBinary appends r as PostgreSQL's record_send writes it: the
// field count, then each field's type OID, length (-1: NULL) and binary
// value.
func appendRecordBinary(dst []byte, r *DTuple) ([]byte, error) {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(r.Elems)))
	for i, e := range r.Elems {
		ft := r.T.Fields[i].T
		dst = binary.BigEndian.AppendUint32(dst, wireOID(ft))
		if IsNull(e) {
			dst = binary.BigEndian.AppendUint32(dst, 0xffffffff)
			continue
		}
		at := len(dst)
		dst = append(dst, 0, 0, 0, 0)
		var err error
		if dst, err = EncodeBinary(dst, ft, e); err != nil {
			return nil, err
		}
		binary.BigEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
	}
	return dst, nil
}
