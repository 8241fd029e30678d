package types

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/cairn-db/cairn/sql/pgerror"
)

// Family groups types that share a datum representation and comparison.
type Family uint8

// The families. The zero Family is invalid so an uninitialized T is caught.
const (
	_ Family = iota
	UnknownFamily
	BoolFamily
	IntFamily     // int2, int4, int8 (Width 16, 32, 64)
	FloatFamily   // float4, float8 (Width 32, 64)
	NumericFamily // numeric(p,s)
	StringFamily  // text, varchar(n), bpchar(n)
	BytesFamily
	DateFamily
	TimeFamily
	TimestampFamily
	TimestampTZFamily
	IntervalFamily
	UUIDFamily
	JSONBFamily
	OidFamily
	ArrayFamily
	// JSONTextFamily is the json type: the text as written, validated.
	// (Appended last: family numbers must not move.)
	JSONTextFamily
	// EnumFamily is a user-defined enum type (CREATE TYPE ... AS ENUM);
	// its members are in T.Enum (see enum.go).
	EnumFamily
	// RecordFamily is an anonymous composite value, PostgreSQL's record
	// (ROW(...), a set-returning function of several columns in a select
	// list); its fields are in T.Fields (see record.go).
	RecordFamily
)

var familyNames = [...]string{
	UnknownFamily: "unknown", BoolFamily: "bool", IntFamily: "int", FloatFamily: "float",
	NumericFamily: "numeric", StringFamily: "string", BytesFamily: "bytes", DateFamily: "date",
	TimeFamily: "time", TimestampFamily: "timestamp", TimestampTZFamily: "timestamptz",
	IntervalFamily: "interval", UUIDFamily: "uuid", JSONBFamily: "jsonb", OidFamily: "oid",
	ArrayFamily: "array", JSONTextFamily: "json", EnumFamily: "enum",
	RecordFamily: "record",
}

func (f Family) String() string {
	if int(f) < len(familyNames) && familyNames[f] != "" {
		return familyNames[f]
	}
	return "Family(" + strconv.Itoa(int(f)) + ")"
}

// T describes a SQL type. Ts are immutable once built; share them freely.
type T struct {
	Family Family
	Oid    uint32
	// Width is the bit width of ints and floats and the declared length n of
	// varchar(n)/char(n) (0: unbounded).
	Width int32
	// Precision and Scale are numeric(p,s) (Precision 0: unconstrained) and
	// the fractional-second precision of time and timestamps (-1: default 6).
	Precision int32
	Scale     int32
	// Elem is the element type of an array.
	Elem *T
	// Enum holds the labels of an EnumFamily type (nil otherwise).
	Enum *EnumMeta
	// Domain, when set, makes this a domain over the type the other
	// fields describe (domain.go).
	Domain *DomainMeta
	// Fields are the named fields of a RecordFamily type, in order.
	Fields []Field
}

