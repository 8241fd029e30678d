package session

import (
	"context"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/pgwire"
	"github.com/cairn-db/cairn/sql/exec"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/types"
)

// cursor is a running plan whose rows go to the client, possibly across
// several Executes of a portal (max_rows suspension).
type cursor struct {
	s    *Session
	p    *plan.Plan
	rows exec.Rows
	cols []plan.Column
	// proj maps a visible column to its position in Root's rows, used
	// only if the executor's rows carry the hidden columns (exec.Start
	// strips them today).
	proj []int
	// formats are the result formats (nil: all text).
	formats []int16
	// tc prints values (the time zone, reg* names) as of the statement:
	// made at the first row from x's catalog reader over txn (typesCtx)
	// when the statement had not made it already.
	tc     *types.Context
	x      *stmtState
	txn    *kv.Txn
	sent   int64
	closed bool
	// exhausted: Next returned the end (a SQL cursor fetched to the end).
	exhausted bool
	// declared describes a DECLAREd cursor for pg_cursors (nil for a
	// protocol portal's).
	declared *plan.SessionCursor
	// held: a WITH HOLD cursor, its rows in memory (materialize);
	// heldCommitted: its declaring transaction committed, so a later
	// rollback leaves it open.
	held, heldCommitted bool
}

// initCursor makes c the cursor over rows, the result of p, and registers
// it with the session. c is the caller's (startExec: the statement's own).
func initCursor(c *cursor, s *Session, p *plan.Plan, rows exec.Rows) {
	*c = cursor{s: s, p: p, rows: rows, cols: p.Columns}
	if p.Root != nil {
		all := p.Root.Columns()
		if len(all) != len(p.Columns) {
			for i, col := range all {
				if !col.Hidden {
					c.proj = append(c.proj, i)
				}
			}
		}
	}
	if s.cursors == nil {
		s.cursors = make(map[*cursor]struct{})
	}
	s.cursors[c] = struct{}{}
}

// columns describes the result for RowDescription in formats. pgwire
// only reads the description, and a kept plan's instances share its
// columns, so the session keeps the last text-format one it made for
// the same columns (descCache): the simple protocol described the same
// plan anew for every statement.
func (c *cursor) columns(formats []int16) []pgwire.Column {
	if formats != nil {
		return describeColumns(c.cols, formats)
	}
	return c.s.describeText(c.cols)
}

// describeText describes cols in text format for RowDescription,
// through the session's descCache (see cursor.columns); pgwire only
// reads the result.
func (s *Session) describeText(cols []plan.Column) []pgwire.Column {
	if len(cols) == 0 {
		return nil
	}
	dc := &s.descCache
	if dc.of != &cols[0] || dc.n != len(cols) {
		dc.of, dc.n, dc.out = &cols[0], len(cols), describeColumns(cols, nil)
	}
	return dc.out
}

// descCache is the last text-format description cursor.columns made, of
// the n columns starting at of (holding of keeps them from being freed,
// so no other columns can later lie there).
type descCache struct {
	of  *plan.Column
	n   int
	out []pgwire.Column
}

func describeColumns(cols []plan.Column, formats []int16) []pgwire.Column {
	if len(cols) == 0 {
		return nil
	}
	out := make([]pgwire.Column, len(cols))
	for i, col := range cols {
		out[i] = pgwire.Column{
			Name:         col.Name,
			TableOID:     uint32(col.Table),
			ColumnNumber: uint16(col.TableCol),
			TypeOID:      col.T.Oid,
			TypeSize:     col.T.Size(),
			TypeModifier: col.T.Typmod(),
		}
		if i < len(formats) {
			out[i].Format = formats[i]
		}
	}
	return out
}

