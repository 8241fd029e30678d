package pgwire

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"io"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/pgwire/pgauth"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
)

// startupPacket builds a startup packet with the given version code and
// key/value parameters.
func startupPacket(code uint32, kv ...string) []byte {
	body := binary.BigEndian.AppendUint32(nil, code)
	for _, s := range kv {
		body = append(append(body, s...), 0)
	}
	body = append(body, 0)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body)+4)), body...)
}

var (
	sslRequest    = []byte{0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f}
	gssencRequest = []byte{0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x30}
	goodStartup   = startupPacket(3<<16, "user", "postgres", "database", "postgres")
)

// transcript writes each chunk in turn (reading the one-byte answer after
// an SSLRequest or GSSENCRequest chunk) and then reads backend messages,
// one line each, until the server hangs up, or until ReadyForQuery unless
// toClose is set.
func transcript(t *testing.T, addr string, toClose bool, chunks ...[]byte) []string {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	var out []string
	var r io.Reader = nc
	for _, c := range chunks {
		if _, err := nc.Write(c); err != nil {
			return append(out, "<write failed>")
		}
		if string(c) != string(sslRequest) && string(c) != string(gssencRequest) {
			continue
		}
		var b [1]byte
		if _, err := io.ReadFull(nc, b[:]); err != nil {
			return append(out, "<connection closed>")
		}
		if b[0] == 'E' {
			// An ErrorResponse instead of an answer.
			r = io.MultiReader(bytes.NewReader(b[:]), nc)
			break
		}
		out = append(out, "answer "+string(b[:]))
	}
	fe := pgproto3.NewFrontend(r, io.Discard)
	for {
		msg, err := fe.Receive()
		if err != nil {
			return append(out, "<connection closed>")
		}
		name := strings.TrimPrefix(fmt.Sprintf("%T", msg), "*pgproto3.")
		line := formatBackendMessage(name, msg)
		switch m := msg.(type) {
		case *pgproto3.ParameterStatus:
			if m.Name != "server_version" {
				continue // TestParameterStatus checks the others
			}
		case *pgproto3.BackendKeyData:
			line = name // random
		case *pgproto3.ReadyForQuery:
			if !toClose {
				return append(out, line)
			}
		}
		out = append(out, line)
	}
}

