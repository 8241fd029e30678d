package catalog

import (
	"context"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/types"
)

// TestEnumTypeDescriptor: an enum type descriptor is created in a schema,
// read back by name with its members' representations intact, and after an
// ADD VALUE stored through Update its old members keep their
// representations (the key encodings depend on them).
func TestEnumTypeDescriptor(t *testing.T) {
	db := newTestDB(t)
	var typeID ID
	var sadRep []byte
	run(t, db, func(ctx context.Context, txn *kv.Txn) error {
		w := NewWriter(txn, nil)
		arr, err := w.AllocateID(ctx)
		if err != nil {
			return err
		}
		et, err := types.MakeEnum(1, 2, "public", "mood", []string{"sad", "ok"})
		if err != nil {
			return err
		}
		d := &TypeDesc{DatabaseID: PostgresDatabaseID, SchemaID: PublicSchemaID, Name: "mood", ArrayID: arr}
		d.SetMembers(et.Enum)
		if err := w.Create(ctx, d); err != nil {
			return err
		}
		typeID, sadRep = d.ID, et.Enum.Members[0].PhysRep
		return nil
	})
	run(t, db, func(ctx context.Context, txn *kv.Txn) error {
		r := NewReader(txn, nil)
		d, err := r.Relation(ctx, PostgresDatabaseID, PublicSchemaID, "mood")
		if err != nil {
			return err
		}
		td, ok := d.(*TypeDesc)
		if !ok || td.ID != typeID || td.Version != 1 {
			t.Fatalf("read back %#v", d)
		}
		typ := td.EnumType("public")
		if typ.Oid != uint32(typeID) || typ.Name() != "mood" || typ.Enum.ArrayOid != uint32(td.ArrayID) {
			t.Fatalf("type %+v", typ)
		}
		m, _, err := typ.Enum.AddValue("awful", "sad", true, false)
		if err != nil {
			return err
		}
		c, err := Clone(td)
		if err != nil {
			return err
		}
		c.SetMembers(m)
		return NewWriter(txn, nil).Update(ctx, c)
	})
	run(t, db, func(ctx context.Context, txn *kv.Txn) error {
		d, err := NewReader(txn, nil).ByID(ctx, typeID)
		if err != nil {
			return err
		}
		typ := d.(*TypeDesc).EnumType("public")
		got, err := types.EnumFromPhysRep(typ, sadRep)
		if err != nil || got.Label != "sad" || d.DescVersion() != 2 {
			t.Fatalf("after ADD VALUE: %v %v version %d", got, err, d.DescVersion())
		}
		if typ.Enum.Members[0].Label != "awful" {
			t.Fatalf("members %+v", typ.Enum.Members)
		}
		return nil
	})
}

func TestTypeDescValidate(t *testing.T) {
	good := func() *TypeDesc {
		return &TypeDesc{ID: 20000, DatabaseID: 1, SchemaID: 2, Name: "e", ArrayID: 20001,
			Members: []EnumDesc{{Label: "a", PhysRep: []byte{10}, SortOrder: 1}, {Label: "b", PhysRep: []byte{20}, SortOrder: 2}}}
	}
	if err := good().Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*TypeDesc){
		"no array":     func(d *TypeDesc) { d.ArrayID = 0 },
		"no schema":    func(d *TypeDesc) { d.SchemaID = 0 },
		"dup label":    func(d *TypeDesc) { d.Members[1].Label = "a" },
		"out of order": func(d *TypeDesc) { d.Members[1].PhysRep = []byte{5} },
		"trailing 0":   func(d *TypeDesc) { d.Members[1].PhysRep = []byte{20, 0} },
		"empty rep":    func(d *TypeDesc) { d.Members[0].PhysRep = nil },
	} {
		d := good()
		mut(d)
		if err := d.Validate(); err == nil {
			t.Errorf("%s: validated", name)
		}
		if _, err := Encode(d); err == nil || !strings.Contains(err.Error(), `type "e"`) {
			t.Errorf("%s: encoded: %v", name, err)
		}
	}
	b, err := Encode(good())
	if err != nil {
		t.Fatal(err)
	}
	d, err := Decode(b)
	if err != nil || d.DescKind() != KindType || len(d.(*TypeDesc).Members) != 2 {
		t.Fatalf("decode: %v %v", d, err)
	}
}

// TestEnumColumnRoundTrip: table columns of an enum type and of its array
// type decode on their own to the same types, members and representations
// included.
func TestEnumColumnRoundTrip(t *testing.T) {
	et, err := types.MakeEnum(20000, 20001, "public", "mood", []string{"sad", "ok"})
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := et.Enum.AddValue("meh", "sad", false, false)
	if err != nil {
		t.Fatal(err)
	}
	et = et.WithEnum(m)
	arr, err := types.MakeArray(et)
	if err != nil {
		t.Fatal(err)
	}
	tbl := simpleTable("t")
	tbl.Columns[1].Type = et
	tbl.Columns[2].Type = arr
	db := newTestDB(t)
	run(t, db, func(ctx context.Context, txn *kv.Txn) error {
		return NewWriter(txn, nil).Create(ctx, tbl)
	})
	var got *Table
	run(t, db, func(ctx context.Context, txn *kv.Txn) error {
		var err error
		got, err = NewReader(txn, nil).Table(ctx, PostgresDatabaseID, PublicSchemaID, "t")
		return err
	})
	c1, c2 := got.Columns[1].Type, got.Columns[2].Type
	if !c1.Identical(et) || c1.Name() != "mood" || !c2.Identical(arr) || c2.Elem.Oid != et.Oid {
		t.Fatalf("types after round trip: %+v %+v", c1, c2)
	}
	for i, mb := range et.Enum.Members {
		g := c1.Enum.Members[i]
		if g.Label != mb.Label || string(g.PhysRep) != string(mb.PhysRep) || g.SortOrder != mb.SortOrder {
			t.Fatalf("member %d: %+v, want %+v", i, g, mb)
		}
	}
	if len(c2.Elem.Enum.Members) != 3 {
		t.Fatalf("array element members %+v", c2.Elem.Enum.Members)
	}
}
