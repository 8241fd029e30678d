package pgwire

import (
	"context"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgproto3"
)

// The extended query protocol. Statements are per connection and live
// until closed; portals live until closed or until their transaction ends
// (readyForQuery). The unnamed statement and portal are replaced silently;
// named ones must be closed before reuse, as in PostgreSQL.

func (c *conn) parse(ctx context.Context, m *pgproto3.Parse) error {
	if m.Name != "" {
		if _, ok := c.stmts[m.Name]; ok {
			return pgerror.New(pgerrcode.DuplicatePreparedStatement, "prepared statement %q already exists", m.Name)
		}
	}
	sctx := c.statementContext(ctx)
	stmt, err := c.sess.Prepare(sctx, m.Query, append([]uint32(nil), m.ParameterOIDs...))
	err = statementError(sctx, err)
	c.endStatement(sctx)
	if err != nil {
		return err
	}
	if old, ok := c.stmts[m.Name]; ok {
		old.Close()
	}
	c.stmts[m.Name] = stmt
	return c.send(&pgproto3.ParseComplete{}, 5)
}

func (c *conn) bind(ctx context.Context, m *pgproto3.Bind) error {
	stmt, ok := c.stmts[m.PreparedStatement]
	if !ok {
		return pgerror.New(pgerrcode.InvalidSQLStatementName, "prepared statement %q does not exist", m.PreparedStatement)
	}
	if m.DestinationPortal != "" {
		if _, ok := c.portal(m.DestinationPortal); ok {
			return pgerror.New(pgerrcode.DuplicateCursor, "portal %q already exists", m.DestinationPortal)
		}
	}
	nParams := len(stmt.ParamOIDs())
	if len(m.Parameters) != nParams {
		return pgerror.New(pgerrcode.ProtocolViolation, "bind message supplies %d parameters, but prepared statement %q requires %d",
			len(m.Parameters), m.PreparedStatement, nParams)
	}
	formats, err := expandFormats(m.ParameterFormatCodes, nParams, "parameter")
	if err != nil {
		return err
	}
	resultFormats, err := expandFormats(m.ResultFormatCodes, len(stmt.Columns()), "result")
	if err != nil {
		return err
	}
	params := BindParams{Values: m.Parameters, Formats: formats, ResultFormats: resultFormats}
	var portal Portal
	if qb, ok := stmt.(QuickBinder); ok && qb.QuickBind() {
		portal, err = stmt.Bind(ctx, params)
	} else {
		sctx := c.statementContext(ctx)
		portal, err = stmt.Bind(sctx, params)
		err = statementError(sctx, err)
		c.endStatement(sctx)
	}
	if err != nil {
		return err
	}
	c.setPortal(m.DestinationPortal, portal)
	return c.send(&pgproto3.BindComplete{}, 5)
}

// sameFormats back expandFormats' results that are all text or all
// binary, shared read-only (BindParams says so): two slices per Bind were
// allocated for what is nearly always "all text".
var sameFormats = [2][64]int16{{}, func() (a [64]int16) {
	for i := range a {
		a[i] = 1
	}
	return a
}()}

// expandFormats applies the Bind message's format-code rule: none means all
// text, one applies to all, otherwise exactly one per item.
func expandFormats(codes []int16, n int, what string) ([]int16, error) {
	if n <= len(sameFormats[0]) {
		switch {
		case len(codes) == 0:
			return sameFormats[0][:n:n], nil
		case len(codes) == 1 && (codes[0] == 0 || codes[0] == 1):
			return sameFormats[codes[0]][:n:n], nil
		}
	}
	out := make([]int16, n)
	switch {
	case len(codes) == 0:
	case len(codes) == 1:
		for i := range out {
			out[i] = codes[0]
		}
	case len(codes) == n:
		copy(out, codes)
	default:
		return nil, pgerror.New(pgerrcode.ProtocolViolation, "bind message has %d %s formats but %d %ss", len(codes), what, n, what)
	}
	for _, f := range out {
		if f != 0 && f != 1 {
			return nil, pgerror.New(pgerrcode.InvalidParameterValue, "unsupported format code: %d", f)
		}
	}
	return out, nil
}

