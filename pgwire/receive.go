package pgwire

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5/pgproto3"
)

// frontend reads the client's messages after startup (conn.receive), as
// pgproto3.Backend.Receive does, with the same messages, checks and
// errors, straight from the connection's bufio.Reader: a message it
// holds whole is decoded in its buffer, any other is read into one body
// buffer (TestFrontendReadsInPlace). Nothing is allocated for the
// messages of a prepared statement's round trip: Bind's parameters and
// format codes are slices of those buffers and the connection's (valid,
// as pgproto3's, until the next receive), and
// its portal and statement names are the last ones read while they stay
// the same (a string per Bind and per Execute before). Bind and Execute
// bodies that do not decode are decoded again by pgproto3, for its error.
type frontend struct {
	br       io.Reader
	maxBody  int    // MaxMessageSize; 0: none
	authType uint32 // what a 'p' message answers (setAuthType)
	hdr      [5]byte
	buf      []byte // the body of a message of at most frontendBufSize

	// The messages, filled in place (pgproto3.Backend keeps one of each
	// too).
	bind     pgproto3.Bind
	execute  pgproto3.Execute
	describe pgproto3.Describe
	sync     pgproto3.Sync
	flush    pgproto3.Flush
	parse    pgproto3.Parse
	query    pgproto3.Query
	close    pgproto3.Close
	term     pgproto3.Terminate
	fcall    pgproto3.FunctionCall
	copyData pgproto3.CopyData
	copyDone pgproto3.CopyDone
	copyFail pgproto3.CopyFail

	params     [][]byte
	pfmt, rfmt []int16
	// portalName and stmtName are the last names read.
	portalName, stmtName string
}

// frontendBufSize is the body buffer the reader keeps; a longer body is
// read into a buffer of its own, dropped after it.
const frontendBufSize = 8 << 10

// receive reads and decodes the next message.
func (f *frontend) receive() (pgproto3.FrontendMessage, error) {
	// A message the bufio.Reader holds whole (after the first of a round
	// trip, whose read brought the rest: Describe, Execute and Sync after
	// Bind) is decoded where it lies, without copying its header and body
	// out through io.ReadFull. Peek and Discard do not read, so the
	// bufio.Reader's buffer stays as it is until the next receive reads,
	// as f.buf does (the messages' slices are valid until then).
	bb, _ := f.br.(*bufio.Reader)
	var hdr []byte
	if bb != nil && bb.Buffered() >= len(f.hdr) {
		hdr, _ = bb.Peek(len(f.hdr))
		bb.Discard(len(hdr))
	} else {
		if _, err := io.ReadFull(f.br, f.hdr[:]); err != nil {
			return nil, translateEOF(err)
		}
		hdr = f.hdr[:]
	}
	typ := hdr[0]
	n := int(int32(binary.BigEndian.Uint32(hdr[1:])))
	if n < 4 {
		return nil, fmt.Errorf("invalid message length: %d", n)
	}
	n -= 4
	if f.maxBody > 0 && n > f.maxBody {
		return nil, &pgproto3.ExceededMaxBodyLenErr{MaxExpectedBodyLen: f.maxBody, ActualBodyLen: n}
	}
	var msg pgproto3.FrontendMessage
	switch typ {
	case 'B':
		msg = &f.bind
	case 'C':
		msg = &f.close
	case 'D':
		msg = &f.describe
	case 'E':
		msg = &f.execute
	case 'F':
		msg = &f.fcall
	case 'f':
		msg = &f.copyFail
	case 'd':
		msg = &f.copyData
	case 'c':
		msg = &f.copyDone
	case 'H':
		msg = &f.flush
	case 'P':
		msg = &f.parse
	case 'p':
		switch f.authType {
		case pgproto3.AuthTypeSASL:
			msg = &pgproto3.SASLInitialResponse{}
		case pgproto3.AuthTypeSASLContinue, pgproto3.AuthTypeSASLFinal:
			msg = &pgproto3.SASLResponse{}
		case pgproto3.AuthTypeGSS, pgproto3.AuthTypeGSSCont:
			msg = &pgproto3.GSSResponse{}
		default:
			msg = &pgproto3.PasswordMessage{}
		}
	case 'Q':
		msg = &f.query
	case 'S':
		msg = &f.sync
	case 'X':
		msg = &f.term
	default:
		return nil, fmt.Errorf("unknown message type: %c", typ)
	}
	var body []byte
	if bb != nil && bb.Buffered() >= n {
		body, _ = bb.Peek(n)
		body = body[:n:n]
		bb.Discard(n)
	} else {
		if n <= frontendBufSize {
			if f.buf == nil {
				f.buf = make([]byte, frontendBufSize)
			}
			body = f.buf[:n:n]
		} else {
			body = make([]byte, n)
		}
		if _, err := io.ReadFull(f.br, body); err != nil {
			return nil, translateEOF(err)
		}
	}
	switch typ {
	case 'B':
		if f.decodeBind(body) {
			return msg, nil
		}
	case 'E':
		if f.decodeExecute(body) {
			return msg, nil
		}
	}
	if err := msg.Decode(body); err != nil {
		return nil, err
	}
	return msg, nil
}

