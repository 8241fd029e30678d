package session_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/sql/session"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestImplicitRead: an autocommitted point SELECT from a cached plan, of
// the simple and the extended protocol, reads without a KV transaction
// and answers what a transaction reads; AS OF SYSTEM TIME, explicit
// transactions, FOR UPDATE, a serializable implicit transaction of the
// extended protocol, a projection that calls a function and a scan that
// is not a point keep their transaction.
func TestImplicitRead(t *testing.T) {
	ctx := context.Background()
	srv, url := startNode(t)
	a := connect(t, url, nil)
	mustExec(t, a, "CREATE TABLE acct (id int PRIMARY KEY, bal int, note text)")
	mustExec(t, a, "INSERT INTO acct SELECT g, g * 10, 'n' || g FROM generate_series(1, 50) g")
	reads := func() float64 { return metric(t, srv, "cairn_sql_implicit_reads_total") }
	const q = "SELECT bal FROM acct WHERE id = $1"
	get := func(sql string, args ...any) int {
		t.Helper()
		var v int
		if err := a.QueryRow(ctx, sql, args...).Scan(&v); err != nil {
			t.Fatalf("%s %v: %v", sql, args, err)
		}
		return v
	}
	get(q, 1) // plans and keeps the plan
	r0 := reads()
	for i := 1; i <= 10; i++ {
		if v := get(q, i); v != i*10 {
			t.Fatalf("id %d: %d", i, v)
		}
	}
	if n := reads() - r0; n != 10 {
		t.Fatalf("prepared: %v of 10 point SELECTs read without a transaction", n)
	}
	// Missing row.
	if err := a.QueryRow(ctx, q, 999).Scan(new(int)); err != pgx.ErrNoRows {
		t.Fatalf("missing row: %v", err)
	}
	// A write is seen by the next implicit read.
	mustExec(t, a, "UPDATE acct SET bal = 7 WHERE id = 3")
	if v := get(q, 3); v != 7 {
		t.Fatalf("after the update: %d", v)
	}
	// The simple protocol's kept plan (by the query's shape).
	for i := 1; i <= 3; i++ {
		if _, err := simple(a, fmt.Sprintf("SELECT bal FROM acct WHERE id = %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	r1 := reads()
	for i := 4; i <= 8; i++ {
		res, err := a.PgConn().Exec(ctx, fmt.Sprintf("SELECT bal FROM acct WHERE id = %d", i)).ReadAll()
		if err != nil || len(res) != 1 || len(res[0].Rows) != 1 || string(res[0].Rows[0][0]) != fmt.Sprint(i*10) {
			t.Fatalf("simple id %d: %v %v", i, res, err)
		}
	}
	if n := reads() - r1; n != 5 {
		t.Fatalf("simple: %v of 5 point SELECTs read without a transaction", n)
	}

	// What keeps its transaction: none of these may count.
	same := func(what string, f func()) {
		t.Helper()
		r := reads()
		f()
		if n := reads() - r; n != 0 {
			t.Errorf("%s: %v reads without a transaction, want none", what, n)
		}
	}
	same("explicit transaction", func() {
		tx, err := a.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 3; i++ {
			if err := tx.QueryRow(ctx, q, i).Scan(new(int)); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	})
	same("FOR UPDATE", func() {
		for i := 1; i <= 3; i++ {
			get("SELECT bal FROM acct WHERE id = $1 FOR UPDATE", i)
		}
	})
	same("AS OF SYSTEM TIME", func() {
		for i := 1; i <= 3; i++ {
			get("SELECT bal FROM acct AS OF SYSTEM TIME '-1us' WHERE id = $1", i)
		}
	})
	same("a function above the read", func() {
		for i := 1; i <= 3; i++ {
			get("SELECT bal + 1 FROM acct WHERE id = $1", i)
		}
	})
	same("not a point", func() {
		for i := 1; i <= 3; i++ {
			get("SELECT count(*) FROM acct WHERE id >= $1", i)
		}
	})
	same("serializable, extended protocol", func() {
		mustExec(t, a, "SET default_transaction_isolation = 'serializable'")
		for i := 1; i <= 3; i++ {
			get(q, i)
		}
		mustExec(t, a, "RESET default_transaction_isolation")
	})
	// A hash-sharded key (USING HASH) is a point of the shard and the key.
	mustExec(t, a, "CREATE TABLE sharded (k int8 PRIMARY KEY USING HASH WITH (bucket_count = 16), v int)")
	mustExec(t, a, "INSERT INTO sharded SELECT g, g FROM generate_series(1, 20) g")
	get("SELECT v FROM sharded WHERE k = $1", 1)
	r3 := reads()
	for i := 1; i <= 5; i++ {
		if v := get("SELECT v FROM sharded WHERE k = $1", i); v != i {
			t.Fatalf("sharded k %d: %d", i, v)
		}
	}
	if n := reads() - r3; n != 5 {
		t.Errorf("hash-sharded key: %v of 5 read without a transaction", n)
	}
	// A prefix of the key is not one row: not tried at all.
	mustExec(t, a, "CREATE TABLE two (a int, b int, v int, PRIMARY KEY (a, b))")
	mustExec(t, a, "INSERT INTO two VALUES (1, 1, 1), (2, 1, 2)")
	retries := func() float64 { return metric(t, srv, "cairn_sql_implicit_read_retries_total") }
	rt := retries()
	same("a key prefix", func() {
		for i := 1; i <= 5; i++ {
			get("SELECT v FROM two WHERE a = $1", i%2+1)
		}
	})
	// A row of more KV entries than a page (unpacked, 300 columns) is
	// refused after its read; the plan stops trying after three.
	cols, vals := "k int PRIMARY KEY", "1"
	for i := 1; i <= 300; i++ {
		cols += fmt.Sprintf(", c%d int", i)
		vals += fmt.Sprintf(", %d", i)
	}
	mustExec(t, a, "CREATE TABLE wide ("+cols+")")
	mustExec(t, a, "SET storage.packed_rows.enabled = off")
	mustExec(t, a, "INSERT INTO wide VALUES ("+vals+")")
	mustExec(t, a, "RESET storage.packed_rows.enabled")
	same("a row longer than a page", func() {
		for range 6 {
			if v := get("SELECT c300 FROM wide WHERE k = $1", 1); v != 300 {
				t.Fatalf("wide: c300 = %d", v)
			}
		}
	})
	if n := retries() - rt; n != 3 {
		t.Errorf("%v implicit reads ran again in a transaction, want 3 (the wide row's, then none)", n)
	}

	// Serializable in the simple protocol: a Query of one statement is a
	// transaction of one read.
	mustExec(t, a, "SET default_transaction_isolation = 'serializable'")
	if _, err := simple(a, "SELECT bal FROM acct WHERE id = 8"); err != nil { // re-plans after the DDL above
		t.Fatal(err)
	}
	r2 := reads()
	if _, err := simple(a, "SELECT bal FROM acct WHERE id = 9"); err != nil {
		t.Fatal(err)
	}
	if n := reads() - r2; n != 1 {
		t.Errorf("serializable, simple protocol: %v reads without a transaction, want 1", n)
	}
	mustExec(t, a, "RESET default_transaction_isolation")
}

// TestImplicitReadTimestamps: the statements of one extended-protocol
// implicit transaction (Executes before one Sync) share now() whether or
// not the first read without a KV transaction, and a statement after such
// a read may not take a timestamp of its own (AS OF SYSTEM TIME), as
// after one that read in the transaction.
func TestImplicitReadTimestamps(t *testing.T) {
	ctx := context.Background()
	srv, url := startNode(t)
	a := connect(t, url, nil)
	mustExec(t, a, "CREATE TABLE acct (id int PRIMARY KEY, bal int)")
	mustExec(t, a, "INSERT INTO acct VALUES (1, 10), (2, 20)")
	const q = "SELECT bal FROM acct WHERE id = $1"
	if err := a.QueryRow(ctx, q, 1).Scan(new(int)); err != nil { // keeps the plan
		t.Fatal(err)
	}
	reads := func() float64 { return metric(t, srv, "cairn_sql_implicit_reads_total") }
	r0 := reads()
	b := &pgx.Batch{}
	b.Queue(q, 2)
	b.Queue("SELECT now(), statement_timestamp()")
	b.Queue("SELECT now(), statement_timestamp()")
	br := a.SendBatch(ctx, b)
	var now1, st1, now2, st2 time.Time
	var bal int
	if err := br.QueryRow().Scan(&bal); err != nil || bal != 20 {
		t.Fatalf("point read in the batch: %d, %v", bal, err)
	}
	if err := br.QueryRow().Scan(&now1, &st1); err != nil {
		t.Fatal(err)
	}
	if err := br.QueryRow().Scan(&now2, &st2); err != nil {
		t.Fatal(err)
	}
	if err := br.Close(); err != nil {
		t.Fatal(err)
	}
	if n := reads() - r0; n != 1 {
		t.Fatalf("%v reads without a transaction in the batch, want 1", n)
	}
	if !now1.Equal(now2) {
		t.Errorf("now() moved within one implicit transaction: %v, then %v", now1, now2)
	}
	if st2.Before(st1) {
		t.Errorf("statement_timestamp() went back: %v, then %v", st1, st2)
	}

	// A statement with its own timestamp after the read, in the same
	// implicit transaction: refused (25001), as after a read in a kv.Txn.
	r1 := reads()
	b = &pgx.Batch{}
	b.Queue(q, 1)
	b.Queue("SELECT bal FROM acct AS OF SYSTEM TIME '-1us' WHERE id = 2")
	br = a.SendBatch(ctx, b)
	if err := br.QueryRow().Scan(&bal); err != nil {
		t.Fatal(err)
	}
	err := br.QueryRow().Scan(&bal)
	_ = br.Close()
	if sqlState(err) != "25001" {
		t.Fatalf("AS OF SYSTEM TIME after an implicit read in one transaction: %v, want 25001", err)
	}
	if n := reads() - r1; n != 1 {
		t.Fatalf("%v reads without a transaction, want 1", n)
	}
}

// TestImplicitReadRacingDDL: a DDL that commits after the plan's catalog
// generation was taken and before the implicit read is sent (the knob
// runs it there) must not let the read return a row under the schema the
// plan knew: the generation check after the read sees the new one and the
// statement runs again in a transaction, planning afresh.
func TestImplicitReadRacingDDL(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, setup, ddl, query, code string
	}{
		{"drop column", "CREATE TABLE r (id int PRIMARY KEY, v int, w int)", "ALTER TABLE r DROP COLUMN w", "SELECT w FROM r WHERE id = $1", "42703"},
		{"drop table", "CREATE TABLE r (id int PRIMARY KEY, v int, w int)", "DROP TABLE r", "SELECT w FROM r WHERE id = $1", "42P01"},
		{"rename", "CREATE TABLE r (id int PRIMARY KEY, v int, w int)", "ALTER TABLE r RENAME TO r2", "SELECT w FROM r WHERE id = $1", "42P01"},
		// The plan's column is another one now: w renamed away and a new
		// w added; the new plan reads the new (NULL) column.
		{"rename column", "CREATE TABLE r (id int PRIMARY KEY, v int, w int)", "ALTER TABLE r RENAME COLUMN w TO old_w", "SELECT w FROM r WHERE id = $1", "42703"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, url := startNode(t)
			a, b := connect(t, url, nil), connect(t, url, nil)
			mustExec(t, a, tc.setup)
			mustExec(t, a, "INSERT INTO r VALUES (1, 10, 100), (2, 20, 200)")
			var w int
			if err := a.QueryRow(ctx, tc.query, 1).Scan(&w); err != nil || w != 100 {
				t.Fatalf("before: %d, %v", w, err)
			}
			reads := func() float64 { return metric(t, srv, "cairn_sql_implicit_reads_total") }
			retries := func() float64 { return metric(t, srv, "cairn_sql_implicit_read_retries_total") }
			r0 := reads()
			if err := a.QueryRow(ctx, tc.query, 2).Scan(&w); err != nil || w != 200 {
				t.Fatalf("before: %d, %v", w, err)
			}
			if reads()-r0 != 1 {
				t.Fatal("the point SELECT did not read without a transaction")
			}
			// The DDL runs in b, to its commit, between a's plan and its
			// read (one time only: the rerun goes through a transaction).
			// The hook runs on the node's goroutine: its outcome comes
			// back on a channel (the client's answer over TCP is no
			// synchronisation the race detector sees).
			var once sync.Once
			ddlDone := make(chan error, 1)
			restore := session.SetImplicitReadHook(func() {
				once.Do(func() {
					_, err := b.Exec(ctx, tc.ddl)
					ddlDone <- err
				})
			})
			defer restore()
			rt0 := retries()
			err := a.QueryRow(ctx, tc.query, 1).Scan(&w)
			restore()
			var ddlErr error
			select {
			case ddlErr = <-ddlDone:
			default:
				t.Fatalf("%s did not run between the plan and the read", tc.ddl)
			}
			if ddlErr != nil {
				t.Fatalf("%s: %v", tc.ddl, ddlErr)
			}
			if sqlState(err) != tc.code {
				t.Fatalf("after %s between the plan and the read: %d, %v; want %s", tc.ddl, w, err, tc.code)
			}
			if retries()-rt0 != 1 {
				t.Fatalf("%v implicit reads ran again in a transaction, want 1", retries()-rt0)
			}
		})
	}
}

// TestImplicitReadRoles: a user other than the superuser reads without a
// KV transaction once the privilege check passed for the kept plan at its
// generation, in both protocols; a REVOKE (a new generation) is obeyed at
// the next statement, and a user without SELECT is refused every time,
// including from a plan the simple protocol keeps before checking
// anything.
func TestImplicitReadRoles(t *testing.T) {
	ctx := context.Background()
	srv, url := startNode(t)
	admin := connect(t, url, nil)
	mustExec(t, admin, "CREATE TABLE acct (id int PRIMARY KEY, bal int)")
	mustExec(t, admin, "INSERT INTO acct SELECT g, g * 10 FROM generate_series(1, 20) g")
	mustExec(t, admin, "CREATE ROLE reader LOGIN")
	mustExec(t, admin, "CREATE ROLE outsider LOGIN")
	mustExec(t, admin, "GRANT SELECT ON acct TO reader")
	as := func(user string) *pgx.Conn {
		return connect(t, fmt.Sprintf("postgres://%s@%s/postgres?sslmode=disable", user, srv.Addr()), nil)
	}
	reader, outsider := as("reader"), as("outsider")
	reads := func() float64 { return metric(t, srv, "cairn_sql_implicit_reads_total") }
	const q = "SELECT bal FROM acct WHERE id = $1"
	get := func(c *pgx.Conn, id int) (int, error) {
		var v int
		err := c.QueryRow(ctx, q, id).Scan(&v)
		return v, err
	}
	simpleGet := func(c *pgx.Conn, id int) (string, error) {
		res, err := c.PgConn().Exec(ctx, fmt.Sprintf("SELECT bal FROM acct WHERE id = %d", id)).ReadAll()
		if err != nil {
			return "", err
		}
		if len(res) != 1 || len(res[0].Rows) != 1 {
			return "", fmt.Errorf("result %v", res)
		}
		return string(res[0].Rows[0][0]), nil
	}
	denied := func(what string, err error) {
		t.Helper()
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "42501" {
			t.Fatalf("%s: %v, want 42501", what, err)
		}
	}

	// Granted: the first Execute plans (and checks), the rest read
	// without a transaction.
	if _, err := get(reader, 1); err != nil {
		t.Fatal(err)
	}
	r0 := reads()
	for i := 1; i <= 5; i++ {
		if v, err := get(reader, i); err != nil || v != i*10 {
			t.Fatalf("reader, id %d: %d, %v", i, v, err)
		}
	}
	if n := reads() - r0; n != 5 {
		t.Errorf("reader, prepared: %v of 5 point SELECTs read without a transaction", n)
	}
	// The simple protocol: the shape's plan is kept unchecked, checked at
	// its first use in a transaction, then read without one.
	for i := 1; i <= 2; i++ {
		if _, err := simpleGet(reader, i); err != nil {
			t.Fatal(err)
		}
	}
	r1 := reads()
	for i := 3; i <= 6; i++ {
		if v, err := simpleGet(reader, i); err != nil || v != fmt.Sprint(i*10) {
			t.Fatalf("reader, simple id %d: %s, %v", i, v, err)
		}
	}
	if n := reads() - r1; n != 4 {
		t.Errorf("reader, simple: %v of 4 point SELECTs read without a transaction", n)
	}

	// Not granted: refused every time, in both protocols.
	r2 := reads()
	for i := 1; i <= 4; i++ {
		_, err := get(outsider, i)
		denied("outsider, prepared", err)
		_, err = simpleGet(outsider, i)
		denied("outsider, simple", err)
	}
	if n := reads() - r2; n != 0 {
		t.Errorf("outsider: %v reads without a transaction", n)
	}

	// Revoked: the next statement is refused, kept plan or not.
	mustExec(t, admin, "REVOKE SELECT ON acct FROM reader")
	_, err := get(reader, 1)
	denied("reader after REVOKE, prepared", err)
	_, err = simpleGet(reader, 1)
	denied("reader after REVOKE, simple", err)
	// Granted again through a role: allowed again, and without a
	// transaction after the first.
	mustExec(t, admin, "CREATE ROLE readers")
	mustExec(t, admin, "GRANT SELECT ON acct TO readers")
	mustExec(t, admin, "GRANT readers TO reader")
	if _, err := get(reader, 1); err != nil {
		t.Fatalf("reader through readers: %v", err)
	}
	r3 := reads()
	if v, err := get(reader, 2); err != nil || v != 20 {
		t.Fatalf("reader through readers: %d, %v", v, err)
	}
	if n := reads() - r3; n != 1 {
		t.Errorf("reader through readers: %v reads without a transaction, want 1", n)
	}
	mustExec(t, admin, "REVOKE readers FROM reader")
	_, err = get(reader, 3)
	denied("reader after REVOKE readers", err)
}
