package pgwire

// A deterministic Session for the protocol tests. It understands a handful
// of statements (one per ';'-separated piece, case-insensitive):
//
//	select <int>              one int4 row
//	select $1::int8           echoes its int8 parameter
//	select "n" from "t"       describes table t (one int8 column n), no rows;
//	                          pgx's CopyFrom asks this before COPY
//	generate <n>              n int8 rows 1..n (column "n")
//	error <sqlstate> <pos>    fails with that SQLSTATE, position, a detail and a hint
//	notice <text>             sends a NOTICE, tag DO
//	begin | commit | rollback transaction status I -> T (-> E on error) -> I
//	set timezone <tz>         reports TimeZone through ParameterStatus
//	sleep                     blocks until its context is canceled
//	panic                     panics
//	copy ... from stdin [csv|binary]
//	                          reads rows with copyfmt; adds up their first
//	                          fields into testBackend.copySum; tag COPY <rows>
//	copy ... to stdout [csv [header]|binary]
//	                          writes the rows (1,'one'), (2,NULL), (3,'a,b')

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/cairn-db/cairn/pgwire/copyfmt"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/jackc/pgerrcode"
)

const (
	oidInt4 = 23
	oidInt8 = 20
	oidText = 25
)

type testBackend struct {
	roles   map[string]Role
	noSleep bool // sleep returns at once (fuzzing must not hang)

	mu       sync.Mutex
	copySum  int64
	copyRows int64
	sleeping chan context.Context // receives the ctx of each running sleep, if non-nil
	closed   int                  // sessions closed
	// syncs records, per Sync, whether its context could be cancelled.
	syncs []bool
}

// setSleeping and sleepingCh guard sleeping with mu: the test sets it
// while the server's goroutines run, and a query sent over the network
// is no happens-before edge the race detector sees.
func (b *testBackend) setSleeping(ch chan context.Context) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sleeping = ch
}

func (b *testBackend) sleepingCh() chan context.Context {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sleeping
}

func newTestBackend() *testBackend {
	return &testBackend{roles: map[string]Role{"postgres": {Name: "postgres", CanLogin: true, Superuser: true}}}
}

func (b *testBackend) copiedSum() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.copySum
}

// setRole adds or replaces a role. Connections served earlier may still be
// looking roles up, so it takes the lock LookupRole does.
func (b *testBackend) setRole(r Role) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.roles[r.Name] = r
}

func (b *testBackend) LookupRole(_ context.Context, name string) (Role, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.roles[name]
	if !ok {
		return Role{}, fmt.Errorf("role %q: %w", name, ErrRoleNotFound)
	}
	return r, nil
}

func (b *testBackend) NewSession(_ context.Context, info StartupInfo) (Session, error) {
	if info.Database != "postgres" {
		return nil, pgerror.New(pgerrcode.InvalidCatalogName, "database %q does not exist", info.Database)
	}
	return &testSession{b: b, txn: TxnIdle}, nil
}

type testSession struct {
	b   *testBackend
	txn TxnStatus
}

func (s *testSession) ParameterStatus() map[string]string {
	return map[string]string{"is_superuser": "on"}
}

func (s *testSession) TxnStatus() TxnStatus { return s.txn }
func (s *testSession) Sync(ctx context.Context, w ResultWriter) error {
	s.b.mu.Lock()
	s.b.syncs = append(s.b.syncs, ctx.Done() != nil)
	s.b.mu.Unlock()
	return nil
}

// QuickSync: outside begin ... commit there is nothing to end.
func (s *testSession) QuickSync() bool { return s.txn == TxnIdle }

func (s *testSession) Close() {
	s.b.mu.Lock()
	s.b.closed++
	s.b.mu.Unlock()
}

func (s *testSession) SimpleQuery(ctx context.Context, sql string, w ResultWriter) error {
	var stmts []string
	for _, piece := range strings.Split(sql, ";") {
		if p := strings.TrimSpace(piece); p != "" {
			stmts = append(stmts, p)
		}
	}
	if len(stmts) == 0 {
		return w.EmptyQuery()
	}
	for _, text := range stmts {
		p, err := s.plan(text, nil)
		if err != nil {
			return s.failed(err)
		}
		portal := &testPortal{s: s, plan: p, cols: p.cols}
		if p.rows != nil {
			if portal.rows, err = p.rows(nil); err != nil {
				return s.failed(err)
			}
			if err := w.BeginRows(p.cols); err != nil {
				return err
			}
		}
		if _, err := portal.Execute(ctx, w, 0); err != nil {
			return err
		}
	}
	return nil
}

