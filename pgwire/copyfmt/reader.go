package copyfmt

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
)

// Reader splits COPY input into rows of fields.
type Reader struct {
	opts   Options
	br     *bufio.Reader
	row    [][]byte  // reused between rows; see Read
	buf    []byte    // backing storage of row's fields
	spans  []csvSpan // the fields of the CSV record being read, reused
	header bool      // a header row is still to be skipped (text, CSV) or checked (binary)
	done   bool
	line   int // 1-based line (text, CSV) or tuple (binary) of the last row read
}

// NewReader returns a Reader of r in opts's format; opts should have passed
// Validate.
func NewReader(r io.Reader, opts Options) *Reader {
	opts = opts.withDefaults()
	return &Reader{opts: opts, br: bufio.NewReader(r), header: opts.Header || opts.Format == Binary}
}

// Line returns the line (text, CSV) or tuple number (binary) of the row
// last returned, for error messages ("COPY t, line 3").
func (r *Reader) Line() int { return r.line }

// Read returns the next row's fields (invariant 1: nil = NULL). The slice
// and its fields are valid until the next call. It returns io.EOF at the
// end of the data: end of input, the `\.` end marker (text, CSV) or the
// trailer (binary).
func (r *Reader) Read() ([][]byte, error) {
	if r.done {
		return nil, io.EOF
	}
	for {
		var err error
		switch r.opts.Format {
		case Text:
			err = r.readText()
		case CSV:
			err = r.readCSV()
		case Binary:
			if r.header {
				if err := r.readBinaryHeader(); err != nil {
					return nil, err
				}
				r.header = false
			}
			err = r.readBinary()
		}
		if err != nil {
			if err == io.EOF {
				r.done = true
			}
			return nil, err
		}
		r.line++
		if r.header {
			r.header = false
			continue
		}
		return r.row, nil
	}
}

// readLine returns the next line without its terminator; io.EOF at the
// end of input.
func (r *Reader) readLine() ([]byte, error) {
	r.buf = r.buf[:0]
	for {
		chunk, err := r.br.ReadSlice('\n')
		r.buf = append(r.buf, chunk...)
		if len(r.buf) > r.opts.MaxRowSize {
			return nil, badFormat("row at line %d exceeds the maximum of %d bytes", r.line+1, r.opts.MaxRowSize)
		}
		switch {
		case err == nil:
			line := r.buf[:len(r.buf)-1]
			return bytes.TrimSuffix(line, []byte{'\r'}), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF:
			if len(r.buf) == 0 {
				return nil, io.EOF
			}
			return bytes.TrimSuffix(r.buf, []byte{'\r'}), nil
		default:
			return nil, err
		}
	}
}

var endMarker = []byte(`\.`)

func (r *Reader) readText() error {
	line, err := r.readLine()
	if err != nil {
		return err
	}
	if bytes.Equal(line, endMarker) {
		return io.EOF
	}
	r.row = r.row[:0]
	// De-escaped fields are never longer than the raw line, so they can
	// live in one allocation that later rows reuse.
	out := make([]byte, 0, len(line))
	delim := r.opts.Delimiter
	start := 0 // raw start of the current field
	fieldStart := 0
	for i := 0; ; {
		if i == len(line) || line[i] == delim {
			raw := line[start:i]
			if string(raw) == r.opts.Null {
				r.row = append(r.row, nil)
			} else {
				r.row = append(r.row, out[fieldStart:len(out):len(out)])
			}
			if i == len(line) {
				return nil
			}
			i++
			start, fieldStart = i, len(out)
			continue
		}
		c := line[i]
		if c != '\\' {
			out = append(out, c)
			i++
			continue
		}
		i++
		if i == len(line) {
			// A trailing lone backslash is taken literally, as PostgreSQL does.
			out = append(out, '\\')
			continue
		}
		c = line[i]
		i++
		switch c {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'v':
			out = append(out, '\v')
		case 'x':
			v, n := 0, 0
			for n < 2 && i < len(line) && isHex(line[i]) {
				v = v*16 + hexVal(line[i])
				i++
				n++
			}
			if n == 0 {
				out = append(out, 'x')
			} else {
				out = append(out, byte(v))
			}
		case '0', '1', '2', '3', '4', '5', '6', '7':
			v := int(c - '0')
			for n := 1; n < 3 && i < len(line) && line[i] >= '0' && line[i] <= '7'; n++ {
				v = v*8 + int(line[i]-'0')
				i++
			}
			out = append(out, byte(v))
		default:
			out = append(out, c)
		}
	}
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func hexVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	default:
		return int(c-'A') + 10
	}
}

