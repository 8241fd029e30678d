package catalog

import (
	"context"
	"testing"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/pgerror"
)

func testFunc(name string, in ...uint32) *FuncDesc {
	f := &FuncDesc{DatabaseID: PostgresDatabaseID, SchemaID: PublicSchemaID, Name: name, Return: 23,
		Volatility: "v", Parallel: "u", Cost: 100, Body: "SELECT 1"}
	for _, t := range in {
		f.Args = append(f.Args, FuncArg{Type: t, Mode: "i"})
	}
	return f
}

// TestFunctionNamespace: functions share their schema's namespace with
// relations without colliding with them (a table f and a function f
// coexist), overloads differ by input types, an overload with the same
// input types collides with 42723, and a dropped function frees its entry.
func TestFunctionNamespace(t *testing.T) {
	db := newTestDB(t)
	var intID ID
	run(t, db, func(ctx context.Context, txn *kv.Txn) error {
		w := NewWriter(txn, nil)
		if err := w.Create(ctx, &Sequence{DatabaseID: PostgresDatabaseID, SchemaID: PublicSchemaID, Name: "f",
			Increment: 1, Min: 1, Max: 10, Start: 1}); err != nil {
			return err
		}
		fi := testFunc("f", 23)
		if err := w.Create(ctx, fi); err != nil {
			return err
		}
		intID = fi.ID
		return w.Create(ctx, testFunc("f", 25))
	})
	run(t, db, func(ctx context.Context, txn *kv.Txn) error {
		w := NewWriter(txn, nil)
		err := w.Create(ctx, testFunc("f", 23))
		if pgerror.Code(err) != pgerrcode.DuplicateFunction {
			t.Fatalf("same signature again: %v", err)
		}
		return nil
	})
	run(t, db, func(ctx context.Context, txn *kv.Txn) error {
		r := NewReader(txn, nil)
		rels, err := r.Relations(ctx, PostgresDatabaseID, PublicSchemaID)
		if err != nil {
			return err
		}
		kinds := map[Kind]int{}
		for _, d := range rels {
			kinds[d.DescKind()]++
		}
		if kinds[KindFunction] != 2 || kinds[KindSequence] != 1 {
			t.Fatalf("listing: %v", kinds)
		}
		id, ok, err := r.LookupID(ctx, PostgresDatabaseID, PublicSchemaID, NamespaceName("f", []uint32{23}))
		if err != nil || !ok || id != intID {
			t.Fatalf("lookup f(int4): %d %v %v", id, ok, err)
		}
		d, err := r.ByID(ctx, intID)
		if err != nil {
			return err
		}
		return NewWriter(txn, nil).Drop(ctx, d)
	})
	run(t, db, func(ctx context.Context, txn *kv.Txn) error {
		r := NewReader(txn, nil)
		if _, ok, err := r.LookupID(ctx, PostgresDatabaseID, PublicSchemaID, NamespaceName("f", []uint32{23})); err != nil || ok {
			t.Fatalf("dropped f(int4) still named: %v %v", ok, err)
		}
		return NewWriter(txn, nil).Create(ctx, testFunc("f", 23))
	})
}

func TestFuncDescValidate(t *testing.T) {
	ok := testFunc("f", 23)
	ok.ID = 20000
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*FuncDesc){
		"nul in name":  func(d *FuncDesc) { d.Name = "f\x00" },
		"no return":    func(d *FuncDesc) { d.Return = 0 },
		"volatility":   func(d *FuncDesc) { d.Volatility = "x" },
		"parallel":     func(d *FuncDesc) { d.Parallel = "" },
		"arg mode":     func(d *FuncDesc) { d.Args[0].Mode = "q" },
		"arg no type":  func(d *FuncDesc) { d.Args[0].Type = 0 },
		"no schema":    func(d *FuncDesc) { d.SchemaID = 0 },
		"no name (id)": func(d *FuncDesc) { d.Name = "" },
	} {
		d := testFunc("f", 23)
		d.ID = 20000
		mut(d)
		if _, err := Encode(d); err == nil {
			t.Errorf("%s: encoded", name)
		}
	}
	d := testFunc("f", 23, 25)
	d.ID = 20000
	b, err := Encode(d)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(b)
	if err != nil || got.DescKind() != KindFunction || len(got.(*FuncDesc).InputTypes()) != 2 {
		t.Fatalf("decode: %v %v", got, err)
	}
}
