package catalog

import (
	"errors"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

// validTable is simpleTable with the fields Writer.Create fills in.
func validTable() *Table {
	t := simpleTable("t")
	t.ID, t.Version, t.GroupID, t.NextColumnID, t.NextIndexID = 104, 1, 104, 4, 3
	t.Partitioning.Kind = PartitionRange
	t.PrimaryIndex.Kind, t.PrimaryIndex.State = IndexBTree, IndexPublic
	ix := &t.Indexes[0]
	ix.Kind, ix.State, ix.Placement, ix.GroupID = IndexBTree, IndexPublic, IndexGlobal, 105
	return t
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Table)
		err    string // substring; "" for valid
	}{
		{"valid", func(*Table) {}, ""},
		{"no ID", func(t *Table) { t.ID = 0 }, "has no ID"},
		{"duplicate column name", func(t *Table) { t.Columns[1].Name = "a" }, `column "a" is defined twice`},
		{"column ID beyond next", func(t *Table) { t.NextColumnID = 3 }, "outside [1, 3)"},
		{"nullable primary key", func(t *Table) { t.Columns[0].Nullable = true }, "primary key column \"a\" is nullable"},
		{"missing key column", func(t *Table) { t.Indexes[0].KeyColumnIDs = []rowenc.ColumnID{9} }, "key column 9 does not exist"},
		{"directions mismatch", func(t *Table) { t.Indexes[0].KeyDirections = nil }, "0 directions for 1 key columns"},
		{"duplicate index name", func(t *Table) { t.Indexes[0].Name = "t_pkey" }, "used twice"},
		{"stored key column", func(t *Table) { t.Indexes[0].StoreColumnIDs = []rowenc.ColumnID{2} }, "is a key column"},
		{"unknown state", func(t *Table) { t.Indexes[0].State = "half" }, `unknown state "half"`},
		{"global index without group", func(t *Table) { t.Indexes[0].GroupID = 0 }, "global index has no group"},
		{"jsonb in btree", func(t *Table) { t.Columns[1].Type = types.JSONB }, "jsonb cannot be in a btree index"},
		{"hash on too many columns", func(t *Table) { t.Partitioning = Partitioning{Kind: PartitionHash, HashColumns: 2} }, "hash partitioning on 2 of 1"},
		{"colocated range table", func(t *Table) { t.Colocated = true }, "colocated table must use single partitioning"},
		{"shared group, range", func(t *Table) { t.GroupID = 7 }, "share a group"},
		{"bad shard column", func(t *Table) {
			t.Indexes[0].HashSharding = &HashSharding{Buckets: 8, ShardColumnID: 3}
		}, "must start with its shard column"},
		{"bad missing value", func(t *Table) { s := "zz"; t.Columns[2].MissingValue = &s }, "missing value"},
		{"column from the future", func(t *Table) { t.Columns[2].AddedIn = 5 }, "added in row schema version 5"},
		{"fk arity", func(t *Table) {
			t.ForeignKeys = []ForeignKey{{Name: "fk", ColumnIDs: []rowenc.ColumnID{2}, ReferencedTableID: 5}}
		}, "equally many"},
		{"unique without index", func(t *Table) { t.Uniques = []UniqueConstraint{{Name: "u", IndexID: 2}} }, "not backed by a unique index"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tbl := validTable()
			tc.mutate(tbl)
			err := tbl.Validate()
			if tc.err == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want one containing %q", err, tc.err)
			}
		})
	}
}

// Every built-in type and the modified ones survive the (OID, typmod)
// round trip exactly.
func TestColumnTypeRoundTrip(t *testing.T) {
	ts := append([]*types.T{}, types.Scalars...)
	vc, _ := types.MakeVarChar(10)
	ch, _ := types.MakeChar(3)
	num, _ := types.MakeNumeric(10, 2)
	tsp, _ := types.MakeTimestamp(types.TimestampTZ, 3)
	ts = append(ts, vc, ch, num, tsp, types.MustArray(types.Int4), types.MustArray(vc))
	for _, typ := range ts {
		if typ.Family == types.UnknownFamily {
			continue
		}
		got, err := refOf(typ).resolve()
		if err != nil || !got.Identical(typ) {
			t.Errorf("%s: round trip gave %v, %v", typ.Name(), got, err)
		}
	}
}

func TestEncodeDecode(t *testing.T) {
	for _, d := range seedDescriptors() {
		b, err := Encode(d)
		if err != nil {
			t.Fatalf("%s: %v", describe(d), err)
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("%s: %v", describe(d), err)
		}
		b2, _ := Encode(got)
		if string(b) != string(b2) {
			t.Errorf("%s: re-encoding differs:\n%s\n%s", describe(d), b, b2)
		}
	}
	for _, bad := range []string{
		`{"format_version":2,"database":{"id":1,"name":"d","version":1,"owner":"x"}}`,
		`{"format_version":1}`,
		`{"format_version":1,"database":{"id":1,"name":"d"},"schema":{"id":2,"name":"s","database_id":1}}`,
		`{"format_version":1,"database":{"id":0,"name":"d"}}`,
		`{"format_version":1,"database":{"id":1,"name":"d","surprise":1}}`,
	} {
		if _, err := Decode([]byte(bad)); !errors.Is(err, ErrBadDescriptor) {
			t.Errorf("Decode(%s) = %v, want ErrBadDescriptor", bad, err)
		}
	}
}

func seedDescriptors() []Descriptor {
	missing := "7"
	tbl := validTable()
	tbl.Columns[2].MissingValue = &missing
	tbl.Columns[2].AddedIn = 1
	return []Descriptor{
		&Database{ID: 1, Name: "postgres", Version: 1, Owner: "postgres"},
		&Database{ID: 9, Name: "co", Version: 3, Colocated: true, ColocationGroupID: 9},
		&Schema{ID: 2, DatabaseID: 1, Name: "public", Version: 1},
		tbl,
		&View{ID: 5, DatabaseID: 1, SchemaID: 2, Name: "v", Version: 1, Query: "SELECT 1 AS x", Columns: []ViewColumn{{Name: "x", Type: types.Int4}}},
		&Sequence{ID: 6, DatabaseID: 1, SchemaID: 2, Name: "s", Version: 1, Start: 1, Increment: 1, Min: 1, Max: 1 << 62,
			OwnedBy: &SequenceOwner{TableID: 104, ColumnID: 1}},
	}
}

// FuzzDecode: Decode never panics, and whatever it accepts is valid and
// re-encodes to bytes that decode to the same thing.
func FuzzDecode(f *testing.F) {
	for _, d := range seedDescriptors() {
		b, err := Encode(d)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"format_version":1,"table":{"id":1,"columns":[{"type":{"oid":1043,"typmod":-7}}]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrBadDescriptor) {
				t.Fatalf("error does not wrap ErrBadDescriptor: %v", err)
			}
			return
		}
		enc, err := Encode(d)
		if err != nil {
			t.Fatalf("decoded descriptor does not encode: %v", err)
		}
		d2, err := Decode(enc)
		if err != nil {
			t.Fatalf("re-encoded descriptor does not decode: %v", err)
		}
		enc2, _ := Encode(d2)
		if string(enc) != string(enc2) {
			t.Fatalf("encoding not stable:\n%s\n%s", enc, enc2)
		}
	})
}
