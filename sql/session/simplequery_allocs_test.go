package session

import (
	"context"
	"testing"

	"github.com/cairn-db/cairn/pgwire"
	"github.com/cairn-db/cairn/sql/catalog"
)

// tagWriter is a ResultWriter for transaction control: it takes tags and
// notices and keeps the last tag.
type tagWriter struct {
	pgwire.ResultWriter
	tag string
}

func (w *tagWriter) Complete(tag string) error            { w.tag = tag; return nil }
func (w *tagWriter) Notice(pgwire.Notice) error           { return nil }
func (w *tagWriter) EmptyQuery() error                    { return nil }
func (w *tagWriter) ParameterStatus(string, string) error { return nil }

// TestSimpleQueryTxnControlAllocs: pgbench's BEGIN and END sent as text
// (parsed once, kept by their text) allocate six objects together, eight
// before: a Query's statement group and its statistics writer are the
// session's now, not two objects per Query. BEGIN opens no KV
// transaction, so END commits none.
func TestSimpleQueryTxnControlAllocs(t *testing.T) {
	s := &Session{act: &activity{}, b: &Backend{}, db: &catalog.Database{Name: "postgres"}, locks: NewAdvisoryLocks().holder()}
	w := &tagWriter{}
	ctx := context.Background()
	pair := func() {
		for _, q := range []struct{ sql, tag string }{{"BEGIN", "BEGIN"}, {"END", "COMMIT"}} {
			if err := s.SimpleQuery(ctx, q.sql, w); err != nil || w.tag != q.tag {
				t.Fatalf("%s: %q, %v; want %s", q.sql, w.tag, err, q.tag)
			}
		}
	}
	pair()
	if s.inTxn || s.txn != nil {
		t.Fatalf("after END: in a transaction (%v), KV transaction %v", s.inTxn, s.txn)
	}
	if raceEnabled {
		return
	}
	if n := testing.AllocsPerRun(100, pair); n > 6 {
		t.Errorf("BEGIN and END: %v allocations, want at most 6", n)
	}
}
