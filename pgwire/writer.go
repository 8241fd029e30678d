package pgwire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgproto3"
)

// resultWriter implements ResultWriter over a connection. In the extended
// protocol RowDescription comes from Describe, so BeginRows sends nothing.
type resultWriter struct {
	c        *conn
	extended bool
}

var _ ResultWriter = (*resultWriter)(nil)

func (w *resultWriter) BeginRows(cols []Column) error {
	if w.extended {
		return nil
	}
	return w.c.sendRowDescription(cols, false)
}

func (w *resultWriter) WriteRow(vals [][]byte) error {
	size := 7
	for _, v := range vals {
		size += 4 + len(v)
	}
	m := &w.c.out.row
	m.Values = vals
	err := w.c.send(m, size)
	m.Values = nil // the caller's; pgwire keeps nothing of it
	return err
}

func (w *resultWriter) Complete(tag string) error {
	m := &w.c.out.cc
	m.CommandTag = append(m.CommandTag[:0], tag...)
	return w.c.send(m, 6+len(tag))
}

func (w *resultWriter) EmptyQuery() error {
	return w.c.send(&pgproto3.EmptyQueryResponse{}, 5)
}

func (w *resultWriter) Notice(n Notice) error {
	return w.c.send(noticeResponse(n), 64+len(n.Message)+len(n.Detail)+len(n.Hint))
}

func (w *resultWriter) ParameterStatus(name, value string) error {
	return w.c.send(&pgproto3.ParameterStatus{Name: name, Value: value}, 7+len(name)+len(value))
}

func copyFormatCodes(f CopyFormat) (byte, []uint16) {
	overall := byte(0)
	if f.Binary {
		overall = 1
	}
	codes := make([]uint16, len(f.Columns))
	for i, c := range f.Columns {
		codes[i] = uint16(c)
	}
	return overall, codes
}

func (w *resultWriter) CopyIn(ctx context.Context, f CopyFormat) (CopyInReader, error) {
	overall, codes := copyFormatCodes(f)
	w.c.be.Send(&pgproto3.CopyInResponse{OverallFormat: overall, ColumnFormatCodes: codes})
	// The client sends nothing until it sees CopyInResponse.
	if err := w.c.flush(); err != nil {
		return nil, err
	}
	in := &copyIn{c: w.c, ctx: ctx}
	if w.c.copyStop == nil {
		w.c.watchCopy(ctx)
	}
	return in, nil
}

func (w *resultWriter) CopyOut(f CopyFormat) (CopyOutWriter, error) {
	overall, codes := copyFormatCodes(f)
	if err := w.c.send(&pgproto3.CopyOutResponse{OverallFormat: overall, ColumnFormatCodes: codes}, 8+2*len(codes)); err != nil {
		return nil, err
	}
	return &copyOut{c: w.c}, nil
}

// copyIn reads the COPY FROM STDIN sub-protocol one message at a time.
type copyIn struct {
	c    *conn
	ctx  context.Context // the statement's; its end interrupts a blocked read
	err  error           // sticky: io.EOF after CopyDone, or the failure
	rest []byte          // unread part of the current chunk, for Reader
}

func (r *copyIn) Next() ([]byte, error) {
	for r.err == nil {
		msg, err := r.c.receive()
		if err != nil {
			if r.ctx.Err() != nil && errors.Is(err, os.ErrDeadlineExceeded) && !r.c.isInterrupted() {
				// watchCopy's deadline, not a broken stream: pgproto3
				// and the buffers below keep a partly read message, so
				// the connection reads on after the statement (the
				// client's remaining COPY messages are then dropped).
				r.c.readErr = nil
				r.c.endCopyWatch()
				err = fmt.Errorf("pgwire: COPY from stdin: %w", causeOf(r.ctx))
			}
			r.err = err
			break
		}
		switch m := msg.(type) {
		case *pgproto3.CopyData:
			return m.Data, nil
		case *pgproto3.CopyDone:
			r.err = io.EOF
		case *pgproto3.CopyFail:
			r.err = pgerror.New(pgerrcode.QueryCanceled, "COPY from stdin failed: %s", m.Message)
		case *pgproto3.Flush, *pgproto3.Sync:
			// The protocol says to ignore these during COPY IN (a client
			// in the extended protocol may send them after Execute).
		default:
			r.err = pgerror.New(pgerrcode.ProtocolViolation, "unexpected message type 0x%02X during COPY from stdin", messageType(msg))
		}
	}
	return nil, r.err
}

func (r *copyIn) Reader() io.Reader { return copyInReader{r} }

type copyInReader struct{ r *copyIn }

func (cr copyInReader) Read(p []byte) (int, error) {
	r := cr.r
	for len(r.rest) == 0 {
		chunk, err := r.Next()
		if err != nil {
			return 0, err
		}
		r.rest = chunk
	}
	n := copy(p, r.rest)
	r.rest = r.rest[n:]
	return n, nil
}

type copyOut struct {
	c    *conn
	done bool
}

func (w *copyOut) Write(p []byte) (int, error) {
	if w.done {
		return 0, errors.New("pgwire: write after COPY Done")
	}
	if err := w.c.send(&pgproto3.CopyData{Data: p}, 5+len(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (w *copyOut) Done() error {
	if w.done {
		return nil
	}
	w.done = true
	return w.c.send(&pgproto3.CopyDone{}, 5)
}

// messageType returns the type byte of a frontend message.
func messageType(msg pgproto3.FrontendMessage) byte {
	b, err := msg.Encode(nil)
	if err != nil || len(b) == 0 {
		return 0
	}
	return b[0]
}