// drain sends up to maxRows rows (0: all) to w. When it stops at the
// limit it reports suspended without completing; otherwise it completes
// the statement with its tag.
func (c *cursor) drain(ctx context.Context, w pgwire.ResultWriter, maxRows int) (suspended bool, err error) {
	n := 0
	for {
		if maxRows > 0 && n >= maxRows {
			return true, nil
		}
		row, err := c.rows.Next(ctx)
		if err != nil {
			return false, err
		}
		if row == nil {
			break
		}
		if c.returnsRows() {
			if err := c.writeRow(w, row); err != nil {
				return false, err
			}
			n++
			c.sent++
		}
	}
	count := c.rows.RowsAffected()
	if c.p.Tag == "SELECT" {
		// Postgres tags each Execute of a portal with the rows that
		// Execute fetched (PortalRunSelect's nprocessed), not the total.
		count = int64(n)
	}
	c.s.noteMutations(c.p, count)
	c.close()
	return false, w.Complete(rowsTag(c.p.Tag, count))
}

// returnsRows: the client gets rows (a query, or DML with RETURNING),
// possibly of zero columns (SELECT FROM t).
func (c *cursor) returnsRows() bool { return len(c.cols) > 0 || c.p.Tag == "SELECT" }

// typesCtx is the cursor's type context (tc), made on first use.
func (c *cursor) typesCtx() *types.Context {
	if c.tc == nil && c.x != nil {
		x := c.x
		if x.tc == nil {
			// What x.types() makes, over the transaction the statement
			// started in (the cursor may be read after it ended).
			x.tc = x.s.regTypesOver(x.ctx, c.txn, x.reader(c.txn))
		}
		c.tc = x.tc
	}
	return c.tc
}

func (c *cursor) writeRow(w pgwire.ResultWriter, row []types.Datum) error {
	return c.s.encodeRow(w, c.cols, c.proj, c.formats, row, c)
}

// typesCtxer makes the type context a row's values print with, when the
// first value that needs it does (cursor, fastRead).
type typesCtxer interface {
	typesCtx() *types.Context
}

// encodeRow encodes row, of the columns cols in formats (nil: all text),
// and writes it to w; proj, when not nil and row is wider than cols, maps
// a column to its position in row. tcs makes the type context for the
// first value that reads it. Every result row of the session is encoded
// here (a cursor's, a kept point read's: fastread.go).
func (s *Session) encodeRow(w pgwire.ResultWriter, cols []plan.Column, proj []int, formats []int16, row []types.Datum, tcs typesCtxer) error {
	var tc *types.Context // made for the first value that needs it
	// The session's buffers (rowScratch): a writer keeps nothing of vals
	// past WriteRow, so every cursor's rows can be encoded in the same
	// ones. They were the cursor's, made per statement, and ends was
	// made per row.
	sc := &s.rowScratch
	if sc.buf == nil {
		sc.buf = make([]byte, 0, 256) // non-nil: an empty value is not NULL
	}
	if cap(sc.vals) < len(cols) {
		sc.vals = make([][]byte, len(cols))
		sc.ends = make([]int, len(cols))
	}
	buf := sc.buf[:0]
	vals, ends := sc.vals[:len(cols)], sc.ends[:len(cols)]
	defer func() {
		if cap(buf) <= maxKeptHeldBuf {
			sc.buf = buf
		}
		clear(vals)
	}()
	for i, col := range cols {
		d := row[i]
		if proj != nil && len(row) != len(cols) {
			d = row[proj[i]]
		}
		if d == nil || types.IsNull(d) {
			ends[i] = -1
			continue
		}
		if i < len(formats) && formats[i] == 1 {
			var err error
			if buf, err = types.EncodeBinary(buf, col.T, d); err != nil {
				return err
			}
		} else {
			if tc == nil && types.FormatUsesContext(d) {
				tc = tcs.typesCtx()
			}
			buf = types.AppendFormat(buf, tc, col.T, d)
		}
		ends[i] = len(buf)
	}
	start := 0
	for i, e := range ends {
		if e < 0 {
			vals[i] = nil
			continue
		}
		vals[i] = buf[start:e:e]
		start = e
	}
	return w.WriteRow(vals)
}

func (c *cursor) close() {
	if c.closed {
		return
	}
	c.closed = true
	c.rows.Close()
	delete(c.s.cursors, c)
}

// rowScratch is where cursors encode a row (cursor.writeRow).
type rowScratch struct {
	buf  []byte
	vals [][]byte
	ends []int
}
