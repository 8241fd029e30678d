package session

import (
	"context"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/catalog"
)

// countingCtx counts the values asked of it.
type countingCtx struct {
	context.Context
	values int
}

func (c *countingCtx) Value(key any) any {
	c.values++
	return c.Context.Value(key)
}

// TestStmtContextObserverKept: a statement context carries the session's
// lock wait observer whatever it was given,
// and the context pgwire hands every statement of a connection, derived
// from StatementBase's, is asked for the observer once, not per
// statement (issue 22: a walk up its parents and an interface assertion
// per Execute). Another context, or one without the observer, is asked
// again.
func TestStmtContextObserverKept(t *testing.T) {
	s := &Session{act: &activity{}, b: &Backend{}, db: &catalog.Database{Name: "postgres"}, vars: map[string]string{}}
	for _, st := range settingsList {
		s.vars[strings.ToLower(st.name)] = st.def
	}
	base := s.StatementBase(context.Background())
	pg := &countingCtx{Context: base}    // pgwire's statement context
	other := &countingCtx{Context: base} // another one derived from it
	plain := &countingCtx{Context: context.Background()}
	for _, c := range []struct {
		name        string
		ctx         *countingCtx
		lockTimeout string
		wantValues  int // values asked of ctx for the observer
	}{
		{"first statement", pg, "0", 1},
		{"same context", pg, "0", 0},
		{"same context again", pg, "0", 0},
		{"same context under lock_timeout", pg, "2s", 0},
		{"another context", other, "0", 1},
		{"the first again", pg, "0", 1},
		{"no observer", plain, "0", 1},
		{"no observer again", plain, "0", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, err := lookupSetting("lock_timeout")
			if err != nil {
				t.Fatal(err)
			}
			if err := s.setVar(st, c.lockTimeout); err != nil {
				t.Fatal(err)
			}
			c.ctx.values = 0
			sctx, cancel := s.stmtContext(c.ctx)
			defer cancel()
			if c.ctx.values != c.wantValues {
				t.Errorf("values asked of the context: %d, want %d", c.ctx.values, c.wantValues)
			}
			if o := kvpb.LockWaitObserverOf(sctx); o != s.act {
				t.Errorf("statement context's observer %v, want the session's", o)
			}
		})
	}
}
