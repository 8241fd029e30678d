package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// These tests run two or more pgx connections against one node: a holder
// of a row lock, a statement that waits for it, and an observer that
// waits, through pg_stat_activity, until the waiter is really waiting
// before it acts. Nothing here sleeps to synchronise.

func connectAs(t *testing.T, s *Server, user string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), fmt.Sprintf("postgres://%s@%s/postgres?sslmode=disable", user, s.Addr()))
	if err != nil {
		t.Fatalf("connecting as %s: %v", user, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func mustExec(t *testing.T, c *pgx.Conn, sqls ...string) {
	t.Helper()
	for _, sql := range sqls {
		if _, err := c.Exec(context.Background(), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
}

func pidOf(t *testing.T, c *pgx.Conn) int32 {
	t.Helper()
	var pid int32
	if err := c.QueryRow(context.Background(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return pid
}

// pgErr returns err's SQLSTATE and message ("" if it has none).
func pgErr(err error) (code, msg string) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code, pe.Message
	}
	return "", ""
}

// waitActivity polls pg_stat_activity from obs until the session pid
// satisfies cond (a predicate over the view's columns).
func waitActivity(t *testing.T, obs *pgx.Conn, pid int32, cond string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("pid %d: %s", pid, cond), 30*time.Second, func() (bool, string) {
		var n int
		err := obs.QueryRow(context.Background(), "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND "+cond, pid).Scan(&n)
		return err == nil && n == 1, fmt.Sprint(n, err)
	})
}

// waitGone polls until pid has left pg_stat_activity (its session closed).
func waitGone(t *testing.T, obs *pgx.Conn, pid int32) {
	t.Helper()
	waitFor(t, fmt.Sprintf("pid %d gone", pid), 30*time.Second, func() (bool, string) {
		var n int
		err := obs.QueryRow(context.Background(), "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&n)
		return err == nil && n == 0, fmt.Sprint(n, err)
	})
}

// lockFixture starts a node with table t(id, v) holding rows 1 and 2, and
// returns it with a holder connection whose open transaction has updated
// row 1 (so it holds that row's lock) and an observer connection.
func lockFixture(t *testing.T, cfg Config) (s *Server, holder, obs *pgx.Conn) {
	t.Helper()
	cfg.Insecure = true
	s = start(t, cfg)
	t.Cleanup(func() { s.Stop(context.Background()) })
	obs = connect(t, s)
	t.Cleanup(func() { obs.Close(context.Background()) })
	mustExec(t, obs, "CREATE TABLE t (id int PRIMARY KEY, v int)", "INSERT INTO t VALUES (1, 0), (2, 0)")
	holder = connect(t, s)
	t.Cleanup(func() { holder.Close(context.Background()) })
	mustExec(t, holder, "BEGIN", "UPDATE t SET v = 100 WHERE id = 1")
	return s, holder, obs
}

// TestTimeoutsOnRowLockWait: an UPDATE blocked on a row another open
// transaction holds ends with statement_timeout (57014) or lock_timeout
// (55P03), in autocommit and in a block, over the simple and the extended
// protocol; in a block the transaction is then failed (25P02). The holder
// is untouched and commits its value.
func TestTimeoutsOnRowLockWait(t *testing.T) {
	s, holder, _ := lockFixture(t, Config{})
	ctx := context.Background()
	for _, tc := range []struct {
		setting, code, msg string
	}{
		{"statement_timeout", "57014", "canceling statement due to statement timeout"},
		{"lock_timeout", "55P03", "canceling statement due to lock timeout"},
	} {
		for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeExec} {
			for _, block := range []bool{false, true} {
				name := fmt.Sprintf("%s/mode=%v/block=%v", tc.setting, mode, block)
				w := connect(t, s)
				mustExec(t, w, fmt.Sprintf("SET %s = '200ms'", tc.setting))
				if block {
					mustExec(t, w, "BEGIN")
				}
				_, err := w.Exec(ctx, "UPDATE t SET v = v + 1 WHERE id = 1", mode)
				if code, msg := pgErr(err); code != tc.code || msg != tc.msg {
					t.Fatalf("%s: got %v, want %s %q", name, err, tc.code, tc.msg)
				}
				if block {
					if _, err := w.Exec(ctx, "SELECT 1"); !strings.Contains(fmt.Sprint(err), "25P02") {
						t.Fatalf("%s: after the timeout in a block: %v, want 25P02", name, err)
					}
					mustExec(t, w, "ROLLBACK")
				}
				w.Close(ctx)
			}
		}
	}
	mustExec(t, holder, "COMMIT")
	var v int
	if err := holder.QueryRow(ctx, "SELECT v FROM t WHERE id = 1").Scan(&v); err != nil || v != 100 {
		t.Fatalf("after the holder's commit: v = %d, %v; want 100 (no waiter wrote)", v, err)
	}
}

// TestLockTimeoutReleasesLocksAtOnce: lock_timeout applies to each lock
// wait, not to the statement, and a block failed by it has released the
// locks it held: another writer of those rows goes ahead while the failed
// block is still open.
func TestLockTimeoutReleasesLocksAtOnce(t *testing.T) {
	s, holder, _ := lockFixture(t, Config{})
	ctx := context.Background()
	w := connect(t, s)
	defer w.Close(ctx)
	mustExec(t, w, "SET lock_timeout = '200ms'", "BEGIN", "UPDATE t SET v = 7 WHERE id = 2")
	if _, err := w.Exec(ctx, "SELECT * FROM t WHERE id = 1 FOR UPDATE"); !strings.Contains(fmt.Sprint(err), "55P03") {
		t.Fatalf("FOR UPDATE of the held row: %v, want 55P03", err)
	}
	// w's block is failed but open; row 2's lock must be gone already.
	third := connect(t, s)
	defer third.Close(ctx)
	mustExec(t, third, "SET lock_timeout = '20s'", "UPDATE t SET v = 3 WHERE id = 2")
	mustExec(t, w, "ROLLBACK")
	mustExec(t, holder, "ROLLBACK")
}

// TestCancelReachesLockWait: a CancelRequest, and pg_cancel_backend, stop
// an UPDATE that waits for a row lock (shown in pg_stat_activity as
// wait_event_type 'Lock') with 57014 "canceling statement due to user
// request"; the waiter's session goes on.
func TestCancelReachesLockWait(t *testing.T) {
	s, holder, obs := lockFixture(t, Config{})
	ctx := context.Background()
	for _, how := range []string{"CancelRequest", "pg_cancel_backend"} {
		w := connect(t, s)
		pid := pidOf(t, w)
		done := make(chan error, 1)
		go func() {
			_, err := w.Exec(ctx, "UPDATE t SET v = v + 1 WHERE id = 1")
			done <- err
		}()
		waitActivity(t, obs, pid, "state = 'active' AND wait_event_type = 'Lock' AND query LIKE 'UPDATE%'")
		if how == "CancelRequest" {
			if err := w.PgConn().CancelRequest(ctx); err != nil {
				t.Fatal(err)
			}
		} else {
			var ok bool
			if err := obs.QueryRow(ctx, "SELECT pg_cancel_backend($1)", pid).Scan(&ok); err != nil || !ok {
				t.Fatalf("pg_cancel_backend: %v, %v", ok, err)
			}
		}
		err := <-done
		if code, msg := pgErr(err); code != "57014" || msg != "canceling statement due to user request" {
			t.Fatalf("%s: got %v, want 57014", how, err)
		}
		var one int
		if err := w.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
			t.Fatalf("%s: session after the cancel: %v", how, err)
		}
		w.Close(ctx)
	}
	mustExec(t, holder, "ROLLBACK")
}

// TestCancelLongSort: a cancel stops a sort over a generated series that
// would otherwise run for minutes (and hold gigabytes).
func TestCancelLongSort(t *testing.T) {
	s := start(t, Config{Insecure: true})
	defer s.Stop(context.Background())
	ctx := context.Background()
	w, obs := connect(t, s), connect(t, s)
	defer w.Close(ctx)
	defer obs.Close(ctx)
	pid := pidOf(t, w)
	done := make(chan error, 1)
	go func() {
		_, err := w.Exec(ctx, "SELECT g FROM generate_series(1, 1000000000) g ORDER BY g DESC LIMIT 1")
		done <- err
	}()
	waitActivity(t, obs, pid, "state = 'active' AND query LIKE '%ORDER BY g DESC%'")
	var ok bool
	if err := obs.QueryRow(ctx, "SELECT pg_cancel_backend($1)", pid).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_cancel_backend: %v, %v", ok, err)
	}
	if code, _ := pgErr(<-done); code != "57014" {
		t.Fatalf("cancelled sort: want 57014")
	}
}

// TestCancelDDL: a cancel stops a DDL statement part way through its
// work (CREATE TABLE AS over a series that would take minutes to write),
// with 57014, and leaves nothing of it behind.
func TestCancelDDL(t *testing.T) {
	s := start(t, Config{Insecure: true})
	defer s.Stop(context.Background())
	ctx := context.Background()
	w, obs := connect(t, s), connect(t, s)
	defer w.Close(ctx)
	defer obs.Close(ctx)
	pid := pidOf(t, w)
	done := make(chan error, 1)
	go func() {
		_, err := w.Exec(ctx, "CREATE TABLE big AS SELECT g, g * 2 AS h FROM generate_series(1, 1000000000) g")
		done <- err
	}()
	waitActivity(t, obs, pid, "state = 'active' AND query LIKE 'CREATE TABLE big%'")
	var ok bool
	if err := obs.QueryRow(ctx, "SELECT pg_cancel_backend($1)", pid).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_cancel_backend: %v, %v", ok, err)
	}
	if code, msg := pgErr(<-done); code != "57014" {
		t.Fatalf("cancelled CREATE TABLE AS: %s %s, want 57014", code, msg)
	}
	var n int
	if err := w.QueryRow(ctx, "SELECT count(*) FROM pg_class WHERE relname = 'big'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("after the cancel: %d tables named big, %v", n, err)
	}
}

