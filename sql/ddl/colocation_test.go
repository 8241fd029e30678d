package ddl

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

// tabletsOf walks the tablets covering span, as the router sees them.
func (e *testEnv) tabletsOf(sp kvpb.Span) []kvpb.TabletDescriptor {
	e.t.Helper()
	var out []kvpb.TabletDescriptor
	for k := sp.Key; bytes.Compare(k, sp.EndKey) < 0; {
		// The router's cache may predate the splits: evict and look
		// again, so the descriptor is the store's.
		c := e.db.TabletCache()
		d, err := c.Lookup(context.Background(), k, false)
		if err == nil {
			c.Evict(d)
			d, err = c.Lookup(context.Background(), k, false)
		}
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, d)
		if len(d.EndKey) == 0 {
			break
		}
		k = d.EndKey
	}
	return out
}

// TestColocationTabletLayout checks where the tablets are, not only what
// SQL answers: a colocated database's tables share one tablet that is
// exactly the group's span, and a table that opts out has the tablets it
// asked for, over its own group.
func TestColocationTabletLayout(t *testing.T) {
	e := newTestEnv(t)
	e.mustExec(`CREATE DATABASE co WITH colocated = true`)
	e.dbName = "co"
	e.mustExec(`CREATE TABLE a (k int PRIMARY KEY, v text)`)
	e.mustExec(`CREATE TABLE b (k int PRIMARY KEY, v text); CREATE INDEX b_v ON b (v)`)
	e.mustExec(`CREATE TABLE c (k int PRIMARY KEY)`)
	e.mustExec(`CREATE TABLE solo (k int PRIMARY KEY, v int) WITH (colocated = false, cairn_split_tablets = 3)`)

	var db *catalog.Database
	e.read(func(_ context.Context, _ *kv.Txn, _ *catalog.Reader, d *catalog.Database) error { db = d; return nil })
	if !db.Colocated || db.ColocationGroupID == 0 {
		t.Fatalf("database co: colocated=%v group=%d", db.Colocated, db.ColocationGroupID)
	}
	g := rowenc.GroupSpan(db.ColocationGroupID)
	ts := e.tabletsOf(g)
	if len(ts) != 1 || !bytes.Equal(ts[0].StartKey, g.Key) || !bytes.Equal(ts[0].EndKey, g.EndKey) {
		t.Fatalf("colocated group %d: want one tablet exactly over %s, got %v", db.ColocationGroupID, g, ts)
	}
	for _, name := range []string{"a", "b", "c"} {
		tb := e.table(name)
		if !tb.Colocated || tb.GroupID != db.ColocationGroupID || tb.Partitioning.Kind != catalog.PartitionSingle {
			t.Errorf("table %s: colocated=%v group=%d partitioning=%v", name, tb.Colocated, tb.GroupID, tb.Partitioning)
		}
		for _, idx := range tb.Indexes {
			if idx.Placement != catalog.IndexLocal {
				t.Errorf("index %s of %s: placement %s, want local (in the group)", idx.Name, name, idx.Placement)
			}
		}
	}
	solo := e.table("solo")
	if solo.Colocated || solo.GroupID == db.ColocationGroupID || solo.Partitioning.Kind != catalog.PartitionHash || solo.Partitioning.InitialTablets != 3 {
		t.Fatalf("solo: colocated=%v group=%d partitioning=%+v", solo.Colocated, solo.GroupID, solo.Partitioning)
	}
	sg := rowenc.GroupSpan(solo.GroupID)
	ts = e.tabletsOf(sg)
	if len(ts) != 3 || !bytes.Equal(ts[0].StartKey, sg.Key) || !bytes.Equal(ts[2].EndKey, sg.EndKey) {
		t.Fatalf("solo's group %d: want 3 tablets over %s, got %v", solo.GroupID, sg, ts)
	}
	// The colocated group's tablet was not touched by solo's splits.
	if ts := e.tabletsOf(g); len(ts) != 1 {
		t.Fatalf("colocated group after solo's splits: %v", ts)
	}

	// DROP TABLE deletes the table's keys inside the group, not its
	// neighbours'; DROP DATABASE empties the group.
	groupKeys := func(sp kvpb.Span) int {
		kvs, err := e.db.Scan(context.Background(), sp.Key, sp.EndKey, 0)
		if err != nil {
			t.Fatal(err)
		}
		return len(kvs)
	}
	e.insert("c", []types.Datum{i(7)})
	cKeys := groupKeys(g)
	e.insert("a", []types.Datum{i(1), s("x")}, []types.Datum{i(2), s("y")})
	e.insert("solo", []types.Datum{i(1), i(1)}, []types.Datum{i(2), i(2)})
	if cKeys == 0 || groupKeys(g) <= cKeys || groupKeys(sg) == 0 {
		t.Fatalf("rows not in their groups: c %d, c+a %d, solo %d keys", cKeys, groupKeys(g), groupKeys(sg))
	}
	e.mustExec(`DROP TABLE a`)
	if got := rowsText(e.rows("c")); got != "(7)" || groupKeys(g) != cKeys {
		t.Fatalf("after DROP TABLE a: c = %q, group keys %d, want c's %d", got, groupKeys(g), cKeys)
	}
	e.dbName = "postgres"
	e.mustExec(`DROP DATABASE co`)
	if n, m := groupKeys(g), groupKeys(sg); n != 0 || m != 0 {
		t.Fatalf("after DROP DATABASE: %d keys in the colocated group, %d in solo's", n, m)
	}
}

