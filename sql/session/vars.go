package session

import (
	"context"
	"strings"

	"github.com/cairn-db/cairn/pgwire"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// setVar checks and stores a session setting's value.
func (s *Session) setVar(st *setting, v string) error {
	if st.readOnly {
		return st.readOnlyError()
	}
	canon, err := st.canonicalize(s, v)
	if err != nil {
		return err
	}
	key := strings.ToLower(st.name)
	s.saveVars()
	s.vars[key] = canon
	s.varsGen++
	if key == "timezone" {
		s.applyDerived()
	}
	return nil
}

// set runs SET, SET LOCAL, SET TRANSACTION, SET SESSION
// CHARACTERISTICS, RESET and RESET ALL.
func (s *Session) set(x *stmtState, n *pg_query.VariableSetStmt, w pgwire.ResultWriter) error {
	if text, ok := asOfSetText(n); ok {
		// SET TRANSACTION AS OF SYSTEM TIME (asof.go).
		if err := s.setTxnAsOf(text); err != nil {
			return err
		}
		return w.Complete("SET")
	}
	switch n.Kind {
	case pg_query.VariableSetKind_VAR_SET_MULTI:
		switch n.Name {
		case "TRANSACTION":
			if !s.block {
				s.notice(w, "WARNING", pgerrcode.NoActiveSQLTransaction, "SET TRANSACTION can only be used in transaction blocks")
				return w.Complete("SET")
			}
			if err := s.setTxnOptions(n.Args, s.txnStmts == 0); err != nil {
				return err
			}
			return w.Complete("SET")
		case "SESSION CHARACTERISTICS":
			for _, a := range n.Args {
				de := a.GetDefElem()
				if de == nil {
					continue
				}
				v, _ := constText(de.Arg)
				var name string
				switch de.Defname {
				case "transaction_isolation":
					name = "default_transaction_isolation"
				case "transaction_read_only":
					name = "default_transaction_read_only"
				default:
					continue
				}
				st, _ := lookupSetting(name)
				if err := s.setVar(st, v); err != nil {
					return err
				}
			}
			return w.Complete("SET")
		}
		return notSupported("SET %s is not supported", n.Name)
	case pg_query.VariableSetKind_VAR_RESET_ALL:
		s.saveVars()
		for _, st := range settingsList {
			if !st.readOnly {
				k := strings.ToLower(st.name)
				s.vars[k] = s.defaults[k]
			}
		}
		s.varsGen++
		s.applyDerived()
		return w.Complete("RESET")
	}

	name := strings.ToLower(n.Name)
	tag := "SET"
	if n.Kind == pg_query.VariableSetKind_VAR_RESET {
		tag = "RESET"
	}
	switch name {
	case "transaction_isolation", "transaction_read_only":
		if !s.inTxn || n.Kind != pg_query.VariableSetKind_VAR_SET_VALUE || len(n.Args) != 1 {
			return w.Complete(tag)
		}
		v, _ := constText(n.Args[0])
		var err error
		if name == "transaction_isolation" {
			err = s.setTxnIsolation(v)
		} else {
			st, _ := lookupSetting("default_transaction_read_only")
			var canon string
			if canon, err = st.canonicalize(s, v); err == nil {
				err = s.setTxnReadOnly(canon == "on")
			}
		}
		if err != nil {
			return err
		}
		return w.Complete(tag)
	case "role", "session_authorization":
		return notSupported("SET %s is not supported", name)
	}
	st, err := lookupSetting(n.Name)
	if err != nil {
		return err
	}
	if st.readOnly {
		return st.readOnlyError()
	}
	key := strings.ToLower(st.name)
	var v string
	switch n.Kind {
	case pg_query.VariableSetKind_VAR_SET_VALUE:
		parts := make([]string, 0, len(n.Args))
		for _, a := range n.Args {
			t, ok := constText(a)
			if !ok {
				return pgerror.New(pgerrcode.SyntaxError, "SET %s takes only constant values", st.name)
			}
			if key == "search_path" {
				t = quoteSchema(t)
			}
			parts = append(parts, t)
		}
		v = strings.Join(parts, ", ")
	case pg_query.VariableSetKind_VAR_SET_CURRENT:
		return notSupported("SET %s FROM CURRENT is not supported", st.name)
	default: // DEFAULT, RESET
		v = s.defaults[key]
	}
	if n.IsLocal && !s.block {
		s.notice(w, "WARNING", pgerrcode.NoActiveSQLTransaction, "SET LOCAL can only be used in transaction blocks")
		return w.Complete(tag)
	}
	if err := s.assign(st, v, n.IsLocal); err != nil {
		return err
	}
	return w.Complete(tag)
}

// assign sets st to v for the session, or for the open transaction only
// when local.
func (s *Session) assign(st *setting, v string, local bool) error {
	key := strings.ToLower(st.name)
	old := s.vars[key]
	if err := s.setVar(st, v); err != nil {
		return err
	}
	if !local {
		// A session-level SET after SET LOCAL in the same transaction is
		// what stays at commit.
		delete(s.localVars, key)
		return nil
	}
	if s.localVars == nil {
		s.localVars = make(map[string]string)
	}
	if _, ok := s.localVars[key]; !ok {
		s.localVars[key] = old
	}
	return nil
}

// Setting implements builtins.SettingsAccess (current_setting).
func (e *evalCtx) Setting(name string, missingOK bool) (string, bool, error) {
	s := e.x.s
	if v, ok := s.txnSetting(name); ok {
		return v, true, nil
	}
	st, err := lookupSetting(name)
	if err != nil {
		if missingOK {
			return "", false, nil
		}
		return "", false, err
	}
	return s.vars[strings.ToLower(st.name)], true, nil
}

// SetSetting implements builtins.SettingsAccess (set_config). Outside a
// block, a local value lasts until the statement's implicit transaction
// ends, as in Postgres.
func (e *evalCtx) SetSetting(name, value string, reset, local bool) (string, error) {
	s := e.x.s
	switch strings.ToLower(name) {
	case "transaction_isolation":
		if !reset {
			if err := s.setTxnIsolation(value); err != nil {
				return "", err
			}
		}
		v, _ := s.txnSetting(name)
		return v, nil
	case "transaction_read_only":
		if !reset {
			st, _ := lookupSetting("default_transaction_read_only")
			canon, err := st.canonicalize(s, value)
			if err != nil {
				return "", err
			}
			if err := s.setTxnReadOnly(canon == "on"); err != nil {
				return "", err
			}
		}
		v, _ := s.txnSetting(name)
		return v, nil
	}
	st, err := lookupSetting(name)
	if err != nil {
		return "", err
	}
	if st.readOnly {
		return "", st.readOnlyError()
	}
	key := strings.ToLower(st.name)
	if reset {
		value = s.defaults[key]
	}
	if err := s.assign(st, value, local); err != nil {
		return "", err
	}
	return s.vars[key], nil
}

// quoteSchema quotes one search_path element when it needs it (a
// quoted identifier keeps its case; SET's arguments arrive unquoted).
func quoteSchema(name string) string {
	if name == "$user" || name != strings.ToLower(name) || strings.ContainsAny(name, ` ,"`) {
		return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
	}
	return name
}

// showColumns describes SHOW's result.
func showColumns(name string) []plan.Column {
	if strings.EqualFold(name, "all") {
		return []plan.Column{{Name: "name", T: types.Text}, {Name: "setting", T: types.Text}, {Name: "description", T: types.Text}}
	}
	col := strings.ToLower(name)
	if st, err := lookupSetting(name); err == nil {
		col = st.name
	}
	return []plan.Column{{Name: col, T: types.Text}}
}

// show runs SHOW name and SHOW ALL. described: the extended protocol
// already sent the row description.
func (s *Session) show(name string, w pgwire.ResultWriter, described bool) error {
	var rows [][]string
	if strings.EqualFold(name, "all") {
		for _, r := range s.settingRows() {
			rows = append(rows, []string{r[0], r[1], r[2]})
		}
	} else if v, ok := s.txnSetting(name); ok {
		rows = [][]string{{v}}
	} else if cs, ok := lookupClusterSetting(name); ok {
		ctx := context.Background()
		if s.cur != nil {
			ctx = s.cur.ctx
		}
		v, err := s.b.ClusterSetting(ctx, cs.name)
		if err != nil {
			return err
		}
		if v == "" && cs.dflt != nil {
			v = cs.dflt()
		}
		rows = [][]string{{v}}
	} else {
		st, err := lookupSetting(name)
		if err != nil {
			return err
		}
		rows = [][]string{{s.vars[strings.ToLower(st.name)]}}
	}
	if !described {
		if err := w.BeginRows(describeColumns(showColumns(name), nil)); err != nil {
			return err
		}
	}
	for _, r := range rows {
		vals := make([][]byte, len(r))
		for i, v := range r {
			vals[i] = []byte(v)
		}
		if err := w.WriteRow(vals); err != nil {
			return err
		}
	}
	return w.Complete("SHOW")
}

// discard runs DISCARD ALL / PLANS / SEQUENCES / TEMP.
func (s *Session) discard(n *pg_query.DiscardStmt, w pgwire.ResultWriter) error {
	switch n.Target {
	case pg_query.DiscardMode_DISCARD_ALL:
		if s.block {
			return pgerror.New(pgerrcode.ActiveSQLTransaction, "DISCARD ALL cannot run inside a transaction block")
		}
		s.saveVars()
		for _, st := range settingsList {
			k := strings.ToLower(st.name)
			s.vars[k] = s.defaults[k]
		}
		s.varsGen++
		s.applyDerived()
		s.prepared = make(map[string]*sqlPrepared)
		s.locks.UnlockAll()
		if err := s.discardTemp(); err != nil {
			return err
		}
		return w.Complete("DISCARD ALL")
	case pg_query.DiscardMode_DISCARD_PLANS:
		// There is no plan cache yet: nothing to discard.
		return w.Complete("DISCARD PLANS")
	case pg_query.DiscardMode_DISCARD_SEQUENCES:
		return w.Complete("DISCARD SEQUENCES")
	default:
		if err := s.discardTemp(); err != nil {
			return err
		}
		return w.Complete("DISCARD TEMP")
	}
}