// The built-in types. Ts with modifiers are built by MakeVarChar, MakeChar,
// MakeNumeric, MakeTimestamp and MakeArray.
var (
	Unknown     = &T{Family: UnknownFamily, Oid: pgtype.UnknownOID}
	Bool        = &T{Family: BoolFamily, Oid: pgtype.BoolOID}
	Int2        = &T{Family: IntFamily, Oid: pgtype.Int2OID, Width: 16}
	Int4        = &T{Family: IntFamily, Oid: pgtype.Int4OID, Width: 32}
	Int8        = &T{Family: IntFamily, Oid: pgtype.Int8OID, Width: 64}
	Float4      = &T{Family: FloatFamily, Oid: pgtype.Float4OID, Width: 32}
	Float8      = &T{Family: FloatFamily, Oid: pgtype.Float8OID, Width: 64}
	Numeric     = &T{Family: NumericFamily, Oid: pgtype.NumericOID}
	Text        = &T{Family: StringFamily, Oid: pgtype.TextOID}
	VarChar     = &T{Family: StringFamily, Oid: pgtype.VarcharOID}
	BPChar      = &T{Family: StringFamily, Oid: pgtype.BPCharOID} // bare "bpchar": no length, no padding
	Bytea       = &T{Family: BytesFamily, Oid: pgtype.ByteaOID}
	Date        = &T{Family: DateFamily, Oid: pgtype.DateOID}
	Time        = &T{Family: TimeFamily, Oid: pgtype.TimeOID, Precision: -1}
	Timestamp   = &T{Family: TimestampFamily, Oid: pgtype.TimestampOID, Precision: -1}
	TimestampTZ = &T{Family: TimestampTZFamily, Oid: pgtype.TimestamptzOID, Precision: -1}
	Interval    = &T{Family: IntervalFamily, Oid: pgtype.IntervalOID}
	UUID        = &T{Family: UUIDFamily, Oid: pgtype.UUIDOID}
	JSONB       = &T{Family: JSONBFamily, Oid: pgtype.JSONBOID}
	// JSONText is the json type (OID 114), which keeps its input text as
	// written: whitespace, key order and duplicate keys.
	JSONText = &T{Family: JSONTextFamily, Oid: pgtype.JSONOID}
	Oid      = &T{Family: OidFamily, Oid: pgtype.OIDOID}
	// Name is PostgreSQL's name (OID 19), the type of identifiers in the
	// system catalogs (pg_class.relname, pg_type.typname, ...): a string
	// of at most NameDataLen-1 bytes, longer input silently cut (as
	// PostgreSQL's namein does). Subscripting one gives its bytes as
	// "char", counted from 0 (pg_dump's typname[0] = '_').
	Name = &T{Family: StringFamily, Oid: pgtype.NameOID}
	// Char is PostgreSQL's single-byte "char" (OID 18, the quoted name;
	// unquoted char is char(1)): the first byte of its input, or none.
	Char = &T{Family: StringFamily, Oid: pgtype.QCharOID}
)

// NameDataLen is PostgreSQL's NAMEDATALEN: a name holds at most
// NameDataLen-1 bytes, and subscripts 0..NameDataLen-1 of a name are
// within its fixed-size storage.
const NameDataLen = 64

// Scalars lists every built-in scalar type (no modifiers), for tests and
// catalog generation.
var Scalars = []*T{Bool, Int2, Int4, Int8, Float4, Float8, Numeric, Text, VarChar, BPChar,
	Bytea, Date, Time, Timestamp, TimestampTZ, Interval, UUID, JSONB, Oid, JSONText, Name, Char}

// arrayOids maps an element OID to its array type's OID (pg_type.typarray).
var arrayOids = map[uint32]uint32{
	pgtype.BoolOID: pgtype.BoolArrayOID, pgtype.Int2OID: pgtype.Int2ArrayOID,
	pgtype.Int4OID: pgtype.Int4ArrayOID, pgtype.Int8OID: pgtype.Int8ArrayOID,
	pgtype.Float4OID: pgtype.Float4ArrayOID, pgtype.Float8OID: pgtype.Float8ArrayOID,
	pgtype.NumericOID: pgtype.NumericArrayOID, pgtype.TextOID: pgtype.TextArrayOID,
	pgtype.VarcharOID: pgtype.VarcharArrayOID, pgtype.BPCharOID: pgtype.BPCharArrayOID,
	pgtype.ByteaOID: pgtype.ByteaArrayOID, pgtype.DateOID: pgtype.DateArrayOID,
	pgtype.TimeOID: pgtype.TimeArrayOID, pgtype.TimestampOID: pgtype.TimestampArrayOID,
	pgtype.TimestamptzOID: pgtype.TimestamptzArrayOID, pgtype.IntervalOID: pgtype.IntervalArrayOID,
	pgtype.UUIDOID: pgtype.UUIDArrayOID, pgtype.JSONBOID: pgtype.JSONBArrayOID,
	pgtype.OIDOID: pgtype.OIDArrayOID, pgtype.JSONOID: pgtype.JSONArrayOID,
	pgtype.NameOID: pgtype.NameArrayOID, pgtype.QCharOID: pgtype.QCharArrayOID,
	// The reg* alias types (reg.go).
	2205: 2210, 2206: 2211, 24: 1008, 2202: 2207, 4089: 4090, 4096: 4097,
}

