package session

import (
	"context"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/cairn-db/cairn/pgwire"
	"github.com/cairn-db/cairn/sql/parser"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// SQL cursors (DECLARE, FETCH, MOVE, CLOSE): psycopg2's named cursors and
// similar server-side cursors. A cursor is a running plan kept in the
// session until CLOSE or the end of its transaction; only forward fetches
// are supported (Cairn's plans do not scroll).
//
// A cursor WITH HOLD (Django's QuerySet.iterator() in autocommit declares
// one) outlives its transaction: its rows are read to the end at DECLARE,
// in the declaring transaction's snapshot, and kept in the session's
// memory until CLOSE or the session ends. PostgreSQL reads them at COMMIT
// instead, from the same snapshot, so the rows are the same; the
// difference is when an error in the query shows (at DECLARE here). A held
// cursor goes away if its declaring transaction rolls back, as in
// PostgreSQL.

// Cursor options of DeclareCursorStmt (PostgreSQL's CURSOR_OPT_*).
const (
	cursorOptScroll = 0x0002
	cursorOptHold   = 0x0020
)

func (s *Session) declareCursor(x *stmtState, st *parser.Statement, n *pg_query.DeclareCursorStmt, w pgwire.ResultWriter) error {
	hold := n.Options&cursorOptHold != 0
	if !s.block && !hold {
		return pgerror.New(pgerrcode.NoActiveSQLTransaction, "DECLARE CURSOR can only be used in transaction blocks")
	}
	if n.Options&cursorOptScroll != 0 {
		return notSupported("DECLARE SCROLL CURSOR is not supported")
	}
	if _, ok := s.sqlCursors[n.Portalname]; ok {
		return pgerror.New(pgerrcode.DuplicateCursor, "cursor %q already exists", n.Portalname)
	}
	inner := *st
	inner.AST = &pg_query.RawStmt{Stmt: n.Query}
	if _, ok := node(&inner).(*pg_query.Node_SelectStmt); !ok {
		return pgerror.New(pgerrcode.InvalidCursorDefinition, "cursor %q must be a SELECT", n.Portalname)
	}
	c, err := s.startPlan(x, &inner, nil, nil, nil)
	if err != nil {
		return err
	}
	if s.sqlCursors == nil {
		s.sqlCursors = make(map[string]*cursor)
	}
	// is_binary stays false: FETCH sends text whatever DECLARE said.
	c.declared = &plan.SessionCursor{Name: n.Portalname, Statement: st.Original, Holdable: hold, Created: time.Now()}
	if hold {
		if err := c.materialize(x.ctx); err != nil {
			return err
		}
	}
	s.sqlCursors[n.Portalname] = c
	return w.Complete("DECLARE CURSOR")
}

// DescribeCursor implements pgwire.CursorDescriber: a declared cursor's
// rows, in text (FETCH sends text).
func (s *Session) DescribeCursor(name string) ([]pgwire.Column, bool) {
	c, ok := s.sqlCursors[name]
	if !ok {
		return nil, false
	}
	return describeColumns(c.cols, nil), true
}

// cursorRows lists the open SQL cursors for pg_cursors, by name. None can
// be scrolled (refused at DECLARE).
func (s *Session) cursorRows() []plan.SessionCursor {
	out := make([]plan.SessionCursor, 0, len(s.sqlCursors))
	for _, c := range s.sqlCursors {
		out = append(out, *c.declared)
	}
	slices.SortFunc(out, func(a, b plan.SessionCursor) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// lookupCursor returns an open SQL cursor (34000 if none).
func (s *Session) lookupCursor(name string) (*cursor, error) {
	c, ok := s.sqlCursors[name]
	if !ok {
		return nil, pgerror.New(pgerrcode.InvalidCursorName, "cursor %q does not exist", name)
	}
	return c, nil
}

func (s *Session) fetch(x *stmtState, n *pg_query.FetchStmt, w pgwire.ResultWriter) error {
	c, err := s.lookupCursor(n.Portalname)
	if err != nil {
		return err
	}
	verb := "FETCH"
	if n.Ismove {
		verb = "MOVE"
	}
	count := n.HowMany
	switch n.Direction {
	case pg_query.FetchDirection_FETCH_FORWARD:
	case pg_query.FetchDirection_FETCH_RELATIVE:
		if count < 1 {
			return notSupported("%s RELATIVE %d is not supported: cursors only move forward", verb, count)
		}
	default:
		return notSupported("%s in this direction is not supported: cursors only move forward", verb)
	}
	if count == math.MaxInt64 || count <= 0 && n.Direction == pg_query.FetchDirection_FETCH_FORWARD {
		count = math.MaxInt64 // FETCH ALL (and FORWARD 0 ... which Postgres refetches; here: none)
	}
	if n.Direction == pg_query.FetchDirection_FETCH_RELATIVE {
		// RELATIVE n skips n-1 rows and returns the nth.
		if _, err := c.advance(x.ctx, nil, count-1); err != nil {
			return err
		}
		count = 1
	}
	var out pgwire.ResultWriter // nil: MOVE sends no rows
	if !n.Ismove {
		if err := w.BeginRows(c.columns(nil)); err != nil {
			return err
		}
		out = w
	}
	got, err := c.advance(x.ctx, out, count)
	if err != nil {
		return err
	}
	return w.Complete(rowsTag(verb, got))
}

// advance moves the cursor up to n rows forward, sending them to w unless
// w is nil, and returns how many it moved.
func (c *cursor) advance(ctx context.Context, w pgwire.ResultWriter, n int64) (int64, error) {
	var got int64
	for got < n && !c.closed && !c.exhausted {
		row, err := c.rows.Next(ctx)
		if err != nil {
			return got, err
		}
		if row == nil {
			c.exhausted = true
			break
		}
		if w != nil {
			if err := c.writeRow(w, row); err != nil {
				return got, err
			}
		}
		got++
	}
	return got, nil
}

func (s *Session) closeCursor(n *pg_query.ClosePortalStmt, w pgwire.ResultWriter) error {
	if n.Portalname == "" {
		for name, c := range s.sqlCursors {
			c.close()
			delete(s.sqlCursors, name)
		}
		return w.Complete("CLOSE CURSOR ALL")
	}
	c, err := s.lookupCursor(n.Portalname)
	if err != nil {
		return err
	}
	c.close()
	delete(s.sqlCursors, n.Portalname)
	return w.Complete("CLOSE CURSOR")
}

// materialize reads a cursor's remaining rows into memory and ends its
// plan, so that the cursor no longer needs its transaction (WITH HOLD).
func (c *cursor) materialize(ctx context.Context) error {
	var rows [][]types.Datum
	for {
		row, err := c.rows.Next(ctx)
		if err != nil {
			c.close()
			return err
		}
		if row == nil {
			break
		}
		rows = append(rows, append([]types.Datum(nil), row...))
	}
	c.rows.Close()
	delete(c.s.cursors, c) // the transaction's end no longer closes it
	c.rows = &heldRows{rows: rows}
	c.held = true
	return nil
}

// heldRows are a held cursor's rows, read at DECLARE.
type heldRows struct {
	rows [][]types.Datum
	next int
}

func (h *heldRows) Next(context.Context) ([]types.Datum, error) {
	if h.next >= len(h.rows) {
		return nil, nil
	}
	h.next++
	return h.rows[h.next-1], nil
}

func (h *heldRows) Close()              { h.rows = nil }
func (h *heldRows) RowsAffected() int64 { return int64(h.next) }

// keepHeldCursors is what the end of a transaction leaves of the SQL
// cursors: the held ones, unless the transaction that declared them rolls
// back (committed: the transaction ended with a commit).
func (s *Session) keepHeldCursors(committed bool) map[string]*cursor {
	var keep map[string]*cursor
	for name, c := range s.sqlCursors {
		if !c.held || !committed && !c.heldCommitted {
			continue
		}
		c.heldCommitted = true
		if keep == nil {
			keep = map[string]*cursor{}
		}
		keep[name] = c
	}
	return keep
}