// TestColocationOptions checks the options' bad values and the cases
// that are no-ops or errors outside a colocated database.
func TestColocationOptions(t *testing.T) {
	e := newTestEnv(t)
	for _, tc := range []struct{ sql, code, msg string }{
		{`CREATE DATABASE x WITH colocated = maybe`, "22023", `invalid value for boolean option "colocated": maybe`},
		{`CREATE DATABASE x WITH colocation = 2`, "22023", `invalid value for boolean option "colocation": 2`},
		{`CREATE TABLE x (a int) WITH (colocated = true)`, "22023", `cannot set colocated = true on table "x": database "postgres" is not colocated`},
		{`CREATE TABLE x (a int) WITH (cairn_split_tablets = 0)`, "22023", `number of tablets 0 out of range: it must be between 1 and 65536`},
	} {
		_, err := e.exec(tc.sql)
		wantErr(t, err, tc.code, tc.msg)
	}
	e.mustExec(`CREATE TABLE plain (a int PRIMARY KEY) WITH (colocated = false)`)
	if p := e.table("plain"); p.Colocated || p.Partitioning.Kind != catalog.PartitionRange {
		t.Fatalf("colocated = false outside a colocated database must be a no-op: %+v", p.Partitioning)
	}
	e.mustExec(`CREATE DATABASE co WITH colocation = true`)
	e.dbName = "co"
	_, err := e.exec(`CREATE TABLE y (a int PRIMARY KEY) WITH (cairn_split_tablets = 2)`)
	wantErr(t, err, "22023", `cannot split colocated table "y" into tablets: it shares its database's tablet`)
	e.mustExec(`CREATE TABLE z (a int PRIMARY KEY) WITH (colocated = false)`)
	if z := e.table("z"); z.Partitioning.InitialTablets != DefaultSplitTablets {
		t.Fatalf("opted-out table without SPLIT INTO: %+v", z.Partitioning)
	}
}