// MakeArray returns the one-dimensional array type of elem, or an error if
// elem is itself an array or has no array type.
func MakeArray(elem *T) (*T, error) {
	oid, ok := arrayOids[elem.Oid]
	if elem.Family == EnumFamily {
		oid, ok = elem.Enum.ArrayOid, elem.Enum.ArrayOid != 0
	}
	if !ok || elem.Family == ArrayFamily {
		return nil, pgerror.New(pgerrcode.UndefinedObject, "could not find array type for data type %s", elem.Name())
	}
	return &T{Family: ArrayFamily, Oid: oid, Elem: elem}, nil
}

// MustArray is MakeArray for built-in element types; it panics on misuse.
func MustArray(elem *T) *T {
	t, err := MakeArray(elem)
	if err != nil {
		panic(err)
	}
	return t
}

// maxCharLength is Postgres's limit on varchar(n)/char(n).
const maxCharLength = 10485760

// MakeVarChar returns varchar(n); n == 0 means unbounded varchar.
func MakeVarChar(n int32) (*T, error) {
	if n < 0 || n > maxCharLength {
		return nil, pgerror.New(pgerrcode.InvalidParameterValue, "length for type varchar must be between 1 and %d", maxCharLength)
	}
	return &T{Family: StringFamily, Oid: pgtype.VarcharOID, Width: n}, nil
}

// MakeChar returns char(n) (bpchar with a length); SQL's bare "char" is char(1).
func MakeChar(n int32) (*T, error) {
	if n < 1 || n > maxCharLength {
		return nil, pgerror.New(pgerrcode.InvalidParameterValue, "length for type char must be between 1 and %d", maxCharLength)
	}
	return &T{Family: StringFamily, Oid: pgtype.BPCharOID, Width: n}, nil
}

// maxNumericPrecision is Postgres's limit for numeric(p,s).
const maxNumericPrecision = 1000

// MakeNumeric returns numeric(p,s).
func MakeNumeric(p, s int32) (*T, error) {
	if p < 1 || p > maxNumericPrecision {
		return nil, pgerror.New(pgerrcode.InvalidParameterValue, "NUMERIC precision %d must be between 1 and %d", p, maxNumericPrecision)
	}
	if s < -1000 || s > 1000 {
		return nil, pgerror.New(pgerrcode.InvalidParameterValue, "NUMERIC scale %d must be between -1000 and 1000", s)
	}
	return &T{Family: NumericFamily, Oid: pgtype.NumericOID, Precision: p, Scale: s}, nil
}

// MakeTimestamp returns timestamp(p), timestamptz(p) or time(p) for base one
// of Timestamp, TimestampTZ or Time. Precisions above 6 are reduced to 6 as
// Postgres does (with a warning there; silently here).
func MakeTimestamp(base *T, p int32) (*T, error) {
	if p < 0 {
		return nil, pgerror.New(pgerrcode.InvalidParameterValue, "%s(%d) precision must not be negative", base.Name(), p)
	}
	p = min(p, 6)
	c := *base
	c.Precision = p
	return &c, nil
}

// Size returns pg_type.typlen, which RowDescription carries: the width of
// fixed-size types, -1 for variable-length ones.
func (t *T) Size() int16 {
	switch t.Family {
	case BoolFamily:
		return 1
	case StringFamily:
		switch t.Oid {
		case Name.Oid:
			return NameDataLen
		case Char.Oid:
			return 1
		}
	case IntFamily:
		return int16(t.Width / 8)
	case FloatFamily:
		return int16(t.Width / 8)
	case DateFamily, OidFamily, EnumFamily:
		return 4 // an enum is a 4-byte OID in PostgreSQL
	case TimeFamily, TimestampFamily, TimestampTZFamily:
		return 8
	case IntervalFamily, UUIDFamily:
		return 16
	case UnknownFamily:
		return -2 // a C string, as Postgres reports unknown
	}
	return -1
}