// TestIdleTimeouts: idle_in_transaction_session_timeout ends a session
// idle in a block with FATAL 25P03 and releases its locks;
// idle_session_timeout ends one idle outside a block with 57P05.
func TestIdleTimeouts(t *testing.T) {
	s, holder, obs := lockFixture(t, Config{})
	ctx := context.Background()
	mustExec(t, holder, "ROLLBACK")

	idler := connect(t, s)
	pid := pidOf(t, idler)
	mustExec(t, idler, "SET idle_in_transaction_session_timeout = '300ms'", "BEGIN", "UPDATE t SET v = 5 WHERE id = 1")
	waitGone(t, obs, pid)
	// Its lock went with it: a writer with a long lock_timeout gets the row.
	mustExec(t, obs, "SET lock_timeout = '20s'", "UPDATE t SET v = 6 WHERE id = 1", "RESET lock_timeout")
	_, err := idler.Exec(ctx, "SELECT 1")
	if code, msg := pgErr(err); code != "25P03" || msg != "terminating connection due to idle-in-transaction timeout" {
		t.Fatalf("idle in transaction: %v, want FATAL 25P03", err)
	}

	// A session idle outside a block is not touched by the first setting.
	quiet := connect(t, s)
	mustExec(t, quiet, "SET idle_in_transaction_session_timeout = '100ms'")
	mustExec(t, quiet, "SET idle_session_timeout = '300ms'")
	qpid := pidOf(t, quiet)
	waitGone(t, obs, qpid)
	_, err = quiet.Exec(ctx, "SELECT 1")
	if code, msg := pgErr(err); code != "57P05" || msg != "terminating connection due to idle-session timeout" {
		t.Fatalf("idle session: %v, want FATAL 57P05", err)
	}
}

