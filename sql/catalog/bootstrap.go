package catalog

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/cairn-db/cairn/kv"
)

// SuperuserName is the role Bootstrap creates, as initdb does.
const SuperuserName = "postgres"

// Bootstrap writes a fresh cluster's catalog in txn: the ID counter, the
// database postgres (PostgresDatabaseID) with its public schema
// (PublicSchemaID), and the superuser role postgres with verifier (a SCRAM
// verifier string; empty for none). pg_catalog and information_schema are
// virtual and need nothing stored. It fails with ErrAlreadyBootstrapped on
// a cluster that has a catalog.
func Bootstrap(ctx context.Context, txn *kv.Txn, verifier string) error {
	_, ok, err := txn.Get(ctx, idCounterKey())
	if err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	if ok {
		return ErrAlreadyBootstrapped
	}
	if err := txn.Put(ctx, idCounterKey(), binary.AppendUvarint(nil, uint64(FirstUserID))); err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	w := NewWriter(txn, nil)
	db := &Database{ID: PostgresDatabaseID, Name: "postgres", Owner: SuperuserName}
	db.setVersion(1)
	if err := w.claimName(ctx, db, db.Name); err != nil {
		return err
	}
	if err := w.put(ctx, db); err != nil {
		return err
	}
	if err := w.Create(ctx, publicSchema(PostgresDatabaseID)); err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	return w.CreateRole(ctx, &Role{Name: SuperuserName, Login: true, Superuser: true, Verifier: verifier})
}

// publicSchema is a database's public schema as PostgreSQL 15 creates it:
// owned by pg_database_owner, which may use and create in it, and usable
// (not creatable in) by everyone.
func publicSchema(db ID) *Schema {
	return &Schema{ID: PublicSchemaID, DatabaseID: db, Name: "public", Owner: DatabaseOwnerRole, Comment: "standard public schema",
		ACL: []ACLItem{
			{Grantee: DatabaseOwnerRole, Grantor: DatabaseOwnerRole, Privs: PrivUsage | PrivCreate},
			{Grantor: DatabaseOwnerRole, Privs: PrivUsage},
		}}
}
