package ddl

import (
	"context"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/pgwire/pgauth"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/sequence"
	"github.com/cairn-db/cairn/sql/types"
)

// TestViews: CREATE VIEW stores the query and the columns the binder
// reports (renamed by the column list), OR REPLACE may only add columns,
// and DROP TABLE refuses while the view depends on the table.
func TestViews(t *testing.T) {
	e := newTestEnv(t)
	var described []string
	e.describe = func(_ context.Context, sql string) ([]plan.Column, error) {
		described = append(described, sql)
		cols := []plan.Column{{Name: "id", T: types.Int4}, {Name: "name", T: types.Text}}
		if strings.Contains(sql, "extra") {
			cols = append(cols, plan.Column{Name: "extra", T: types.Int8})
		}
		return cols, nil
	}
	e.mustExec(`CREATE TABLE t (id int PRIMARY KEY, name text)`)
	if tag := e.mustExec(`CREATE VIEW v (ident) AS SELECT id, name FROM t WHERE id > 1`); tag != "CREATE VIEW" {
		t.Fatalf("tag %q", tag)
	}
	v, ok := e.relation("v").(*catalog.View)
	if !ok || len(v.Columns) != 2 || v.Columns[0].Name != "ident" || v.Columns[1].Name != "name" {
		t.Fatalf("view %+v", v)
	}
	// The stored query names its relations with their schemas, so that it
	// means the same under any search path.
	if v.Query != "SELECT id, name FROM public.t WHERE id > 1" || described[0] != v.Query {
		t.Fatalf("query %q, described %q", v.Query, described)
	}
	if len(v.DependsOn) != 1 || v.DependsOn[0] != e.table("t").ID {
		t.Fatalf("depends on %v", v.DependsOn)
	}
	_, err := e.exec(`CREATE VIEW v AS SELECT 1`)
	wantErr(t, err, "42P07", `relation "v" already exists`)
	_, err = e.exec(`CREATE OR REPLACE VIEW v AS SELECT id, name FROM t`)
	wantErr(t, err, "42P16", `cannot change name of view column "ident" to "id"`)
	e.mustExec(`CREATE OR REPLACE VIEW v (ident) AS SELECT id, name, 1 AS extra FROM t`)
	if v := e.relation("v").(*catalog.View); len(v.Columns) != 3 {
		t.Fatalf("replaced view has %d columns", len(v.Columns))
	}
	_, err = e.exec(`DROP TABLE t`)
	wantErr(t, err, "2BP01", `cannot drop table t because other objects depend on it`)
	e.mustExec(`DROP TABLE t CASCADE`)
	if e.relation("v") != nil {
		t.Fatal("view survived DROP TABLE CASCADE")
	}
	if len(e.notices) != 1 || e.notices[0] != "drop cascades to view v" {
		t.Fatalf("notices %q", e.notices)
	}
}

// TestSequenceDDL: ALTER SEQUENCE changes the definition and RESTART the
// position; DROP of a serial's sequence needs CASCADE, which drops the
// default; TRUNCATE ... RESTART IDENTITY restarts owned sequences.
func TestSequenceDDL(t *testing.T) {
	e := newTestEnv(t)
	e.mustExec(`CREATE SEQUENCE s START 5 INCREMENT 2 MAXVALUE 100 CACHE 3`)
	seq := e.relation("s").(*catalog.Sequence)
	if seq.Start != 5 || seq.Increment != 2 || seq.Max != 100 || seq.Min != 1 || seq.Cache != 3 {
		t.Fatalf("sequence %+v", seq)
	}
	lookup := func(ctx context.Context, oid uint32) (*catalog.Sequence, error) {
		var out *catalog.Sequence
		err := e.db.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
			d, err := catalog.NewReader(txn, nil).ByID(ctx, catalog.ID(oid))
			out, _ = d.(*catalog.Sequence)
			return err
		})
		return out, err
	}
	next := func(name string) int64 {
		t.Helper()
		s := sequence.NewSession(e.db, lookup)
		v, err := s.NextVal(uint32(e.relation(name).DescID()))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := next("s"); v != 5 {
		t.Fatalf("first nextval %d", v)
	}
	e.mustExec(`ALTER SEQUENCE s RESTART WITH 50`)
	if v := next("s"); v != 50 {
		t.Fatalf("nextval after RESTART WITH 50 = %d", v)
	}
	e.mustExec(`ALTER SEQUENCE s INCREMENT 10 NO MAXVALUE`)
	if s := e.relation("s").(*catalog.Sequence); s.Max != 9223372036854775807 || s.Increment != 10 {
		t.Fatalf("after ALTER: %+v", s)
	}
	// The previous session fetched 50, 52 and 54 (CACHE 3): as in
	// PostgreSQL, cached values count as used.
	if v := next("s"); v != 64 {
		t.Fatalf("nextval after INCREMENT 10 = %d, want 64", v)
	}

	e.mustExec(`CREATE TABLE t (id serial PRIMARY KEY, x int)`)
	if v := next("t_id_seq"); v != 1 {
		t.Fatalf("serial nextval %d", v)
	}
	_, err := e.exec(`DROP SEQUENCE t_id_seq`)
	wantErr(t, err, "2BP01", `cannot drop sequence t_id_seq because other objects depend on it`)
	e.mustExec(`TRUNCATE t RESTART IDENTITY`)
	if v := next("t_id_seq"); v != 1 {
		t.Fatalf("nextval after RESTART IDENTITY = %d", v)
	}
	e.mustExec(`DROP SEQUENCE t_id_seq CASCADE`)
	if c := e.table("t").ColumnByName("id"); c.DefaultExpr != "" || c.SequenceID != 0 {
		t.Fatalf("column keeps %+v", c)
	}
	e.mustExec(`CREATE SEQUENCE o OWNED BY t.x`)
	e.mustExec(`ALTER TABLE t DROP COLUMN x`)
	if e.relation("o") != nil {
		t.Fatal("sequence owned by a dropped column survived")
	}
}