// TestSignalPrivileges: PostgreSQL's rules for pg_cancel_backend and
// pg_terminate_backend: a non-superuser may not signal a superuser's
// session nor another role's without its privileges (42501); with them
// (GRANT bob TO alice) it may; an unknown pid is a WARNING and false; a
// negative timeout is 22003; a terminated session ends with 57P01 and
// leaves pg_stat_activity.
func TestSignalPrivileges(t *testing.T) {
	s := start(t, Config{Insecure: true})
	defer s.Stop(context.Background())
	ctx := context.Background()
	admin := connect(t, s)
	defer admin.Close(ctx)
	mustExec(t, admin, "CREATE ROLE alice LOGIN", "CREATE ROLE bob LOGIN")
	alice, bob := connectAs(t, s, "alice"), connectAs(t, s, "bob")
	adminPID, bobPID := pidOf(t, admin), pidOf(t, bob)

	for _, tc := range []struct {
		sql  string
		code string
		msg  string
	}{
		{fmt.Sprintf("SELECT pg_cancel_backend(%d)", adminPID), "42501", "must be a superuser to cancel superuser query"},
		{fmt.Sprintf("SELECT pg_terminate_backend(%d)", adminPID), "42501", "must be a superuser to terminate superuser process"},
		{fmt.Sprintf("SELECT pg_cancel_backend(%d)", bobPID), "42501", "must be a member of the role whose query is being canceled or member of pg_signal_backend"},
		{fmt.Sprintf("SELECT pg_terminate_backend(%d)", bobPID), "42501", "must be a member of the role whose process is being terminated or member of pg_signal_backend"},
		{fmt.Sprintf("SELECT pg_terminate_backend(%d, -1)", bobPID), "22003", `"timeout" must not be negative`},
	} {
		_, err := alice.Exec(ctx, tc.sql)
		if code, msg := pgErr(err); code != tc.code || msg != tc.msg {
			t.Fatalf("alice: %s: got %v, want %s %q", tc.sql, err, tc.code, tc.msg)
		}
	}
	// Unknown pid: false and a WARNING, for both functions.
	var notices []string
	cfg, err := pgx.ParseConfig(fmt.Sprintf("postgres://alice@%s/postgres?sslmode=disable", s.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { notices = append(notices, n.Severity+" "+n.Message) }
	watcher, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close(ctx)
	for _, fn := range []string{"pg_cancel_backend", "pg_terminate_backend"} {
		var ok bool
		if err := watcher.QueryRow(ctx, "SELECT "+fn+"(999999)").Scan(&ok); err != nil || ok {
			t.Fatalf("%s of an unknown pid: %v, %v; want false", fn, ok, err)
		}
	}
	want := "WARNING PID 999999 is not a PostgreSQL server process"
	if len(notices) != 2 || notices[0] != want || notices[1] != want {
		t.Fatalf("notices = %q, want two %q", notices, want)
	}

	// pg_stat_activity hides other roles' queries from alice ...
	seen := func(pid int32) string {
		var q string
		if err := alice.QueryRow(ctx, "SELECT query FROM pg_stat_activity WHERE pid = $1", pid).Scan(&q); err != nil {
			t.Fatal(err)
		}
		return q
	}
	if q := seen(bobPID); q != "<insufficient privilege>" {
		t.Fatalf("alice sees bob's query %q before GRANT", q)
	}
	// ... until she has their privileges; with them she may signal too.
	mustExec(t, admin, "GRANT bob TO alice")
	if q := seen(bobPID); q != "SELECT pg_backend_pid()" {
		t.Fatalf("alice sees bob's query %q after GRANT", q)
	}
	var ok bool
	if err := alice.QueryRow(ctx, "SELECT pg_cancel_backend($1)", bobPID).Scan(&ok); err != nil || !ok {
		t.Fatalf("alice cancels bob after GRANT: %v, %v", ok, err)
	}
	if err := alice.QueryRow(ctx, "SELECT pg_terminate_backend($1, 20000)", bobPID).Scan(&ok); err != nil || !ok {
		t.Fatalf("alice terminates bob: %v, %v", ok, err)
	}
	// The wait returned only once bob's session was gone.
	var n int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", bobPID).Scan(&n); err != nil || n != 0 {
		t.Fatalf("bob still in pg_stat_activity after the terminate returned: %d, %v", n, err)
	}
	_, err = bob.Exec(ctx, "SELECT 1")
	if code, msg := pgErr(err); code != "57P01" || msg != "terminating connection due to administrator command" {
		t.Fatalf("bob after pg_terminate_backend: %v, want FATAL 57P01", err)
	}
}

// TestDisconnectCancelsWork: a client that vanishes while its statement
// runs (a long aggregate, or a wait for a row lock) has the statement
// cancelled and the session closed, which pg_stat_activity shows. The
// client is a bare protocol connection: pgx, on a broken connection, sends
// a CancelRequest first, which would hide whether the server noticed.
func TestDisconnectCancelsWork(t *testing.T) {
	s, holder, obs := lockFixture(t, Config{})
	ctx := context.Background()
	for _, tc := range []struct {
		sql, cond string
	}{
		{"SELECT count(*) FROM generate_series(1, 10000000000)", "state = 'active'"},
		{"UPDATE t SET v = 9 WHERE id = 1", "wait_event_type = 'Lock'"},
	} {
		nc, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		fe := pgproto3.NewFrontend(nc, nc)
		fe.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersionNumber,
			Parameters: map[string]string{"user": "postgres", "database": "postgres"}})
		if err := fe.Flush(); err != nil {
			t.Fatal(err)
		}
		var pid int32
	startup:
		for {
			msg, err := fe.Receive()
			if err != nil {
				t.Fatal(err)
			}
			switch m := msg.(type) {
			case *pgproto3.BackendKeyData:
				pid = int32(m.ProcessID)
			case *pgproto3.ErrorResponse:
				t.Fatalf("startup: %s", m.Message)
			case *pgproto3.ReadyForQuery:
				break startup
			}
		}
		fe.Send(&pgproto3.Query{String: tc.sql})
		if err := fe.Flush(); err != nil {
			t.Fatal(err)
		}
		waitActivity(t, obs, pid, tc.cond)
		nc.Close() // as a killed client's kernel would
		waitGone(t, obs, pid)
	}
	// The waiter wrote nothing.
	mustExec(t, holder, "ROLLBACK")
	var v int
	if err := obs.QueryRow(ctx, "SELECT v FROM t WHERE id = 1").Scan(&v); err != nil || v != 0 {
		t.Fatalf("v = %d, %v; want 0", v, err)
	}
}