// failed moves an open transaction to the failed state.
func (s *testSession) failed(err error) error {
	if err != nil && s.txn == TxnActive {
		s.txn = TxnFailed
	}
	return err
}

func (s *testSession) Prepare(_ context.Context, sql string, paramOIDs []uint32) (Statement, error) {
	sql = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(sql), ";"))
	p, err := s.plan(sql, paramOIDs)
	if err != nil {
		return nil, s.failed(err)
	}
	return &testStmt{s: s, plan: p}, nil
}

// testPlan is a parsed statement: either rows computed from arguments, or
// an exec function that writes its own results.
type testPlan struct {
	cols    []Column
	params  []uint32
	rows    func(args []int64) ([][]any, error)
	exec    func(ctx context.Context, w ResultWriter) error
	txnCtrl bool // allowed in a failed transaction
}

func col(name string, oid uint32) Column {
	size := int16(-1)
	switch oid {
	case oidInt4:
		size = 4
	case oidInt8:
		size = 8
	}
	return Column{Name: name, TypeOID: oid, TypeSize: size, TypeModifier: -1}
}

func (s *testSession) plan(sql string, _ []uint32) (*testPlan, error) {
	lower := strings.ToLower(sql)
	f := strings.Fields(lower)
	syntax := func() error {
		return WithPosition(pgerror.New(pgerrcode.SyntaxError, "syntax error at or near %q", f[0]), 1)
	}
	if len(f) == 0 {
		return &testPlan{exec: func(_ context.Context, w ResultWriter) error { return w.EmptyQuery() }}, nil
	}
	switch {
	case lower == "select $1::int8":
		return &testPlan{cols: []Column{col("int8", oidInt8)}, params: []uint32{oidInt8},
			rows: func(args []int64) ([][]any, error) { return [][]any{{args[0]}}, nil }}, nil
	case lower == `select "n" from "t"`:
		return &testPlan{cols: []Column{col("n", oidInt8)},
			rows: func([]int64) ([][]any, error) { return nil, nil }}, nil
	case f[0] == "select" && strings.HasSuffix(lower, "::int8"):
		// pgx's simple protocol inlines the parameter: select '42'::int8.
		lit := strings.Trim(strings.TrimSuffix(strings.TrimPrefix(lower, "select"), "::int8"), " ()'")
		v, err := strconv.ParseInt(lit, 10, 64)
		if err != nil {
			return nil, syntax()
		}
		return &testPlan{cols: []Column{col("int8", oidInt8)},
			rows: func([]int64) ([][]any, error) { return [][]any{{v}}, nil }}, nil
	case f[0] == "select" && len(f) == 2:
		v, err := strconv.ParseInt(f[1], 10, 32)
		if err != nil {
			return nil, syntax()
		}
		return &testPlan{cols: []Column{col("?column?", oidInt4)},
			rows: func([]int64) ([][]any, error) { return [][]any{{v}}, nil }}, nil
	case f[0] == "generate" && len(f) == 2:
		n, err := strconv.Atoi(f[1])
		if err != nil {
			return nil, syntax()
		}
		return &testPlan{cols: []Column{col("n", oidInt8)}, rows: func([]int64) ([][]any, error) {
			rows := make([][]any, n)
			for i := range rows {
				rows[i] = []any{int64(i + 1)}
			}
			return rows, nil
		}}, nil
	case f[0] == "error" && len(f) == 3:
		pos, _ := strconv.Atoi(f[2])
		code := strings.ToUpper(f[1])
		return &testPlan{exec: func(context.Context, ResultWriter) error {
			return WithPosition(pgerror.New(code, "injected error").WithDetail("some detail").WithHint("some hint").WithWhere("some context").WithTable("s", "t").WithColumn("c").WithConstraint("k"), pos)
		}}, nil
	case f[0] == "notice":
		msg := strings.TrimSpace(sql[len("notice"):])
		return &testPlan{exec: func(_ context.Context, w ResultWriter) error {
			if err := w.Notice(Notice{Message: msg, Detail: "notice detail"}); err != nil {
				return err
			}
			return w.Complete("DO")
		}}, nil
	case lower == "begin":
		return &testPlan{exec: func(_ context.Context, w ResultWriter) error {
			s.txn = TxnActive
			return w.Complete("BEGIN")
		}}, nil
	case lower == "commit" || lower == "rollback":
		return &testPlan{txnCtrl: true, exec: func(_ context.Context, w ResultWriter) error {
			tag := "COMMIT"
			if lower == "rollback" || s.txn == TxnFailed {
				tag = "ROLLBACK"
			}
			s.txn = TxnIdle
			return w.Complete(tag)
		}}, nil
	case len(f) == 3 && f[0] == "set" && f[1] == "timezone":
		tz := strings.Fields(sql)[2]
		return &testPlan{exec: func(_ context.Context, w ResultWriter) error {
			if err := w.ParameterStatus("TimeZone", tz); err != nil {
				return err
			}
			return w.Complete("SET")
		}}, nil
	case lower == "sleep":
		return &testPlan{exec: func(ctx context.Context, w ResultWriter) error {
			if s.b.noSleep {
				return w.Complete("SLEEP")
			}
			if ch := s.b.sleepingCh(); ch != nil {
				ch <- ctx
			}
			<-ctx.Done()
			return fmt.Errorf("sleep interrupted: %w", ctx.Err())
		}}, nil
	case lower == "panic":
		return &testPlan{exec: func(context.Context, ResultWriter) error { panic("test session panic") }}, nil
	case f[0] == "copy" && strings.Contains(lower, "from stdin"):
		return &testPlan{exec: func(ctx context.Context, w ResultWriter) error { return s.copyIn(ctx, lower, w) }}, nil
	case f[0] == "copy" && strings.Contains(lower, "to stdout"):
		return &testPlan{exec: func(_ context.Context, w ResultWriter) error { return s.copyOut(lower, w) }}, nil
	}
	return nil, syntax()
}

