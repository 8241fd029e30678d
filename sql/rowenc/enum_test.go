package rowenc

import (
	"bytes"
	"testing"

	"github.com/cairn-db/cairn/sql/types"
)

// TestEnumKeysAndValues: enum keys order by declaration order in both
// directions, keep that order for keys written before ADD VALUE
// BEFORE/AFTER, and keys and packed rows written before RENAME VALUE
// read back with the new label.
func TestEnumKeysAndValues(t *testing.T) {
	typ, err := types.MakeEnum(100000, 100001, "public", "mood", []string{"sad", "ok", "happy"})
	if err != nil {
		t.Fatal(err)
	}
	parse := func(typ *types.T, s string) types.Datum {
		d, err := types.ParseDatum(nil, typ, s)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	key := func(d types.Datum, o Order) []byte {
		k, err := EncodeKey(nil, d, o)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	sadK, happyK := key(parse(typ, "sad"), Asc), key(parse(typ, "happy"), Asc)
	sadD := key(parse(typ, "sad"), Descending)
	arrT, err := types.MakeArray(typ)
	if err != nil {
		t.Fatal(err)
	}
	sch := mustSchema(t, 1, Column{ID: 1, Type: typ}, Column{ID: 2, Type: arrT})
	arr := parse(arrT, "{ok,NULL}")
	row := []types.Datum{parse(typ, "sad"), arr}
	packed, err := PackRow(nil, sch, row, 0)
	if err != nil {
		t.Fatal(err)
	}

	// ALTER TYPE mood ADD VALUE 'meh' AFTER 'sad'; ADD VALUE 'awful' BEFORE 'sad'.
	m, _, err := typ.Enum.AddValue("meh", "sad", false, false)
	if err != nil {
		t.Fatal(err)
	}
	m, _, err = m.AddValue("awful", "sad", true, false)
	if err != nil {
		t.Fatal(err)
	}
	// ALTER TYPE mood RENAME VALUE 'sad' TO 'blue'.
	if m, err = m.RenameValue("sad", "blue"); err != nil {
		t.Fatal(err)
	}
	typ2 := typ.WithEnum(m)
	mehK, awfulK := key(parse(typ2, "meh"), Asc), key(parse(typ2, "awful"), Asc)
	if !(bytes.Compare(awfulK, sadK) < 0 && bytes.Compare(sadK, mehK) < 0 && bytes.Compare(mehK, happyK) < 0) {
		t.Fatalf("key order after ADD VALUE: awful %x sad %x meh %x happy %x", awfulK, sadK, mehK, happyK)
	}
	if mehD := key(parse(typ2, "meh"), Descending); bytes.Compare(mehD, sadD) >= 0 {
		t.Fatalf("descending: meh %x should sort before sad %x", mehD, sadD)
	}
	if !bytes.Equal(key(parse(typ2, "blue"), Asc), sadK) {
		t.Fatal("RENAME VALUE changed the key encoding")
	}
	for _, o := range []Order{Asc, Descending} {
		d, rest, err := DecodeKey(key(parse(typ, "sad"), o), typ2, o)
		if err != nil || len(rest) != 0 || d.String() != "blue" {
			t.Fatalf("old key under renamed type: %v %x %v", d, rest, err)
		}
	}

	arrT2, err := types.MakeArray(typ2)
	if err != nil {
		t.Fatal(err)
	}
	sch2 := mustSchema(t, 1, Column{ID: 1, Type: typ2}, Column{ID: 2, Type: arrT2})
	got, err := DecodeRow(sch2, packed, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].String() != "blue" {
		t.Fatalf("old row under renamed type: %s", rowString(got))
	}
	if types.Format(nil, arrT2, got[1]) != "{ok,NULL}" {
		t.Fatalf("enum array: %s", rowString(got))
	}

	// A representation the type does not know (a stale descriptor) is an
	// error, never a wrong label.
	if _, _, err := DecodeKey(key(parse(typ2, "meh"), Asc), typ, Asc); err == nil {
		t.Fatal("decoded a member unknown to the type")
	}
}