func TestStartup(t *testing.T) {
	ts := startServer(t, nil)
	ok := []string{"AuthenticationOk", "ParameterStatus server_version=15.18", "BackendKeyData", "ReadyForQuery I"}
	for _, tc := range []struct {
		name   string
		chunks [][]byte
		want   []string
	}{
		{"plain", [][]byte{goodStartup}, ok},
		{"ssl refused", [][]byte{sslRequest, goodStartup}, append([]string{"answer N"}, ok...)},
		{"gssenc then ssl refused", [][]byte{gssencRequest, sslRequest, goodStartup}, append([]string{"answer N", "answer N"}, ok...)},
		{"plaintext buffered after ssl request", [][]byte{append(append([]byte{}, sslRequest...), goodStartup...)},
			[]string{"ErrorResponse FATAL 08P01 received unencrypted data after SSL request", "<connection closed>"}},
		{"http garbage", [][]byte{[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")},
			[]string{"ErrorResponse FATAL 08P01 invalid length of startup packet", "<connection closed>"}},
		{"startup packet too large", [][]byte{startupPacket(3<<16, "user", strings.Repeat("x", MaxStartupPacketSize))},
			[]string{"ErrorResponse FATAL 08P01 invalid length of startup packet", "<connection closed>"}},
		{"protocol 2", [][]byte{startupPacket(2<<16, "user", "postgres")},
			[]string{"ErrorResponse FATAL 0A000 unsupported frontend protocol 2.0: server supports 3.0 to 3.0", "<connection closed>"}},
		{"protocol 3.2 negotiated down", [][]byte{startupPacket(3<<16|2, "user", "postgres", "_pq_.compression", "on")},
			append([]string{"NegotiateProtocolVersion"}, ok...)},
		{"no user", [][]byte{startupPacket(3<<16, "database", "postgres")},
			[]string{"ErrorResponse FATAL 28000 no PostgreSQL user name specified in startup packet", "<connection closed>"}},
		{"missing terminator", [][]byte{func() []byte {
			p := startupPacket(3<<16, "user", "postgres")
			p = p[:len(p)-1]
			binary.BigEndian.PutUint32(p, uint32(len(p)))
			return p
		}()}, []string{"ErrorResponse FATAL 08P01 invalid startup packet layout: expected terminator as last byte", "<connection closed>"}},
		{"cancel request of wrong length", [][]byte{{0, 0, 0, 12, 0x04, 0xd2, 0x16, 0x2e, 0, 0, 0, 1}},
			[]string{"ErrorResponse FATAL 08P01 invalid length of cancel request packet", "<connection closed>"}},
		{"unknown message after startup", [][]byte{goodStartup, {'?', 0, 0, 0, 4}},
			append(ok[:len(ok):len(ok)], "ErrorResponse FATAL 08P01 invalid message: unknown message type: ?", "<connection closed>")},
		{"message length below 4", [][]byte{goodStartup, {'Q', 0, 0, 0, 3}},
			append(ok[:len(ok):len(ok)], "ErrorResponse FATAL 08P01 invalid message: invalid message length: 3", "<connection closed>")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			toClose := tc.want[len(tc.want)-1] == "<connection closed>"
			got := transcript(t, ts.addr, toClose, tc.chunks...)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// selfSignedTLS returns a server config with a throwaway certificate.
func selfSignedTLS(t *testing.T) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}

func TestTLS(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.TLS = selfSignedTLS(t) })
	ctx := context.Background()
	// sslmode=require encrypts without verifying the certificate.
	conn, err := pgx.Connect(ctx, strings.Replace(ts.connString("postgres", ""), "sslmode=disable", "sslmode=require", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, ok := conn.PgConn().Conn().(*tls.Conn); !ok {
		t.Fatalf("connection is %T, not TLS", conn.PgConn().Conn())
	}
	var v int32
	if err := conn.QueryRow(ctx, "select 6").Scan(&v); err != nil || v != 6 {
		t.Fatalf("query over TLS: %v", err)
	}
	// Plaintext clients are still served, and buffered plaintext after
	// SSLRequest is refused before any handshake.
	if got := transcript(t, ts.addr, false, goodStartup); got[len(got)-1] != "ReadyForQuery I" {
		t.Fatalf("plaintext client: %q", got)
	}
	got := transcript(t, ts.addr, true, append(append([]byte{}, sslRequest...), goodStartup...))
	if !strings.Contains(got[0], "received unencrypted data after SSL request") {
		t.Fatalf("buffered plaintext: %q", got)
	}
}

// TestAuthTimeout checks that a client that stalls before finishing
// authentication is disconnected; the test waits for the hang-up, it does
// not time it.
func TestAuthTimeout(t *testing.T) {
	ts := startServer(t, func(c *Config) {
		c.AuthTimeout = 50 * time.Millisecond
		c.Insecure = false
	})
	for name, chunks := range map[string][][]byte{
		"silent":            nil,
		"half a packet":     {goodStartup[:6]},
		"stalls in SCRAM":   {goodStartup},
		"stalls after SSLR": {sslRequest},
	} {
		t.Run(name, func(t *testing.T) {
			got := transcript(t, ts.addr, true, chunks...)
			if got[len(got)-1] != "<connection closed>" {
				t.Fatalf("got %q", got)
			}
			if name == "stalls in SCRAM" && got[0] != "AuthenticationSASL" {
				t.Fatalf("got %q, want the SASL request first", got)
			}
		})
	}
}

// TestAuthTimeoutTLS: on a server with TLS, the pre-authentication
// bound covers the TLS handshake too (issue 21: "pre-auth limits stay").
// A client that gets the 'S' answer and then sends nothing, or half a
// TLS record, is hung up on by the server, well before the test's own
// ten-second read deadline would end the wait.
func TestAuthTimeoutTLS(t *testing.T) {
	ts := startServer(t, func(c *Config) {
		c.AuthTimeout = 50 * time.Millisecond
		c.Insecure = false
		c.TLS = selfSignedTLS(t)
	})
	for name, after := range map[string][]byte{
		"silent after S":         nil,
		"half a TLS record head": {0x16, 0x03, 0x01},
	} {
		t.Run(name, func(t *testing.T) {
			nc, err := net.Dial("tcp", ts.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			nc.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := nc.Write(sslRequest); err != nil {
				t.Fatal(err)
			}
			var b [1]byte
			if _, err := io.ReadFull(nc, b[:]); err != nil || b[0] != 'S' {
				t.Fatalf("answer to SSLRequest: %q, %v; want S", b[:], err)
			}
			if len(after) > 0 {
				if _, err := nc.Write(after); err != nil {
					t.Fatal(err)
				}
			}
			// Whatever the server sends (a TLS alert at most), it then
			// closes: the copy ends with EOF, not the read deadline.
			if _, err := io.Copy(io.Discard, nc); err != nil {
				t.Fatalf("the server held the stalled handshake open: %v", err)
			}
		})
	}
}

// TestTLSSCRAM authenticates over TLS with and without channel binding
// (SCRAM-SHA-256-PLUS is offered only over TLS).
func TestTLSSCRAM(t *testing.T) {
	ts := startServer(t, func(c *Config) {
		c.TLS = selfSignedTLS(t)
		c.Insecure = false
	})
	v, err := pgauth.Verifier("pw")
	if err != nil {
		t.Fatal(err)
	}
	ts.b.setRole(Role{Name: "alice", CanLogin: true, SCRAMVerifier: v})
	ctx := context.Background()
	for _, tc := range []struct{ sslmode, binding, password, code string }{
		{"require", "require", "pw", ""},
		{"require", "disable", "pw", ""},
		{"require", "prefer", "wrong", "28P01"},
		{"disable", "prefer", "pw", ""},
		{"disable", "require", "pw", "no PLUS"}, // pgx refuses: no PLUS without TLS
	} {
		cs := strings.Replace(ts.connString("alice", tc.password), "sslmode=disable", "sslmode="+tc.sslmode, 1) + " channel_binding=" + tc.binding
		conn, err := pgx.Connect(ctx, cs)
		switch {
		case tc.code == "" && err != nil:
			t.Fatalf("%+v: %v", tc, err)
		case tc.code == "":
			conn.Close(ctx)
		case tc.code == "no PLUS" && err == nil, tc.code != "no PLUS" && pgCode(err) != tc.code:
			t.Fatalf("%+v: got %v, want %s", tc, err, tc.code)
		}
	}
}

// TestSCRAMMechanismMismatch checks that a client cannot select
// SCRAM-SHA-256-PLUS and then skip channel binding, or the reverse.
func TestSCRAMMechanismMismatch(t *testing.T) {
	ts := startServer(t, func(c *Config) {
		c.TLS = selfSignedTLS(t)
		c.Insecure = false
	})
	for _, tc := range []struct{ mechanism, first string }{
		{"SCRAM-SHA-256-PLUS", "n,,n=,r=abcdef"},
		{"SCRAM-SHA-256", "p=tls-server-end-point,,n=,r=abcdef"},
		{"SCRAM-SHA-1", "n,,n=,r=abcdef"},
	} {
		nc, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		nc.Write(sslRequest)
		var answer [1]byte
		if _, err := io.ReadFull(nc, answer[:]); err != nil || answer[0] != 'S' {
			t.Fatalf("SSLRequest answer %q, %v", answer, err)
		}
		tc2 := tls.Client(nc, &tls.Config{InsecureSkipVerify: true})
		fe := pgproto3.NewFrontend(tc2, tc2)
		fe.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersionNumber,
			Parameters: map[string]string{"user": "postgres"}})
		fe.Flush()
		msg, err := fe.Receive()
		sasl, ok := msg.(*pgproto3.AuthenticationSASL)
		if err != nil || !ok || strings.Join(sasl.AuthMechanisms, ",") != "SCRAM-SHA-256-PLUS,SCRAM-SHA-256" {
			t.Fatalf("got %#v, %v; want SASL offering PLUS first", msg, err)
		}
		fe.Send(&pgproto3.SASLInitialResponse{AuthMechanism: tc.mechanism, Data: []byte(tc.first)})
		fe.Flush()
		msg, err = fe.Receive()
		if er, ok := msg.(*pgproto3.ErrorResponse); err != nil || !ok || er.Code != "08P01" || er.Severity != "FATAL" {
			t.Fatalf("%s with %q: got %#v, %v", tc.mechanism, tc.first, msg, err)
		}
		nc.Close()
	}
}
