package rowenc_test

import (
	"errors"
	"testing"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

// Rows packed under one schema version read correctly after ADD COLUMN
// (with a missing value) and DROP COLUMN, made through the catalog's
// column changes; a reader with an older descriptor refuses rows written
// under a newer one instead of misreading them.
func TestSchemaChangesWithPackedRows(t *testing.T) {
	db := newKVDB(t)
	v1 := testTable(104)
	l1 := mustLayout(t, v1)
	if err := write(t, db, newWriter(l1, true, 0), ins(row(1, "x", 5, "p")), ins(row(2, nil, nil, nil))); err != nil {
		t.Fatal(err)
	}

	// ALTER TABLE t ADD COLUMN e int8 DEFAULT 7
	v2, err := catalog.Clone(v1)
	if err != nil {
		t.Fatal(err)
	}
	seven := "7"
	if _, err := v2.AddColumn(catalog.Column{Name: "e", Type: types.Int8, Nullable: true, MissingValue: &seven}); err != nil {
		t.Fatal(err)
	}
	l2 := mustLayout(t, v2)
	if got := rowsString(fetch(t, db, l2, &l2.Primary, nil)); got != "(1,x,5,p,7) (2,NULL,NULL,NULL,7)" {
		t.Errorf("after ADD COLUMN: %s", got)
	}
	w2 := newWriter(l2, true, 0)
	r3 := []types.Datum{types.DInt(3), types.DString("z"), types.DInt(1), types.DNull, types.DInt(9)}
	old1 := []types.Datum{types.DInt(1), types.DString("x"), types.DInt(5), types.DString("p"), types.DInt(7)}
	new1 := []types.Datum{types.DInt(1), types.DString("x"), types.DInt(5), types.DString("p"), types.DInt(8)}
	if err := write(t, db, w2, ins(r3), upd(old1, new1)); err != nil {
		t.Fatal(err)
	}
	if got := rowsString(fetch(t, db, l2, &l2.Primary, nil)); got != "(1,x,5,p,8) (2,NULL,NULL,NULL,7) (3,z,1,NULL,9)" {
		t.Errorf("after writes under version 2: %s", got)
	}

	// The old descriptor must not misread a row packed under version 2.
	f, err := rowenc.NewRowFetcher(l1, &l1.Primary, nil)
	if err != nil {
		t.Fatal(err)
	}
	span := l1.IndexSpan(&l1.Primary)
	if _, err := f.DecodeRows(scan(t, db, span)); !errors.Is(err, rowenc.ErrSchemaTooOld) {
		t.Errorf("old reader of a newer row: %v, want ErrSchemaTooOld", err)
	}

	// ALTER TABLE t DROP COLUMN d (after dropping the indexes that use it).
	v3, err := catalog.Clone(v2)
	if err != nil {
		t.Fatal(err)
	}
	if err := v3.DropColumn("d"); err == nil {
		t.Fatal("dropping an indexed column succeeded")
	}
	v3.Indexes = v3.Indexes[:1]
	if err := v3.DropColumn("d"); err != nil {
		t.Fatal(err)
	}
	l3 := mustLayout(t, v3)
	if got := rowsString(fetch(t, db, l3, &l3.Primary, nil)); got != "(1,x,5,8) (2,NULL,NULL,7) (3,z,1,9)" {
		t.Errorf("after DROP COLUMN: %s", got)
	}
	if v3.RowFormat.SchemaVersion != 3 || len(v3.DroppedColumns) != 1 {
		t.Errorf("row format %+v, dropped %+v", v3.RowFormat, v3.DroppedColumns)
	}
}
