package pgwire

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/pgwire/pgauth"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
)

// testServer is a Server with the test Backend on 127.0.0.1:0.
type testServer struct {
	*Server
	b    *testBackend
	addr string
	// stopServe cancels the context Serve runs under.
	stopServe context.CancelFunc
}

func startServer(t testing.TB, configure func(*Config)) *testServer {
	t.Helper()
	b := newTestBackend()
	cfg := Config{Backend: b, Insecure: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if configure != nil {
		configure(&cfg)
	}
	srv, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	ctx, stop := context.WithCancel(context.Background())
	go func() { served <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		srv.Close()
		stop()
		if err := <-served; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	return &testServer{Server: srv, b: b, addr: ln.Addr().String(), stopServe: stop}
}

func (ts *testServer) connString(user, password string) string {
	host, port, _ := net.SplitHostPort(ts.addr)
	return fmt.Sprintf("host=%s port=%s user=%s password='%s' dbname=postgres sslmode=disable connect_timeout=10", host, port, user, password)
}

func (ts *testServer) config(t testing.TB, user, password string) *pgx.ConnConfig {
	t.Helper()
	cfg, err := pgx.ParseConfig(ts.connString(user, password))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func (ts *testServer) connect(t testing.TB) *pgx.Conn {
	t.Helper()
	conn, err := pgx.ConnectConfig(context.Background(), ts.config(t, "postgres", ""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// pgCode returns err's SQLSTATE as pgx sees it, "" if none.
func pgCode(err error) string {
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		return pe.Code
	}
	return ""
}

func TestSimpleProtocolSeveralStatements(t *testing.T) {
	ts := startServer(t, nil)
	cfg := ts.config(t, "postgres", "")
	var notices []*pgconn.Notice
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { notices = append(notices, n) }
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())

	results, err := conn.PgConn().Exec(context.Background(), "select 7; generate 3; notice hello there;").ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range results {
		var vals []string
		for _, row := range r.Rows {
			vals = append(vals, string(row[0]))
		}
		got = append(got, fmt.Sprintf("%s %v", r.CommandTag, vals))
	}
	want := []string{"SELECT 1 [7]", "SELECT 3 [1 2 3]", "DO []"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("results %q, want %q", got, want)
	}
	if len(results[0].FieldDescriptions) != 1 || results[0].FieldDescriptions[0].DataTypeOID != oidInt4 {
		t.Fatalf("field descriptions %+v", results[0].FieldDescriptions)
	}
	if len(notices) != 1 || notices[0].Message != "hello there" || notices[0].Severity != "NOTICE" || notices[0].Code != "00000" || notices[0].Detail != "notice detail" {
		t.Fatalf("notices %+v", notices)
	}

	// An empty query string gets EmptyQueryResponse, which pgconn reports
	// as a result with an empty tag.
	if results, err = conn.PgConn().Exec(context.Background(), " ; ").ReadAll(); err != nil || len(results) != 1 || results[0].CommandTag.String() != "" {
		t.Fatalf("empty query: %v %+v", err, results)
	}

	// A multi-statement string stops at the first error.
	_, err = conn.PgConn().Exec(context.Background(), "select 1; error 22012 3; notice unreachable").ReadAll()
	if pgCode(err) != "22012" || len(notices) != 1 {
		t.Fatalf("got %v (notices %d), want 22012 and no further statements", err, len(notices))
	}
}

func TestExtendedProtocol(t *testing.T) {
	ts := startServer(t, nil)
	conn := ts.connect(t)
	ctx := context.Background()
	for _, mode := range []pgx.QueryExecMode{
		pgx.QueryExecModeCacheStatement, // named statements, binary results
		pgx.QueryExecModeCacheDescribe,  // unnamed statements
		pgx.QueryExecModeDescribeExec,
		pgx.QueryExecModeExec, // text parameters, unnamed, no describe
		pgx.QueryExecModeSimpleProtocol,
	} {
		t.Run(mode.String(), func(t *testing.T) {
			for _, v := range []int64{0, 42, -1 << 62} {
				var got int64
				if err := conn.QueryRow(ctx, "select $1::int8", mode, v).Scan(&got); err != nil {
					t.Fatal(err)
				}
				if got != v {
					t.Fatalf("echo %d got %d", v, got)
				}
			}
			rows, err := conn.Query(ctx, "generate 1000", mode)
			if err != nil {
				t.Fatal(err)
			}
			sum, n := int64(0), 0
			for rows.Next() {
				var v int64
				if err := rows.Scan(&v); err != nil {
					t.Fatal(err)
				}
				sum += v
				n++
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if n != 1000 || sum != 500500 || rows.CommandTag().String() != "SELECT 1000" {
				t.Fatalf("n=%d sum=%d tag=%q", n, sum, rows.CommandTag())
			}
		})
	}

	// Prepare with a name, then use it by name; preparing it again fails.
	if _, err := conn.Prepare(ctx, "echo", "select $1::int8"); err != nil {
		t.Fatal(err)
	}
	var got int64
	if err := conn.QueryRow(ctx, "echo", int64(5)).Scan(&got); err != nil || got != 5 {
		t.Fatalf("named statement: %v %d", err, got)
	}
	if err := conn.Deallocate(ctx, "echo"); err != nil {
		t.Fatal(err)
	}
}

func TestErrors(t *testing.T) {
	ts := startServer(t, nil)
	conn := ts.connect(t)
	ctx := context.Background()
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeSimpleProtocol} {
		_, err := conn.Exec(ctx, "error 22012 7", mode)
		pe, ok := errors.AsType[*pgconn.PgError](err)
		if !ok {
			t.Fatalf("%v: got %v, want a PgError", mode, err)
		}
		if pe.Code != "22012" || pe.Position != 7 || pe.Message != "injected error" || pe.Detail != "some detail" || pe.Hint != "some hint" || pe.Where != "some context" || pe.Severity != "ERROR" ||
			pe.SchemaName != "s" || pe.TableName != "t" || pe.ColumnName != "c" || pe.ConstraintName != "k" {
			t.Fatalf("%v: got %+v", mode, pe)
		}
		// The connection goes on.
		var v int32
		if err := conn.QueryRow(ctx, "select 3", mode).Scan(&v); err != nil || v != 3 {
			t.Fatalf("%v: after error: %v %d", mode, err, v)
		}
	}
	if _, err := conn.Exec(ctx, "bogus statement"); pgCode(err) != "42601" {
		t.Fatalf("syntax error: got %v", err)
	}
	// A session error with no SQLSTATE is an internal error.
	if _, err := conn.Exec(ctx, "select $1::int8", "not a number"); pgCode(err) != "22P02" {
		t.Fatalf("bad parameter: got %v", err)
	}

	// Errors inside a transaction block fail it until ROLLBACK, and
	// ReadyForQuery reports each state.
	steps := []struct {
		sql, code string
		status    byte
	}{
		{"begin", "", 'T'},
		{"select 1", "", 'T'},
		{"error 23505 1", "23505", 'E'},
		{"select 1", "25P02", 'E'},
		{"rollback", "", 'I'},
		{"select 1", "", 'I'},
	}
	for _, s := range steps {
		_, err := conn.Exec(ctx, s.sql)
		if pgCode(err) != s.code || (s.code == "" && err != nil) {
			t.Fatalf("%s: got %v, want code %q", s.sql, err, s.code)
		}
		if st := conn.PgConn().TxStatus(); st != s.status {
			t.Fatalf("%s: status %c, want %c", s.sql, st, s.status)
		}
	}
}

func TestParameterStatus(t *testing.T) {
	ts := startServer(t, nil)
	cfg := ts.config(t, "postgres", "")
	cfg.RuntimeParams["application_name"] = "pgwire-test"
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	pc := conn.PgConn()
	for k, want := range map[string]string{
		"server_version":              DefaultServerVersion,
		"server_encoding":             "UTF8",
		"client_encoding":             "UTF8",
		"DateStyle":                   "ISO, MDY",
		"TimeZone":                    "Etc/UTC",
		"integer_datetimes":           "on",
		"standard_conforming_strings": "on",
		"is_superuser":                "on", // from the session, overriding the default
		"session_authorization":       "postgres",
		"application_name":            "pgwire-test",
	} {
		if got := pc.ParameterStatus(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if pc.PID() == 0 || len(pc.SecretKey()) != 4 {
		t.Errorf("BackendKeyData pid=%d key=%x", pc.PID(), pc.SecretKey())
	}
	if _, err := conn.Exec(context.Background(), "set timezone Europe/Paris"); err != nil {
		t.Fatal(err)
	}
	if got := pc.ParameterStatus("TimeZone"); got != "Europe/Paris" {
		t.Errorf("TimeZone after SET = %q", got)
	}
}

func TestCopy(t *testing.T) {
	ts := startServer(t, nil)
	conn := ts.connect(t)
	ctx := context.Background()
	pc := conn.PgConn()

	// pgx's CopyFrom: describe, then binary COPY FROM STDIN.
	n, err := conn.CopyFrom(ctx, pgx.Identifier{"t"}, []string{"n"},
		pgx.CopyFromSlice(100, func(i int) ([]any, error) { return []any{int64(i + 1)}, nil }))
	if err != nil || n != 100 {
		t.Fatalf("CopyFrom: %d, %v", n, err)
	}
	if ts.b.copiedSum() != 5050 {
		t.Fatalf("server saw sum %d, want 5050", ts.b.copiedSum())
	}

	for _, tc := range []struct{ sql, data, tag string }{
		{"copy t from stdin", "1\n2\n\\N\n", "COPY 3"},
		{"copy t from stdin csv", "10,x\n\"20\",\"y,z\"\n", "COPY 2"},
		{"copy t from stdin csv header", "n,s\n5,a\n", "COPY 1"},
	} {
		tag, err := pc.CopyFrom(ctx, strings.NewReader(tc.data), tc.sql)
		if err != nil || tag.String() != tc.tag {
			t.Fatalf("%s: %q, %v", tc.sql, tag, err)
		}
	}
	if ts.b.copiedSum() != 5050+3+30+5 {
		t.Fatalf("server saw sum %d", ts.b.copiedSum())
	}

	// Bad data: the session's error comes back, and the connection is fine.
	if _, err := pc.CopyFrom(ctx, strings.NewReader("1\nnope\n3\n"), "copy t from stdin"); pgCode(err) != "22P02" {
		t.Fatalf("bad data: %v", err)
	}
	// A client-side failure sends CopyFail: 57014.
	if _, err := pc.CopyFrom(ctx, io.MultiReader(strings.NewReader("1\n"), errReader{}), "copy t from stdin"); pgCode(err) != "57014" {
		t.Fatalf("CopyFail: %v", err)
	} else if !strings.Contains(err.Error(), "COPY from stdin failed") {
		t.Fatalf("CopyFail message: %v", err)
	}

	for _, tc := range []struct{ sql, want string }{
		{"copy t to stdout", "1\tone\n2\t\\N\n3\ta,b\n"},
		{"copy t to stdout csv header", "n,name\n1,one\n2,\n3,\"a,b\"\n"},
	} {
		var buf bytes.Buffer
		tag, err := pc.CopyTo(ctx, &buf, tc.sql)
		if err != nil || tag.String() != "COPY 3" || buf.String() != tc.want {
			t.Fatalf("%s: %q %v\n%q", tc.sql, tag, err, buf.String())
		}
	}
	var buf bytes.Buffer
	if _, err := pc.CopyTo(ctx, &buf, "copy t to stdout binary"); err != nil || !strings.HasPrefix(buf.String(), "PGCOPY\n\xff\r\n\x00") {
		t.Fatalf("binary copy out: %v %q", err, buf.String())
	}
	var v int32
	if err := conn.QueryRow(ctx, "select 9").Scan(&v); err != nil || v != 9 {
		t.Fatalf("after COPY: %v", err)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("client gave up") }

func TestCancel(t *testing.T) {
	ts := startServer(t, nil)
	ts.b.setSleeping(make(chan context.Context, 1))
	conn := ts.connect(t)
	ctx := context.Background()
	pc := conn.PgConn()

	// A CancelRequest with the wrong secret cancels nothing.
	done := make(chan error, 1)
	go func() { _, err := conn.Exec(ctx, "sleep"); done <- err }()
	sctx := <-ts.b.sleepingCh()
	raw, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	raw.Write(cancelPacket(pc.PID(), []byte{0, 0, 0, 0}))
	if _, err := io.ReadAll(raw); err != nil { // the server hangs up once it has handled it
		t.Fatal(err)
	}
	raw.Close()
	if sctx.Err() != nil {
		t.Fatal("a cancel request with the wrong secret canceled the query")
	}
	// The right one does, through pgconn's own CancelRequest.
	if err := pc.CancelRequest(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; pgCode(err) != "57014" {
		t.Fatalf("canceled query: %v", err)
	}
	var v int32
	if err := conn.QueryRow(ctx, "select 1").Scan(&v); err != nil {
		t.Fatalf("after cancel: %v", err)
	}

	// pgx's context cancellation, configured to send a CancelRequest.
	cfg := ts.config(t, "postgres", "")
	cfg.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, CancelRequestDelay: 0, DeadlineDelay: time.Minute}
	}
	conn2, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close(ctx)
	qctx, cancel := context.WithCancel(ctx)
	go func() { <-ts.b.sleepingCh(); cancel() }()
	if _, err := conn2.Exec(qctx, "sleep"); pgCode(err) != "57014" && !errors.Is(err, context.Canceled) {
		t.Fatalf("context cancel: %v", err)
	}
	if err := conn2.QueryRow(ctx, "select 2").Scan(&v); err != nil || v != 2 {
		t.Fatalf("after context cancel: %v", err)
	}
}

func cancelPacket(pid uint32, secret []byte) []byte {
	b := []byte{0, 0, 0, 16, 0x04, 0xd2, 0x16, 0x2e}
	b = append(b, byte(pid>>24), byte(pid>>16), byte(pid>>8), byte(pid))
	return append(b, secret...)
}

func TestAuthentication(t *testing.T) {
	verifier, err := pgauth.Verifier("s3cret")
	if err != nil {
		t.Fatal(err)
	}
	setRoles := func(b *testBackend) {
		b.setRole(Role{Name: "alice", CanLogin: true, SCRAMVerifier: verifier})
		b.setRole(Role{Name: "nologin", CanLogin: false, SCRAMVerifier: verifier})
		b.setRole(Role{Name: "nopass", CanLogin: true})
	}
	ctx := context.Background()
	t.Run("scram", func(t *testing.T) {
		ts := startServer(t, func(c *Config) { c.Insecure = false })
		setRoles(ts.b)
		for _, tc := range []struct{ user, password, code string }{
			{"alice", "s3cret", ""},
			{"alice", "wrong", "28P01"},
			{"alice", "", "28P01"},
			{"ghost", "s3cret", "28P01"}, // no hint that the role does not exist
			{"nopass", "anything", "28P01"},
			{"nologin", "s3cret", "28000"},
		} {
			conn, err := pgx.Connect(ctx, ts.connString(tc.user, tc.password))
			if tc.code == "" {
				if err != nil {
					t.Fatalf("%s/%s: %v", tc.user, tc.password, err)
				}
				conn.Close(ctx)
				continue
			}
			if pgCode(err) != tc.code {
				t.Fatalf("%s/%s: got %v, want %s", tc.user, tc.password, err, tc.code)
			}
		}
	})
	t.Run("trust", func(t *testing.T) {
		ts := startServer(t, nil)
		setRoles(ts.b)
		for _, tc := range []struct{ user, db, code, msg string }{
			{"alice", "postgres", "", ""},
			{"nopass", "postgres", "", ""},
			{"ghost", "postgres", "28000", `role "ghost" does not exist`},
			{"nologin", "postgres", "28000", `role "nologin" is not permitted to log in`},
			{"alice", "nope", "3D000", `database "nope" does not exist`},
		} {
			cfg := ts.config(t, tc.user, "")
			cfg.Database = tc.db
			conn, err := pgx.ConnectConfig(ctx, cfg)
			if tc.code == "" {
				if err != nil {
					t.Fatalf("%s: %v", tc.user, err)
				}
				conn.Close(ctx)
				continue
			}
			if pgCode(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("%s@%s: got %v, want %s %s", tc.user, tc.db, err, tc.code, tc.msg)
			}
		}
	})
}

func TestConnectionLimit(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxConnections = 2 })
	ctx := context.Background()
	c1 := ts.connect(t)
	ts.connect(t)
	_, err := pgx.Connect(ctx, ts.connString("postgres", ""))
	if pgCode(err) != "53300" || !strings.Contains(err.Error(), "sorry, too many clients already") {
		t.Fatalf("third connection: %v", err)
	}
	c1.Close(ctx)
	// The slot frees once the server has seen c1 go; poll for that rather
	// than guess a delay.
	for i := 0; ; i++ {
		conn, err := pgx.Connect(ctx, ts.connString("postgres", ""))
		if err == nil {
			conn.Close(ctx)
			break
		}
		if pgCode(err) != "53300" || i == 500 {
			t.Fatalf("after a disconnect: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestOversizedMessage(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxMessageSize = 1024 })
	ctx := context.Background()
	victim, bystander := ts.connect(t), ts.connect(t)
	_, err := victim.Exec(ctx, "notice "+strings.Repeat("x", 2000), pgx.QueryExecModeSimpleProtocol)
	if pgCode(err) != "08P01" {
		t.Fatalf("oversized: %v", err)
	}
	if _, err := victim.Exec(ctx, "select 1"); err == nil {
		t.Fatal("connection survived a protocol violation")
	}
	var v int32
	if err := bystander.QueryRow(ctx, "select 4").Scan(&v); err != nil || v != 4 {
		t.Fatalf("other connection: %v", err)
	}
}

func TestPanicIsContained(t *testing.T) {
	ts := startServer(t, nil)
	ctx := context.Background()
	conn := ts.connect(t)
	if _, err := conn.Exec(ctx, "panic"); pgCode(err) != "XX000" {
		t.Fatalf("panic: %v", err)
	}
	if _, err := conn.Exec(ctx, "select 1"); err == nil {
		t.Fatal("connection survived a panic")
	}
	var v int32
	if err := ts.connect(t).QueryRow(ctx, "select 5").Scan(&v); err != nil || v != 5 {
		t.Fatalf("new connection after panic: %v", err)
	}
}

// TestClose: Close, or the end of the context Serve runs under, stops a
// running statement and tells every connection 57P01 (statements run under
// contexts of their own that only the connection's interrupt cancels).
// TestNoStatementAfterServeContext: once Serve's context is cancelled,
// a statement that arrives before Close has reached its connection (Close
// runs on Serve's AfterFunc goroutine; here it is held at the server's
// lock) does not run: the client hears 57P01. Before, it ran, and
// TestClose's "Serve's context" case failed about once in 20 runs.
func TestNoStatementAfterServeContext(t *testing.T) {
	ts := startServer(t, nil)
	idle := ts.connect(t)
	ts.mu.Lock()
	locked := true
	unlock := func() {
		if locked {
			locked = false
			ts.mu.Unlock()
		}
	}
	defer unlock()
	ts.stopServe()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := idle.Exec(ctx, "select 1")
	unlock()
	if pgCode(err) != "57P01" {
		t.Fatalf("a statement after Serve's context ended: %v, want 57P01", err)
	}
}

func TestClose(t *testing.T) {
	for _, tc := range []struct {
		name string
		stop func(ts *testServer) error
	}{
		{"Close", func(ts *testServer) error { return ts.Close() }},
		{"Serve's context", func(ts *testServer) error { ts.stopServe(); return nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, nil)
			ts.b.setSleeping(make(chan context.Context, 1))
			ctx := context.Background()
			idle, busy := ts.connect(t), ts.connect(t)
			done := make(chan error, 1)
			go func() { _, err := busy.Exec(ctx, "sleep"); done <- err }()
			<-ts.b.sleepingCh()
			if err := tc.stop(ts); err != nil {
				t.Fatal(err)
			}
			if err := <-done; pgCode(err) != "57P01" {
				t.Fatalf("running statement at shutdown: %v", err)
			}
			// The idle connection was told too; pgconn reads the FATAL on its next use.
			if _, err := idle.Exec(ctx, "select 1"); pgCode(err) != "57P01" {
				t.Fatalf("idle connection at shutdown: %v", err)
			}
			// Close waits for the connections' goroutines, hence their
			// sessions' Close.
			ts.Close()
			if _, err := net.Dial("tcp", ts.addr); err == nil {
				t.Fatal("still accepting after Close")
			}
			ts.b.mu.Lock()
			defer ts.b.mu.Unlock()
			if ts.b.closed != 2 {
				t.Fatalf("%d sessions closed, want 2", ts.b.closed)
			}
		})
	}
}

// TestQuickSync: a Sync the session says is quick (QuickSyncer: no
// transaction to end) runs under the connection's context, which nothing
// cancels and no statement context was made for; any other Sync runs
// under a statement context CancelRequest can cancel (invariant 8).
func TestQuickSync(t *testing.T) {
	ts := startServer(t, nil)
	conn := ts.connect(t)
	ctx := context.Background()
	syncs := func() []bool {
		ts.b.mu.Lock()
		defer ts.b.mu.Unlock()
		out := ts.b.syncs
		ts.b.syncs = nil
		return out
	}
	var got int64
	if err := conn.QueryRow(ctx, "select $1::int8", pgx.QueryExecModeCacheStatement, int64(7)).Scan(&got); err != nil || got != 7 {
		t.Fatalf("select: %v %d", err, got)
	}
	s := syncs()
	if len(s) == 0 {
		t.Fatal("no Sync reached the session")
	}
	for i, cancellable := range s {
		if cancellable {
			t.Errorf("Sync %d outside a transaction ran under a cancellable statement context", i)
		}
	}
	if _, err := conn.Exec(ctx, "begin", pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, "select $1::int8", pgx.QueryExecModeCacheStatement, int64(8)).Scan(&got); err != nil || got != 8 {
		t.Fatalf("select in a transaction: %v %d", err, got)
	}
	s = syncs()
	if len(s) == 0 || !s[len(s)-1] {
		t.Errorf("Sync in a transaction: cancellable %v, want a statement context", s)
	}
	if _, err := conn.Exec(ctx, "commit", pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
}