func (c *conn) describe(m *pgproto3.Describe) error {
	switch m.ObjectType {
	case 'S':
		stmt, ok := c.stmts[m.Name]
		if !ok {
			return pgerror.New(pgerrcode.InvalidSQLStatementName, "prepared statement %q does not exist", m.Name)
		}
		oids := stmt.ParamOIDs()
		if err := c.send(&pgproto3.ParameterDescription{ParameterOIDs: oids}, 7+4*len(oids)); err != nil {
			return err
		}
		return c.sendRowDescription(stmt.Columns(), true)
	case 'P':
		p, ok := c.portal(m.Name)
		if !ok {
			if cd, isCD := c.sess.(CursorDescriber); isCD {
				if cols, found := cd.DescribeCursor(m.Name); found {
					return c.sendRowDescription(cols, false)
				}
			}
			return pgerror.New(pgerrcode.InvalidCursorName, "portal %q does not exist", m.Name)
		}
		return c.sendRowDescription(p.Columns(), false)
	default:
		return pgerror.New(pgerrcode.ProtocolViolation, "invalid DESCRIBE message subtype %d", m.ObjectType)
	}
}

// sendRowDescription sends RowDescription, or NoData for no columns. A
// statement's description reports text formats: formats are only known
// once bound.
func (c *conn) sendRowDescription(cols []Column, forStatement bool) error {
	if len(cols) == 0 {
		return c.send(&pgproto3.NoData{}, 5)
	}
	// The connection's own message and name buffer (conn.out): a Describe
	// per Bind (libpq's PQexecPrepared) made a message, its fields and
	// each name anew.
	rd := &c.out.rd
	rd.Fields = rd.Fields[:0]
	names := c.out.names[:0]
	for _, col := range cols {
		names = append(names, col.Name...)
	}
	size, at := 7, 0
	for _, col := range cols {
		f := col.Format
		if forStatement {
			f = 0
		}
		end := at + len(col.Name)
		rd.Fields = append(rd.Fields, pgproto3.FieldDescription{
			Name: names[at:end:end], TableOID: col.TableOID, TableAttributeNumber: col.ColumnNumber,
			DataTypeOID: col.TypeOID, DataTypeSize: col.TypeSize, TypeModifier: col.TypeModifier, Format: f,
		})
		at = end
		size += len(col.Name) + 19
	}
	c.out.names = names
	return c.send(rd, size)
}

func (c *conn) execute(ctx context.Context, m *pgproto3.Execute) error {
	p, ok := c.portal(m.Portal)
	if !ok {
		return pgerror.New(pgerrcode.InvalidCursorName, "portal %q does not exist", m.Portal)
	}
	maxRows := int(m.MaxRows)
	if maxRows < 0 {
		maxRows = 0
	}
	sctx := c.statementContext(ctx)
	suspended, err := p.Execute(sctx, &c.extW, maxRows)
	err = statementError(sctx, err)
	c.endStatement(sctx)
	if err != nil {
		return err
	}
	if suspended {
		return c.send(&pgproto3.PortalSuspended{}, 5)
	}
	return nil
}

func (c *conn) closeMsg(m *pgproto3.Close) error {
	switch m.ObjectType {
	case 'S':
		if s, ok := c.stmts[m.Name]; ok {
			delete(c.stmts, m.Name)
			s.Close()
		}
	case 'P':
		c.closePortal(m.Name)
	default:
		return pgerror.New(pgerrcode.ProtocolViolation, "invalid CLOSE message subtype %d", m.ObjectType)
	}
	// Closing something that does not exist is not an error.
	return c.send(&pgproto3.CloseComplete{}, 5)
}
