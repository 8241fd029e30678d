package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
)

// rawExtended sends one statement's Parse, Bind and Execute on c's
// connection without a Sync, then any extra messages, and writes them out:
// the test decides when the implicit transaction ends.
func rawExtended(t *testing.T, c *pgx.Conn, sql string, params [][]byte, extra ...pgproto3.FrontendMessage) *pgproto3.Frontend {
	t.Helper()
	fe := c.PgConn().Frontend()
	fe.Send(&pgproto3.Parse{Query: sql})
	fe.Send(&pgproto3.Bind{Parameters: params})
	fe.Send(&pgproto3.Execute{})
	for _, m := range extra {
		fe.Send(m)
	}
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	return fe
}

// receiveUntil reads backend messages until one of type stop (or an
// ErrorResponse) arrives, within 20 s, and returns them.
func receiveUntil[M pgproto3.BackendMessage](t *testing.T, c *pgx.Conn, fe *pgproto3.Frontend) []pgproto3.BackendMessage {
	t.Helper()
	conn := c.PgConn().Conn()
	if err := conn.SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
		t.Fatal(err)
	}
	defer conn.SetReadDeadline(time.Time{})
	var got []pgproto3.BackendMessage
	for {
		m, err := fe.Receive()
		if err != nil {
			t.Fatalf("receive after %d messages: %v", len(got), err)
		}
		switch m := m.(type) {
		case M:
			return append(got, m)
		case *pgproto3.ErrorResponse:
			t.Fatalf("ErrorResponse %s: %s", m.Code, m.Message)
		case *pgproto3.CommandComplete:
			// Receive reuses its messages: keep a copy.
			got = append(got, &pgproto3.CommandComplete{CommandTag: append([]byte(nil), m.CommandTag...)})
		default:
			got = append(got, m)
		}
	}
}

func commandTags(msgs []pgproto3.BackendMessage) []string {
	var tags []string
	for _, m := range msgs {
		if cc, ok := m.(*pgproto3.CommandComplete); ok {
			tags = append(tags, string(cc.CommandTag))
		}
	}
	return tags
}

// TestExtendedImplicitCommitRetry: an Execute in the extended protocol's
// implicit transaction whose commit at Sync fails with a retryable error
// (its timestamp pushed by a later reader, then a refresh that finds a
// newer write to what it read) is rerun by the session, as the simple
// protocol's implicit transactions are: the client hears one successful
// UPDATE, whose result is the rerun's. Before the rerun existed, the
// client heard "UPDATE 1" and then 40001 at Sync (CI's
// TestReferenceTableLinearizable saw it from pgx).
func TestExtendedImplicitCommitRetry(t *testing.T) {
	ctx := context.Background()
	url := startServer(t)
	a, b, lk := connect(t, url, nil), connect(t, url, nil), connect(t, url, nil)
	mustExec(t, b, "CREATE TABLE t (k int PRIMARY KEY, v int NOT NULL); INSERT INTO t VALUES (1, 0), (2, 0)")
	mustExec(t, a, "SET default_transaction_isolation = serializable")

	// A reads k = 2 and writes k = 1; its implicit transaction stays open
	// until the Sync below.
	fe := rawExtended(t, a, "UPDATE t SET v = (SELECT v FROM t WHERE k = 2) + $1 WHERE k = 1", [][]byte{[]byte("1")})
	// The UPDATE has run once it holds its lock on k = 1.
	mustExec(t, lk, "SET lock_timeout = '20ms'")
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := simple(lk, "UPDATE t SET v = v WHERE k = 1")
		if sqlState(err) == "55P03" {
			break
		}
		if err != nil {
			t.Fatalf("probing the lock on k = 1: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the held UPDATE never locked k = 1")
		}
	}
	// A write of k = 2 after A's read of it, then a read of k = 1 that
	// pushes A's commit above that write: the refresh of A's read finds
	// the write and fails.
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := b.Exec(rctx, "UPDATE t SET v = 10 WHERE k = 2"); err != nil {
		t.Fatal(err)
	}
	var v int
	if err := b.QueryRow(rctx, "SELECT v FROM t WHERE k = 1").Scan(&v); err != nil || v != 0 {
		t.Fatalf("reading k = 1 under A's lock: %d, %v", v, err)
	}

	fe.Send(&pgproto3.Sync{})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	msgs := receiveUntil[*pgproto3.ReadyForQuery](t, a, fe)
	if tags := commandTags(msgs); len(tags) != 1 || tags[0] != "UPDATE 1" {
		t.Fatalf("command tags %q, want one UPDATE 1", tags)
	}
	// 11: the rerun read k = 2 after B's write. 1 would mean the commit was
	// not pushed and this test did not exercise the rerun.
	if err := b.QueryRow(ctx, "SELECT v FROM t WHERE k = 1").Scan(&v); err != nil || v != 11 {
		t.Fatalf("k = 1 holds %d (%v), want 11 from the rerun", v, err)
	}
}

// TestExtendedHeldResultOrder: a held CommandComplete goes out as soon as
// the client sends anything but Sync: a Flush (asyncpg and pgx pipelines
// wait for the Execute's reply before they Sync) and a second Execute
// (whose reply must follow the first's).
func TestExtendedHeldResultOrder(t *testing.T) {
	url := startServer(t)
	a, b := connect(t, url, nil), connect(t, url, nil)
	mustExec(t, b, "CREATE TABLE t (k int PRIMARY KEY, v int NOT NULL); INSERT INTO t VALUES (1, 0), (2, 0)")

	fe := rawExtended(t, a, "UPDATE t SET v = v + $1 WHERE k = 1", [][]byte{[]byte("1")}, &pgproto3.Flush{})
	msgs := receiveUntil[*pgproto3.CommandComplete](t, a, fe)
	if tags := commandTags(msgs); len(tags) != 1 || tags[0] != "UPDATE 1" {
		t.Fatalf("after Flush: tags %q, want UPDATE 1 before any Sync", tags)
	}
	fe.Send(&pgproto3.Parse{Query: "DELETE FROM t WHERE k = $1"})
	fe.Send(&pgproto3.Bind{Parameters: [][]byte{[]byte("2")}})
	fe.Send(&pgproto3.Execute{})
	fe.Send(&pgproto3.Parse{Query: "UPDATE t SET v = v + $1 WHERE k >= 1"})
	fe.Send(&pgproto3.Bind{Parameters: [][]byte{[]byte("5")}})
	fe.Send(&pgproto3.Execute{})
	fe.Send(&pgproto3.Sync{})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	msgs = receiveUntil[*pgproto3.ReadyForQuery](t, a, fe)
	var kinds []string
	for _, m := range msgs {
		switch m := m.(type) {
		case *pgproto3.ParseComplete:
			kinds = append(kinds, "parse")
		case *pgproto3.BindComplete:
			kinds = append(kinds, "bind")
		case *pgproto3.CommandComplete:
			kinds = append(kinds, string(m.CommandTag))
		}
	}
	want := []string{"parse", "bind", "DELETE 1", "parse", "bind", "UPDATE 1", "ready"}
	kinds = append(kinds, "ready")
	if len(kinds) != len(want) {
		t.Fatalf("replies %q, want %q", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("replies %q, want %q", kinds, want)
		}
	}
	var v int
	if err := b.QueryRow(context.Background(), "SELECT v FROM t WHERE k = 1").Scan(&v); err != nil || v != 6 {
		t.Fatalf("k = 1 holds %d (%v), want 6", v, err)
	}
}