// TestConnectionSlots: max_connections and superuser_reserved_connections
// come from the node's configuration, SHOW reports them and SET refuses
// them (55P02); non-superusers are kept out of the reserved slots; and a
// flood of connections that never authenticate keeps no login out.
func TestConnectionSlots(t *testing.T) {
	s := start(t, Config{Insecure: true, MaxConnections: 4, SuperuserReservedConnections: 2, MaxStartupConnections: 8})
	defer s.Stop(context.Background())
	ctx := context.Background()
	admin := connect(t, s)
	defer admin.Close(ctx)
	var maxc, reserved string
	if err := admin.QueryRow(ctx, "SHOW max_connections").Scan(&maxc); err != nil || maxc != "4" {
		t.Fatalf("SHOW max_connections = %q, %v", maxc, err)
	}
	if err := admin.QueryRow(ctx, "SHOW superuser_reserved_connections").Scan(&reserved); err != nil || reserved != "2" {
		t.Fatalf("SHOW superuser_reserved_connections = %q, %v", reserved, err)
	}
	_, err := admin.Exec(ctx, "SET max_connections = 10")
	if code, msg := pgErr(err); code != "55P02" || msg != `parameter "max_connections" cannot be changed without restarting the server` {
		t.Fatalf("SET max_connections: %v", err)
	}
	var authTimeout string
	if err := admin.QueryRow(ctx, "SHOW authentication_timeout").Scan(&authTimeout); err != nil || authTimeout != "10s" {
		t.Fatalf("SHOW authentication_timeout = %q, %v", authTimeout, err)
	}
	_, err = admin.Exec(ctx, "SET authentication_timeout = '1min'")
	if code, msg := pgErr(err); code != "55P02" || msg != `parameter "authentication_timeout" cannot be changed now` {
		t.Fatalf("SET authentication_timeout: %v", err)
	}
	mustExec(t, admin, "CREATE ROLE carol LOGIN")

	// A flood of idle TCP connections, three times max_connections.
	for i := 0; i < 12; i++ {
		nc, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
	}
	connectAs(t, s, "carol") // 2 of 4 sessions
	_, err = pgx.Connect(ctx, fmt.Sprintf("postgres://carol@%s/postgres?sslmode=disable", s.Addr()))
	if code, msg := pgErr(err); code != "53300" || msg != "remaining connection slots are reserved for roles with the SUPERUSER attribute" {
		t.Fatalf("carol into a reserved slot: %v", err)
	}
	connectAs(t, s, "postgres") // 3
	connectAs(t, s, "postgres") // 4
	_, err = pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", s.Addr()))
	if code, msg := pgErr(err); code != "53300" || msg != "sorry, too many clients already" {
		t.Fatalf("past max_connections: %v", err)
	}
}

