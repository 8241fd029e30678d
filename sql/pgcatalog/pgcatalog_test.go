package pgcatalog

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/cairn-db/cairn/testcluster"
)

// fixture is the schema every test reads:
//
//	CREATE TABLE users (id bigserial PRIMARY KEY, email varchar(100) NOT NULL UNIQUE,
//	    name text DEFAULT 'anon', score numeric(10,2) CHECK (score >= 0),
//	    total numeric GENERATED ALWAYS AS (score * 2) STORED);
//	CREATE TABLE orders (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
//	    user_id bigint REFERENCES users (id) ON DELETE CASCADE, note text);
//	CREATE INDEX orders_user_idx ON orders (user_id DESC) INCLUDE (note) WHERE note IS NOT NULL;
//	CREATE TABLE nopk (a int4);  -- keyed by a hidden rowid
//	CREATE SCHEMA other; CREATE TABLE other.t2 (x int4 PRIMARY KEY);
//	CREATE VIEW v AS SELECT id FROM users;
type fixture struct {
	db                  *kv.DB
	users, orders, nopk *catalog.Table
	t2                  *catalog.Table
	usersSeq, ordersSeq *catalog.Sequence
	view                *catalog.View
}

func asc(n int) []rowenc.Order { return make([]rowenc.Order, n) }

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{db: testcluster.StartNode(t, testcluster.Options{}).DB}
	err := f.db.Txn(context.Background(), kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		if err := catalog.Bootstrap(ctx, txn, ""); err != nil {
			return err
		}
		w := catalog.NewWriter(txn, nil)
		ids := make([]catalog.ID, 4)
		for i := range ids {
			id, err := w.AllocateID(ctx)
			if err != nil {
				return err
			}
			ids[i] = id
		}
		pub := func(name string) (catalog.ID, catalog.ID, string) {
			return catalog.PostgresDatabaseID, catalog.PublicSchemaID, name
		}
		f.usersSeq = &catalog.Sequence{ID: ids[2], Start: 1, Increment: 1, Min: 1, Max: math.MaxInt64,
			OwnedBy: &catalog.SequenceOwner{TableID: ids[0], ColumnID: 1}}
		f.usersSeq.DatabaseID, f.usersSeq.SchemaID, f.usersSeq.Name = pub("users_id_seq")
		f.ordersSeq = &catalog.Sequence{ID: ids[3], Start: 1, Increment: 1, Min: 1, Max: math.MaxInt64,
			OwnedBy: &catalog.SequenceOwner{TableID: ids[1], ColumnID: 1}}
		f.ordersSeq.DatabaseID, f.ordersSeq.SchemaID, f.ordersSeq.Name = pub("orders_id_seq")
		vc100, _ := types.MakeVarChar(100)
		num, _ := types.MakeNumeric(10, 2)
		f.users = &catalog.Table{ID: ids[0],
			Columns: []catalog.Column{
				{ID: 1, Name: "id", Type: types.Int8, DefaultExpr: "nextval('users_id_seq'::regclass)", SequenceID: ids[2]},
				{ID: 2, Name: "email", Type: vc100},
				{ID: 3, Name: "name", Type: types.Text, Nullable: true, DefaultExpr: "'anon'::text"},
				{ID: 4, Name: "score", Type: num, Nullable: true},
				{ID: 5, Name: "total", Type: types.Numeric, Nullable: true, ComputedExpr: "score * 2", Stored: true},
			},
			PrimaryIndex: catalog.Index{ID: catalog.PrimaryIndexID, Name: "users_pkey", Unique: true,
				KeyColumnIDs: []rowenc.ColumnID{1}, KeyDirections: asc(1)},
			Indexes: []catalog.Index{{ID: 2, Name: "users_email_key", Unique: true,
				KeyColumnIDs: []rowenc.ColumnID{2}, KeyDirections: asc(1)}},
			Uniques:   []catalog.UniqueConstraint{{Name: "users_email_key", IndexID: 2}},
			Checks:    []catalog.Check{{Name: "users_score_check", Expr: "(score >= (0)::numeric)"}},
			RowFormat: catalog.RowFormat{Packed: true, SchemaVersion: 1},
			Comment:   "people",
		}
		f.users.DatabaseID, f.users.SchemaID, f.users.Name = pub("users")
		f.orders = &catalog.Table{ID: ids[1],
			Columns: []catalog.Column{
				{ID: 1, Name: "id", Type: types.Int8, Identity: catalog.IdentityAlways, SequenceID: ids[3]},
				{ID: 2, Name: "user_id", Type: types.Int8, Nullable: true},
				{ID: 3, Name: "note", Type: types.Text, Nullable: true},
			},
			PrimaryIndex: catalog.Index{ID: catalog.PrimaryIndexID, Name: "orders_pkey", Unique: true,
				KeyColumnIDs: []rowenc.ColumnID{1}, KeyDirections: asc(1)},
			Indexes: []catalog.Index{{ID: 2, Name: "orders_user_idx", KeyColumnIDs: []rowenc.ColumnID{2},
				KeyDirections: []rowenc.Order{rowenc.Desc}, StoreColumnIDs: []rowenc.ColumnID{3},
				Predicate: "(note IS NOT NULL)"}},
			ForeignKeys: []catalog.ForeignKey{{Name: "orders_user_id_fkey", ColumnIDs: []rowenc.ColumnID{2},
				ReferencedTableID: ids[0], ReferencedColumnIDs: []rowenc.ColumnID{1}, OnDelete: catalog.Cascade}},
			RowFormat: catalog.RowFormat{Packed: true, SchemaVersion: 1},
		}
		f.orders.DatabaseID, f.orders.SchemaID, f.orders.Name = pub("orders")
		f.nopk = &catalog.Table{
			Columns: []catalog.Column{
				{ID: 1, Name: "a", Type: types.Int4, Nullable: true},
				{ID: 2, Name: "rowid", Type: types.Int8, Hidden: true, DefaultExpr: "unique_rowid()"},
			},
			PrimaryIndex: catalog.Index{ID: catalog.PrimaryIndexID, Name: "nopk_pkey", Unique: true,
				KeyColumnIDs: []rowenc.ColumnID{2}, KeyDirections: asc(1)},
			RowFormat: catalog.RowFormat{Packed: true, SchemaVersion: 1},
		}
		f.nopk.DatabaseID, f.nopk.SchemaID, f.nopk.Name = pub("nopk")
		for _, d := range []catalog.Descriptor{f.usersSeq, f.ordersSeq, f.users, f.orders, f.nopk} {
			if err := w.Create(ctx, d); err != nil {
				return fmt.Errorf("creating %s: %w", d.DescName(), err)
			}
		}
		other := &catalog.Schema{DatabaseID: catalog.PostgresDatabaseID, Name: "other"}
		if err := w.Create(ctx, other); err != nil {
			return err
		}
		f.t2 = &catalog.Table{DatabaseID: catalog.PostgresDatabaseID, SchemaID: other.ID, Name: "t2",
			Columns: []catalog.Column{{ID: 1, Name: "x", Type: types.Int4}},
			PrimaryIndex: catalog.Index{ID: catalog.PrimaryIndexID, Name: "t2_pkey", Unique: true,
				KeyColumnIDs: []rowenc.ColumnID{1}, KeyDirections: asc(1)},
			RowFormat: catalog.RowFormat{Packed: true, SchemaVersion: 1}}
		if err := w.Create(ctx, f.t2); err != nil {
			return err
		}
		f.view = &catalog.View{Query: "SELECT id FROM users", Columns: []catalog.ViewColumn{{Name: "id", Type: types.Int8}}}
		f.view.DatabaseID, f.view.SchemaID, f.view.Name = pub("v")
		return w.Create(ctx, f.view)
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// read runs fn in a transaction with a virtual-table environment and a
// resolver over it.
func (f *fixture) read(t *testing.T, fn func(ctx context.Context, env *plan.VirtualEnv, tc *types.Context)) {
	t.Helper()
	err := f.db.Txn(context.Background(), kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		r := catalog.NewReader(txn, nil)
		db, err := r.Database(ctx, "postgres")
		if err != nil {
			return err
		}
		env := &plan.VirtualEnv{Txn: txn, Catalog: r, Database: db, User: "postgres",
			Settings: func() [][3]string { return [][3]string{{"TimeZone", "UTC", "zone"}} },
			Session:  builtins.SessionInfo{BackendPID: 42, SearchPath: []string{"public"}}}
		tc := &types.Context{Reg: NewRegResolver(ctx, r, db, "postgres", []string{"$user", "public"})}
		fn(ctx, env, tc)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// rows returns a virtual table's rows as column name → text (NULL for
// NULL), formatted as a client would see them.
func rows(t *testing.T, ctx context.Context, env *plan.VirtualEnv, tc *types.Context, schema, name string) []map[string]string {
	t.Helper()
	vt := Lookup(schema, name)
	if vt == nil {
		t.Fatalf("no virtual table %s.%s", schema, name)
	}
	rs, err := vt.Rows(ctx, env)
	if err != nil {
		t.Fatalf("%s.%s: %v", schema, name, err)
	}
	cols := vt.Columns()
	var out []map[string]string
	for _, r := range rs {
		m := map[string]string{}
		for i, c := range cols {
			if types.IsNull(r[i]) {
				m[c.Name] = "NULL"
			} else {
				m[c.Name] = types.Format(tc, c.T, r[i])
			}
		}
		out = append(out, m)
	}
	return out
}

// where keeps the rows whose column col is val.
func where(rs []map[string]string, col, val string) []map[string]string {
	var out []map[string]string
	for _, r := range rs {
		if r[col] == val {
			out = append(out, r)
		}
	}
	return out
}

// check asserts that exactly one row has key = keyVal and that its columns
// have the wanted values.
func check(t *testing.T, what string, rs []map[string]string, key, keyVal string, want map[string]string) {
	t.Helper()
	got := where(rs, key, keyVal)
	if len(got) != 1 {
		t.Errorf("%s: %d rows with %s = %s, want 1", what, len(got), key, keyVal)
		return
	}
	for c, w := range want {
		v, ok := got[0][c]
		if !ok {
			t.Errorf("%s %s: no column %s", what, keyVal, c)
		} else if v != w {
			t.Errorf("%s %s: %s = %q, want %q", what, keyVal, c, v, w)
		}
	}
}

func oidStr[T ~uint32](id T) string { return fmt.Sprint(uint32(id)) }

func TestEveryTableGenerates(t *testing.T) {
	f := newFixture(t)
	f.read(t, func(ctx context.Context, env *plan.VirtualEnv, _ *types.Context) {
		for _, vt := range Tables() {
			rs, err := vt.Rows(ctx, env)
			if err != nil {
				t.Errorf("%s.%s: %v", vt.Schema(), vt.Name(), err)
				continue
			}
			for _, r := range rs {
				if len(r) != len(vt.Columns()) {
					t.Fatalf("%s.%s: row of %d values for %d columns", vt.Schema(), vt.Name(), len(r), len(vt.Columns()))
				}
				for i, d := range r {
					c := vt.Columns()[i]
					if !types.IsNull(d) && d.Family() != c.T.Family {
						t.Errorf("%s.%s.%s: %s datum in a %s column", vt.Schema(), vt.Name(), c.Name, d.Family(), c.T.Family)
					}
				}
			}
		}
	})
}

func TestFixedOIDs(t *testing.T) {
	for _, tc := range []struct {
		schema, name string
		oid          uint32
		cols         int
	}{
		{"pg_catalog", "pg_class", 1259, 33}, {"pg_catalog", "pg_attribute", 1249, 26},
		{"pg_catalog", "pg_type", 1247, 32}, {"pg_catalog", "pg_namespace", 2615, 4},
		{"pg_catalog", "pg_proc", 1255, 30}, {"pg_catalog", "pg_index", 2610, 21},
		{"pg_catalog", "pg_constraint", 2606, 26}, {"information_schema", "columns", 13295, 44},
	} {
		vt := Lookup(tc.schema, tc.name)
		if vt == nil || vt.OID() != tc.oid || len(vt.Columns()) != tc.cols {
			t.Errorf("%s.%s: %v", tc.schema, tc.name, vt)
		}
	}
	if Lookup("pg_catalog", "nosuch") != nil || Lookup("public", "pg_class") != nil {
		t.Error("Lookup found a relation that does not exist")
	}
}

func TestPgClassAndAttribute(t *testing.T) {
	f := newFixture(t)
	f.read(t, func(ctx context.Context, env *plan.VirtualEnv, tc *types.Context) {
		class := rows(t, ctx, env, tc, "pg_catalog", "pg_class")
		check(t, "pg_class", class, "relname", "users", map[string]string{"oid": oidStr(f.users.ID),
			"relnamespace": "2200", "relkind": "r", "relnatts": "5", "relhasindex": "t", "relchecks": "1",
			"relowner": "10", "relam": "2", "relpersistence": "p"})
		check(t, "pg_class", class, "relname", "users_pkey", map[string]string{"relkind": "i", "relnatts": "1",
			"oid": oidStr(indexOID(f.users.ID, 1)), "relam": "403"})
		check(t, "pg_class", class, "relname", "orders_user_idx", map[string]string{"relkind": "i", "relnatts": "2"})
		check(t, "pg_class", class, "relname", "users_id_seq", map[string]string{"relkind": "S"})
		check(t, "pg_class", class, "relname", "v", map[string]string{"relkind": "v", "relnatts": "1"})
		check(t, "pg_class", class, "relname", "t2", map[string]string{"relnamespace": oidStr(f.t2.SchemaID)})
		check(t, "pg_class", class, "relname", "pg_class", map[string]string{"oid": "1259", "relnamespace": "11", "relkind": "r"})
		check(t, "pg_class", class, "relname", "pg_tables", map[string]string{"relkind": "v"})
		check(t, "pg_class", class, "relname", "nopk", map[string]string{"relnatts": "1", "relhasindex": "f"})
		if n := len(where(class, "relname", "nopk_pkey")); n != 0 {
			t.Errorf("the primary index of a table without a primary key is listed (%d rows)", n)
		}

		attr := rows(t, ctx, env, tc, "pg_catalog", "pg_attribute")
		var names []string
		for _, a := range where(attr, "attrelid", oidStr(f.users.ID)) {
			names = append(names, a["attnum"]+":"+a["attname"])
		}
		sort.Strings(names)
		if got := strings.Join(names, " "); got != "1:id 2:email 3:name 4:score 5:total" {
			t.Errorf("users' attributes: %s", got)
		}
		users := where(attr, "attrelid", oidStr(f.users.ID))
		check(t, "users", users, "attname", "id", map[string]string{"atttypid": "20", "attnotnull": "t",
			"atthasdef": "t", "attlen": "8", "atttypmod": "-1", "attidentity": "", "attgenerated": ""})
		check(t, "users", users, "attname", "email", map[string]string{"atttypid": "1043", "atttypmod": "104",
			"attnotnull": "t", "atthasdef": "f", "attlen": "-1", "attcollation": "100"})
		check(t, "users", users, "attname", "score", map[string]string{"atttypid": "1700",
			"atttypmod": fmt.Sprint(10<<16 | 2 + 4), "attnotnull": "f"})
		check(t, "users", users, "attname", "total", map[string]string{"attgenerated": "s", "atthasdef": "t"})
		check(t, "orders", where(attr, "attrelid", oidStr(f.orders.ID)), "attname", "id",
			map[string]string{"attidentity": "a", "atthasdef": "f"})
		nopk := where(attr, "attrelid", oidStr(f.nopk.ID))
		if len(nopk) != 1 || nopk[0]["attname"] != "a" {
			t.Errorf("nopk's attributes (the hidden rowid must not show): %v", nopk)
		}
		idx := where(attr, "attrelid", oidStr(indexOID(f.orders.ID, 2)))
		if len(idx) != 2 {
			t.Errorf("orders_user_idx attributes: %v", idx)
		}

		nsp := rows(t, ctx, env, tc, "pg_catalog", "pg_namespace")
		for _, n := range []string{"public", "pg_catalog", "information_schema", "other"} {
			if len(where(nsp, "nspname", n)) != 1 {
				t.Errorf("pg_namespace has no %s", n)
			}
		}
		// PostgreSQL 15: public belongs to pg_database_owner (OID 6171).
		check(t, "pg_namespace", nsp, "nspname", "public", map[string]string{"oid": "2200", "nspowner": "6171",
			"nspacl": "{pg_database_owner=UC/pg_database_owner,=U/pg_database_owner}"})
	})
}

func TestIndexesAndConstraints(t *testing.T) {
	f := newFixture(t)
	f.read(t, func(ctx context.Context, env *plan.VirtualEnv, tc *types.Context) {
		ix := rows(t, ctx, env, tc, "pg_catalog", "pg_index")
		check(t, "pg_index", ix, "indexrelid", oidStr(indexOID(f.users.ID, 1)), map[string]string{
			"indrelid": oidStr(f.users.ID), "indisprimary": "t", "indisunique": "t", "indkey": "1",
			"indnatts": "1", "indnkeyatts": "1", "indisvalid": "t", "indoption": "0"})
		check(t, "pg_index", ix, "indexrelid", oidStr(indexOID(f.users.ID, 2)), map[string]string{
			"indisprimary": "f", "indisunique": "t", "indkey": "2", "indcollation": "100", "indclass": "3126"})
		check(t, "pg_index", ix, "indexrelid", oidStr(indexOID(f.orders.ID, 2)), map[string]string{
			"indisunique": "f", "indkey": "2 3", "indnatts": "2", "indnkeyatts": "1", "indoption": "3", "indclass": "3124",
			"indpred": "(note IS NOT NULL)"})
		if n := len(where(ix, "indrelid", oidStr(f.nopk.ID))); n != 0 {
			t.Errorf("nopk has %d pg_index rows, want 0", n)
		}

		con := rows(t, ctx, env, tc, "pg_catalog", "pg_constraint")
		check(t, "pg_constraint", con, "conname", "users_pkey", map[string]string{"contype": "p", "conkey": "{1}",
			"conrelid": oidStr(f.users.ID), "conindid": oidStr(indexOID(f.users.ID, 1)), "connamespace": "2200",
			"confrelid": "0"})
		check(t, "pg_constraint", con, "conname", "users_email_key", map[string]string{"contype": "u", "conkey": "{2}",
			"conindid": oidStr(indexOID(f.users.ID, 2))})
		check(t, "pg_constraint", con, "conname", "users_score_check", map[string]string{"contype": "c",
			"conkey": "{4}", "conbin": "(score >= (0)::numeric)"})
		check(t, "pg_constraint", con, "conname", "orders_user_id_fkey", map[string]string{"contype": "f",
			"conkey": "{2}", "confkey": "{1}", "confrelid": oidStr(f.users.ID), "confdeltype": "c",
			"confupdtype": "a", "confmatchtype": "s", "conindid": oidStr(indexOID(f.users.ID, 1))})
		if n := len(where(con, "conrelid", oidStr(f.nopk.ID))); n != 0 {
			t.Errorf("nopk has %d constraints, want 0", n)
		}

		// The catalog functions, through the resolver, by the OIDs the
		// catalogs show.
		res := tc.Reg.(*Resolver)
		defs := map[string]string{}
		for _, c := range con {
			var oid types.Datum
			oid, _ = types.ParseDatum(nil, types.Oid, c["oid"])
			d, ok := res.ConstraintDef(uint32(oid.(types.DOid)))
			if !ok {
				t.Errorf("no definition for constraint %s", c["conname"])
			}
			defs[c["conname"]] = d
		}
		for name, want := range map[string]string{
			"users_pkey": "PRIMARY KEY (id)", "users_email_key": "UNIQUE (email)",
			"users_score_check":   "CHECK ((score >= (0)::numeric))",
			"orders_user_id_fkey": "FOREIGN KEY (user_id) REFERENCES users(id) ON DELETE CASCADE",
		} {
			if defs[name] != want {
				t.Errorf("pg_get_constraintdef(%s) = %q, want %q", name, defs[name], want)
			}
		}
		for _, tc := range []struct {
			oid  uint32
			col  int
			want string
		}{
			{indexOID(f.users.ID, 1), 0, "CREATE UNIQUE INDEX users_pkey ON public.users USING btree (id)"},
			{indexOID(f.orders.ID, 2), 0, "CREATE INDEX orders_user_idx ON public.orders USING btree (user_id DESC) INCLUDE (note) WHERE (note IS NOT NULL)"},
			{indexOID(f.orders.ID, 2), 1, "user_id"},
		} {
			if got, ok := res.IndexDef(tc.oid, tc.col); !ok || got != tc.want {
				t.Errorf("pg_get_indexdef(%d, %d) = %q, want %q", tc.oid, tc.col, got, tc.want)
			}
		}
		// The pretty forms, as psql's \d asks for them.
		if got, _ := res.IndexDefPretty(indexOID(f.orders.ID, 2), 0, true); got != "CREATE INDEX orders_user_idx ON orders USING btree (user_id DESC) INCLUDE (note) WHERE note IS NOT NULL" {
			t.Errorf("pretty pg_get_indexdef = %q", got)
		}
		for _, c := range con {
			if c["conname"] == "users_score_check" {
				oid, _ := types.ParseDatum(nil, types.Oid, c["oid"])
				if got, _ := res.ConstraintDefPretty(uint32(oid.(types.DOid)), true); got != "CHECK (score >= 0::numeric)" {
					t.Errorf("pretty pg_get_constraintdef = %q", got)
				}
			}
		}
		if _, ok := res.IndexDef(uint32(f.users.ID), 0); ok {
			t.Error("pg_get_indexdef of a table OID found an index")
		}

		ad := rows(t, ctx, env, tc, "pg_catalog", "pg_attrdef")
		check(t, "pg_attrdef", where(ad, "adrelid", oidStr(f.users.ID)), "adnum", "1",
			map[string]string{"adbin": "nextval('users_id_seq'::regclass)"})
		check(t, "pg_attrdef", where(ad, "adrelid", oidStr(f.users.ID)), "adnum", "5",
			map[string]string{"adbin": "score * 2"})
		if n := len(where(ad, "adrelid", oidStr(f.nopk.ID))); n != 0 {
			t.Errorf("the hidden rowid's default is listed")
		}
		dep := rows(t, ctx, env, tc, "pg_catalog", "pg_depend")
		check(t, "pg_depend", dep, "objid", oidStr(f.usersSeq.ID), map[string]string{"refobjid": oidStr(f.users.ID),
			"refobjsubid": "1", "deptype": "a", "classid": "1259", "refclassid": "1259"})
		check(t, "pg_depend", dep, "objid", oidStr(f.ordersSeq.ID), map[string]string{"deptype": "i"})
		if s, err := res.SerialSequence("users", "id"); err != nil || s != "public.users_id_seq" {
			t.Errorf("pg_get_serial_sequence(users, id) = %q, %v", s, err)
		}
		if s, err := res.SerialSequence("users", "email"); err != nil || s != "" {
			t.Errorf("pg_get_serial_sequence(users, email) = %q, %v", s, err)
		}
		if _, err := res.SerialSequence("users", "nosuch"); pgerror.Code(err) != pgerrcode.UndefinedColumn {
			t.Errorf("pg_get_serial_sequence of a missing column: %v", err)
		}
		if d, ok := res.Description(uint32(f.users.ID), "pg_class", 0); !ok || d != "people" {
			t.Errorf("obj_description(users) = %q, %v", d, ok)
		}
	})
}

func TestInformationSchema(t *testing.T) {
	f := newFixture(t)
	f.read(t, func(ctx context.Context, env *plan.VirtualEnv, tc *types.Context) {
		cols := where(rows(t, ctx, env, tc, "information_schema", "columns"), "table_schema", "public")
		users := where(cols, "table_name", "users")
		check(t, "columns", users, "column_name", "id", map[string]string{"ordinal_position": "1",
			"data_type": "bigint", "udt_name": "int8", "is_nullable": "NO", "numeric_precision": "64",
			"numeric_precision_radix": "2", "numeric_scale": "0", "column_default": "nextval('users_id_seq'::regclass)",
			"is_identity": "NO", "is_generated": "NEVER", "table_catalog": "postgres"})
		check(t, "columns", users, "column_name", "email", map[string]string{"data_type": "character varying",
			"character_maximum_length": "100", "character_octet_length": "400", "udt_name": "varchar",
			"numeric_precision": "NULL"})
		check(t, "columns", users, "column_name", "score", map[string]string{"data_type": "numeric",
			"numeric_precision": "10", "numeric_scale": "2", "numeric_precision_radix": "10", "is_nullable": "YES"})
		check(t, "columns", users, "column_name", "total", map[string]string{"is_generated": "ALWAYS",
			"generation_expression": "score * 2", "column_default": "NULL"})
		check(t, "columns", where(cols, "table_name", "orders"), "column_name", "id", map[string]string{
			"is_identity": "YES", "identity_generation": "ALWAYS", "identity_start": "1", "identity_increment": "1",
			"identity_cycle": "NO", "column_default": "NULL"})
		if n := len(where(where(cols, "table_name", "nopk"), "column_name", "rowid")); n != 0 {
			t.Error("information_schema.columns shows the hidden rowid")
		}

		tcs := rows(t, ctx, env, tc, "information_schema", "table_constraints")
		check(t, "table_constraints", tcs, "constraint_name", "orders_user_id_fkey", map[string]string{
			"constraint_type": "FOREIGN KEY", "table_name": "orders", "is_deferrable": "NO"})
		check(t, "table_constraints", tcs, "constraint_name", "users_pkey", map[string]string{"constraint_type": "PRIMARY KEY"})
		kcu := rows(t, ctx, env, tc, "information_schema", "key_column_usage")
		check(t, "key_column_usage", kcu, "constraint_name", "orders_user_id_fkey", map[string]string{
			"column_name": "user_id", "ordinal_position": "1", "position_in_unique_constraint": "1"})
		check(t, "key_column_usage", kcu, "constraint_name", "users_email_key", map[string]string{
			"column_name": "email", "position_in_unique_constraint": "NULL"})
		rc := rows(t, ctx, env, tc, "information_schema", "referential_constraints")
		check(t, "referential_constraints", rc, "constraint_name", "orders_user_id_fkey", map[string]string{
			"unique_constraint_name": "users_pkey", "delete_rule": "CASCADE", "update_rule": "NO ACTION",
			"match_option": "NONE"})
		ccu := rows(t, ctx, env, tc, "information_schema", "constraint_column_usage")
		check(t, "constraint_column_usage", ccu, "constraint_name", "orders_user_id_fkey", map[string]string{
			"table_name": "users", "column_name": "id"})
		tables := rows(t, ctx, env, tc, "information_schema", "tables")
		check(t, "tables", tables, "table_name", "users", map[string]string{"table_type": "BASE TABLE"})
		check(t, "tables", tables, "table_name", "v", map[string]string{"table_type": "VIEW"})
		seqs := rows(t, ctx, env, tc, "information_schema", "sequences")
		check(t, "sequences", seqs, "sequence_name", "users_id_seq", map[string]string{"start_value": "1",
			"maximum_value": "9223372036854775807", "data_type": "bigint"})
		sch := rows(t, ctx, env, tc, "information_schema", "schemata")
		check(t, "schemata", sch, "schema_name", "other", map[string]string{"catalog_name": "postgres"})
	})
}

func TestRegTypesRoundTrip(t *testing.T) {
	f := newFixture(t)
	f.read(t, func(ctx context.Context, env *plan.VirtualEnv, tc *types.Context) {
		for _, c := range []struct {
			typ       *types.T
			in        string
			oid       uint32
			out, code string
		}{
			{typ: types.RegClass, in: "users", oid: uint32(f.users.ID), out: "users"},
			{typ: types.RegClass, in: "public.users", oid: uint32(f.users.ID), out: "users"},
			{typ: types.RegClass, in: `"USERS"`, code: pgerrcode.UndefinedTable},
			{typ: types.RegClass, in: "USERS", oid: uint32(f.users.ID), out: "users"},
			{typ: types.RegClass, in: "users_pkey", oid: indexOID(f.users.ID, 1), out: "users_pkey"},
			{typ: types.RegClass, in: "users_id_seq", oid: uint32(f.usersSeq.ID), out: "users_id_seq"},
			{typ: types.RegClass, in: "other.t2", oid: uint32(f.t2.ID), out: "other.t2"},
			{typ: types.RegClass, in: "t2", code: pgerrcode.UndefinedTable},
			{typ: types.RegClass, in: "pg_class", oid: 1259, out: "pg_class"},
			{typ: types.RegClass, in: "pg_catalog.pg_type", oid: 1247, out: "pg_type"},
			{typ: types.RegClass, in: "information_schema.columns", oid: 13295, out: "information_schema.columns"},
			{typ: types.RegClass, in: "nosuch", code: pgerrcode.UndefinedTable},
			{typ: types.RegClass, in: "nosuch.users", code: pgerrcode.InvalidSchemaName},
			{typ: types.RegClass, in: "a..b", code: pgerrcode.InvalidName},
			{typ: types.RegClass, in: "123456", oid: 123456, out: "123456"},
			{typ: types.RegClass, in: "-", oid: 0, out: "-"},
			{typ: types.RegNamespace, in: "public", oid: 2200, out: "public"},
			{typ: types.RegNamespace, in: "pg_catalog", oid: 11, out: "pg_catalog"},
			{typ: types.RegNamespace, in: "nosuch", code: pgerrcode.InvalidSchemaName},
			{typ: types.RegType, in: "integer", oid: 23, out: "integer"},
			{typ: types.RegType, in: "varchar(10)", oid: 1043, out: "character varying"},
			{typ: types.RegType, in: "int8[]", oid: 1016, out: "bigint[]"},
			{typ: types.RegType, in: "nosuch", code: pgerrcode.UndefinedObject},
			{typ: types.RegRole, in: "postgres", oid: 10, out: "postgres"},
			{typ: types.RegRole, in: "nobody", code: pgerrcode.UndefinedObject},
			{typ: types.RegProc, in: "now", out: "now"},
			{typ: types.RegProc, in: "nosuchfn", code: pgerrcode.UndefinedFunction},
			{typ: types.RegProcedure, in: "lower(text)", out: "lower(text)"},
		} {
			d, err := types.ParseDatum(tc, c.typ, c.in)
			if c.code != "" {
				if pgerror.Code(err) != c.code {
					t.Errorf("%s %q: error %v, want SQLSTATE %s", c.typ.Name(), c.in, err, c.code)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s %q: %v", c.typ.Name(), c.in, err)
				continue
			}
			if c.oid != 0 && uint32(d.(types.DOid)) != c.oid {
				t.Errorf("%s %q = %d, want %d", c.typ.Name(), c.in, d, c.oid)
			}
			out := types.Format(tc, c.typ, d)
			if out != c.out {
				t.Errorf("%s %q prints %q, want %q", c.typ.Name(), c.in, out, c.out)
			}
			// Invariant 1 of sql/types: what Format prints parses back.
			if back, err := types.ParseDatum(tc, c.typ, out); err != nil || back != d {
				t.Errorf("%s %q: %q reads back as %v, %v", c.typ.Name(), c.in, out, back, err)
			}
		}
		res := tc.Reg.(*Resolver)
		for _, c := range []struct {
			oid            uint32
			visible, known bool
		}{{uint32(f.users.ID), true, true}, {uint32(f.t2.ID), false, true}, {1259, true, true}, {999999, false, false}} {
			v, ok := res.TableIsVisible(c.oid)
			if v != c.visible || ok != c.known {
				t.Errorf("pg_table_is_visible(%d) = %v, %v", c.oid, v, ok)
			}
		}
	})
}

func TestSessionTables(t *testing.T) {
	f := newFixture(t)
	f.read(t, func(ctx context.Context, env *plan.VirtualEnv, tc *types.Context) {
		check(t, "pg_settings", rows(t, ctx, env, tc, "pg_catalog", "pg_settings"), "name", "TimeZone",
			map[string]string{"setting": "UTC", "short_desc": "zone"})
		check(t, "pg_stat_activity", rows(t, ctx, env, tc, "pg_catalog", "pg_stat_activity"), "pid", "42",
			map[string]string{"datname": "postgres", "usename": "postgres"})
		check(t, "pg_database", rows(t, ctx, env, tc, "pg_catalog", "pg_database"), "datname", "postgres",
			map[string]string{"encoding": "6", "datdba": "10"})
		check(t, "pg_roles", rows(t, ctx, env, tc, "pg_catalog", "pg_roles"), "rolname", "postgres",
			map[string]string{"oid": "10", "rolsuper": "t", "rolcanlogin": "t"})
		check(t, "pg_tables", rows(t, ctx, env, tc, "pg_catalog", "pg_tables"), "tablename", "users",
			map[string]string{"schemaname": "public", "hasindexes": "t", "tableowner": "postgres"})
		check(t, "pg_indexes", rows(t, ctx, env, tc, "pg_catalog", "pg_indexes"), "indexname", "users_email_key",
			map[string]string{"indexdef": "CREATE UNIQUE INDEX users_email_key ON public.users USING btree (email)"})
		check(t, "pg_views", rows(t, ctx, env, tc, "pg_catalog", "pg_views"), "viewname", "v",
			// pg_get_viewdef's deparse, as PostgreSQL prints the view.
			map[string]string{"definition": " SELECT users.id\n   FROM users;"})
		check(t, "pg_sequences", rows(t, ctx, env, tc, "pg_catalog", "pg_sequences"), "sequencename", "users_id_seq",
			map[string]string{"data_type": "bigint", "increment_by": "1"})
		types_ := rows(t, ctx, env, tc, "pg_catalog", "pg_type")
		check(t, "pg_type", types_, "typname", "int4", map[string]string{"oid": "23", "typlen": "4", "typbyval": "t",
			"typarray": "1007", "typcategory": "N", "typnamespace": "11"})
		check(t, "pg_type", types_, "typname", "_int4", map[string]string{"oid": "1007", "typelem": "23", "typcategory": "A"})
		check(t, "pg_type", types_, "typname", "regclass", map[string]string{"oid": "2205", "typarray": "2210"})
		check(t, "pg_type", types_, "typname", "varchar", map[string]string{"typlen": "-1", "typcollation": "100"})
		procs := rows(t, ctx, env, tc, "pg_catalog", "pg_proc")
		if lower := where(procs, "proname", "lower"); len(lower) == 0 || lower[0]["proargtypes"] != "25" ||
			lower[0]["prorettype"] != "25" || lower[0]["provolatile"] != "i" {
			t.Errorf("pg_proc lower: %v", lower)
		}
		if c := where(procs, "proname", "count"); len(c) == 0 || c[0]["prokind"] != "a" {
			t.Errorf("pg_proc count: %v", c)
		}
	})
}

func TestIndoption(t *testing.T) {
	for o, want := range map[rowenc.Order]int64{rowenc.Asc: 0, rowenc.Desc: 3, rowenc.DescNullsLast: 1, rowenc.AscNullsFirst: 2} {
		if got := indoption(o); got != want {
			t.Errorf("indoption(%v) = %d, want %d", o, got, want)
		}
	}
}
