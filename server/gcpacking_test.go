package server

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/catalog"
)

// tableDesc reads the stored descriptor of the table named name.
func tableDesc(t *testing.T, s *Server, name string) *catalog.Table {
	t.Helper()
	prefix := keys.System([]byte("d/"))
	var out *catalog.Table
	err := s.db.Txn(context.Background(), kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		kvs, err := txn.Scan(ctx, prefix, keys.PrefixEnd(prefix), 0)
		if err != nil {
			return err
		}
		for _, e := range kvs {
			d, err := catalog.Decode(e.Value)
			if err != nil {
				return err
			}
			if tb, ok := d.(*catalog.Table); ok && tb.Name == name {
				out = tb
			}
		}
		return nil
	})
	if err != nil || out == nil {
		t.Fatalf("reading the descriptor of %s: %v (found %v)", name, err, out != nil)
	}
	return out
}

// Rows written under five row schema versions (two ADD and two DROP
// COLUMN, partial and full updates between them) are repacked by GC under
// the newest; VACUUM then drops the packing versions no row uses: the
// descriptor forgets both dropped columns and says packed rows start at
// the current version. It does not while a transaction that began before
// the last DROP is open (it could still write a row under an older
// version), and every row reads the same throughout, also in a snapshot
// taken before the versions were dropped.
func TestVacuumDropsUnusedPackingVersions(t *testing.T) {
	s := start(t, Config{Insecure: true})
	defer s.Stop(context.Background())
	ctx := context.Background()
	c := connectInfo(t, s)
	defer c.Close(ctx)
	old := connect(t, s)
	defer old.Close(ctx)
	snap := connect(t, s)
	defer snap.Close(ctx)
	exec := func(conn *pgx.Conn, qs ...string) {
		t.Helper()
		for _, q := range qs {
			if _, err := conn.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	exec(c.Conn,
		"CREATE TABLE t (k int PRIMARY KEY, a int, b text, x int, y text)",
		"ALTER TABLE t CONFIGURE ZONE USING gc.ttlseconds = 1",
		"INSERT INTO t SELECT i, i, 'b' || i, i * 10, 'y' || i FROM generate_series(1, 5) AS g(i)",
		"ALTER TABLE t ADD COLUMN d int DEFAULT 4",
		"INSERT INTO t SELECT i, i, 'b' || i, i * 10, 'y' || i, i FROM generate_series(6, 8) AS g(i)",
		"ALTER TABLE t DROP COLUMN x",
		"UPDATE t SET a = a + 10 WHERE k % 2 = 0",
		"INSERT INTO t VALUES (9, 9, 'b9', 'y9', 9), (10, 10, 'b10', 'y10', 10)",
	)
	// A transaction that read the table before the last DROP stays open.
	exec(old, "BEGIN ISOLATION LEVEL REPEATABLE READ", "SELECT count(*) FROM t")
	exec(c.Conn,
		"ALTER TABLE t DROP COLUMN y",
		"ALTER TABLE t ADD COLUMN e text DEFAULT 'e'",
		"UPDATE t SET b = b || '!' WHERE k <= 3 OR k = 9",
	)
	rows := func(conn *pgx.Conn) string {
		t.Helper()
		r, err := conn.Query(ctx, "SELECT k, a, b, d, e FROM t ORDER BY k")
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		var sb strings.Builder
		for r.Next() {
			var k, a, d int
			var b, e string
			if err := r.Scan(&k, &a, &b, &d, &e); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&sb, "(%d,%d,%s,%d,%s)", k, a, b, d, e)
		}
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
		return sb.String()
	}
	const want = "(1,1,b1!,4,e)(2,12,b2!,4,e)(3,3,b3!,4,e)(4,14,b4,4,e)(5,5,b5,4,e)" +
		"(6,16,b6,6,e)(7,7,b7,7,e)(8,18,b8,8,e)(9,9,b9!,9,e)(10,10,b10,10,e)"
	if got := rows(c.Conn); got != want {
		t.Fatalf("before GC: %s\nwant %s", got, want)
	}
	if d := tableDesc(t, s, "t"); len(d.DroppedColumns) != 2 {
		t.Fatalf("descriptor remembers %d dropped columns, want 2 (x and y)", len(d.DroppedColumns))
	}

	// While the old transaction is open, the protected timestamp is below
	// the descriptor's last write: VACUUM keeps both dropped columns.
	for range 3 {
		c.vacuum(t)
	}
	if d := tableDesc(t, s, "t"); len(d.DroppedColumns) != 2 {
		t.Fatalf("VACUUM forgot dropped columns while a transaction from before the DROP was open: %d left", len(d.DroppedColumns))
	}
	exec(old, "COMMIT")

	// A snapshot taken now (after the last DROP) sees the old descriptor
	// throughout, and must read the same after the versions are dropped.
	exec(snap, "BEGIN ISOLATION LEVEL REPEATABLE READ")
	if got := rows(snap); got != want {
		t.Fatalf("snapshot: %s\nwant %s", got, want)
	}
	var d *catalog.Table
	for deadline := time.Now().Add(30 * time.Second); ; {
		c.vacuum(t)
		if d = tableDesc(t, s, "t"); len(d.DroppedColumns) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("VACUUM did not forget the dropped columns in 30s: %d left, oldest packed %d; messages %q",
				len(d.DroppedColumns), d.RowFormat.OldestPacked, c.msgs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if d.RowFormat.OldestPacked != d.RowFormat.SchemaVersion {
		t.Fatalf("oldest packed version %d, want the schema version %d (every row repacked)", d.RowFormat.OldestPacked, d.RowFormat.SchemaVersion)
	}
	found := false
	for _, m := range c.msgs {
		found = found || strings.Contains(m, `"t": dropped the packing versions before`) && strings.Contains(m, "forgot 2 dropped columns")
	}
	if !found {
		t.Fatalf("VACUUM VERBOSE did not report the dropped versions: %q", c.msgs)
	}
	if got := rows(c.Conn); got != want {
		t.Fatalf("after the versions were dropped: %s\nwant %s", got, want)
	}
	if got := rows(snap); got != want {
		t.Fatalf("snapshot after the versions were dropped: %s\nwant %s", got, want)
	}
	exec(snap, "COMMIT")
	// The table stays writable, partially and wholly, under the pruned
	// descriptor, and GC keeps working on it.
	exec(c.Conn, "UPDATE t SET a = a + 1 WHERE k = 1", "INSERT INTO t VALUES (11, 11, 'b11', 11, 'f')")
	var n, sum int
	if err := c.QueryRow(ctx, "SELECT count(*), sum(a) FROM t").Scan(&n, &sum); err != nil || n != 11 || sum != 1+12+3+14+5+16+7+18+9+10+1+11 {
		t.Fatalf("after writes: count %d sum %d, %v", n, sum, err)
	}
	c.vacuum(t)
}
