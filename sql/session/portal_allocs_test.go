package session

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/pgwire"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/types"
)

// TestPortalAllocs: the Bind, Execute and Close of a prepared statement's
// portal, as pgbench -M prepared and libpq send them (Bind of the unnamed
// portal, Execute, the portal closed at ReadyForQuery), allocate nothing
// of their own once the statement has a closed portal (its spare) and
// the session its Execute allocation (execSpare): a portal per Bind and
// the writers and held result per Execute were two objects of every
// prepared SELECT. The statement is the empty one (Execute answers
// EmptyQuery): what is counted is the portal's and the Execute's own,
// not a statement's.
func TestPortalAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	s := &Session{act: &activity{}, b: &Backend{}, db: &catalog.Database{Name: "postgres"}, vars: map[string]string{}}
	ps := &preparedStatement{s: s, paramTypes: []*types.T{types.Int8}}
	w := &tagWriter{}
	ctx := context.Background()
	params := pgwire.BindParams{Values: [][]byte{[]byte("7")}, Formats: []int16{0}}
	round := func() {
		p, err := ps.Bind(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		pt := p.(*portal)
		if len(pt.params) != 1 || pt.params[0] != types.DInt(7) {
			t.Fatalf("params %v, want [7]", pt.params)
		}
		if _, err := p.Execute(ctx, w, 0); err != nil {
			t.Fatal(err)
		}
		p.Close()
		p.Close() // a second Close changes nothing
	}
	round()
	if n := testing.AllocsPerRun(100, round); n > 0 {
		t.Errorf("Bind, Execute and Close: %v allocations, want 0", n)
	}
	// A portal that is still open is not the next Bind's.
	p1, _ := ps.Bind(ctx, params)
	p2, _ := ps.Bind(ctx, params)
	if p1 == p2 {
		t.Errorf("two open portals are one")
	}
	p1.Close()
	p2.Close()
	// The Execute allocation is not taken again while its held result
	// waits for Sync.
	a := s.execSpare
	if a == nil {
		t.Fatal("no Execute allocation kept")
	}
	s.extHeld = &a.h
	p3, _ := ps.Bind(ctx, params)
	if _, err := p3.Execute(ctx, w, 0); err != nil {
		t.Fatal(err)
	}
	if s.execSpare == a {
		t.Errorf("an Execute took the allocation whose held result waits")
	}
}

// TestHotVars: the settings every statement reads are copied out of vars
// once (hotVars), and a SET of any of them is seen by the next
// statement: every write bumps varsGen.
func TestHotVars(t *testing.T) {
	s := &Session{act: &activity{}, b: &Backend{}, db: &catalog.Database{Name: "postgres"}, vars: map[string]string{}}
	for _, st := range settingsList {
		s.vars[strings.ToLower(st.name)] = st.def
	}
	for _, c := range []struct {
		name, value string
		got         func(*hotVars) string
		want        string
	}{
		{"lock_timeout", "2s", func(h *hotVars) string { return h.lockTimeout }, "2s"},
		{"statement_timeout", "5s", func(h *hotVars) string { return h.stmtTimeout }, "5s"},
		{"idle_session_timeout", "7s", func(h *hotVars) string { return h.idleTimeout }, "7s"},
		{"idle_in_transaction_session_timeout", "9s", func(h *hotVars) string { return h.idleInTxnTimeout }, "9s"},
		{"application_name", "app", func(h *hotVars) string { return h.appName }, "app"},
		{"default_transaction_isolation", "serializable", func(h *hotVars) string { return h.defaultIso }, "serializable"},
		{"default_transaction_read_only", "on", func(h *hotVars) string { return fmt.Sprint(h.defaultReadOnly) }, "true"},
		{"search_path", "x, public", func(h *hotVars) string { return h.searchPath }, s.mustCanon(t, "search_path", "x, public")},
		{"timezone", "Europe/Paris", func(h *hotVars) string { return h.timeZone }, "Europe/Paris"},
		{"distsql", "on", func(h *hotVars) string { return fmt.Sprint(h.distsql) }, "true"},
	} {
		before := c.got(s.hotVars())
		st, err := lookupSetting(c.name)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.setVar(st, c.value); err != nil {
			t.Fatalf("SET %s = %s: %v", c.name, c.value, err)
		}
		if got := c.got(s.hotVars()); got != c.want || got == before {
			t.Errorf("SET %s = %s: hot value %q (before %q), want %q", c.name, c.value, got, before, c.want)
		}
	}
}

// mustCanon is a setting's canonical form of v.
func (s *Session) mustCanon(t *testing.T, name, v string) string {
	st, err := lookupSetting(name)
	if err != nil {
		t.Fatal(err)
	}
	out, err := st.canonicalize(s, v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
