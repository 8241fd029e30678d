package types

import (
	"testing"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
)

func TestLookupName(t *testing.T) {
	tests := []struct {
		name string
		want string // Name(), or a SQLSTATE when lookup fails
	}{
		{"INT", "integer"},
		{"pg_catalog.int8", "bigint"},
		{"_int8", "bigint[]"},
		{"text[]", "text[]"},
		{"Character Varying", "character varying"},
		{"serial", pgerrcode.UndefinedObject}, // the binder expands serial
		{"int4[][]", pgerrcode.UndefinedObject},
	}
	for _, tc := range tests {
		typ, err := LookupName(tc.name)
		got := pgerror.Code(err)
		if err == nil {
			got = typ.Name()
		}
		if got != tc.want {
			t.Errorf("LookupName(%q) = %s, want %s", tc.name, got, tc.want)
		}
	}
	for _, typ := range Scalars {
		if u, ok := OidToType(typ.Oid); !ok || !u.Identical(typ) {
			t.Errorf("OidToType(%d) = %v", typ.Oid, u)
		}
		if typ.Family == UnknownFamily {
			continue
		}
		arr := MustArray(typ)
		if u, ok := OidToType(arr.Oid); !ok || !u.Identical(arr) {
			t.Errorf("OidToType(%d) = %v, want %s", arr.Oid, u, arr)
		}
	}
}

func TestDecodeBinaryRejectsGarbage(t *testing.T) {
	tests := []struct {
		typ *T
		src []byte
	}{
		{Int4, []byte{1, 2}},
		{Float8, []byte{1}},
		{UUID, []byte{1, 2, 3}},
		{MustArray(Int4), []byte{0, 0, 0, 9}},
		{Text, []byte{0xff, 0xfe}}, // invalid UTF-8
		{JSONB, []byte{1, '{'}},
		{Timestamp, []byte{0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe}}, // beyond Cairn's range
	}
	for _, tc := range tests {
		if _, err := DecodeBinary(tc.typ, tc.src); err == nil {
			t.Errorf("DecodeBinary(%s, %x) succeeded", tc.typ, tc.src)
		} else if code := pgerror.Code(err); code != pgerrcode.InvalidBinaryRepresentation {
			t.Errorf("DecodeBinary(%s, %x): code %s (%v)", tc.typ, tc.src, code, err)
		}
	}
}

func TestInvalidUTF8IsRejected(t *testing.T) {
	for _, typ := range []*T{Text, JSONB, MustArray(Text)} {
		_, err := ParseDatum(nil, typ, "a\xffb")
		if code := pgerror.Code(err); code != pgerrcode.CharacterNotInRepertoire {
			t.Errorf("%s: code %s (%v)", typ, code, err)
		}
	}
	if _, err := ParseJSON("\"\xc3\""); pgerror.Code(err) != pgerrcode.CharacterNotInRepertoire {
		t.Errorf("ParseJSON accepted invalid UTF-8: %v", err)
	}
}