func copyOptions(lower string) copyfmt.Options {
	o := copyfmt.Options{Format: copyfmt.Text}
	switch {
	case strings.Contains(lower, "binary"):
		o.Format = copyfmt.Binary
	case strings.Contains(lower, "csv"):
		o.Format = copyfmt.CSV
	}
	o.Header = strings.Contains(lower, "header")
	return o
}

func (s *testSession) copyIn(ctx context.Context, lower string, w ResultWriter) error {
	opts := copyOptions(lower)
	f := CopyFormat{Binary: opts.Format == copyfmt.Binary, Columns: []int16{0}}
	if f.Binary {
		f.Columns[0] = 1
	}
	in, err := w.CopyIn(ctx, f)
	if err != nil {
		return err
	}
	r := copyfmt.NewReader(in.Reader(), opts)
	var n, sum int64
	for {
		row, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("COPY t, line %d: %w", r.Line()+1, err)
		}
		if len(row) == 0 || row[0] == nil {
			n++
			continue
		}
		var v int64
		if opts.Format == copyfmt.Binary {
			if len(row[0]) != 8 {
				return pgerror.New(pgerrcode.InvalidBinaryRepresentation, "incorrect binary data format")
			}
			v = int64(binary.BigEndian.Uint64(row[0]))
		} else if v, err = strconv.ParseInt(string(row[0]), 10, 64); err != nil {
			return pgerror.New(pgerrcode.InvalidTextRepresentation, "invalid input syntax for type bigint: %q", row[0])
		}
		n++
		sum += v
	}
	s.b.mu.Lock()
	s.b.copySum += sum
	s.b.copyRows += n
	s.b.mu.Unlock()
	return w.Complete(fmt.Sprintf("COPY %d", n))
}

var copyOutRows = [][][]byte{{[]byte("1"), []byte("one")}, {[]byte("2"), nil}, {[]byte("3"), []byte("a,b")}}

