package ddl

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/pgerror"
)

// knownExtensions are the extensions CREATE EXTENSION accepts: those whose
// functions Cairn has built in (sql/builtins), with the version
// PostgreSQL 15 installs by default. Creating one only records it in the
// database descriptor (pg_extension, \dx); its functions exist either way.
var knownExtensions = map[string]struct{ version, comment string }{
	// gen_random_uuid, gen_random_bytes, digest, hmac: crypt, gen_salt
	// and pgp_* are missing.
	"pgcrypto": {"1.3", "cryptographic functions"},
	// uuid_generate_v1/v1mc/v3/v4/v5, uuid_nil, uuid_ns_*.
	"uuid-ossp": {"1.1", "generate universally unique identifiers (UUIDs)"},
}

// extensionControlDir is where PostgreSQL 15's Debian packages look for
// control files; the message for an unknown extension names it as
// PostgreSQL's does.
const extensionControlDir = "/usr/share/postgresql/15/extension"

// createExtension is CREATE EXTENSION [IF NOT EXISTS] name [WITH] [SCHEMA
// s] [VERSION v] [CASCADE].
func (e *executor) createExtension(ctx context.Context, n *pg_query.CreateExtensionStmt) error {
	known, ok := knownExtensions[n.Extname]
	version := known.version
	var schemaName string
	for _, o := range n.Options {
		d := o.GetDefElem()
		switch d.GetDefname() {
		case "schema":
			schemaName = defString(d)
		case "new_version":
			if v := defString(d); v != version && ok {
				return pgerror.New(pgerrcode.InvalidParameterValue, "extension %q has no installation script nor update path for version %q", n.Extname, v)
			}
		case "cascade":
			// Neither known extension requires another.
		default:
			return notSupported("CREATE EXTENSION option %q is not supported", d.GetDefname())
		}
	}
	db, err := e.x.Writer.Database(ctx, e.x.Database.Name)
	if err != nil {
		return err
	}
	if slices.ContainsFunc(db.Extensions, func(x catalog.Extension) bool { return x.Name == n.Extname }) {
		if n.IfNotExists {
			e.notice(pgerrcode.DuplicateObject, fmt.Sprintf("extension %q already exists, skipping", n.Extname))
			return nil
		}
		return pgerror.New(pgerrcode.DuplicateObject, "extension %q already exists", n.Extname)
	}
	if !ok {
		return pgerror.New(pgerrcode.FeatureNotSupported, "extension %q is not available", n.Extname).
			WithDetail("Could not open extension control file \"%s/%s.control\": No such file or directory.", extensionControlDir, n.Extname).
			WithHint("The extension must first be installed on the system where PostgreSQL is running.")
	}
	var schema *catalog.Schema
	if schemaName != "" {
		schema, err = e.creationSchema(ctx, &pg_query.RangeVar{Schemaname: schemaName, Relname: n.Extname})
	} else {
		schema, err = e.creationSchema(ctx, &pg_query.RangeVar{Relname: n.Extname})
	}
	if err != nil {
		return err
	}
	oid, err := e.x.Writer.AllocateID(ctx)
	if err != nil {
		return fmt.Errorf("create extension %q: %w", n.Extname, err)
	}
	c := *db
	c.Extensions = append(slices.Clone(db.Extensions), catalog.Extension{OID: oid, Name: n.Extname, Version: version, SchemaID: schema.ID, Owner: e.x.User, Comment: known.comment})
	return e.x.Writer.Update(ctx, &c)
}

// dropExtensions is DROP EXTENSION [IF EXISTS] name, ... [CASCADE |
// RESTRICT]. No object depends on an extension (its functions are built
// in), so CASCADE and RESTRICT drop the same.
func (e *executor) dropExtensions(ctx context.Context, n *pg_query.DropStmt) error {
	db, err := e.x.Writer.Database(ctx, e.x.Database.Name)
	if err != nil {
		return err
	}
	a, err := e.authorizer(ctx)
	if err != nil {
		return err
	}
	exts := slices.Clone(db.Extensions)
	for _, obj := range n.Objects {
		name := strVal(obj)
		i := slices.IndexFunc(exts, func(x catalog.Extension) bool { return x.Name == name })
		if i < 0 {
			if n.MissingOk {
				e.notice("00000", fmt.Sprintf("extension %q does not exist, skipping", name))
				continue
			}
			return pgerror.New(pgerrcode.UndefinedObject, "extension %q does not exist", name)
		}
		if !a.IsOwner(exts[i].Owner) {
			return pgerror.New(pgerrcode.InsufficientPrivilege, "must be owner of extension %s", name)
		}
		exts = slices.Delete(exts, i, i+1)
	}
	if len(exts) == len(db.Extensions) {
		return nil
	}
	c := *db
	c.Extensions = exts
	return e.x.Writer.Update(ctx, &c)
}

// commentOnExtension is COMMENT ON EXTENSION name IS '...' | NULL. pg_dump
// writes one after every CREATE EXTENSION (the control file's comment), so
// a dump of a database with an extension restores only if it is accepted.
func (e *executor) commentOnExtension(ctx context.Context, n *pg_query.CommentStmt) error {
	db, err := e.x.Writer.Database(ctx, e.x.Database.Name)
	if err != nil {
		return err
	}
	name := strVal(n.Object)
	i := slices.IndexFunc(db.Extensions, func(x catalog.Extension) bool { return x.Name == name })
	if i < 0 {
		return pgerror.New(pgerrcode.UndefinedObject, "extension %q does not exist", name)
	}
	a, err := e.authorizer(ctx)
	if err != nil {
		return err
	}
	if !a.IsOwner(db.Extensions[i].Owner) {
		return pgerror.New(pgerrcode.InsufficientPrivilege, "must be owner of extension %s", name)
	}
	c := *db
	c.Extensions = slices.Clone(db.Extensions)
	c.Extensions[i].Comment = n.Comment
	return e.x.Writer.Update(ctx, &c)
}