// TestCancelCopy: COPY FROM STDIN is cancelled too. The client's data is
// held back until pg_stat_activity shows the COPY running and the cancel
// was sent; the rows that follow are refused with 57014 and none is kept.
func TestCancelCopy(t *testing.T) {
	s := start(t, Config{Insecure: true})
	defer s.Stop(context.Background())
	ctx := context.Background()
	w, obs := connect(t, s), connect(t, s)
	defer w.Close(ctx)
	defer obs.Close(ctx)
	mustExec(t, obs, "CREATE TABLE c (id int PRIMARY KEY, v int)")
	pid := pidOf(t, w)
	release := make(chan struct{})
	n := 0
	src := pgx.CopyFromFunc(func() ([]any, error) {
		n++
		if n == 1 {
			<-release
		}
		if n > 200000 {
			return nil, nil
		}
		return []any{int32(n), int32(0)}, nil
	})
	done := make(chan error, 1)
	go func() {
		_, err := w.CopyFrom(ctx, pgx.Identifier{"c"}, []string{"id", "v"}, src)
		done <- err
	}()
	waitActivity(t, obs, pid, "state = 'active' AND query ILIKE 'copy%'")
	var ok bool
	if err := obs.QueryRow(ctx, "SELECT pg_cancel_backend($1)", pid).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_cancel_backend: %v, %v", ok, err)
	}
	close(release)
	if code, msg := pgErr(<-done); code != "57014" || msg != "canceling statement due to user request" {
		t.Fatalf("cancelled COPY: got %s %q", code, msg)
	}
	var rows int
	if err := obs.QueryRow(ctx, "SELECT count(*) FROM c").Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("after the cancelled COPY: %d rows, %v", rows, err)
	}
}