// TestAlterColocationMovesKeys: ALTER TABLE t SET (colocated = false)
// moves every key of t (rows and index entries) from the colocation
// tablet into t's new group, split into its tablets, and leaves the
// neighbours' keys alone; SET (colocated = true) brings them back and
// leaves the old group empty.
func TestAlterColocationMovesKeys(t *testing.T) {
	e := newTestEnv(t)
	e.mustExec(`CREATE DATABASE co WITH colocated = true`)
	e.dbName = "co"
	e.mustExec(`CREATE TABLE n (k int PRIMARY KEY)`)
	e.mustExec(`CREATE TABLE m (k int PRIMARY KEY, v text); CREATE INDEX m_v ON m (v)`)
	e.insert("n", []types.Datum{i(1)}, []types.Datum{i(2)})
	e.insert("m", []types.Datum{i(1), s("a")}, []types.Datum{i(2), s("b")}, []types.Datum{i(3), s("c")})

	keysIn := func(sp kvpb.Span) int {
		kvs, err := e.db.Scan(context.Background(), sp.Key, sp.EndKey, 0)
		if err != nil {
			t.Fatal(err)
		}
		return len(kvs)
	}
	before := e.table("m")
	g := rowenc.GroupSpan(before.GroupID)
	all := keysIn(g)
	bl, err := before.Layout()
	if err != nil {
		t.Fatal(err)
	}
	mKeys := keysIn(bl.TableSpans()[0]) // m's rows and its (local) index's entries
	if mKeys == 0 || mKeys >= all {
		t.Fatalf("m has %d of the group's %d keys", mKeys, all)
	}
	e.mustExec(`ALTER TABLE n SET (colocated = true)`) // already there: nothing moves
	if keysIn(g) != all {
		t.Fatalf("a no-op ALTER changed the group's keys: %d, was %d", keysIn(g), all)
	}

	e.mustExec(`ALTER TABLE m SET (colocated = false, cairn_split_tablets = 3)`)
	out := e.table("m")
	if out.Colocated || out.GroupID == before.GroupID || out.Partitioning.Kind != catalog.PartitionHash || out.Partitioning.InitialTablets != 3 {
		t.Fatalf("m after moving out: colocated=%v group=%d partitioning=%+v", out.Colocated, out.GroupID, out.Partitioning)
	}
	if len(out.Indexes) != 1 || out.Indexes[0].Placement != catalog.IndexGlobal || out.Indexes[0].GroupID == 0 {
		t.Fatalf("m's index after moving out: %+v", out.Indexes)
	}
	og := rowenc.GroupSpan(out.GroupID)
	if ts := e.tabletsOf(og); len(ts) != 3 {
		t.Fatalf("m's new group: %d tablets, want 3", len(ts))
	}
	ig := rowenc.GroupSpan(out.Indexes[0].GroupID)
	// n's keys stay; all of m's leave, its rows for its group and one
	// entry per row for its index's.
	if moved := all - keysIn(g); moved != mKeys || keysIn(og)+keysIn(ig) != mKeys || keysIn(ig) != 3 {
		t.Fatalf("moving out: %d keys left the colocation group (want m's %d), %d in m's group, %d in its index's (want 3)",
			moved, mKeys, keysIn(og), keysIn(ig))
	}
	// Hash partitioned now: the scan comes in bucket order.
	if got := sortedRows(rowsText(e.rows("m"))); got != "(1,a) (2,b) (3,c)" {
		t.Fatalf("m after moving out: %s", got)
	}

	e.mustExec(`ALTER TABLE m SET (colocated = true)`)
	in := e.table("m")
	if !in.Colocated || in.GroupID != before.GroupID || in.Partitioning.Kind != catalog.PartitionSingle || in.Indexes[0].Placement != catalog.IndexLocal {
		t.Fatalf("m after moving back: %+v", in)
	}
	if keysIn(g) != all || keysIn(og) != 0 || keysIn(ig) != 0 {
		t.Fatalf("moving back: %d keys in the colocation group (want %d), %d and %d left behind",
			keysIn(g), all, keysIn(og), keysIn(ig))
	}
	if got := rowsText(e.rows("m")); got != "(1,a) (2,b) (3,c)" {
		t.Fatalf("m after moving back: %s", got)
	}
	if got := rowsText(e.rows("n")); got != "(1) (2)" {
		t.Fatalf("n, m's neighbour: %s", got)
	}
}

// sortedRows sorts rowsText's space-separated rows.
func sortedRows(s string) string {
	f := strings.Fields(s)
	slices.Sort(f)
	return strings.Join(f, " ")
}
