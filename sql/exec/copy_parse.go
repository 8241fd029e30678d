package exec

import (
	"context"
	"io"

	"github.com/cairn-db/cairn/pgwire/copyfmt"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/types"
)

// COPY FROM's parse stage (issue #18, parallel COPY): reading the input's
// rows and parsing their fields into datums runs in a goroutine of its
// own, a batch of copyParseBatch rows ahead of the statement's goroutine,
// which evaluates defaults, WHERE, constraints and writes (everything that
// touches the transaction, sequences or the session). At most
// copyParseAhead batches wait between the two, so memory stays flat in the
// input's size. Errors keep their order: a parse error travels after the
// rows before it, and the statement reports it only once those are
// written, as the sequential loop did.
//
// Types whose text needs the catalog (the reg* types, which resolve names
// through the transaction) are parsed in the statement's goroutine
// instead: a transaction is used by one goroutine at a time.

const (
	copyParseBatch = 256
	copyParseAhead = 4
)

type copyParser struct {
	rd                      *copyfmt.Reader
	t                       *copyTarget
	tb                      *catalog.Table
	o                       *copyOptions
	forceNotNull, forceNull []bool
	tctx                    *types.Context
	binary, header          bool
	// text is a row's text fields laid end to end, made one string.
	text []byte
}

// parsedRow is one input row: its datums (the columns COPY does not name
// are nil) and its line.
type parsedRow struct {
	row  []types.Datum
	line int
}

// parsedBatch is a batch of rows; err, if set, comes after them (and ends
// the input).
type parsedBatch struct {
	rows []parsedRow
	err  error
}

// needsTxn says whether parsing a value of t may read the catalog.
func needsTxn(t *types.T) bool {
	for ; t != nil; t = t.Elem {
		if t.Family == types.OidFamily && t.Oid != types.Oid.Oid {
			return true
		}
		if t.Elem == t {
			break
		}
	}
	return false
}

// start runs the parse stage and returns its batches; stop (safe to call
// twice) ends it and waits until it no longer reads the input.
func (p *copyParser) start(ctx context.Context) (<-chan parsedBatch, func()) {
	inline := false
	for _, t := range p.t.typs {
		if needsTxn(t) {
			inline = true
		}
	}
	// Inline (parsing may read the catalog through the caller's
	// transaction): parse one batch at a time, in step with the caller,
	// over an unbuffered channel.
	ahead := copyParseAhead
	if inline {
		ahead = 0
	}
	out := make(chan parsedBatch, ahead)
	done := make(chan struct{})
	send := func(b parsedBatch) bool {
		select {
		case out <- b:
			return true
		case <-done:
		case <-ctx.Done():
		}
		return false
	}
	go func() {
		defer close(out)
		for {
			b, more := p.next()
			if !send(b) || !more {
				return
			}
			// Inline, the caller takes this empty batch only once it
			// is done with the last: the next is parsed while the
			// caller waits, not while it uses its transaction.
			if inline && !send(parsedBatch{}) {
				return
			}
		}
	}()
	return out, stopper(done, out)
}

// stopper ends a parse stage: it signals done and drains ch until the
// producer closes it, so the producer no longer reads the input when the
// statement returns.
func stopper(done chan struct{}, ch <-chan parsedBatch) func() {
	stopped := false
	return func() {
		if stopped {
			return
		}
		stopped = true
		close(done)
		for range ch {
		}
	}
}

// next parses up to copyParseBatch rows; more is false once the input or
// an error ended.
func (p *copyParser) next() (parsedBatch, bool) {
	var b parsedBatch
	t, tb := p.t, p.tb
	// The batch's rows are carved from a few slices (each row capped at
	// its own width), not allocated one by one; they grow with the
	// batch, so a COPY of one row allocates one row.
	ncols := len(tb.Columns)
	var slab []types.Datum
	for len(b.rows) < copyParseBatch {
		fields, err := p.rd.Read()
		if err == io.EOF {
			return b, false
		}
		if err != nil {
			b.err = copyLineError(err, tb.Name, p.rd.Line()+1, "", "")
			return b, false
		}
		line := p.rd.Line()
		if p.header {
			p.header = false
			if p.o.headerMatch {
				if err := checkHeader(t, fields, p.o.fmt.Null); err != nil {
					b.err = copyLineError(err, tb.Name, line, "", "")
					return b, false
				}
			}
			continue
		}
		if len(fields) != t.width() {
			switch {
			case p.binary:
				err = badCopyData("row field count is %d, expected %d", len(fields), t.width())
			case len(fields) > t.width():
				err = badCopyData("extra data after last expected column")
			default:
				err = badCopyData("missing data for column %q", t.names[len(fields)])
			}
			b.err = copyLineError(err, tb.Name, line, "", "")
			return b, false
		}
		if len(slab) < ncols {
			k := min(max(len(b.rows), 1), copyParseBatch-len(b.rows))
			slab = make([]types.Datum, k*ncols)
		}
		row := slab[:ncols:ncols]
		slab = slab[ncols:]
		for i, f := range fields {
			if f == nil && p.forceNotNull[i] {
				fields[i] = []byte(p.o.fmt.Null)
			} else if f != nil && p.forceNull[i] && string(f) == p.o.fmt.Null {
				fields[i] = nil
			}
		}
		// Text fields are parsed from one string per row, made in one
		// allocation: a field's string (what a text datum keeps) used to
		// be an allocation of its own, numbers' included.
		var text string
		if !p.binary {
			p.text = p.text[:0]
			for _, f := range fields {
				p.text = append(p.text, f...)
			}
			text = string(p.text)
		}
		off := 0
		for i, f := range fields {
			pos := t.pos[i]
			if f == nil {
				row[pos] = types.DNull
				continue
			}
			var d types.Datum
			if p.binary {
				d, err = types.DecodeBinary(t.typs[i], f)
			} else {
				d, err = types.ParseDatum(p.tctx, t.typs[i], text[off:off+len(f)])
				off += len(f)
			}
			if err != nil {
				b.err = copyLineError(err, tb.Name, line, t.names[i], string(f))
				return b, false
			}
			row[pos] = d
		}
		b.rows = append(b.rows, parsedRow{row: row, line: line})
	}
	return b, true
}