// Typmod returns the Postgres type modifier (pg_attribute.atttypmod): -1
// when there is none.
func (t *T) Typmod() int32 {
	switch t.Family {
	case StringFamily:
		if t.Width > 0 {
			return t.Width + 4 // VARHDRSZ, as Postgres stores it
		}
	case NumericFamily:
		if t.Precision > 0 {
			return (t.Precision<<16 | t.Scale&0xffff) + 4
		}
	case TimeFamily, TimestampFamily, TimestampTZFamily:
		if t.Precision >= 0 {
			return t.Precision
		}
	case ArrayFamily:
		return t.Elem.Typmod()
	}
	return -1
}

// Identical reports whether t and u are the same type including modifiers.
func (t *T) Identical(u *T) bool {
	if t == u {
		return true
	}
	if t.Family != u.Family || t.Oid != u.Oid || t.Width != u.Width || t.Precision != u.Precision || t.Scale != u.Scale {
		return false
	}
	if (t.Domain == nil) != (u.Domain == nil) || t.Domain != nil && t.Domain.Oid != u.Domain.Oid {
		return false // a value must pass the domain's checks to become one
	}
	if t.Family == ArrayFamily {
		return t.Elem.Identical(u.Elem)
	}
	return true
}

// Equivalent reports whether t and u share a family (and, for arrays, their
// elements do): values of one can be compared with values of the other
// without a cast.
func (t *T) Equivalent(u *T) bool {
	if t.Family != u.Family {
		return false
	}
	if t.Family == ArrayFamily {
		return t.Elem.Equivalent(u.Elem)
	}
	return true
}

// Name returns the type as Postgres's format_type prints it, e.g.
// "character varying(10)", "timestamp with time zone", "integer[]".
func (t *T) Name() string {
	if t.Domain != nil {
		return t.Domain.Name
	}
	switch t.Family {
	case RecordFamily:
		return "record"
	case EnumFamily:
		return t.Enum.Name
	case ArrayFamily:
		if IsVector(t) {
			return vectorName(t)
		}
		return t.Elem.Name() + "[]"
	case StringFamily:
		switch t.Oid {
		case pgtype.VarcharOID:
			if t.Width > 0 {
				return fmt.Sprintf("character varying(%d)", t.Width)
			}
			return "character varying"
		case pgtype.BPCharOID:
			if t.Width > 0 {
				return fmt.Sprintf("character(%d)", t.Width)
			}
			return "bpchar"
		case Name.Oid:
			return "name"
		case Char.Oid:
			return `"char"`
		}
		return "text"
	case NumericFamily:
		if t.Precision > 0 {
			return fmt.Sprintf("numeric(%d,%d)", t.Precision, t.Scale)
		}
		return "numeric"
	case TimeFamily, TimestampFamily, TimestampTZFamily:
		base := map[Family][2]string{
			TimeFamily:        {"time", " without time zone"},
			TimestampFamily:   {"timestamp", " without time zone"},
			TimestampTZFamily: {"timestamp", " with time zone"},
		}[t.Family]
		if t.Precision >= 0 {
			return fmt.Sprintf("%s(%d)%s", base[0], t.Precision, base[1])
		}
		return base[0] + base[1]
	}
	switch t.Oid {
	case pgtype.BoolOID:
		return "boolean"
	case pgtype.Int2OID:
		return "smallint"
	case pgtype.Int4OID:
		return "integer"
	case pgtype.Int8OID:
		return "bigint"
	case pgtype.Float4OID:
		return "real"
	case pgtype.Float8OID:
		return "double precision"
	case pgtype.ByteaOID:
		return "bytea"
	case pgtype.DateOID:
		return "date"
	case pgtype.IntervalOID:
		return "interval"
	case pgtype.UUIDOID:
		return "uuid"
	case pgtype.JSONBOID:
		return "jsonb"
	case pgtype.JSONOID:
		return "json"
	case pgtype.OIDOID:
		return "oid"
	case RegClass.Oid, RegType.Oid, RegProc.Oid, RegProcedure.Oid, RegNamespace.Oid, RegRole.Oid:
		n, _ := regName(t.Oid)
		return n
	case pgtype.UnknownOID:
		return "unknown"
	}
	return fmt.Sprintf("type(%d)", t.Oid)
}

// String returns Name.
func (t *T) String() string { return t.Name() }

