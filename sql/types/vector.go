package types

import (
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgtype"
)

// int2vector and oidvector are the arrays PostgreSQL's own catalogs use
// (pg_index.indkey, pg_proc.proargtypes): one-dimensional, subscripted
// from 0, printed as space-separated numbers ("1 2"). Clients read them in
// that form (SQLAlchemy splits indkey on spaces; its generate_subscripts
// counts from 0), so the catalogs must produce them exactly. Their datums
// are *DArray with ZeroBased set; every array operation that sees
// subscripts honours it (DArray.Lower).
var (
	Int2Vector = &T{Family: ArrayFamily, Oid: 22, Elem: Int2}
	OidVector  = &T{Family: ArrayFamily, Oid: 30, Elem: Oid}
)

// IsVector reports whether t is int2vector or oidvector.
func IsVector(t *T) bool {
	return t.Family == ArrayFamily && (t.Oid == Int2Vector.Oid || t.Oid == OidVector.Oid)
}

// NewVector returns an int2vector or oidvector value of elems.
func NewVector(t *T, elems ...Datum) *DArray {
	return &DArray{Elem: t.Elem, Elems: elems, ZeroBased: true}
}

// Lower is the subscript of a's first element: 0 for a ZeroBased array,
// else 1.
func (a *DArray) Lower() int {
	if a.ZeroBased {
		return 0
	}
	return 1
}

func vectorName(t *T) string {
	if t.Oid == Int2Vector.Oid {
		return "int2vector"
	}
	return "oidvector"
}

// appendVector is int2vectorout/oidvectorout.
func appendVector(dst []byte, a *DArray) []byte {
	for i, e := range a.Elems {
		if i > 0 {
			dst = append(dst, ' ')
		}
		switch v := e.(type) {
		case DInt:
			dst = strconv.AppendInt(dst, int64(v), 10)
		case DOid:
			dst = strconv.AppendUint(dst, uint64(v), 10)
		}
	}
	return dst
}

// parseVector is int2vectorin/oidvectorin: numbers separated by spaces.
func parseVector(t *T, s string) (Datum, error) {
	a := NewVector(t)
	for _, f := range strings.Fields(s) {
		d, err := ParseDatum(nil, t.Elem, f)
		if err != nil {
			return nil, err
		}
		a.Elems = append(a.Elems, d)
	}
	return a, nil
}

// appendBounds prefixes a zero-based array's text with its bounds, as
// PostgreSQL prints an array whose lower bound is not 1 ("[0:1]={1,2}").
func appendBounds(dst []byte, a *DArray) []byte {
	if !a.ZeroBased || len(a.Elems) == 0 {
		return dst
	}
	dst = append(dst, "[0:"...)
	dst = strconv.AppendInt(dst, int64(len(a.Elems)-1), 10)
	return append(dst, "]="...)
}

func vectorWireOID(t *T) uint32 {
	if t.Oid == Int2Vector.Oid {
		return pgtype.Int2ArrayOID
	}
	return pgtype.OIDArrayOID
}