// TestTruncate: TRUNCATE empties the tables, cascading to referencing
// tables with CASCADE.
func TestTruncate(t *testing.T) {
	e := newTestEnv(t)
	e.mustExec(`CREATE TABLE p (id int PRIMARY KEY); CREATE INDEX ON p (id); CREATE TABLE c (id int PRIMARY KEY, pid int REFERENCES p)`)
	e.insert("p", []types.Datum{i(1)})
	e.insert("c", []types.Datum{i(1), i(1)})
	if tag := e.mustExec(`TRUNCATE TABLE p CASCADE`); tag != "TRUNCATE TABLE" {
		t.Fatalf("tag %q", tag)
	}
	if len(e.notices) != 1 || e.notices[0] != `truncate cascades to table "c"` {
		t.Fatalf("notices %q", e.notices)
	}
	if n := e.countKeys(); n != 0 {
		t.Fatalf("%d keys left", n)
	}
}

// TestSchemasDatabasesComments covers schemas (CASCADE), databases,
// comments, roles and the statements accepted without effect.
func TestSchemasDatabasesComments(t *testing.T) {
	e := newTestEnv(t)
	e.mustExec(`CREATE SCHEMA app; CREATE TABLE app.t (id int PRIMARY KEY, v text); CREATE SEQUENCE app.s`)
	_, err := e.exec(`DROP SCHEMA app`)
	wantErr(t, err, "2BP01", `cannot drop schema app because other objects depend on it`)
	e.mustExec(`CREATE SCHEMA IF NOT EXISTS app`)
	if len(e.notices) != 1 || e.notices[0] != `schema "app" already exists, skipping` {
		t.Fatalf("notices %q", e.notices)
	}
	e.mustExec(`DROP SCHEMA app CASCADE`)
	if e.notices[0] != "drop cascades to 2 other objects\ndrop cascades to sequence app.s\ndrop cascades to table app.t" {
		t.Fatalf("notices %q", e.notices)
	}

	e.mustExec(`CREATE DATABASE other`)
	e.dbName = "other"
	e.mustExec(`CREATE TABLE x (a int PRIMARY KEY)`)
	e.insert("x", []types.Datum{i(1)})
	e.dbName = "postgres"
	e.mustExec(`DROP DATABASE other`)
	if n := e.countKeys(); n != 0 {
		t.Fatalf("%d keys of the dropped database left", n)
	}
	_, err = e.exec(`CREATE DATABASE c WITH colocated = maybe`)
	wantErr(t, err, "22023", `invalid value for boolean option "colocated": maybe`)

	e.mustExec(`CREATE TABLE t (id int PRIMARY KEY, v text); CREATE INDEX t_v ON t (v)`)
	e.mustExec(`COMMENT ON TABLE t IS 'a table'; COMMENT ON COLUMN t.v IS 'a column'; COMMENT ON INDEX t_v IS 'an index'`)
	tbl := e.table("t")
	if tbl.Comment != "a table" || tbl.ColumnByName("v").Comment != "a column" || tbl.IndexByName("t_v").Comment != "an index" {
		t.Fatalf("comments not stored: %q %q %q", tbl.Comment, tbl.ColumnByName("v").Comment, tbl.IndexByName("t_v").Comment)
	}

	e.mustExec(`CREATE USER alice WITH PASSWORD 'secret'; CREATE ROLE bob NOLOGIN SUPERUSER CREATEDB`)
	e.read(func(ctx context.Context, _ *kv.Txn, r *catalog.Reader, _ *catalog.Database) error {
		a, err := r.Role(ctx, "alice")
		if err != nil {
			return err
		}
		if !a.Login || a.Superuser || !strings.HasPrefix(a.Verifier, "SCRAM-SHA-256$") {
			t.Errorf("alice %+v", a)
		}
		if _, err := pgauth.ParseVerifier(a.Verifier); err != nil {
			t.Errorf("alice's verifier: %v", err)
		}
		b, err := r.Role(ctx, "bob")
		if err != nil {
			return err
		}
		if b.Login || !b.Superuser {
			t.Errorf("bob %+v", b)
		}
		return nil
	})
	e.mustExec(`ALTER ROLE bob LOGIN PASSWORD NULL`)
	e.mustExec(`DROP ROLE IF EXISTS alice, nobody`)
	if len(e.notices) != 1 || e.notices[0] != `role "nobody" does not exist, skipping` {
		t.Fatalf("notices %q", e.notices)
	}
	for sql, tag := range map[string]string{
		`GRANT SELECT ON t TO bob`:                             "GRANT",
		`REVOKE ALL ON t FROM bob`:                             "REVOKE",
		`LOCK TABLE t IN ACCESS EXCLUSIVE MODE`:                "LOCK TABLE",
		`CREATE INDEX CONCURRENTLY IF NOT EXISTS t_v ON t (v)`: "CREATE INDEX",
	} {
		if got := e.mustExec(sql); got != tag {
			t.Errorf("%s: tag %q, want %q", sql, got, tag)
		}
	}
}

