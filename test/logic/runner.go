// Package logic runs SQL logic tests: files under testdata/ that state, as
// data, what a PostgreSQL-compatible server answers to each statement. The
// same files run against PostgreSQL 15 (which is how their expected results
// are made and checked: `make logic-pg`) and against Cairn, so each file is a
// specification of the SQL behaviour Cairn owes its clients.
//
// It owns the file format, its parser, and the runner that talks pgwire (pgx,
// simple query protocol, so every value arrives in PostgreSQL's text format).
// It is called by TestLogic and `make logic-pg`; it calls only a server over
// the network and must not import Cairn's internals, so the files test what a
// client sees and nothing else.
//
// # Format
//
// The format follows sqllogictest as CockroachDB uses it. A file is a series
// of records separated by blank lines; lines starting with # are comments.
//
//	statement ok
//	CREATE TABLE t (a INT PRIMARY KEY, b TEXT)
//
//	statement count 2
//	INSERT INTO t VALUES (1, 'x'), (2, '')
//
//	statement error 23505 duplicate key value
//	INSERT INTO t VALUES (1, 'y')
//
//	query IT rowsort colnames
//	SELECT a, b FROM t
//	----
//	a b
//	1 x
//	2 ·
//
// Records:
//
//   - statement ok | statement count N | statement error SPEC, then SQL up to
//     a blank line. The SQL may span lines and hold several statements.
//   - query TYPES [nosort|rowsort|valuesort] [colnames], then SQL, "----",
//     and the expected rows up to a blank line. TYPES has one letter per
//     column: I integer (int2/4/8, oid), R float4/8 or numeric, B bool, T
//     anything else; the runner checks them against the column types the
//     server reports. Without "----" the query must return no rows.
//   - query error SPEC, then SQL.
//   - SPEC is [SQLSTATE] [pos=N] [regexp]: the five-character SQLSTATE
//     (preferred), the 1-based error position PostgreSQL reports for syntax
//     and name errors, and a Go regexp that must match the message.
//   - connection NAME switches to the named session (created on first use;
//     the first is "default"), for interleaving transactions.
//   - connection NAME database DB does the same for a session of database
//     DB instead of the file's own (the file creates and drops DB itself).
//   - user NAME switches to a session logged in as NAME (the role must
//     exist); the URL's own user means the default session.
//   - let $VAR, then a query returning one value; later SQL has $VAR
//     replaced by that value.
//   - halt stops the file; hash-threshold N is accepted and ignored.
//   - onlyif ENGINE / skipif ENGINE (postgres or cairn) directly in front of a
//     record restrict it to, or exclude it from, one engine. They mark where
//     Cairn intentionally differs from PostgreSQL and should stay rare.
//
// Result rows are values joined by single spaces, NULL for SQL NULL and "·"
// for the empty string, exactly as PostgreSQL prints them in text format (t/f
// booleans, ISO dates, the session's time zone; the runner starts each
// session with TimeZone UTC, DateStyle "ISO, MDY" and IntervalStyle
// postgres). A value containing newlines continues on the next lines.
// rowsort sorts rendered rows; valuesort sorts all values and puts one per
// line.
// Trailing whitespace is not significant.
//
// # Invariants
//
//  1. Each file runs in a database of its own, created before and dropped
//     after, so files are independent and may run in any order.
//  2. A record's outcome is compared in full: every row, every column type,
//     and for errors the SQLSTATE whenever the file names one.
//  3. A failure names file:line of the record, with expected and actual, and
//     the run continues with the next record so one file reports all its
//     differences.
//  4. Rewrite changes only expected parts (result lines, type letters, the
//     statement/query outcome); SQL and comments are kept byte for byte.
package logic

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Engine names, as onlyif/skipif use them.
const (
	EnginePostgres = "postgres"
	EngineCairn    = "cairn"
)

// ServerFactory starts a Cairn server for a test and returns a PostgreSQL
// URL for it (any database; the runner makes its own). The server must stop
// when the test ends (tb.Cleanup).
type ServerFactory func(tb TB) (url string)