// PGName returns the pg_type.typname of t ("int4", "_int4", "varchar").
func (t *T) PGName() string {
	if t.Family == RecordFamily {
		return "record"
	}
	if IsVector(t) {
		return vectorName(t)
	}
	if t.Family == ArrayFamily {
		return "_" + t.Elem.PGName()
	}
	if t.Oid == Char.Oid {
		return "char"
	}
	for name, u := range typeNames {
		if u.Oid == t.Oid && isCanonicalName(name) {
			return name
		}
	}
	return t.Name()
}

func isCanonicalName(name string) bool {
	switch name {
	case "bool", "int2", "int4", "int8", "float4", "float8", "numeric", "text", "varchar", "bpchar",
		"bytea", "date", "time", "timestamp", "timestamptz", "interval", "uuid", "jsonb", "json", "oid", "unknown",
		"regclass", "regtype", "regproc", "regprocedure", "regnamespace", "regrole", "name":
		return true
	}
	return false
}

// typeNames holds every name (lower case) a type can be spelled with, after
// the parser's rewrites (STRING → text, BYTES → bytea). serial types are
// the binder's business (they add a sequence), so they are absent.
var typeNames = map[string]*T{
	"bool": Bool, "boolean": Bool,
	"int2": Int2, "smallint": Int2,
	"int4": Int4, "int": Int4, "integer": Int4,
	"int8": Int8, "bigint": Int8,
	"float4": Float4, "real": Float4,
	"float8": Float8, "double precision": Float8, "float": Float8,
	"numeric": Numeric, "decimal": Numeric,
	"text":    Text,
	"varchar": VarChar, "character varying": VarChar,
	"bpchar": BPChar,
	"name":   Name,
	"bytea":  Bytea,
	"date":   Date,
	"time":   Time, "time without time zone": Time,
	"timestamp": Timestamp, "timestamp without time zone": Timestamp,
	"timestamptz": TimestampTZ, "timestamp with time zone": TimestampTZ,
	"interval": Interval,
	"uuid":     UUID,
	"jsonb":    JSONB,
	"json":     JSONText,
	"oid":      Oid,
	"regclass": RegClass, "regtype": RegType, "regproc": RegProc,
	"regprocedure": RegProcedure, "regnamespace": RegNamespace, "regrole": RegRole,
	"unknown":    Unknown,
	"int2vector": Int2Vector, "oidvector": OidVector,
}

// LookupName resolves a type name (case-insensitive; "pg_catalog." prefix
// allowed; a trailing "[]" makes an array) to its unmodified type.
// "character" means char(1) and "char" the single-byte "char", as in
// PostgreSQL, where the parser turns an unquoted char into bpchar(1) and
// only a quoted "char" (or the name in text, 'char'::regtype) arrives
// here as "char".
func LookupName(name string) (*T, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	n = strings.TrimPrefix(n, "pg_catalog.")
	if elem, ok := strings.CutSuffix(n, "[]"); ok {
		e, err := LookupName(elem)
		if err != nil {
			return nil, err
		}
		return MakeArray(e)
	}
	if strings.HasPrefix(n, "_") {
		if e, err := LookupName(n[1:]); err == nil {
			return MakeArray(e)
		}
	}
	if n == "character" {
		return MakeChar(1)
	}
	if n == "char" || n == `"char"` {
		return Char, nil
	}
	if t, ok := typeNames[n]; ok {
		return t, nil
	}
	return nil, pgerror.New(pgerrcode.UndefinedObject, "type %q does not exist", name)
}

// OidToType returns the unmodified type with the given OID.
func OidToType(oid uint32) (*T, bool) {
	for _, t := range Scalars {
		if t.Oid == oid {
			return t, true
		}
	}
	for _, t := range RegTypes {
		if t.Oid == oid {
			return t, true
		}
	}
	for _, t := range []*T{Int2Vector, OidVector} {
		if t.Oid == oid {
			return t, true
		}
	}
	for elem, arr := range arrayOids {
		if arr == oid {
			e, _ := OidToType(elem)
			return MustArray(e), true
		}
	}
	return nil, false
}
