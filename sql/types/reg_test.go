package types

import (
	"testing"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
)

func TestRegTypesWithoutResolver(t *testing.T) {
	for _, tc := range []struct {
		typ       *T
		in, out   string
		oid       uint32
		errorCode string
	}{
		{typ: RegClass, in: "16400", out: "16400", oid: 16400},
		{typ: RegClass, in: " 7 ", out: "7", oid: 7},
		{typ: RegClass, in: "-", out: "-", oid: 0},
		{typ: RegClass, in: "t", errorCode: pgerrcode.UndefinedTable},
		{typ: RegClass, in: "99999999999", errorCode: pgerrcode.NumericValueOutOfRange},
		{typ: RegNamespace, in: "public", errorCode: pgerrcode.InvalidSchemaName},
		{typ: RegProc, in: "lower", errorCode: pgerrcode.UndefinedFunction},
		{typ: RegRole, in: "bob", errorCode: pgerrcode.UndefinedObject},
		{typ: RegType, in: "integer", out: "integer", oid: 23},
		{typ: RegType, in: "INT4", out: "integer", oid: 23},
		{typ: RegType, in: "varchar(10)", out: "character varying", oid: 1043},
		{typ: RegType, in: "timestamptz", out: "timestamp with time zone", oid: 1184},
		{typ: RegType, in: "text[]", out: "text[]", oid: 1009},
		{typ: RegType, in: "regclass", out: "regclass", oid: 2205},
		{typ: RegType, in: "nosuch", errorCode: pgerrcode.UndefinedObject},
	} {
		d, err := ParseDatum(nil, tc.typ, tc.in)
		if tc.errorCode != "" {
			if pgerror.Code(err) != tc.errorCode {
				t.Errorf("%s %q: %v, want SQLSTATE %s", tc.typ, tc.in, err, tc.errorCode)
			}
			continue
		}
		if err != nil || d != DOid(tc.oid) {
			t.Errorf("%s %q = %v, %v; want %d", tc.typ, tc.in, d, err, tc.oid)
			continue
		}
		if got := Format(nil, tc.typ, d); got != tc.out {
			t.Errorf("%s %q prints %q, want %q", tc.typ, tc.in, got, tc.out)
		}
		// Binary: the alias types are oids on the wire.
		b, err := EncodeBinary(nil, tc.typ, d)
		if err != nil {
			t.Fatalf("%s: %v", tc.typ, err)
		}
		if back, err := DecodeBinary(tc.typ, b); err != nil || back != d {
			t.Errorf("%s binary round trip: %v, %v", tc.typ, back, err)
		}
	}
}

func TestRegCasts(t *testing.T) {
	// pg_cast's contexts for the alias types.
	for _, tc := range []struct {
		from, to *T
		want     CastKind
	}{
		{RegClass, Oid, CastImplicit}, {Oid, RegClass, CastImplicit}, {Int4, RegClass, CastImplicit},
		{Int8, RegType, CastImplicit}, {Int2, Oid, CastImplicit}, {Int2, RegClass, CastImplicit},
		{RegClass, Int8, CastAssignment}, {RegClass, Int4, CastAssignment}, {Oid, Int2, CastNone},
		{RegClass, RegType, CastNone}, {Text, RegClass, CastImplicit}, {Text, RegType, CastExplicit},
		{RegClass, Text, CastAssignment},
	} {
		if got := CastKindOf(tc.from, tc.to); got != tc.want {
			t.Errorf("CastKindOf(%s, %s) = %d, want %d", tc.from, tc.to, got, tc.want)
		}
	}
	d, err := Cast(nil, DString("int8"), Text, RegType)
	if err != nil || d != DOid(20) {
		t.Fatalf("'int8'::regtype = %v, %v", d, err)
	}
	if s, err := Cast(nil, d, RegType, Text); err != nil || s != DString("bigint") {
		t.Errorf("'int8'::regtype::text = %v, %v", s, err)
	}
	if o, err := Cast(nil, d, RegType, Oid); err != nil || o != DOid(20) {
		t.Errorf("regtype::oid = %v, %v", o, err)
	}
	arr, err := ParseDatum(nil, MustArray(RegType), "{int4,text}")
	if err != nil || Format(nil, MustArray(RegType), arr) != "{integer,text}" {
		t.Errorf("regtype[] = %v, %v", arr, err)
	}
	if c, _ := RegClass.Category(); c != 'N' {
		t.Errorf("regclass category %c", c)
	}
	if _, pref := RegClass.Category(); pref {
		t.Error("regclass is a preferred type; only oid is")
	}
}
