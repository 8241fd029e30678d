package pgwire

// TestProtocol drives the server message by message with a pgproto3
// frontend, from datadriven scripts in testdata/protocol. Each file starts
// on a fresh, authenticated connection to a server running the test
// session (see session_test.go). The mini-language:
//
//	send
//	<Type> [<json>]      one frontend message per line, decoded with
//	...                  pgproto3's JSON form, e.g. Parse {"Name": "s1",
//	                     "Query": "generate 3"}, Execute {"MaxRows": 2},
//	                     Bind {"Parameters": [{"text": "7"}]}
//	CopyText <string>    shorthand: a CopyData whose payload is the Go
//	                     quoted string
//	----
//	(nothing)
//
//	until [<Type>...]    reads messages until each listed type has been
//	----                 seen in turn (default: ReadyForQuery) and prints
//	<messages>           one line per message. "until closed" reads until
//	                     the server hangs up.
//
//	connect              replaces the connection with a fresh one
//
// Messages print as their type plus what matters: DataRow values (quoted
// text, or 0x-hex for binary), tags, SQLSTATE and message of errors, the
// ReadyForQuery status, columns of RowDescription as name:oid:format.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cockroachdb/datadriven"
	"github.com/jackc/pgx/v5/pgproto3"
)

func TestProtocol(t *testing.T) {
	datadriven.Walk(t, "testdata/protocol", func(t *testing.T, path string) {
		ts := startServer(t, nil)
		fc := dialFrontend(t, ts.addr, "postgres")
		defer func() { fc.nc.Close() }()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "connect":
				fc.nc.Close()
				fc = dialFrontend(t, ts.addr, "postgres")
				return ""
			case "send":
				for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
					fc.fe.Send(parseFrontendMessage(t, line))
				}
				if err := fc.fe.Flush(); err != nil {
					t.Fatalf("%s: flush: %v", d.Pos, err)
				}
				return ""
			case "until":
				want := []string{"ReadyForQuery"}
				if len(d.CmdArgs) > 0 {
					want = want[:0]
					for _, a := range d.CmdArgs {
						want = append(want, a.Key)
					}
				}
				return fc.until(t, want)
			default:
				t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
				return ""
			}
		})
	})
}

type frontendConn struct {
	nc net.Conn
	fe *pgproto3.Frontend
}

// dialFrontend connects and completes startup with trust authentication.
func dialFrontend(t testing.TB, addr, user string) *frontendConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fc := &frontendConn{nc: nc, fe: pgproto3.NewFrontend(nc, nc)}
	fc.fe.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersionNumber,
		Parameters: map[string]string{"user": user, "database": "postgres"}})
	if err := fc.fe.Flush(); err != nil {
		t.Fatal(err)
	}
	fc.until(t, []string{"ReadyForQuery"})
	return fc
}

// until reads messages until each of want (message type names) has been
// seen in turn, or "closed" the connection's end.
func (fc *frontendConn) until(t testing.TB, want []string) string {
	t.Helper()
	var out strings.Builder
	fc.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer fc.nc.SetReadDeadline(time.Time{})
	for len(want) > 0 {
		msg, err := fc.fe.Receive()
		if err != nil {
			if want[0] == "closed" && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || isReset(err)) {
				out.WriteString("<connection closed>\n")
				return out.String()
			}
			t.Fatalf("receive (waiting for %v): %v\nso far:\n%s", want, err, out.String())
		}
		name := fmt.Sprintf("%T", msg)[len("*pgproto3."):]
		out.WriteString(formatBackendMessage(name, msg))
		out.WriteByte('\n')
		if name == want[0] {
			want = want[1:]
		}
	}
	return out.String()
}

func isReset(err error) bool {
	var ne *net.OpError
	return errors.As(err, &ne)
}

func formatBackendMessage(name string, msg pgproto3.BackendMessage) string {
	switch m := msg.(type) {
	case *pgproto3.DataRow:
		var vals []string
		for _, v := range m.Values {
			vals = append(vals, formatValue(v))
		}
		return name + " " + strings.Join(vals, " ")
	case *pgproto3.RowDescription:
		var cols []string
		for _, f := range m.Fields {
			cols = append(cols, fmt.Sprintf("%s:%d:%d", f.Name, f.DataTypeOID, f.Format))
		}
		return name + " " + strings.Join(cols, " ")
	case *pgproto3.ParameterDescription:
		return fmt.Sprintf("%s %v", name, m.ParameterOIDs)
	case *pgproto3.CommandComplete:
		return name + " " + string(m.CommandTag)
	case *pgproto3.ReadyForQuery:
		return name + " " + string(m.TxStatus)
	case *pgproto3.ErrorResponse:
		s := fmt.Sprintf("%s %s %s %s", name, m.Severity, m.Code, m.Message)
		if m.Position != 0 {
			s += fmt.Sprintf(" (position %d)", m.Position)
		}
		return s
	case *pgproto3.NoticeResponse:
		return fmt.Sprintf("%s %s %s %s", name, m.Severity, m.Code, m.Message)
	case *pgproto3.CopyInResponse:
		return fmt.Sprintf("%s format=%d columns=%v", name, m.OverallFormat, m.ColumnFormatCodes)
	case *pgproto3.CopyOutResponse:
		return fmt.Sprintf("%s format=%d columns=%v", name, m.OverallFormat, m.ColumnFormatCodes)
	case *pgproto3.CopyData:
		return name + " " + formatValue(m.Data)
	case *pgproto3.ParameterStatus:
		return fmt.Sprintf("%s %s=%s", name, m.Name, m.Value)
	}
	return name
}

func formatValue(v []byte) string {
	if v == nil {
		return "NULL"
	}
	if utf8.Valid(v) && strconv.IsPrint(rune(firstRune(v))) {
		return strconv.Quote(string(v))
	}
	return fmt.Sprintf("0x%x", v)
}

func firstRune(v []byte) rune {
	if len(v) == 0 {
		return 'x'
	}
	r, _ := utf8.DecodeRune(v)
	return r
}

func parseFrontendMessage(t *testing.T, line string) pgproto3.FrontendMessage {
	t.Helper()
	typ, arg, _ := strings.Cut(strings.TrimSpace(line), " ")
	if typ == "CopyText" {
		s, err := strconv.Unquote(arg)
		if err != nil {
			t.Fatalf("CopyText %s: %v", arg, err)
		}
		return &pgproto3.CopyData{Data: []byte(s)}
	}
	var msg pgproto3.FrontendMessage
	switch typ {
	case "Query":
		msg = &pgproto3.Query{}
	case "Parse":
		msg = &pgproto3.Parse{}
	case "Bind":
		msg = &pgproto3.Bind{}
	case "Describe":
		msg = &pgproto3.Describe{}
	case "Execute":
		msg = &pgproto3.Execute{}
	case "Close":
		msg = &pgproto3.Close{}
	case "Sync":
		msg = &pgproto3.Sync{}
	case "Flush":
		msg = &pgproto3.Flush{}
	case "CopyData":
		msg = &pgproto3.CopyData{}
	case "CopyDone":
		msg = &pgproto3.CopyDone{}
	case "CopyFail":
		msg = &pgproto3.CopyFail{}
	case "FunctionCall":
		msg = &pgproto3.FunctionCall{}
	case "Terminate":
		msg = &pgproto3.Terminate{}
	default:
		t.Fatalf("unknown frontend message %q", typ)
	}
	if arg != "" {
		if err := json.Unmarshal([]byte(arg), msg); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
	}
	return msg
}