func (s *testSession) copyOut(lower string, w ResultWriter) error {
	opts := copyOptions(lower)
	f := CopyFormat{Binary: opts.Format == copyfmt.Binary, Columns: []int16{0, 0}}
	if f.Binary {
		f.Columns = []int16{1, 1}
	}
	out, err := w.CopyOut(f)
	if err != nil {
		return err
	}
	var buf []byte
	if f.Binary {
		buf = copyfmt.AppendBinaryHeader(buf)
	} else if opts.Header {
		buf = copyfmt.AppendRow(buf, [][]byte{[]byte("n"), []byte("name")}, opts)
	}
	for _, row := range copyOutRows {
		if f.Binary {
			n, _ := strconv.ParseInt(string(row[0]), 10, 64)
			buf = copyfmt.AppendBinaryTuple(buf, [][]byte{binary.BigEndian.AppendUint64(nil, uint64(n)), row[1]})
		} else {
			buf = copyfmt.AppendRow(buf, row, opts)
		}
		if _, err := out.Write(buf); err != nil {
			return err
		}
		buf = buf[:0]
	}
	if f.Binary {
		if _, err := out.Write(copyfmt.AppendBinaryTrailer(nil)); err != nil {
			return err
		}
	}
	if err := out.Done(); err != nil {
		return err
	}
	return w.Complete(fmt.Sprintf("COPY %d", len(copyOutRows)))
}

type testStmt struct {
	s    *testSession
	plan *testPlan
}

func (st *testStmt) ParamOIDs() []uint32 { return st.plan.params }
func (st *testStmt) Columns() []Column   { return st.plan.cols }
func (st *testStmt) Close()              {}

func (st *testStmt) Bind(_ context.Context, p BindParams) (Portal, error) {
	args := make([]int64, len(p.Values))
	for i, v := range p.Values {
		switch {
		case v == nil:
			return nil, pgerror.New(pgerrcode.NullValueNotAllowedDataException, "test session takes no NULL parameters")
		case p.Formats[i] == 1:
			if len(v) != 8 {
				return nil, pgerror.New(pgerrcode.InvalidBinaryRepresentation, "incorrect binary data format in bind parameter %d", i+1)
			}
			args[i] = int64(binary.BigEndian.Uint64(v))
		default:
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				return nil, pgerror.New(pgerrcode.InvalidTextRepresentation, "invalid input syntax for type bigint: %q", v)
			}
			args[i] = n
		}
	}
	portal := &testPortal{s: st.s, plan: st.plan}
	for i, c := range st.plan.cols {
		c.Format = p.ResultFormats[i]
		portal.cols = append(portal.cols, c)
	}
	if st.plan.rows != nil {
		var err error
		if portal.rows, err = st.plan.rows(args); err != nil {
			return nil, err
		}
	}
	return portal, nil
}

type testPortal struct {
	s    *testSession
	plan *testPlan
	cols []Column
	rows [][]any
	pos  int
}

func (p *testPortal) Columns() []Column { return p.cols }
func (p *testPortal) Close()            {}

func (p *testPortal) Execute(ctx context.Context, w ResultWriter, maxRows int) (bool, error) {
	if p.s.txn == TxnFailed && !p.plan.txnCtrl {
		return false, pgerror.New(pgerrcode.InFailedSQLTransaction,
			"current transaction is aborted, commands ignored until end of transaction block")
	}
	if p.plan.exec != nil {
		return false, p.s.failed(p.plan.exec(ctx, w))
	}
	// Like PostgreSQL: no look-ahead, so a portal whose last row was just
	// sent still suspends, and the tag counts this Execute's rows.
	n := 0
	for ; ; n++ {
		if maxRows > 0 && n == maxRows {
			return true, nil
		}
		if p.pos == len(p.rows) {
			break
		}
		vals := make([][]byte, len(p.cols))
		for i, c := range p.cols {
			vals[i] = encode(p.rows[p.pos][i].(int64), c)
		}
		if err := w.WriteRow(vals); err != nil {
			return false, err
		}
		p.pos++
	}
	return false, w.Complete(fmt.Sprintf("SELECT %d", n))
}

func encode(v int64, c Column) []byte {
	if c.Format == 0 {
		return strconv.AppendInt(nil, v, 10)
	}
	if c.TypeOID == oidInt4 {
		return binary.BigEndian.AppendUint32(nil, uint32(v))
	}
	return binary.BigEndian.AppendUint64(nil, uint64(v))
}