// translateEOF is pgproto3's: a stream that ends mid-message (or before
// one) is io.ErrUnexpectedEOF.
func translateEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// name returns b as a string, *last when it is the same (no allocation).
func name(last *string, b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if *last != string(b) {
		*last = string(b)
	}
	return *last
}

// decodeBind decodes a Bind body into f.bind as pgproto3's Bind.Decode
// does; false: it is malformed (pgproto3 then reports how).
func (f *frontend) decodeBind(src []byte) bool {
	m := &f.bind
	i := bytes.IndexByte(src, 0)
	if i < 0 {
		return false
	}
	portal := src[:i]
	src = src[i+1:]
	if i = bytes.IndexByte(src, 0); i < 0 {
		return false
	}
	stmt := src[:i]
	src = src[i+1:]
	var ok bool
	if f.pfmt, src, ok = readCodes(src, f.pfmt[:0]); !ok {
		return false
	}
	if len(src) < 2 {
		return false
	}
	np := int(binary.BigEndian.Uint16(src))
	src = src[2:]
	params := f.params[:0]
	for range np {
		if len(src) < 4 {
			return false
		}
		size := int(int32(binary.BigEndian.Uint32(src)))
		src = src[4:]
		if size == -1 {
			params = append(params, nil)
			continue
		}
		if size < 0 || len(src) < size {
			return false
		}
		params = append(params, src[:size:size])
		src = src[size:]
	}
	f.params = params
	if f.rfmt, _, ok = readCodes(src, f.rfmt[:0]); !ok {
		return false
	}
	*m = pgproto3.Bind{
		DestinationPortal: name(&f.portalName, portal), PreparedStatement: name(&f.stmtName, stmt),
		ParameterFormatCodes: f.pfmt, Parameters: params, ResultFormatCodes: f.rfmt,
	}
	return true
}

// readCodes reads a count and that many int16 format codes into dst.
func readCodes(src []byte, dst []int16) ([]int16, []byte, bool) {
	if len(src) < 2 {
		return dst, src, false
	}
	n := int(binary.BigEndian.Uint16(src))
	src = src[2:]
	if len(src) < 2*n {
		return dst, src, false
	}
	for range n {
		dst = append(dst, int16(binary.BigEndian.Uint16(src)))
		src = src[2:]
	}
	return dst, src, true
}

// decodeExecute decodes an Execute body into f.execute as pgproto3's
// Execute.Decode does; false: it is malformed.
func (f *frontend) decodeExecute(src []byte) bool {
	i := bytes.IndexByte(src, 0)
	if i < 0 || len(src)-i-1 < 4 {
		return false
	}
	f.execute = pgproto3.Execute{Portal: name(&f.portalName, src[:i]), MaxRows: binary.BigEndian.Uint32(src[i+1:])}
	return true
}
