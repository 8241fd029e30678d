package pgwire

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Request codes of the startup phase (PostgreSQL's pqcomm.h): they sit
// where a protocol version would, with major version 1234.
const (
	codeCancelRequest = 1234<<16 | 5678
	codeSSLRequest    = 1234<<16 | 5679
	codeGSSENCRequest = 1234<<16 | 5680
	protocolV3        = 3 << 16
)

// startupResult is what a connection learned before authentication.
type startupResult struct {
	params map[string]string // includes user and database
	// unrecognized lists the _pq_.* protocol options the client asked
	// for; with a 3.x minor version above 0, it triggers
	// NegotiateProtocolVersion.
	unrecognized []string
	minor        uint16
	// cancel is set when the packet was a CancelRequest, which ends the
	// connection without a reply.
	cancel *pgproto3.CancelRequest
}

// readStartup runs the startup phase: SSL and GSS negotiation, then one
// StartupMessage or CancelRequest. It reads with exact-length reads from a
// bufio.Reader so that bytes sent ahead of our SSLRequest answer are visible
// as buffered data (invariant 4).
func (c *conn) readStartup() (*startupResult, error) {
	tlsDone := false
	for {
		body, err := c.readStartupPacket()
		if err != nil {
			return nil, err
		}
		code := binary.BigEndian.Uint32(body)
		switch code {
		case codeSSLRequest, codeGSSENCRequest:
			if len(body) != 4 {
				return nil, protocolErrorf("invalid length of %s request", negotiationName(code))
			}
			if tlsDone {
				return nil, protocolErrorf("%s request received after TLS was established", negotiationName(code))
			}
			accept := code == codeSSLRequest && c.srv.cfg.TLS != nil
			answer := byte('N')
			if accept {
				answer = 'S'
			}
			if c.br.Buffered() > 0 {
				// CVE-2021-23214: bytes that arrived before our answer were
				// sent in the clear and may come from a man in the middle.
				return nil, pgerror.New(pgerrcode.ProtocolViolation,
					"received unencrypted data after %s request", negotiationName(code)).
					WithDetail("This could be either a client-software bug or evidence of an attempted man-in-the-middle attack.")
			}
			if _, err := c.nc.Write([]byte{answer}); err != nil {
				return nil, fmt.Errorf("answering %s request: %w", negotiationName(code), err)
			}
			if accept {
				tc := tls.Server(c.nc, serverTLS(c.srv.cfg.TLS, &c.tlsCert))
				if err := tc.Handshake(); err != nil {
					return nil, fmt.Errorf("TLS handshake: %w", err)
				}
				c.nc = tc
				c.br = bufio.NewReader(&c.in)
				c.in.r = tc
				tlsDone = true
			}
		case codeCancelRequest:
			cr := &pgproto3.CancelRequest{}
			if err := cr.Decode(body); err != nil || len(body) != 12 {
				return nil, protocolErrorf("invalid length of cancel request packet")
			}
			return &startupResult{cancel: cr}, nil
		default:
			return parseStartupMessage(code, body[4:])
		}
	}
}

func negotiationName(code uint32) string {
	if code == codeSSLRequest {
		return "SSL"
	}
	return "GSSAPI encryption"
}

// readStartupPacket reads one length-prefixed startup packet body (code
// included), bounded by MaxStartupPacketSize.
func (c *conn) readStartupPacket() ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(c.br, hdr[:]); err != nil {
		return nil, err
	}
	n := int64(int32(binary.BigEndian.Uint32(hdr[:]))) - 4
	if n < 4 || n > MaxStartupPacketSize {
		return nil, protocolErrorf("invalid length of startup packet")
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c.br, body); err != nil {
		return nil, fmt.Errorf("incomplete startup packet: %w", err)
	}
	return body, nil
}

// parseStartupMessage decodes a StartupMessage's parameters: pairs of
// NUL-terminated strings ending with an empty name.
func parseStartupMessage(code uint32, b []byte) (*startupResult, error) {
	major, minor := code>>16, uint16(code&0xffff)
	if major != 3 {
		return nil, pgerror.New(pgerrcode.FeatureNotSupported,
			"unsupported frontend protocol %d.%d: server supports 3.0 to 3.0", major, minor)
	}
	r := &startupResult{params: make(map[string]string), minor: minor}
	for {
		i := bytes.IndexByte(b, 0)
		if i < 0 {
			return nil, protocolErrorf("invalid startup packet layout: expected terminator as last byte")
		}
		name := string(b[:i])
		b = b[i+1:]
		if name == "" {
			if len(b) != 0 {
				return nil, protocolErrorf("invalid startup packet layout: expected terminator as last byte")
			}
			break
		}
		j := bytes.IndexByte(b, 0)
		if j < 0 {
			return nil, protocolErrorf("invalid startup packet layout: expected terminator as last byte")
		}
		if strings.HasPrefix(name, "_pq_.") {
			r.unrecognized = append(r.unrecognized, name)
		} else {
			r.params[name] = string(b[:j])
		}
		b = b[j+1:]
	}
	if r.params["user"] == "" {
		return nil, pgerror.New(pgerrcode.InvalidAuthorizationSpecification,
			"no PostgreSQL user name specified in startup packet")
	}
	if r.params["database"] == "" {
		r.params["database"] = r.params["user"]
	}
	return r, nil
}

// isIOError reports whether err came from the network rather than from
// the client's bytes; such errors end a connection silently.
func isIOError(err error) bool {
	var ioe *ioError
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ioe)
}