// TB is the part of testing.TB a ServerFactory needs; it keeps this
// package's non-test code free of the testing package.
type TB interface {
	Helper()
	Cleanup(func())
	Fatalf(format string, args ...any)
}

// Config says where and how to run files.
type Config struct {
	// URL reaches the server as a role allowed to create databases.
	URL string
	// Engine selects onlyif/skipif records: EnginePostgres or EngineCairn.
	Engine string
	// Rewrite replaces expected results with the server's answers.
	Rewrite bool
	// StatementTimeout bounds each record; zero means 30s.
	StatementTimeout time.Duration
	// Settings are set in every session of the file (as startup
	// parameters, as if each session began with SET): TestLogicSpill sets
	// a tiny work_mem so that every sort, hash table and window spills to
	// disk, and the files' expected results must not change.
	Settings map[string]string
	// OnTimeout, if set, is called when a record runs past
	// StatementTimeout, before the next record: TestLogic prints the
	// in-process server's SQL goroutines there, so a rare hang seen only
	// in CI leaves its stacks in the log.
	OnTimeout func(file string, line int)
}

// Report is the outcome of one file.
type Report struct {
	Failures []Failure
	Ran      int // records executed
	Skipped  int // records excluded by onlyif/skipif
	// Rewritten is the file with expected parts replaced by the server's
	// answers; set only when Config.Rewrite is.
	Rewritten string
}

// RunFile parses the file at path and runs it in a fresh database. The
// error is for problems running the file at all (bad format, no server);
// differences in results are in Report.Failures.
func RunFile(ctx context.Context, cfg Config, path string) (*Report, error) {
	f, err := ParseFile(path)
	if err != nil {
		return nil, err
	}
	return Run(ctx, cfg, f)
}

// Run runs a parsed file in a fresh database.
func Run(ctx context.Context, cfg Config, f *File) (*Report, error) {
	if cfg.StatementTimeout == 0 {
		cfg.StatementTimeout = 30 * time.Second
	}
	base, err := pgx.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("parsing server URL: %w", err)
	}
	dbName := databaseName(f.Name)
	admin, err := connect(ctx, base, base.Database, base.User, nil)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", cfg.URL, err)
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+dbName); err != nil {
		return nil, fmt.Errorf("dropping old database: %w", err)
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+dbName); err != nil {
		return nil, fmt.Errorf("creating database: %w", err)
	}
	r := &fileRun{
		cfg:      cfg,
		base:     base,
		db:       dbName,
		f:        f,
		sessions: map[string]*pgx.Conn{},
		dbOf:     map[string]string{},
		vars:     map[string]string{},
		report:   &Report{},
		edits:    map[int]edit{},
	}
	runErr := r.run(ctx)
	r.closeSessions()
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+dbName); err != nil && runErr == nil {
		runErr = fmt.Errorf("dropping database: %w", err)
	}
	if runErr != nil {
		return nil, runErr
	}
	if cfg.Rewrite {
		r.report.Rewritten = r.rewrite()
	}
	return r.report, nil
}

var nonIdent = regexp.MustCompile(`[^a-z0-9_]+`)

func databaseName(file string) string {
	return "logic_" + nonIdent.ReplaceAllString(strings.ToLower(file), "_")
}

func connect(ctx context.Context, base *pgx.ConnConfig, db, user string, settings map[string]string) (*pgx.Conn, error) {
	c := base.Copy()
	c.Database = db
	c.User = user
	c.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	if c.RuntimeParams == nil {
		c.RuntimeParams = map[string]string{}
	}
	// Files print dates, times and intervals; fix how rather than inherit
	// the server's configuration (these are initdb's defaults, except UTC).
	c.RuntimeParams["TimeZone"] = "UTC"
	c.RuntimeParams["DateStyle"] = "ISO, MDY"
	c.RuntimeParams["IntervalStyle"] = "postgres"
	for k, v := range settings {
		c.RuntimeParams[k] = v
	}
	return pgx.ConnectConfig(ctx, c)
}