// TestStalledCopyTimesOut: statement_timeout and a cancel end a COPY FROM
// STDIN whose client stopped sending in the middle (the server is blocked
// reading its data), and the session goes on serving.
func TestStalledCopyTimesOut(t *testing.T) {
	s := start(t, Config{Insecure: true})
	defer s.Stop(context.Background())
	ctx := context.Background()
	obs := connect(t, s)
	defer obs.Close(ctx)
	mustExec(t, obs, "CREATE TABLE c (id int PRIMARY KEY, v int)")
	for _, how := range []string{"statement_timeout", "pg_cancel_backend"} {
		w := connect(t, s)
		pid := pidOf(t, w)
		if how == "statement_timeout" {
			mustExec(t, w, "SET statement_timeout = '300ms'")
		}
		stall := make(chan struct{})
		n := 0
		src := pgx.CopyFromFunc(func() ([]any, error) {
			if n++; n == 100 {
				<-stall // the client stops sending, mid-COPY
			}
			return []any{int32(n), int32(0)}, nil
		})
		done := make(chan error, 1)
		go func() {
			_, err := w.CopyFrom(ctx, pgx.Identifier{"c"}, []string{"id", "v"}, src)
			done <- err
		}()
		if how == "pg_cancel_backend" {
			waitActivity(t, obs, pid, "state = 'active' AND query ILIKE 'copy%'")
			var ok bool
			if err := obs.QueryRow(ctx, "SELECT pg_cancel_backend($1)", pid).Scan(&ok); err != nil || !ok {
				t.Fatalf("pg_cancel_backend: %v, %v", ok, err)
			}
		}
		// The server ends the COPY while the client still stalls (pgx's
		// CopyFrom returns only once its source goroutine does, so the
		// stall is lifted after the server is seen idle).
		waitActivity(t, obs, pid, "state = 'idle' AND query ILIKE 'copy%'")
		close(stall)
		want := map[string]string{"statement_timeout": "canceling statement due to statement timeout",
			"pg_cancel_backend": "canceling statement due to user request"}[how]
		if code, msg := pgErr(<-done); code != "57014" || msg != want {
			t.Fatalf("%s: stalled COPY got %s %q, want 57014 %q", how, code, msg, want)
		}
		var one int
		if err := w.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
			t.Fatalf("%s: session after the stalled COPY: %v", how, err)
		}
		w.Close(ctx)
	}
	var rows int
	if err := obs.QueryRow(ctx, "SELECT count(*) FROM c").Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("%d rows kept, %v", rows, err)
	}
}
