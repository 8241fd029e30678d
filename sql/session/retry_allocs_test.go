package session

import (
	"context"
	"testing"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/pgwire"
)

// TestRetryStatementFirstWriter: an Execute's statement retry under READ
// COMMITTED writes its first attempt through the stmtWriter allocated with
// the Execute (execAlloc.rw, retryStatementIn's first) and allocates none
// of its own; without one it allocates its writer, as before.
func TestRetryStatementFirstWriter(t *testing.T) {
	stmts, err := parse("SELECT 1")
	if err != nil || len(stmts) != 1 {
		t.Fatalf("parse: %v, %d statements", err, len(stmts))
	}
	st := &stmts[0]
	s := &Session{inTxn: true, txnIso: kv.ReadCommitted}
	if !s.statementRetries(st) {
		t.Fatal("the statement would not be retried: the test reaches no writer")
	}
	ctx := context.Background()
	var w pgwire.ResultWriter = &struct{ pgwire.ResultWriter }{}
	first := &stmtWriter{}
	var got pgwire.ResultWriter
	run := func(w pgwire.ResultWriter) error { got = w; return nil }
	if err := s.retryStatementIn(ctx, st, w, first, run); err != nil {
		t.Fatal(err)
	}
	if got != first {
		t.Errorf("the first attempt wrote through %p, want the caller's %p", got, first)
	}
	if err := s.retryStatement(ctx, st, w, run); err != nil {
		t.Fatal(err)
	}
	if got == first {
		t.Errorf("retryStatement without a first writer reused one")
	}
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	for _, tc := range []struct {
		first *stmtWriter
		want  float64
	}{{first, 0}, {nil, 1}} {
		if n := testing.AllocsPerRun(100, func() { _ = s.retryStatementIn(ctx, st, w, tc.first, run) }); n != tc.want {
			t.Errorf("first writer %v: %v allocations, want %v", tc.first != nil, n, tc.want)
		}
	}
}
