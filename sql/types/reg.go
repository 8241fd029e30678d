package types

import (
	"strconv"
	"strings"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/cairn-db/cairn/sql/pgerror"
)

// The object identifier alias types. Their values are oids (DOid); they
// differ from oid only in their text input and output, which name the
// object the oid stands for. regtype needs nothing but this package; the
// others need the catalog, which this package cannot see: Context.Reg
// supplies it (the session wires one per statement, see sql/pgcatalog).
var (
	RegClass     = &T{Family: OidFamily, Oid: 2205}
	RegType      = &T{Family: OidFamily, Oid: 2206}
	RegProc      = &T{Family: OidFamily, Oid: 24}
	RegProcedure = &T{Family: OidFamily, Oid: 2202}
	RegNamespace = &T{Family: OidFamily, Oid: 4089}
	RegRole      = &T{Family: OidFamily, Oid: 4096}
)

// RegTypes lists the alias types, for catalog generation and OidToType.
var RegTypes = []*T{RegClass, RegType, RegProc, RegProcedure, RegNamespace, RegRole}

// RegResolver resolves the names of catalog objects for the reg* types'
// input and output functions. kind is one of RegClass, RegProc,
// RegProcedure, RegNamespace or RegRole (RegType is resolved here).
type RegResolver interface {
	// ResolveReg returns the OID name stands for, or an error with
	// Postgres's SQLSTATE and wording (42P01 relation "x" does not exist,
	// 42883 function "f" does not exist, 3F000 schema "s" does not exist).
	ResolveReg(kind *T, name string) (uint32, error)
	// RegName returns the name oid prints as (schema-qualified when not
	// visible on the search path), false when there is no such object.
	RegName(kind *T, oid uint32) (string, bool)
}

// IsReg reports whether t is one of the reg* alias types.
func IsReg(t *T) bool { return t.Family == OidFamily && t.Oid != pgtype.OIDOID }

func regName(oid uint32) (string, bool) {
	switch oid {
	case RegClass.Oid:
		return "regclass", true
	case RegType.Oid:
		return "regtype", true
	case RegProc.Oid:
		return "regproc", true
	case RegProcedure.Oid:
		return "regprocedure", true
	case RegNamespace.Oid:
		return "regnamespace", true
	case RegRole.Oid:
		return "regrole", true
	}
	return "", false
}

// parseReg is the input function of the reg* types: a number is taken as
// the OID itself and "-" as 0, as Postgres's regclassin and friends do;
// anything else is a name.
func parseReg(ctx *Context, t *T, s string) (Datum, error) {
	n := strings.TrimSpace(s)
	if n == "-" {
		return DOid(0), nil
	}
	if n != "" && n[0] >= '0' && n[0] <= '9' {
		v, err := strconv.ParseUint(n, 10, 32)
		if err != nil {
			if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
				return nil, errInputOutOfRange(t, s)
			}
			return nil, errInvalidSyntax(t, s)
		}
		return DOid(v), nil
	}
	if t.Oid == RegType.Oid {
		u, err := LookupName(stripTypmod(n))
		if err != nil {
			if ctx != nil && ctx.Reg != nil {
				if oid, rerr := ctx.Reg.ResolveReg(t, n); rerr == nil {
					return DOid(oid), nil
				}
			}
			return nil, pgerror.New(pgerrcode.UndefinedObject, "type \"%s\" does not exist", n)
		}
		return DOid(u.Oid), nil
	}
	if ctx == nil || ctx.Reg == nil {
		return nil, regNotFound(t, n)
	}
	oid, err := ctx.Reg.ResolveReg(t, n)
	if err != nil {
		return nil, err
	}
	return DOid(oid), nil
}

// stripTypmod drops a type modifier ("varchar(10)" → "varchar"): regtype
// names the type, not the modifier.
func stripTypmod(n string) string {
	if i := strings.IndexByte(n, '('); i > 0 {
		if j := strings.IndexByte(n[i:], ')'); j > 0 {
			return strings.TrimSpace(n[:i] + n[i+j+1:])
		}
	}
	return n
}

// regNotFound is the error for an unknown name, used when no resolver is
// present (and by resolvers, for Postgres's wording).
func regNotFound(t *T, name string) error {
	switch t.Oid {
	case RegClass.Oid:
		return pgerror.New(pgerrcode.UndefinedTable, "relation \"%s\" does not exist", name)
	case RegNamespace.Oid:
		return pgerror.New(pgerrcode.InvalidSchemaName, "schema \"%s\" does not exist", name)
	case RegRole.Oid:
		return pgerror.New(pgerrcode.UndefinedObject, "role \"%s\" does not exist", name)
	case RegType.Oid:
		return pgerror.New(pgerrcode.UndefinedObject, "type \"%s\" does not exist", name)
	}
	return pgerror.New(pgerrcode.UndefinedFunction, "function \"%s\" does not exist", name)
}

// RegNotFound returns Postgres's "does not exist" error for name as input
// to reg type t, for resolvers.
func RegNotFound(t *T, name string) error { return regNotFound(t, name) }

// appendReg is the output function of the reg* types: the object's name,
// "-" for 0, and the number itself for an OID naming nothing.
func appendReg(dst []byte, ctx *Context, t *T, v DOid) []byte {
	if v == 0 {
		return append(dst, '-')
	}
	if t.Oid == RegType.Oid {
		if u, ok := OidToType(uint32(v)); ok {
			return append(dst, u.Name()...)
		}
		if uint32(v) == Unknown.Oid {
			return append(dst, "unknown"...) // pg_typeof of an untyped literal
		}
		if uint32(v) == 2249 {
			return append(dst, "record"...) // prorettype of RETURNS TABLE
		}
	}
	if ctx != nil && ctx.Reg != nil {
		if name, ok := ctx.Reg.RegName(t, uint32(v)); ok {
			return append(dst, name...)
		}
	}
	return strconv.AppendUint(dst, uint64(v), 10)
}

// wireOID is the OID pgtype encodes t's values as: the alias types are
// oids on the wire.
func wireOID(t *T) uint32 {
	switch {
	case IsVector(t):
		return vectorWireOID(t)
	case IsReg(t):
		return pgtype.OIDOID
	case t.Family == ArrayFamily && IsReg(t.Elem):
		return pgtype.OIDArrayOID
	}
	return t.Oid
}

// TypeResolver is implemented by a RegResolver that also knows the
// user-defined types (CREATE TYPE ... AS ENUM): type names this package
// does not know (a cast's target, a column definition) are looked up
// through it. sql/pgcatalog's resolver implements it.
type TypeResolver interface {
	// ResolveType returns the user-defined type schema.name names
	// (schema "": the first match on the search path; a name "_t" is the
	// array of t, as in PostgreSQL). found is false when there is none.
	ResolveType(schema, name string) (t *T, found bool, err error)
	// TypeByOID returns the user-defined type, or the array of one, whose
	// pg_type OID is oid.
	TypeByOID(oid uint32) (*T, bool)
}

// UserTypes returns the context's TypeResolver, nil when it has none.
func (c *Context) UserTypes() TypeResolver {
	if c == nil || c.Reg == nil {
		return nil
	}
	tr, _ := c.Reg.(TypeResolver)
	return tr
}
