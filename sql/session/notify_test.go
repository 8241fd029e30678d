package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestListenNotify runs LISTEN/NOTIFY through pgx, a real client:
// notifications reach an idle listener (pgx's WaitForNotification blocks
// reading the socket), only when the notifying transaction commits, in
// order, a transaction's duplicates folded, none after a rollback or
// UNLISTEN, and the notifier hears its own before its ReadyForQuery.
func TestListenNotify(t *testing.T) {
	url := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, n := connect(t, url, nil), connect(t, url, nil)
	exec := func(c *pgx.Conn, sql string) {
		t.Helper()
		if _, err := simple(c, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	next := func(want string) {
		t.Helper()
		got, err := l.WaitForNotification(ctx)
		if err != nil {
			t.Fatalf("waiting for %q: %v", want, err)
		}
		if got.Channel+"/"+got.Payload != want || got.PID != n.PgConn().PID() {
			t.Fatalf("notification %s/%s from pid %d, want %s from %d", got.Channel, got.Payload, got.PID, want, n.PgConn().PID())
		}
	}
	exec(l, "LISTEN jobs")
	exec(n, "NOTIFY jobs, 'hello'")
	next("jobs/hello")

	// Delivered at commit, in order, duplicates folded; pg_notify too.
	exec(n, "BEGIN")
	exec(n, "NOTIFY jobs, 'a'")
	exec(n, "SELECT pg_notify('jobs', 'b')")
	exec(n, "NOTIFY jobs, 'a'")
	exec(n, "COMMIT")
	next("jobs/a")
	next("jobs/b")
	// A rolled-back transaction sends nothing: the next one heard is
	// the one sent after it.
	exec(n, "BEGIN; NOTIFY jobs, 'lost'; ROLLBACK")
	exec(n, "NOTIFY jobs, 'after'")
	next("jobs/after")

	// LISTEN in a block takes effect at commit; UNLISTEN stops delivery.
	exec(l, "BEGIN; LISTEN other; UNLISTEN jobs; COMMIT")
	var chans []string
	rows, err := l.Query(ctx, "SELECT * FROM pg_listening_channels()")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		chans = append(chans, c)
	}
	if rows.Err() != nil || len(chans) != 1 || chans[0] != "other" {
		t.Fatalf("pg_listening_channels() = %v, %v", chans, rows.Err())
	}
	exec(n, "NOTIFY jobs, 'unheard'")
	exec(n, "NOTIFY other, 'heard'")
	next("other/heard")

	// The notifier hears its own notification on its connection.
	exec(n, "LISTEN self")
	exec(n, "NOTIFY self, 'me'")
	got, err := n.WaitForNotification(ctx)
	if err != nil || got.Channel != "self" || got.Payload != "me" {
		t.Fatalf("own notification: %+v, %v", got, err)
	}

	if _, err := simple(n, "SELECT pg_notify('', 'x')"); sqlState(err) != "22023" {
		t.Errorf("pg_notify of an empty channel: %v, want 22023", err)
	}
	if _, err := simple(n, "SELECT pg_notify('other', repeat('x', 8000))"); sqlState(err) != "22023" {
		t.Errorf("pg_notify of 8000 bytes: %v, want 22023", err)
	}
	exec(n, "BEGIN READ ONLY; NOTIFY other, 'read-only'; COMMIT")
	next("other/read-only")

	// A listener inside a transaction block gets what was sent meanwhile
	// once the block ends.
	exec(l, "BEGIN")
	exec(n, "NOTIFY other, 'while busy'")
	exec(l, "SELECT 1")
	exec(l, "COMMIT")
	next("other/while busy")
}
