package server

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// TestStatementTimeoutSortExtended: under the extended protocol (Parse,
// Bind, Describe, Execute, Sync, as pgx sends them), statement_timeout
// stops a sort of a hundred million rows (a plain one and a top-k one)
// with exactly one ErrorResponse, 57014, before ReadyForQuery, and the
// session serves the next statement. The messages are read off the wire,
// so a second error or a lost ReadyForQuery would show.
func TestStatementTimeoutSortExtended(t *testing.T) {
	s := start(t, Config{Insecure: true})
	defer s.Stop(context.Background())
	ctx := context.Background()
	conn := connect(t, s)
	for _, q := range []string{"SET statement_timeout = '500ms'", "SET work_mem = '1MB'"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	hc, err := conn.PgConn().Hijack()
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Conn.Close()
	f := hc.Frontend
	// roundTrip sends msgs and reads up to ReadyForQuery: the SQLSTATEs
	// of the ErrorResponses and the number of DataRows.
	roundTrip := func(msgs ...pgproto3.FrontendMessage) (codes []string, rows int) {
		t.Helper()
		for _, m := range msgs {
			f.Send(m)
		}
		if err := f.Flush(); err != nil {
			t.Fatal(err)
		}
		for {
			m, err := f.Receive()
			if err != nil {
				t.Fatal(err)
			}
			switch m := m.(type) {
			case *pgproto3.ErrorResponse:
				codes = append(codes, m.Code)
			case *pgproto3.DataRow:
				rows++
			case *pgproto3.ReadyForQuery:
				return codes, rows
			}
		}
	}
	for _, q := range []string{
		"SELECT g FROM generate_series(1, 100000000) g ORDER BY g % 1000003 DESC, g",
		"SELECT g FROM generate_series(1, 100000000) g ORDER BY g % 1000003 DESC, g LIMIT $1",
	} {
		var params [][]byte
		if q[len(q)-2:] == "$1" {
			params = [][]byte{[]byte("10")}
		}
		codes, _ := roundTrip(
			&pgproto3.Parse{Query: q},
			&pgproto3.Bind{Parameters: params},
			&pgproto3.Describe{ObjectType: 'P'},
			&pgproto3.Execute{},
			&pgproto3.Sync{},
		)
		if fmt.Sprint(codes) != "[57014]" {
			t.Fatalf("%s: errors %v, want exactly one 57014", q, codes)
		}
		codes, rows := roundTrip(&pgproto3.Query{String: "SELECT 1"})
		if len(codes) != 0 || rows != 1 {
			t.Fatalf("after the timeout: errors %v, %d rows", codes, rows)
		}
	}
}
