package pgwire

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// encodeFrontend concatenates encoded frontend messages, for seeds.
func encodeFrontend(t testing.TB, msgs ...pgproto3.FrontendMessage) []byte {
	var b []byte
	for _, m := range msgs {
		var err error
		if b, err = m.Encode(b); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

func fuzzSeeds(t testing.TB) [][]byte {
	return [][]byte{
		encodeFrontend(t, &pgproto3.Query{String: "select 1; generate 3"}),
		encodeFrontend(t, &pgproto3.Parse{Name: "s", Query: "select $1::int8"}, &pgproto3.Bind{PreparedStatement: "s", Parameters: [][]byte{[]byte("1")}},
			&pgproto3.Describe{ObjectType: 'P'}, &pgproto3.Execute{MaxRows: 1}, &pgproto3.Sync{}),
		encodeFrontend(t, &pgproto3.Query{String: "copy t from stdin"}, &pgproto3.CopyData{Data: []byte("1\n")}, &pgproto3.CopyDone{}),
		encodeFrontend(t, &pgproto3.Query{String: "copy t from stdin binary"}, &pgproto3.CopyData{Data: []byte("PGCOPY\n\xff\r\n\x00")}, &pgproto3.CopyFail{Message: "x"}),
		encodeFrontend(t, &pgproto3.Query{String: "begin"}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{}, &pgproto3.Query{String: "panic"}),
		{'Q', 0, 0, 0, 4},
		{'B', 0xff, 0xff, 0xff, 0xff},
		[]byte("garbage garbage garbage"),
		{},
	}
}

// FuzzServerMessages plays arbitrary bytes as a client, after a valid
// startup packet or instead of one, against a running server: the server
// must not crash or hang, and must still serve a well-formed client after.
func FuzzServerMessages(f *testing.F) {
	ts := startServer(f, func(c *Config) { c.MaxMessageSize = 1 << 16 })
	ts.b.noSleep = true
	for _, s := range fuzzSeeds(f) {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Add(append(append([]byte{}, sslRequest...), goodStartup...), true)
	f.Fuzz(func(t *testing.T, data []byte, raw bool) {
		nc, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(20 * time.Second))
		if !raw {
			data = append(append([]byte{}, goodStartup...), data...)
		}
		// Write and drain concurrently so neither side blocks on a full
		// socket buffer, then half-close so the server sees the end.
		drained := make(chan error, 1)
		go func() { _, err := io.Copy(io.Discard, nc); drained <- err }()
		nc.Write(data)
		nc.(*net.TCPConn).CloseWrite()
		if err := <-drained; err != nil && !isReset(err) {
			t.Fatalf("server did not hang up cleanly: %v", err)
		}
		got := transcript(t, ts.addr, false, goodStartup)
		if got[len(got)-1] != "ReadyForQuery I" {
			t.Fatalf("server unusable after fuzz input: %q", got)
		}
	})
}

// FuzzBackendReceive decodes arbitrary bytes with the same pgproto3
// Backend settings the server uses, in every authentication state.
func FuzzBackendReceive(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s, uint8(0))
	}
	f.Add(encodeFrontend(f, &pgproto3.SASLInitialResponse{AuthMechanism: "SCRAM-SHA-256", Data: []byte("n,,n=,r=abc")}), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, auth uint8) {
		be := pgproto3.NewBackend(bytes.NewReader(data), io.Discard)
		be.SetMaxBodyLen(1 << 16)
		switch auth % 3 {
		case 1:
			be.SetAuthType(pgproto3.AuthTypeSASL)
		case 2:
			be.SetAuthType(pgproto3.AuthTypeSASLContinue)
		}
		for range 1000 {
			if _, err := be.Receive(); err != nil {
				return
			}
		}
	})
}