// fileRun is the state of one file's run.
type fileRun struct {
	cfg      Config
	base     *pgx.ConnConfig
	db       string
	f        *File
	sessions map[string]*pgx.Conn
	cur      string // current session name
	user     string // user of the current session
	vars     map[string]string
	report   *Report
	edits    map[int]edit // by record index, for rewrite
	// dbOf is the database of sessions opened with "connection NAME
	// database DB" (others open the file's own).
	dbOf map[string]string
}

func (r *fileRun) run(ctx context.Context) error {
	r.cur, r.user = "default", r.base.User
	for i := range r.f.Records {
		rec := &r.f.Records[i]
		if rec.Skip(r.cfg.Engine) {
			r.report.Skipped++
			continue
		}
		switch rec.Kind {
		case KindHalt:
			return nil
		case KindConnection:
			r.cur, r.user = rec.Name, r.base.User
			if rec.Database != "" {
				r.dbOf[rec.Name] = rec.Database
			}
			continue
		case KindUser:
			// The URL's own user has the default session, so "user postgres"
			// returns to it with its state intact.
			r.cur, r.user = "user:"+rec.Name, rec.Name
			if rec.Name == r.base.User {
				r.cur = "default"
			}
			continue
		}
		conn, err := r.session(ctx)
		if err != nil {
			return fmt.Errorf("%s:%d: %w", r.f.Name, rec.Line, err)
		}
		r.report.Ran++
		rctx, cancel := context.WithTimeout(ctx, r.cfg.StatementTimeout)
		r.runRecord(rctx, i, rec, conn)
		if errors.Is(rctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil && r.cfg.OnTimeout != nil {
			r.cfg.OnTimeout(r.f.Name, rec.Line)
		}
		cancel()
		if conn.IsClosed() {
			// A timeout or a broken connection: start the session afresh so
			// the rest of the file still runs.
			delete(r.sessions, r.cur)
		}
	}
	return nil
}

func (r *fileRun) session(ctx context.Context) (*pgx.Conn, error) {
	if c, ok := r.sessions[r.cur]; ok {
		return c, nil
	}
	db := r.db
	if d, ok := r.dbOf[r.cur]; ok {
		db = d
	}
	c, err := connect(ctx, r.base, db, r.user, r.cfg.Settings)
	if err != nil {
		return nil, fmt.Errorf("opening session %q: %w", r.cur, err)
	}
	r.sessions[r.cur] = c
	return c, nil
}

func (r *fileRun) closeSessions() {
	for name, c := range r.sessions {
		_ = c.Close(context.Background())
		delete(r.sessions, name)
	}
}

func (r *fileRun) fail(rec *Record, format string, args ...any) {
	r.report.Failures = append(r.report.Failures, Failure{
		File: r.f.Name, Line: rec.Line, Msg: fmt.Sprintf(format, args...),
	})
}

var useRE = regexp.MustCompile(`\$[A-Za-z_][A-Za-z0-9_]*`)

// expand replaces let-bound $variables; other $-words are left alone.
func (r *fileRun) expand(sql string) string {
	return useRE.ReplaceAllStringFunc(sql, func(v string) string {
		if val, ok := r.vars[v[1:]]; ok {
			return val
		}
		return v
	})
}

// serverError extracts what error records check from err; ok is false for
// errors that did not come from the server (a broken connection, a
// timeout), which are always failures.
func serverError(err error) (ServerError, bool) {
	var pg *pgconn.PgError
	if !errors.As(err, &pg) {
		return ServerError{}, false
	}
	return ServerError{Code: pg.Code, Message: pg.Message, Position: int(pg.Position)}, true
}

func (r *fileRun) runRecord(ctx context.Context, idx int, rec *Record, conn *pgx.Conn) {
	sql := r.expand(rec.SQL)
	switch rec.Kind {
	case KindStatement:
		tag, err := conn.Exec(ctx, sql)
		r.checkOutcome(idx, rec, err, func() {
			if rec.HasCount && tag.RowsAffected() != rec.Count {
				r.fail(rec, "expected %d rows affected, got %d", rec.Count, tag.RowsAffected())
				r.edits[idx] = edit{header: fmt.Sprintf("statement count %d", tag.RowsAffected())}
			}
		})
	case KindQuery:
		cols, oids, rows, err := query(ctx, conn, sql)
		r.checkOutcome(idx, rec, err, func() { r.checkRows(idx, rec, cols, oids, rows) })
	case KindLet:
		_, _, rows, err := query(ctx, conn, sql)
		if err != nil {
			r.fail(rec, "let: %v", err)
			return
		}
		if len(rows) != 1 || len(rows[0]) != 1 {
			r.fail(rec, "let: query must return one value, got %d rows", len(rows))
			return
		}
		r.vars[rec.Name] = string(rows[0][0])
	}
}

// checkOutcome compares success or failure with what rec expects; onOK runs
// further checks when both agree that the SQL succeeded.
func (r *fileRun) checkOutcome(idx int, rec *Record, err error, onOK func()) {
	if err == nil {
		if rec.Err != nil {
			r.fail(rec, "expected error, got success")
			if rec.Kind == KindStatement {
				r.edits[idx] = edit{header: "statement ok"}
			}
			return
		}
		onOK()
		return
	}
	se, fromServer := serverError(err)
	if !fromServer {
		r.fail(rec, "%v", err)
		return
	}
	kind := "statement"
	if rec.Kind == KindQuery {
		kind = "query"
	}
	if rec.Err == nil {
		r.fail(rec, "unexpected error: %s", se)
		r.edits[idx] = edit{header: kind + " error " + specFor(se), dropResults: true}
		return
	}
	if ok, why := rec.Err.Match(se); !ok {
		r.fail(rec, "%s", why)
		r.edits[idx] = edit{header: kind + " error " + specFor(se)}
	}
}

func (r *fileRun) checkRows(idx int, rec *Record, cols []string, oids []uint32, rows [][][]byte) {
	actual := Render(cols, rows, rec.Sort, rec.ColNames)
	e := edit{results: actual, hasResults: true}
	failed := false
	if err := CheckTypes(rec.Types, oids); err != nil {
		r.fail(rec, "%v", err)
		failed = true
		e.header = strings.Join(append([]string{"query", TypeLetters(oids)}, rec.opts...), " ")
	}
	if !EqualLines(rec.Expected, actual) {
		r.fail(rec, "results differ\nexpected:\n%s\nactual:\n%s",
			indent(rec.Expected), indent(actual))
		failed = true
	}
	if failed {
		r.edits[idx] = e
	}
}

func indent(lines []string) string {
	if len(lines) == 0 {
		return "    (no rows)"
	}
	return "    " + strings.Join(lines, "\n    ")
}

// query runs sql and copies out its column names, types and raw text values.
func query(ctx context.Context, conn *pgx.Conn, sql string) ([]string, []uint32, [][][]byte, error) {
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		return nil, nil, nil, err
	}
	defer rows.Close()
	fds := rows.FieldDescriptions()
	cols := make([]string, len(fds))
	oids := make([]uint32, len(fds))
	for i, fd := range fds {
		cols[i], oids[i] = fd.Name, fd.DataTypeOID
	}
	var out [][][]byte
	for rows.Next() {
		raw := rows.RawValues()
		row := make([][]byte, len(raw))
		for i, v := range raw {
			if v != nil {
				// RawValues are only valid until Next; keep a non-nil
				// slice for the empty string.
				row[i] = append([]byte{}, v...)
			}
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, nil, err
	}
	return cols, oids, out, nil
}

// Files lists the logic files in dir: every regular file, sorted by name.
// Subdirectories (such as the fuzzer's testdata/fuzz) are not logic files.
func Files(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("listing logic files: %w", err)
	}
	var paths []string
	for _, e := range entries {
		if e.Type().IsRegular() {
			paths = append(paths, filepath.Join(dir, e.Name()))
		}
	}
	return paths, nil
}
