package session

import (
	"context"
	"errors"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/parser"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// AS OF SYSTEM TIME (CockroachDB's historical reads; the parser's
// dialect_aost.go turns the syntax into Statement.AsOf and the SET LOCAL
// cairn_as_of_system_time of BEGIN and SET TRANSACTION). A transaction
// with a system time reads at exactly that timestamp through
// kv.DB.NewAsOfTxn: no uncertainty restarts (a value written after the
// timestamp in real time cannot have happened before a read of the past),
// read-only (a write is 25006), registered with the GC protection. The
// timestamp is fixed once the transaction has one: a second, different
// one is an error, as is one given after the transaction began reading.
//
// The expression is evaluated once, when the statement (or BEGIN / SET
// TRANSACTION) runs:
//
//   - a string: a decimal is an HLC timestamp (wall nanoseconds, then ten
//     digits of logical: '1234567890.0000000001'), a negative interval is
//     relative to now ('-10s'), anything else a timestamp ('2026-01-01
//     10:00:00', in the session's time zone when it has none);
//   - an integer or decimal constant: an HLC timestamp as above;
//   - a cast of a string to timestamp[tz], interval or decimal;
//   - follower_read_timestamp(): now − FollowerReadOffset;
//   - with_max_staleness(interval [, nearest_only]),
//     with_min_timestamp(timestamp [, nearest_only]): bounded staleness,
//     only for a single statement outside a block: the read may use any
//     timestamp from the bound to now, and uses the newest its nearest
//     replicas serve without waiting (boundedStalenessTS).
//
// A timestamp in the future is 22023 ("cannot specify timestamp in the
// future", CockroachDB's text); one below a tablet's GC threshold fails
// its read with 72000 snapshot_too_old (faults.go).

// FollowerReadOffset is how far behind now follower_read_timestamp()
// reads: CockroachDB's default (a closed-timestamp target of 3 s plus
// 1.2 s of margin for the closing to reach the followers).
const FollowerReadOffset = 4200 * time.Millisecond

// asOf is an evaluated AS OF SYSTEM TIME.
type asOf struct {
	ts hlc.Timestamp
	// bounded: with_max_staleness / with_min_timestamp; ts is the bound,
	// the oldest timestamp the read may use.
	bounded bool
	// nearestOnly: the bounded read fails rather than leave its nearest
	// replicas when they cannot serve the bound (the functions' second
	// argument, false by default, as in CockroachDB).
	nearestOnly bool
}

// evalAsOf evaluates an AS OF SYSTEM TIME expression.
func (s *Session) evalAsOf(e *pg_query.Node) (asOf, error) {
	clock := s.b.db.Clock()
	now := clock.Now()
	var a asOf
	var err error
	switch {
	case e.GetFuncCall() != nil:
		a, err = s.evalAsOfFunc(e.GetFuncCall(), now)
	default:
		var ts hlc.Timestamp
		ts, err = s.asOfConst(e, now)
		a = asOf{ts: ts}
	}
	if err != nil {
		return asOf{}, err
	}
	if now.Less(a.ts) {
		return asOf{}, pgerror.New(pgerrcode.InvalidParameterValue, "AS OF SYSTEM TIME: cannot specify timestamp in the future (%s > %s)", a.ts, now)
	}
	return a, nil
}

func (s *Session) evalAsOfFunc(f *pg_query.FuncCall, now hlc.Timestamp) (asOf, error) {
	name := ""
	if n := len(f.Funcname); n > 0 {
		name = f.Funcname[n-1].GetString_().GetSval()
	}
	switch name {
	case "follower_read_timestamp":
		if len(f.Args) != 0 {
			return asOf{}, pgerror.New(pgerrcode.UndefinedFunction, "follower_read_timestamp() takes no arguments")
		}
		return asOf{ts: hlc.Timestamp{WallTime: now.WallTime - FollowerReadOffset.Nanoseconds()}}, nil
	case "with_max_staleness":
		if len(f.Args) < 1 || len(f.Args) > 2 {
			return asOf{}, pgerror.New(pgerrcode.UndefinedFunction, "with_max_staleness takes an interval and an optional boolean")
		}
		v, err := s.asOfDatum(f.Args[0], types.Interval)
		if err != nil {
			return asOf{}, err
		}
		iv := v.(types.DInterval)
		d := intervalNanos(iv)
		if d < 0 {
			return asOf{}, pgerror.New(pgerrcode.InvalidParameterValue, "interval duration for with_max_staleness must be greater or equal to 0")
		}
		nearest, err := s.asOfNearestOnly(f.Args)
		if err != nil {
			return asOf{}, err
		}
		return asOf{ts: hlc.Timestamp{WallTime: now.WallTime - d}, bounded: true, nearestOnly: nearest}, nil
	case "with_min_timestamp":
		if len(f.Args) < 1 || len(f.Args) > 2 {
			return asOf{}, pgerror.New(pgerrcode.UndefinedFunction, "with_min_timestamp takes a timestamp and an optional boolean")
		}
		v, err := s.asOfDatum(f.Args[0], types.TimestampTZ)
		if err != nil {
			return asOf{}, err
		}
		nearest, err := s.asOfNearestOnly(f.Args)
		if err != nil {
			return asOf{}, err
		}
		return asOf{ts: hlc.Timestamp{WallTime: int64(v.(types.DTimestampTZ)) * 1000}, bounded: true, nearestOnly: nearest}, nil
	}
	return asOf{}, errAsOfExpr
}

// asOfNearestOnly reads a bounded-staleness function's optional second
// argument, nearest_only (a boolean constant).
func (s *Session) asOfNearestOnly(args []*pg_query.Node) (bool, error) {
	if len(args) < 2 {
		return false, nil
	}
	e := args[1]
	if tc := e.GetTypeCast(); tc != nil {
		e = tc.Arg
	}
	if b, ok := e.GetAConst().GetVal().(*pg_query.A_Const_Boolval); ok {
		return b.Boolval.Boolval, nil
	}
	v, err := s.asOfDatum(e, types.Bool)
	if err != nil {
		return false, err
	}
	return bool(v.(types.DBool)), nil
}

var errAsOfExpr = pgerror.New(pgerrcode.SyntaxError, "AS OF SYSTEM TIME: only constant expressions, with_min_timestamp, with_max_staleness, or follower_read_timestamp are allowed")

// asOfDatum reads a function argument: a string constant, or a cast of
// one, as t.
func (s *Session) asOfDatum(e *pg_query.Node, t *types.T) (types.Datum, error) {
	if tc := e.GetTypeCast(); tc != nil {
		e = tc.Arg
	}
	str, ok := asOfString(e)
	if !ok {
		return nil, errAsOfExpr
	}
	d, err := types.ParseDatum(s.typesCtx(), t, str)
	if err != nil {
		return nil, pgerror.New(pgerrcode.InvalidParameterValue, "AS OF SYSTEM TIME: %v", err)
	}
	return d, nil
}

func asOfString(e *pg_query.Node) (string, bool) {
	c := e.GetAConst()
	if c == nil || c.Isnull {
		return "", false
	}
	switch v := c.Val.(type) {
	case *pg_query.A_Const_Sval:
		return v.Sval.Sval, true
	case *pg_query.A_Const_Ival:
		return strconv.FormatInt(int64(v.Ival.Ival), 10), true
	case *pg_query.A_Const_Fval:
		return v.Fval.Fval, true
	}
	return "", false
}

// asOfConst evaluates a constant (or a cast of one) to a timestamp.
func (s *Session) asOfConst(e *pg_query.Node, now hlc.Timestamp) (hlc.Timestamp, error) {
	cast := ""
	if tc := e.GetTypeCast(); tc != nil {
		if n := len(tc.TypeName.GetNames()); n > 0 {
			cast = tc.TypeName.Names[n-1].GetString_().GetSval()
		}
		e = tc.Arg
	}
	str, ok := asOfString(e)
	if !ok {
		return hlc.Timestamp{}, errAsOfExpr
	}
	str = strings.TrimSpace(str)
	_, isString := e.GetAConst().GetVal().(*pg_query.A_Const_Sval)
	switch {
	case cast == "numeric" || cast == "decimal" || (cast == "" && (!isString || isDecimal(str))):
		return parseHLC(str)
	case cast == "interval" || (cast == "" && isInterval(s, str)):
		d, err := types.ParseDatum(s.typesCtx(), types.Interval, str)
		if err != nil {
			return hlc.Timestamp{}, pgerror.New(pgerrcode.InvalidParameterValue, "AS OF SYSTEM TIME: %v", err)
		}
		n := intervalNanos(d.(types.DInterval))
		if n >= 0 {
			return hlc.Timestamp{}, pgerror.New(pgerrcode.InvalidParameterValue, "AS OF SYSTEM TIME: interval value %q too large, AS OF interval must be <= -1µs", str)
		}
		return hlc.Timestamp{WallTime: now.WallTime + n}, nil
	case cast == "" || cast == "timestamptz" || cast == "timestamp":
		d, err := types.ParseDatum(s.typesCtx(), types.TimestampTZ, str)
		if err != nil {
			return hlc.Timestamp{}, pgerror.New(pgerrcode.InvalidParameterValue, "AS OF SYSTEM TIME: value is neither timestamp, decimal, nor interval: %q", str)
		}
		return hlc.Timestamp{WallTime: int64(d.(types.DTimestampTZ)) * 1000}, nil
	}
	return hlc.Timestamp{}, errAsOfExpr
}

// isInterval: str reads as an interval (CockroachDB tries an interval
// before a timestamp).
func isInterval(s *Session, str string) bool {
	_, err := types.ParseDatum(s.typesCtx(), types.Interval, str)
	return err == nil
}

// isDecimal: digits with at most one point.
func isDecimal(s string) bool {
	if s == "" {
		return false
	}
	dot := false
	for _, c := range s {
		switch {
		case c == '.' && !dot:
			dot = true
		case c < '0' || c > '9':
			return false
		}
	}
	return true
}

// parseHLC reads CockroachDB's decimal form of an HLC timestamp: wall
// nanoseconds, optionally a point and ten digits of logical counter.
func parseHLC(s string) (hlc.Timestamp, error) {
	bad := pgerror.New(pgerrcode.InvalidParameterValue, "AS OF SYSTEM TIME: %q is not a valid HLC timestamp", s)
	whole, frac, _ := strings.Cut(s, ".")
	if !isDecimal(s) || len(frac) > 10 {
		return hlc.Timestamp{}, bad
	}
	wall, ok := new(big.Int).SetString(whole, 10)
	if !ok || !wall.IsInt64() {
		return hlc.Timestamp{}, bad
	}
	var logical int64
	if frac != "" {
		frac += strings.Repeat("0", 10-len(frac))
		l, err := strconv.ParseInt(frac, 10, 64)
		if err != nil || l > 1<<31-1 {
			return hlc.Timestamp{}, bad
		}
		logical = l
	}
	if wall.Int64() <= 0 && logical == 0 {
		return hlc.Timestamp{}, pgerror.New(pgerrcode.InvalidParameterValue, "AS OF SYSTEM TIME: zero timestamp is invalid")
	}
	return hlc.Timestamp{WallTime: wall.Int64(), Logical: int32(logical)}, nil
}

// intervalNanos is an interval's length with 24-hour days and 30-day
// months (as CockroachDB counts them for AS OF SYSTEM TIME).
func intervalNanos(iv types.DInterval) int64 {
	const day = int64(24 * time.Hour)
	return iv.Micros*1000 + int64(iv.Days)*day + int64(iv.Months)*30*day
}

// stmtAsOf applies a SELECT's AS OF SYSTEM TIME before the statement
// touches the transaction: outside a block it gives the implicit
// transaction its timestamp (bounded staleness negotiates the read's
// timestamp here); inside one it must repeat the block's own.
func (s *Session) stmtAsOf(ctx context.Context, st *parser.Statement) error {
	if st == nil || st.AsOf == nil { // nil: the empty statement
		return nil
	}
	a, err := s.evalAsOf(st.AsOf)
	if err != nil {
		return err
	}
	if s.block {
		if a.bounded {
			return pgerror.New(pgerrcode.FeatureNotSupported, "bounded staleness reads (with_max_staleness, with_min_timestamp) are only supported in single-statement implicit transactions")
		}
		if s.txnAsOf.IsEmpty() {
			return pgerror.New(pgerrcode.ActiveSQLTransaction, "AS OF SYSTEM TIME: a statement inside an explicit transaction takes the transaction's timestamp; use BEGIN AS OF SYSTEM TIME")
		}
		// The expression was evaluated now, so only a fixed timestamp can
		// repeat the block's: CockroachDB's rule.
		if a.ts != s.txnAsOf {
			return pgerror.New(pgerrcode.ActiveSQLTransaction, "inconsistent AS OF SYSTEM TIME timestamp; expected: %s", s.txnAsOf)
		}
		return nil
	}
	// txnStmts: an earlier statement of the transaction read without a
	// kv.Txn (implicit.go).
	if s.txn != nil || s.txnStmts > 0 || s.multiImplicit {
		return pgerror.New(pgerrcode.ActiveSQLTransaction, "AS OF SYSTEM TIME: a statement of several in one implicit transaction cannot have its own timestamp")
	}
	if a.bounded {
		if a.ts, err = s.boundedStalenessTS(ctx, st, a); err != nil {
			return err
		}
	}
	s.txnAsOf, s.txnReadOnly = a.ts, true
	return nil
}

// boundedStalenessTS negotiates the timestamp of a bounded-staleness read
// whose oldest acceptable timestamp is a.ts (CockroachDB's negotiation,
// kv.DB.NegotiateBoundedStaleness): the newest timestamp every replica
// the statement's tables are read from first serves without waiting, the
// present when they are leaseholders, a follower's closed timestamp
// otherwise, never older than the bound. When those replicas cannot serve
// the bound the read takes the bound and goes to the leaseholders, or,
// with nearest_only, fails (55000, CockroachDB's message).
//
// The tables are the statement's named relations, resolved in the present
// catalog (as CockroachDB plans a bounded read with its newest
// descriptors), a view standing for the tables it reads, each read over
// its whole span: the negotiation does not wait for the plan to know
// which rows it reads. A sequence's value is not negotiated over.
func (s *Session) boundedStalenessTS(ctx context.Context, st *parser.Statement, a asOf) (hlc.Timestamp, error) {
	spans, err := s.boundedSpans(ctx, st)
	if err != nil {
		return hlc.Timestamp{}, err
	}
	b, err := s.b.db.NegotiateBoundedStaleness(ctx, spans, a.ts)
	if err != nil {
		return hlc.Timestamp{}, err
	}
	if a.nearestOnly && !b.Satisfied() {
		return hlc.Timestamp{}, pgerror.New(pgerrcode.ObjectNotInPrerequisiteState, "bounded staleness read with minimum timestamp bound of %s could not be satisfied by a local resolved timestamp of %s", a.ts, b.Resolved)
	}
	return b.Timestamp, nil
}

// boundedSpans lists the spans of the tables st names, and of those the
// views it names read, resolved at the present in a transaction of their
// own. A name that resolves to nothing (a CTE's) reads no table.
func (s *Session) boundedSpans(ctx context.Context, st *parser.Statement) ([]kvpb.Span, error) {
	txn := s.b.db.NewTxn(ctx, "bounded staleness negotiation", kv.Snapshot)
	defer func() { _ = txn.Rollback(ctx) }()
	cat := s.resolver(txn)
	var rvs []*pg_query.RangeVar
	parser.WalkAST(st.AST.GetStmt(), func(n *pg_query.Node) bool {
		if rv := n.GetRangeVar(); rv != nil {
			rvs = append(rvs, rv)
		}
		return true
	})
	var spans []kvpb.Span
	seen := map[catalog.ID]bool{}
	var views []catalog.ID
	addTable := func(t *catalog.Table) error {
		if seen[t.ID] {
			return nil
		}
		seen[t.ID] = true
		l, err := t.SharedLayout()
		if err != nil {
			return err
		}
		spans = append(spans, l.TableSpans()...)
		return nil
	}
	for _, rv := range rvs {
		rel, err := cat.LookupRelation(ctx, rv.Schemaname, rv.Relname)
		if err != nil {
			var pe *pgerror.Error
			if errors.As(err, &pe) && pe.Code == pgerrcode.UndefinedTable {
				continue
			}
			return nil, err
		}
		switch {
		case rel.Table != nil:
			if err := addTable(rel.Table); err != nil {
				return nil, err
			}
		case rel.View != nil:
			views = append(views, rel.View.DependsOn...)
		}
	}
	// What views read, views over views included.
	r := s.catalogReader(txn)
	for len(views) > 0 {
		id := views[len(views)-1]
		views = views[:len(views)-1]
		if seen[id] {
			continue
		}
		d, err := r.ByID(ctx, id)
		if err != nil {
			return nil, err
		}
		switch d := d.(type) {
		case *catalog.Table:
			if err := addTable(d); err != nil {
				return nil, err
			}
		case *catalog.View:
			seen[id] = true
			views = append(views, d.DependsOn...)
		}
	}
	return spans, nil
}

// setTxnAsOf runs SET LOCAL cairn_as_of_system_time = 'e' (BEGIN AS OF
// SYSTEM TIME e, SET TRANSACTION AS OF SYSTEM TIME e).
func (s *Session) setTxnAsOf(text string) error {
	if !s.block {
		return pgerror.New(pgerrcode.NoActiveSQLTransaction, "SET TRANSACTION AS OF SYSTEM TIME can only be used in transaction blocks")
	}
	stmts, err := parser.Parse("SELECT " + text)
	if err != nil || len(stmts) != 1 || len(stmts[0].AST.GetStmt().GetSelectStmt().GetTargetList()) != 1 {
		return pgerror.New(pgerrcode.SyntaxError, "AS OF SYSTEM TIME: invalid expression %q", text)
	}
	e := stmts[0].AST.GetStmt().GetSelectStmt().GetTargetList()[0].GetResTarget().GetVal()
	if e == nil {
		return errAsOfExpr
	}
	a, err := s.evalAsOf(e)
	if err != nil {
		return err
	}
	if a.bounded {
		return pgerror.New(pgerrcode.FeatureNotSupported, "bounded staleness reads (with_max_staleness, with_min_timestamp) are only supported in single-statement implicit transactions")
	}
	if s.txn != nil || s.txnStmts > 0 {
		return pgerror.New(pgerrcode.ActiveSQLTransaction, "SET TRANSACTION AS OF SYSTEM TIME must be called before any query")
	}
	s.txnAsOf, s.txnReadOnly = a.ts, true
	return nil
}

// asOfSetText returns e of the parser's SET LOCAL cairn_as_of_system_time
// = 'e', or false when n is another SET.
func asOfSetText(n *pg_query.VariableSetStmt) (string, bool) {
	if n == nil || n.Name != parser.AsOfName || n.Kind != pg_query.VariableSetKind_VAR_SET_VALUE || len(n.Args) != 1 {
		return "", false
	}
	v, ok := asOfString(n.Args[0])
	return v, ok
}

// beginAsOf applies a derived statement of BEGIN: its AS OF SYSTEM TIME.
func (s *Session) beginAsOf(d *parser.Statement) error {
	text, ok := asOfSetText(d.AST.GetStmt().GetVariableSetStmt())
	if !ok {
		return pgerror.New(pgerrcode.InternalError, "unexpected statement derived from BEGIN: %s", d.SQL)
	}
	return s.setTxnAsOf(text)
}