// TestORMMigrations: the DDL Django's and Prisma's PostgreSQL backends
// generate (quoted mixed-case names, identity keys, DEFERRABLE foreign
// keys added afterwards, pattern_ops indexes, SET CONSTRAINTS, type
// changes with USING, defaults added then dropped).
func TestORMMigrations(t *testing.T) {
	e := newTestEnv(t)
	for _, sql := range []string{
		`CREATE TABLE "polls_question" ("id" bigint NOT NULL PRIMARY KEY GENERATED BY DEFAULT AS IDENTITY, "question_text" varchar(200) NOT NULL, "pub_date" timestamp with time zone NOT NULL)`,
		`CREATE TABLE "polls_choice" ("id" bigint NOT NULL PRIMARY KEY GENERATED BY DEFAULT AS IDENTITY, "choice_text" varchar(200) NOT NULL, "votes" integer NOT NULL, "question_id" bigint NOT NULL)`,
		`ALTER TABLE "polls_choice" ADD CONSTRAINT "polls_choice_question_id_c5b4b260_fk_polls_question_id" FOREIGN KEY ("question_id") REFERENCES "polls_question" ("id") DEFERRABLE INITIALLY DEFERRED`,
		`CREATE INDEX "polls_choice_question_id_c5b4b260" ON "polls_choice" ("question_id")`,
		`CREATE INDEX "polls_choice_choice_text_like" ON "polls_choice" ("choice_text" varchar_pattern_ops)`,
		`ALTER TABLE "polls_choice" ADD COLUMN "rank" integer DEFAULT 0 NOT NULL`,
		`ALTER TABLE "polls_choice" ALTER COLUMN "rank" DROP DEFAULT`,
		`ALTER TABLE "polls_choice" ALTER COLUMN "choice_text" TYPE varchar(300) USING "choice_text"::varchar(300)`,
		`SET CONSTRAINTS "polls_choice_question_id_c5b4b260_fk_polls_question_id" IMMEDIATE; ALTER TABLE "polls_choice" DROP CONSTRAINT "polls_choice_question_id_c5b4b260_fk_polls_question_id"`,
		`CREATE TABLE "User" ("id" SERIAL NOT NULL, "email" TEXT NOT NULL, "name" TEXT, CONSTRAINT "User_pkey" PRIMARY KEY ("id"))`,
		`CREATE TABLE "Post" ("id" SERIAL NOT NULL, "authorId" INTEGER NOT NULL, CONSTRAINT "Post_pkey" PRIMARY KEY ("id"))`,
		`CREATE UNIQUE INDEX "User_email_key" ON "User"("email")`,
		`ALTER TABLE "Post" ADD CONSTRAINT "Post_authorId_fkey" FOREIGN KEY ("authorId") REFERENCES "User"("id") ON DELETE RESTRICT ON UPDATE CASCADE`,
	} {
		e.mustExec(sql)
	}
	ch := e.table("polls_choice")
	if len(ch.ForeignKeys) != 0 || ch.ColumnByName("rank").DefaultExpr != "" || ch.ColumnByName("choice_text").Type.Width != 300 {
		t.Errorf("polls_choice:\n%s", describeTable(ch))
	}
	if c := e.table("User").ColumnByName("id"); c.DefaultExpr != `nextval('"User_id_seq"'::regclass)` {
		t.Errorf("User.id default %q", c.DefaultExpr)
	}
	if fk := e.table("Post").ForeignKeys; len(fk) != 1 || fk[0].OnDelete != catalog.Restrict || fk[0].OnUpdate != catalog.Cascade {
		t.Errorf("Post fks %+v", fk)
	}
}
