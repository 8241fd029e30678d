package session

import (
	"context"
	"fmt"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/ddl"
	"github.com/cairn-db/cairn/sql/parser"
)

// Temporary tables (CREATE TEMP TABLE). They are ordinary tables in a
// schema of the session's own, pg_temp_<pid>_<random> (pids repeat
// across nodes), which the first temporary object creates in its
// transaction, the search path lists first (searchPath), `pg_temp`
// names, other sessions cannot read (plan's catalog refuses another
// session's pg_temp_ schema, 0A000), and Close drops with everything in
// it. ON COMMIT DROP and ON COMMIT DELETE ROWS are carried out inside each
// committing transaction, just before its commit, as PostgreSQL's
// PreCommit_on_commit_actions does.
//
// A node that crashes leaves its sessions' temporary schemas behind:
// they are not on anyone's search path and hold no one's data, and
// DROP SCHEMA removes them.

type tempState struct {
	// name is the session's temporary schema, "" until the first
	// temporary object (the schema may not exist: its creation rolled
	// back).
	name string
	// onCommit holds the temporary tables with an ON COMMIT action.
	onCommit map[catalog.ID]ddl.OnCommitAction
}

// tempSchema is ddl.Context.TempSchema.
func (s *Session) tempSchema(ctx context.Context, w *catalog.Writer) (*catalog.Schema, error) {
	if s.temp.name == "" {
		s.temp.name = fmt.Sprintf("pg_temp_%d_%04x", s.pid, s.rng.Uint32()&0xffff)
	}
	sc, ok, err := w.LookupSchema(ctx, s.db.ID, s.temp.name)
	if err != nil || ok {
		return sc, err
	}
	sc = &catalog.Schema{DatabaseID: s.db.ID, Name: s.temp.name, Owner: s.user, Temp: true}
	if err := w.Create(ctx, sc); err != nil {
		return nil, err
	}
	return sc, nil
}

// recordOnCommit is ddl.Context.OnCommit.
func (s *Session) recordOnCommit(table catalog.ID, action ddl.OnCommitAction) {
	if s.temp.onCommit == nil {
		s.temp.onCommit = map[catalog.ID]ddl.OnCommitAction{}
	}
	s.temp.onCommit[table] = action
}

// onCommitActions runs the ON COMMIT actions in txn, which is about to
// commit. A table that no longer exists (dropped, or created by a
// transaction that rolled back) is forgotten.
func (s *Session) onCommitActions(ctx context.Context, txn *kv.Txn) error {
	if len(s.temp.onCommit) == 0 {
		return nil
	}
	r := catalog.NewReader(txn, s.b.cache)
	for id, action := range s.temp.onCommit {
		d, err := r.ByID(ctx, id)
		t, ok := d.(*catalog.Table)
		if err != nil || !ok {
			delete(s.temp.onCommit, id)
			continue
		}
		name := builtins.QuoteIdent(s.temp.name) + "." + builtins.QuoteIdent(t.Name)
		sql := "TRUNCATE " + name
		if action == ddl.OnCommitDrop {
			sql = "DROP TABLE " + name
			delete(s.temp.onCommit, id)
		}
		if err := s.internalDDL(ctx, txn, sql); err != nil {
			return fmt.Errorf("ON COMMIT of temporary table %s: %w", t.Name, err)
		}
	}
	return nil
}

// dropTempSchema drops the session's temporary schema and its contents,
// in a transaction of its own (the session is ending).
func (s *Session) dropTempSchema(ctx context.Context) {
	if s.temp.name == "" {
		return
	}
	var wrote *kv.Txn
	err := s.b.db.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		_, ok, err := catalog.NewReader(txn, s.b.cache).LookupSchema(ctx, s.db.ID, s.temp.name)
		if err != nil || !ok {
			return err
		}
		wrote = txn
		return s.internalDDL(ctx, txn, "DROP SCHEMA "+builtins.QuoteIdent(s.temp.name)+" CASCADE")
	})
	if wrote != nil {
		s.b.cache.EndDDL(wrote)
	}
	if err != nil {
		s.log.Warn("session: dropping the temporary schema failed", "schema", s.temp.name, "err", err)
	}
}

// internalDDL runs one DDL statement the session issues itself in txn.
func (s *Session) internalDDL(ctx context.Context, txn *kv.Txn, sql string) error {
	stmts, err := parser.Parse(sql)
	if err != nil {
		return err
	}
	// As execDDL: a schema change's writes are intents others meet.
	if err := txn.DisableWriteBuffering(ctx); err != nil {
		return err
	}
	s.txnWroteCatalog = true
	dc := &ddl.Context{
		Txn: txn, Writer: catalog.NewWriter(txn, s.b.cache), Database: s.db, User: s.user,
		SearchPath: s.searchPath(), Catalog: s.resolver(txn), DB: s.b.db, BackendPID: int32(s.pid),
		Memory: s.b.cfg.Memory, TempStorage: s.b.cfg.TempStorage,
		DrainTimestamp: s.b.cfg.DrainTimestamp,
		TempSchema:     s.tempSchema, OnCommit: s.recordOnCommit,
	}
	_, err = ddl.Exec(ctx, dc, &stmts[0])
	return err
}

// discardTemp is DISCARD TEMP (and part of DISCARD ALL): the session's
// temporary tables are dropped, in the open block's transaction if there
// is one, else at once.
func (s *Session) discardTemp() error {
	if s.temp.name == "" {
		return nil
	}
	ctx := context.Background()
	if !s.block {
		s.dropTempSchema(ctx)
		s.temp = tempState{}
		return nil
	}
	txn := s.kvTxn()
	_, ok, err := catalog.NewReader(txn, s.b.cache).LookupSchema(ctx, s.db.ID, s.temp.name)
	if err != nil || !ok {
		return err
	}
	return s.internalDDL(ctx, txn, "DROP SCHEMA "+builtins.QuoteIdent(s.temp.name)+" CASCADE")
}