// readCSV reads one CSV record, which may span lines inside quotes.
func (r *Reader) readCSV() error {
	o := &r.opts
	r.row = r.row[:0]
	r.buf = r.buf[:0]
	spans := r.spans[:0]
	defer func() { r.spans = spans[:0] }()
	cur := csvSpan{}
	inQuote, any := false, false
	endField := func() {
		cur.end = len(r.buf)
		spans = append(spans, cur)
		cur = csvSpan{start: len(r.buf)}
	}
	for {
		if !inQuote && r.plainRun() {
			// Ordinary bytes outside quotes are copied a buffered run
			// at a time; the byte that ends the run is read below.
			any = true
		}
		c, err := r.br.ReadByte()
		if err == io.EOF {
			if inQuote {
				return badFormat("unterminated CSV quoted field")
			}
			if !any {
				return io.EOF
			}
			endField()
			break
		}
		if err != nil {
			return err
		}
		any = true
		if len(r.buf) > o.MaxRowSize {
			return badFormat("row at line %d exceeds the maximum of %d bytes", r.line+1, o.MaxRowSize)
		}
		if inQuote {
			switch {
			case c == o.Escape && (o.Escape != o.Quote || r.peekIs(o.Quote)):
				next, err := r.br.ReadByte()
				if err != nil {
					if o.Escape == o.Quote {
						inQuote = false
						continue
					}
					return badFormat("unterminated CSV quoted field")
				}
				if next == o.Quote || next == o.Escape {
					r.buf = append(r.buf, next)
				} else {
					r.buf = append(r.buf, c)
					r.br.UnreadByte()
				}
			case c == o.Quote:
				inQuote = false
			default:
				r.buf = append(r.buf, c)
			}
			continue
		}
		if c == o.Delimiter {
			endField()
			continue
		}
		if c == '\n' || c == '\r' {
			if c == '\r' && r.peekIs('\n') {
				r.br.ReadByte()
			}
			endField()
			break
		}
		if c == o.Quote {
			inQuote, cur.quoted = true, true
			continue
		}
		r.buf = append(r.buf, c)
	}
	if len(spans) == 1 && !spans[0].quoted && bytes.Equal(r.buf[spans[0].start:spans[0].end], endMarker) {
		return io.EOF
	}
	for _, s := range spans {
		f := r.buf[s.start:s.end:s.end]
		switch {
		case !s.quoted && string(f) == o.Null:
			f = nil
		case f == nil:
			f = []byte{} // slicing an empty buffer gives nil, which means NULL
		}
		r.row = append(r.row, f)
	}
	return nil
}

// csvSpan is one field of a CSV record in Reader.buf.
type csvSpan struct {
	start, end int
	quoted     bool
}

// plainRun appends to r.buf the longest run of buffered bytes that hold
// no delimiter, quote or line end (bytes that mean nothing outside
// quotes), and reports whether there was one. The row size limit is
// checked by the caller's next byte, so a row may pass it by at most one
// buffer's worth before it fails.
func (r *Reader) plainRun() bool {
	b, _ := r.br.Peek(r.br.Buffered())
	o := &r.opts
	n := 0
	for n < len(b) {
		c := b[n]
		if c == o.Delimiter || c == o.Quote || c == '\n' || c == '\r' {
			break
		}
		n++
	}
	if n == 0 {
		return false
	}
	r.buf = append(r.buf, b[:n]...)
	_, _ = r.br.Discard(n)
	return true
}

func (r *Reader) peekIs(c byte) bool {
	b, err := r.br.Peek(1)
	return err == nil && b[0] == c
}

// BinarySignature starts every binary COPY stream.
const BinarySignature = "PGCOPY\n\xff\r\n\x00"

func (r *Reader) readBinaryHeader() error {
	var hdr [len(BinarySignature) + 8]byte
	if _, err := io.ReadFull(r.br, hdr[:]); err != nil {
		return badFormat("COPY file signature not recognized")
	}
	if string(hdr[:len(BinarySignature)]) != BinarySignature {
		return badFormat("COPY file signature not recognized")
	}
	flags := binary.BigEndian.Uint32(hdr[len(BinarySignature):])
	if flags&(1<<16) != 0 {
		return badFormat("COPY file with OIDs is not supported")
	}
	if flags&^(uint32(1)<<16) >= 1<<16 {
		return badFormat("unrecognized critical flags in COPY file header")
	}
	ext := int32(binary.BigEndian.Uint32(hdr[len(BinarySignature)+4:]))
	if ext < 0 {
		return badFormat("invalid COPY file header (missing length)")
	}
	if _, err := r.br.Discard(int(ext)); err != nil {
		return badFormat("invalid COPY file header (wrong length)")
	}
	return nil
}

func (r *Reader) readBinary() error {
	var b [4]byte
	if _, err := io.ReadFull(r.br, b[:2]); err != nil {
		if err == io.EOF {
			// The end of the stream at a tuple boundary ends the data even
			// without a trailer, as in PostgreSQL (pgx sends none).
			return io.EOF
		}
		return badFormat("unexpected EOF in COPY data")
	}
	n := int16(binary.BigEndian.Uint16(b[:2]))
	if n == -1 {
		return io.EOF
	}
	if n < 0 {
		return badFormat("row field count is %d", n)
	}
	r.row = r.row[:0]
	r.buf = r.buf[:0]
	lens := make([]int32, n)
	for i := range lens {
		if _, err := io.ReadFull(r.br, b[:]); err != nil {
			return badFormat("unexpected EOF in COPY data")
		}
		l := int32(binary.BigEndian.Uint32(b[:]))
		if l < -1 {
			return badFormat("invalid field size")
		}
		lens[i] = l
		if l > 0 {
			if len(r.buf)+int(l) > r.opts.MaxRowSize {
				return badFormat("row at tuple %d exceeds the maximum of %d bytes", r.line+1, r.opts.MaxRowSize)
			}
			start := len(r.buf)
			r.buf = append(r.buf, make([]byte, l)...)
			if _, err := io.ReadFull(r.br, r.buf[start:]); err != nil {
				return badFormat("unexpected EOF in COPY data")
			}
		}
	}
	off := 0
	for _, l := range lens {
		if l < 0 {
			r.row = append(r.row, nil)
			continue
		}
		f := r.buf[off : off+int(l) : off+int(l)]
		if f == nil {
			f = []byte{} // slicing an empty buffer gives nil, which means NULL
		}
		r.row = append(r.row, f)
		off += int(l)
	}
	return nil
}
