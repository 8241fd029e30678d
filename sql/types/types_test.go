package types

import (
	"time"

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

// TestFormatUsesContext: a datum FormatUsesContext says prints without
// the context prints the same with none as with one whose time zone is
// not UTC; a timestamptz, which reads it, prints differently.
func TestFormatUsesContext(t *testing.T) {
	zone := &Context{Location: time.FixedZone("plus5", 5*3600)}
	for _, tc := range []struct {
		t    *T
		text string
		uses bool
	}{
		{Bool, "true", false},
		{Int8, "42", false},
		{Float8, "1.5", false},
		{Numeric, "12.50", false},
		{Text, "abc", false},
		{Bytea, `\x0102`, false},
		{Date, "2026-11-30", false},
		{Time, "12:34:56", false},
		{Timestamp, "2026-11-30 12:34:56", false},
		{Interval, "1 day 02:00:00", false},
		{UUID, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", false},
		{JSONB, `{"a": 1}`, false},
		{TimestampTZ, "2026-11-30 12:34:56+00", true},
	} {
		d, err := ParseDatum(nil, tc.t, tc.text)
		if err != nil {
			t.Fatalf("%s %q: %v", tc.t.Name(), tc.text, err)
		}
		if got := FormatUsesContext(d); got != tc.uses {
			t.Errorf("%s: FormatUsesContext = %v, want %v", tc.t.Name(), got, tc.uses)
		}
		without, with := string(AppendFormat(nil, nil, tc.t, d)), string(AppendFormat(nil, zone, tc.t, d))
		if (without != with) != tc.uses {
			t.Errorf("%s: printed %q without a context, %q with one", tc.t.Name(), without, with)
		}
	}
	if FormatUsesContext(DNull) {
		t.Error("FormatUsesContext(NULL) = true; NULL prints without a context")
	}
}
