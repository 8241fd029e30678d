package session_test

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestAsOfSystemTimeReadsOldValue: a row updated after T reads as it was
// at T through every form of AS OF SYSTEM TIME (a decimal HLC timestamp,
// a timestamp string, BEGIN and SET TRANSACTION), through the simple and
// the extended protocol, while a present-time read sees the update. The
// server runs in this process, so the test's clock is the server's: T,
// taken between the INSERT's answer and the UPDATE, is above the first's
// timestamp and below the second's.
func TestAsOfSystemTimeReadsOldValue(t *testing.T) {
	url := startServer(t)
	c := connect(t, url, nil)
	ctx := context.Background()
	mustExec(t, c, "CREATE TABLE hist (k int PRIMARY KEY, v text)")
	mustExec(t, c, "INSERT INTO hist VALUES (1, 'old'), (2, 'kept')")
	at := time.Now()
	mustExec(t, c, "UPDATE hist SET v = 'new' WHERE k = 1")
	mustExec(t, c, "DELETE FROM hist WHERE k = 2")

	dec := fmt.Sprintf("'%d.0000000000'", at.UnixNano())
	str := "'" + at.UTC().Format("2006-01-02 15:04:05.999999") + "+00'"
	for _, e := range []string{dec, str} {
		q := "SELECT v FROM hist AS OF SYSTEM TIME " + e + " WHERE k = 1"
		// Extended protocol (pgx's QueryRow).
		var v string
		if err := c.QueryRow(ctx, q).Scan(&v); err != nil || v != "old" {
			t.Errorf("%s (extended): %q %v, want old", q, v, err)
		}
		// Simple protocol.
		res, err := c.PgConn().Exec(ctx, q).ReadAll()
		if err != nil || len(res) != 1 || len(res[0].Rows) != 1 || string(res[0].Rows[0][0]) != "old" {
			t.Errorf("%s (simple): %v %v, want old", q, res, err)
		}
		if n := count(t, c, "SELECT count(*) FROM hist AS OF SYSTEM TIME "+e); n != 2 {
			t.Errorf("count at %s: %d, want 2 (the deleted row was there)", e, n)
		}
	}
	for _, begin := range []string{"BEGIN AS OF SYSTEM TIME " + dec, "BEGIN; SET TRANSACTION AS OF SYSTEM TIME " + dec} {
		mustExec(t, c, begin)
		var v string
		if err := c.QueryRow(ctx, "SELECT v FROM hist WHERE k = 1").Scan(&v); err != nil || v != "old" {
			t.Errorf("%s: %q %v, want old", begin, v, err)
		}
		// Repeating the transaction's own timestamp is allowed.
		if err := c.QueryRow(ctx, "SELECT v FROM hist AS OF SYSTEM TIME "+dec+" WHERE k = 2").Scan(&v); err != nil || v != "kept" {
			t.Errorf("%s, then the same AS OF SYSTEM TIME: %q %v, want kept", begin, v, err)
		}
		mustExec(t, c, "COMMIT")
	}
	var v string
	if err := c.QueryRow(ctx, "SELECT v FROM hist WHERE k = 1").Scan(&v); err != nil || v != "new" {
		t.Errorf("present read: %q %v, want new", v, err)
	}
	if n := count(t, c, "SELECT count(*) FROM hist"); n != 1 {
		t.Errorf("present count %d, want 1", n)
	}
}

// TestAsOfSystemTimeBelowGCThreshold: once GC has collected past T, a
// read at T is refused with 72000 snapshot_too_old, never answered from
// what GC left.
func TestAsOfSystemTimeBelowGCThreshold(t *testing.T) {
	url := startServer(t)
	c := connect(t, url, nil)
	mustExec(t, c, "CREATE TABLE gcd (k int PRIMARY KEY, v int)")
	mustExec(t, c, "ALTER TABLE gcd CONFIGURE ZONE USING gc.ttlseconds = 1")
	mustExec(t, c, "INSERT INTO gcd VALUES (1, 1)")
	at := time.Now()
	mustExec(t, c, "UPDATE gcd SET v = 2")
	q := fmt.Sprintf("SELECT v FROM gcd AS OF SYSTEM TIME '%d'", at.UnixNano())
	deadline := time.Now().Add(30 * time.Second)
	for {
		mustExec(t, c, "VACUUM gcd")
		res, err := c.PgConn().Exec(context.Background(), q).ReadAll()
		if sqlState(err) == "72000" {
			return
		}
		if err != nil || len(res) != 1 || len(res[0].Rows) != 1 || string(res[0].Rows[0][0]) != "1" {
			t.Fatalf("%s: %v %v, want 72000 or the old row", q, res, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still answered 30 s after the update with a 1 s TTL", q)
		}
		// The TTL has to pass before VACUUM may collect; wait for the
		// clock, not for a result.
		time.Sleep(200 * time.Millisecond)
	}
}
