package ddl

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/pgwire/pgauth"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sequence"
	"github.com/cairn-db/cairn/sql/stats"
)

// ---- views ----

func (e *executor) createView(ctx context.Context, n *pg_query.ViewStmt) error {
	checkOption := ""
	switch n.WithCheckOption {
	case pg_query.ViewCheckOption_LOCAL_CHECK_OPTION:
		checkOption = "local"
	case pg_query.ViewCheckOption_CASCADED_CHECK_OPTION:
		checkOption = "cascaded"
	}
	for _, d := range defElems(n.Options) {
		switch d.Defname {
		case "security_barrier", "security_invoker":
		case "check_option":
			checkOption = strings.ToLower(defString(d))
			if checkOption != "local" && checkOption != "cascaded" {
				return pgerror.New(pgerrcode.InvalidParameterValue, "invalid value for \"check_option\" option").
					WithDetail("Valid values are \"local\" and \"cascaded\".")
			}
		default:
			return pgerror.New(pgerrcode.InvalidParameterValue, "unrecognized parameter %q", d.Defname)
		}
	}
	if n.View.Relpersistence == "t" {
		return notSupported("temporary views are not supported yet")
	}
	schema, err := e.creationSchema(ctx, n.View)
	if err != nil {
		return err
	}
	name := truncateIdent(n.View.Relname)
	if err := e.qualifyRelations(ctx, n.Query); err != nil {
		return err
	}
	query, err := deparse(n.Query)
	if err != nil {
		return fmt.Errorf("ddl: deparsing view query: %w", err)
	}
	if checkOption != "" {
		if why := plan.ViewNotUpdatableReason(query); why != "" {
			return pgerror.New(pgerrcode.FeatureNotSupported, "WITH CHECK OPTION is supported only on automatically updatable views").
				WithHint("%s", why)
		}
	}
	if e.x.Describe == nil {
		return notSupported("CREATE VIEW needs the session's binder")
	}
	pcols, err := e.x.Describe(ctx, query)
	if err != nil {
		return err
	}
	aliases := nameList(n.Aliases)
	var cols []catalog.ViewColumn
	for _, c := range pcols {
		if c.Hidden {
			continue
		}
		cols = append(cols, catalog.ViewColumn{Name: c.Name, Type: c.T})
	}
	if len(aliases) > len(cols) {
		return pgerror.New(pgerrcode.SyntaxError, "CREATE VIEW specifies more column names than columns")
	}
	for i, a := range aliases {
		cols[i].Name = truncateIdent(a)
	}
	seen := map[string]bool{}
	for _, c := range cols {
		if seen[c.Name] {
			return pgerror.New(pgerrcode.DuplicateColumn, "column %q specified more than once", c.Name)
		}
		seen[c.Name] = true
	}
	deps, err := e.queryDependencies(ctx, n.Query)
	if err != nil {
		return err
	}
	existing, err := e.x.Writer.Relation(ctx, e.x.Database.ID, schema.ID, name)
	if err == nil {
		old, ok := existing.(*catalog.View)
		if !n.Replace {
			return pgerror.New(pgerrcode.DuplicateTable, "relation %q already exists", name)
		}
		if !ok {
			return pgerror.New(pgerrcode.WrongObjectType, "%q is not a view", name)
		}
		if len(cols) < len(old.Columns) {
			return pgerror.New(pgerrcode.InvalidTableDefinition, "cannot drop columns from view")
		}
		for i, oc := range old.Columns {
			if cols[i].Name != oc.Name {
				return pgerror.New(pgerrcode.InvalidTableDefinition, "cannot change name of view column %q to %q", oc.Name, cols[i].Name).
					WithHint("Use ALTER VIEW ... RENAME COLUMN ... to change name of view column instead.")
			}
			if !cols[i].Type.Identical(oc.Type) {
				return pgerror.New(pgerrcode.InvalidTableDefinition, "cannot change data type of view column %q from %s to %s", oc.Name, oc.Type.Name(), cols[i].Type.Name())
			}
		}
		v := *old
		v.Query, v.Columns, v.DependsOn, v.CheckOption = query, cols, deps, checkOption
		return e.x.Writer.Update(ctx, &v)
	} else if pgerror.Code(err) != pgerrcode.UndefinedTable {
		return err
	}
	return e.x.Writer.Create(ctx, &catalog.View{DatabaseID: e.x.Database.ID, SchemaID: schema.ID, Name: name, Owner: e.x.User,
		Query: query, Columns: cols, DependsOn: deps, CheckOption: checkOption})
}

// qualifyRelations gives every relation name of a view's query that
// resolves to a table, view or sequence its schema, in place: the stored
// query then means what it meant at CREATE VIEW whatever the search path
// of a later reader (PostgreSQL stores the resolved relations in the
// view's rule; pg_dump reads and restores views with an empty search
// path). CTE names and the system catalogs stay as written.
// pg_get_viewdef drops the schema again where the relation is visible.
func (e *executor) qualifyRelations(ctx context.Context, q *pg_query.Node) error {
	ctes := map[string]bool{}
	var rvs []*pg_query.RangeVar
	walkMessages(q.ProtoReflect(), func(m proto.Message) {
		switch x := m.(type) {
		case *pg_query.CommonTableExpr:
			ctes[x.Ctename] = true
		case *pg_query.RangeVar:
			rvs = append(rvs, x)
		}
	})
	for _, rv := range rvs {
		if rv.Schemaname != "" || ctes[rv.Relname] {
			continue
		}
		_, sc, err := e.lookupRelation(ctx, rv)
		if pgerror.Code(err) == pgerrcode.UndefinedTable {
			continue // the binder reports it, with its position
		}
		if err != nil {
			return err
		}
		if sc != nil && !sc.Virtual {
			rv.Schemaname = sc.Name
		}
	}
	return nil
}

// walkMessages calls f for m and every message below it.
func walkMessages(m protoreflect.Message, f func(proto.Message)) {
	if !m.IsValid() {
		return
	}
	f(m.Interface())
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				walkMessages(l.Get(i).Message(), f)
			}
		case fd.Message() != nil && !fd.IsMap():
			walkMessages(v.Message(), f)
		}
		return true
	})
}

// queryDependencies lists the relations a query names (its RangeVars that
// resolve, CTE names excepted): what a view depends on.
func (e *executor) queryDependencies(ctx context.Context, q *pg_query.Node) ([]catalog.ID, error) {
	b, err := protojson.Marshal(q)
	if err != nil {
		return nil, fmt.Errorf("ddl: walking view query: %w", err)
	}
	var tree any
	if err := json.Unmarshal(b, &tree); err != nil {
		return nil, fmt.Errorf("ddl: walking view query: %w", err)
	}
	var rvs []*pg_query.RangeVar
	ctes := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if rv, ok := x["RangeVar"].(map[string]any); ok {
				r := &pg_query.RangeVar{}
				r.Relname, _ = rv["relname"].(string)
				r.Schemaname, _ = rv["schemaname"].(string)
				rvs = append(rvs, r)
			}
			if name, ok := x["ctename"].(string); ok {
				ctes[name] = true
			}
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(tree)
	var out []catalog.ID
	for _, rv := range rvs {
		if rv.Schemaname == "" && ctes[rv.Relname] {
			continue
		}
		d, _, err := e.lookupRelation(ctx, rv)
		if err != nil {
			continue // a catalog table, or a name the binder resolved otherwise
		}
		if !slices.Contains(out, d.DescID()) {
			out = append(out, d.DescID())
		}
	}
	return out, nil
}

// ---- TRUNCATE ----

func (e *executor) truncate(ctx context.Context, n *pg_query.TruncateStmt) error {
	cascade := n.Behavior == pg_query.DropBehavior_DROP_CASCADE
	var tables []*catalog.Table
	in := map[catalog.ID]bool{}
	for _, r := range n.Relations {
		rv := r.GetRangeVar()
		d, _, err := e.lookupRelation(ctx, rv)
		if err != nil {
			return err
		}
		t, ok := d.(*catalog.Table)
		if !ok {
			return pgerror.New(pgerrcode.WrongObjectType, "%q is not a table", rv.Relname)
		}
		if err := e.checkPrivilege(ctx, t, catalog.PrivTruncate); err != nil {
			return err
		}
		if !in[t.ID] {
			in[t.ID] = true
			tables = append(tables, t)
		}
	}
	// Tables whose foreign keys reference a truncated table must be
	// truncated too: with CASCADE they are added, else 0A000 as in
	// PostgreSQL.
	for i := 0; i < len(tables); i++ {
		for _, ref := range tables[i].ReferencedBy {
			if in[ref] {
				continue
			}
			child, err := e.x.Writer.TableByID(ctx, ref)
			if err != nil {
				return err
			}
			if !cascade {
				return pgerror.New(pgerrcode.FeatureNotSupported, "cannot truncate a table referenced in a foreign key constraint").
					WithDetail("Table %q references %q.", child.Name, tables[i].Name).
					WithHint("Truncate table %q at the same time, or use TRUNCATE ... CASCADE.", child.Name)
			}
			e.notice("00000", fmt.Sprintf("truncate cascades to table %q", child.Name))
			in[ref] = true
			tables = append(tables, child)
		}
	}
	for _, t := range tables {
		if err := e.truncateStorage(ctx, t); err != nil {
			return err
		}
		// The table's statistics describe rows that are gone: the
		// planner treats it as never analyzed (reltuples -1), as
		// PostgreSQL's pg_class does after TRUNCATE.
		if err := stats.Delete(ctx, e.x.Txn, t.ID); err != nil {
			return err
		}
	}
	if !n.RestartSeqs {
		return nil
	}
	for _, t := range tables {
		for _, c := range t.Columns {
			if c.SequenceID == 0 {
				continue
			}
			d, err := e.x.Writer.ByID(ctx, c.SequenceID)
			if err != nil {
				continue
			}
			seq, ok := d.(*catalog.Sequence)
			if !ok || seq.OwnedBy == nil || seq.OwnedBy.TableID != t.ID {
				continue
			}
			if e.x.DB == nil {
				return notSupported("RESTART IDENTITY needs the session's KV client")
			}
			// Unlike PostgreSQL, the restart is not undone if the
			// transaction rolls back: sequence values live outside
			// transactions in Cairn.
			if _, err := sequence.SetValue(ctx, e.x.DB, seq, seq.Start, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// truncateStorage empties t by moving it to fresh storage: every index
// gets a new storage ID in a new descriptor version, written in the
// transaction, instead of a tombstone per row (docs/architecture.md,
// "Bulk loads"). Other transactions keep reading the old storage through
// the old version until this one commits; a writer that resolved the old
// version fails its commit-time validation of the table's stamp key
// (kv/txn_validate.go) unless it committed before the new version was
// written, in which case TRUNCATE, serialized after it, discards its rows
// with the rest. The table is marked (catalog.TruncatedTableMark) so that
// a load into it later in the transaction can write committed values, as
// into a table created in it.
//
// The old storage is freed once the transaction commits, by a range
// deletion of each old index's span (kv.DB.ClearRange, run by
// kv.Txn.AfterCommit): no descriptor names it any more, and a rollback
// never runs it. Like PostgreSQL's TRUNCATE this is not MVCC-safe: a
// transaction whose snapshot predates the TRUNCATE and that reads the
// table only afterwards finds it empty. The local indexes of a
// hash-partitioned table spread over the buckets of its group, so their
// old entries have no one span; they stay as garbage until DROP TABLE
// clears the group.
func (e *executor) truncateStorage(ctx context.Context, t *catalog.Table) error {
	old, err := t.Layout()
	if err != nil {
		return err
	}
	nt := cloneTable(t)
	if err := catalog.MoveToFreshStorage(ctx, e.x.Txn.DB(), nt); err != nil {
		return err
	}
	if err := e.x.Writer.Update(ctx, nt); err != nil {
		return fmt.Errorf("moving table %q to fresh storage: %w", t.Name, err)
	}
	e.x.Txn.MarkNew(catalog.TruncatedTableMark(t.ID))
	var spans []kvpb.Span
	for _, idx := range append([]*rowenc.IndexLayout{&old.Primary}, indexLayoutPtrs(old.Secondary)...) {
		if idx.Local && old.HashColumns > 0 {
			continue
		}
		spans = append(spans, old.IndexBucketSpan(idx, 0))
	}
	db := e.x.Txn.DB()
	e.x.Txn.AfterCommit(func(ctx context.Context) {
		for _, sp := range spans {
			// A failure leaves garbage no descriptor names, which DROP
			// TABLE's range deletion of the table's keyspace still
			// covers; the commit stands either way.
			_ = db.ClearRange(ctx, sp.Key, sp.EndKey)
		}
	})
	return nil
}

func indexLayoutPtrs(xs []rowenc.IndexLayout) []*rowenc.IndexLayout {
	out := make([]*rowenc.IndexLayout, len(xs))
	for i := range xs {
		out[i] = &xs[i]
	}
	return out
}

// ---- COMMENT ----

func (e *executor) comment(ctx context.Context, n *pg_query.CommentStmt) error {
	text := n.Comment
	switch n.Objtype {
	case pg_query.ObjectType_OBJECT_TYPE:
		return e.commentOnType(ctx, n)
	case pg_query.ObjectType_OBJECT_EXTENSION:
		return e.commentOnExtension(ctx, n)
	case pg_query.ObjectType_OBJECT_FUNCTION:
		f, err := e.lookupFunction(ctx, n.Object.GetObjectWithArgs(), false)
		if err != nil {
			return err
		}
		if err := e.checkOwner(ctx, f); err != nil {
			return err
		}
		c := *f
		c.Comment = text
		return e.x.Writer.Update(ctx, &c)
	case pg_query.ObjectType_OBJECT_TABLE, pg_query.ObjectType_OBJECT_VIEW, pg_query.ObjectType_OBJECT_SEQUENCE:
		rv := rangeVarOf(n.Object)
		d, _, err := e.lookupRelation(ctx, rv)
		if err != nil {
			return err
		}
		if err := e.checkOwner(ctx, d); err != nil {
			return err
		}
		switch v := d.(type) {
		case *catalog.Table:
			if n.Objtype != pg_query.ObjectType_OBJECT_TABLE {
				return pgerror.New(pgerrcode.WrongObjectType, "%q is not a %s", v.Name, strings.ToLower(strings.TrimPrefix(n.Objtype.String(), "OBJECT_")))
			}
			t := cloneTable(v)
			t.Comment = text
			return e.x.Writer.Update(ctx, t)
		case *catalog.View:
			if n.Objtype != pg_query.ObjectType_OBJECT_VIEW {
				return pgerror.New(pgerrcode.WrongObjectType, "%q is not a table", v.Name)
			}
			c := *v
			c.Comment = text
			return e.x.Writer.Update(ctx, &c)
		case *catalog.Sequence:
			if n.Objtype != pg_query.ObjectType_OBJECT_SEQUENCE {
				return pgerror.New(pgerrcode.WrongObjectType, "%q is not a table", v.Name)
			}
			c := *v
			c.Comment = text
			return e.x.Writer.Update(ctx, &c)
		}
	case pg_query.ObjectType_OBJECT_COLUMN:
		names := nameList(n.Object.GetList().GetItems())
		if len(names) < 2 {
			return pgerror.New(pgerrcode.SyntaxError, "column name must be qualified")
		}
		rv := &pg_query.RangeVar{Relname: names[len(names)-2]}
		if len(names) > 2 {
			rv.Schemaname = names[len(names)-3]
		}
		t, err := e.mutableTable(ctx, rv)
		if err != nil {
			return err
		}
		if err := e.checkOwner(ctx, t); err != nil {
			return err
		}
		c := t.ColumnByName(names[len(names)-1])
		if c == nil {
			return pgerror.New(pgerrcode.UndefinedColumn, "column %q of relation %q does not exist", names[len(names)-1], t.Name)
		}
		c.Comment = text
		return e.x.Writer.Update(ctx, t)
	case pg_query.ObjectType_OBJECT_TABCONSTRAINT:
		return e.commentOnConstraint(ctx, n)
	case pg_query.ObjectType_OBJECT_INDEX:
		rv := rangeVarOf(n.Object)
		t, idx, err := e.findIndex(ctx, rv)
		if err != nil {
			return err
		}
		if idx == nil {
			return pgerror.New(pgerrcode.UndefinedTable, "relation %q does not exist", qualified(rv))
		}
		c := cloneTable(t)
		c.IndexByName(idx.Name).Comment = text
		return e.x.Writer.Update(ctx, c)
	case pg_query.ObjectType_OBJECT_SCHEMA:
		s, err := e.x.Writer.Schema(ctx, e.x.Database.ID, strVal(n.Object))
		if err != nil {
			return err
		}
		if s.Virtual {
			return pgerror.New(pgerrcode.InsufficientPrivilege, "must be owner of schema %s", s.Name)
		}
		c := *s
		c.Comment = text
		return e.x.Writer.Update(ctx, &c)
	case pg_query.ObjectType_OBJECT_DATABASE:
		db, err := e.x.Writer.Database(ctx, strVal(n.Object))
		if err != nil {
			return err
		}
		c := *db
		c.Comment = text
		return e.x.Writer.Update(ctx, &c)
	}
	return notSupported("COMMENT ON %s is not supported yet", strings.TrimPrefix(n.Objtype.String(), "OBJECT_"))
}

// ---- roles and privileges ----

// roleOptions applies CREATE/ALTER ROLE options to r. Only LOGIN,
// SUPERUSER and PASSWORD are recorded (the catalog's Role has nothing
// else); the other PostgreSQL options are accepted so that scripts written
// for PostgreSQL run, and change nothing (doc.go).
func roleOptions(r *catalog.Role, opts []*pg_query.Node) error {
	seen := map[string]bool{}
	for _, d := range defElems(opts) {
		if seen[d.Defname] {
			return pgerror.New(pgerrcode.SyntaxError, "conflicting or redundant options")
		}
		seen[d.Defname] = true
		switch d.Defname {
		case "canlogin":
			r.Login = defString(d) == "true"
		case "superuser":
			r.Superuser = defString(d) == "true"
		case "password":
			if d.Arg == nil {
				r.Verifier = ""
				continue
			}
			pw := defString(d)
			switch {
			case strings.HasPrefix(pw, "SCRAM-SHA-256$"):
				if _, err := pgauth.ParseVerifier(pw); err != nil {
					return pgerror.New(pgerrcode.InvalidPassword, "invalid SCRAM secret for role %q", r.Name)
				}
				r.Verifier = pw
			case strings.HasPrefix(pw, "md5") && len(pw) == 35:
				return notSupported("MD5 password hashes are not supported: use a plain password or a SCRAM-SHA-256 secret")
			case pw == "":
				// PostgreSQL: an empty password is no password.
				r.Verifier = ""
			default:
				v, err := pgauth.Verifier(pw)
				if err != nil {
					return fmt.Errorf("ddl: computing the SCRAM verifier: %w", err)
				}
				r.Verifier = v
			}
		case "createdb", "createrole", "inherit", "connectionlimit", "validUntil", "isreplication", "bypassrls",
			"rolemembers", "addroleto", "adminmembers", "sysid":
		default:
			return pgerror.New(pgerrcode.SyntaxError, "option %q not recognized", d.Defname)
		}
	}
	return nil
}

func (e *executor) createRole(ctx context.Context, n *pg_query.CreateRoleStmt) (string, error) {
	tag := "CREATE ROLE"
	r := &catalog.Role{Name: n.Role, Login: n.StmtType == pg_query.RoleStmtType_ROLESTMT_USER}
	if strings.HasPrefix(r.Name, "pg_") {
		return tag, pgerror.New(pgerrcode.ReservedName, "role name %q is reserved", r.Name).
			WithDetail("Role names starting with \"pg_\" are reserved.")
	}
	if err := roleOptions(r, n.Options); err != nil {
		return tag, err
	}
	if err := e.requireSuperuser(ctx, "create role"); err != nil {
		return tag, err
	}
	return tag, e.x.Writer.CreateRole(ctx, r)
}

func (e *executor) alterRole(ctx context.Context, n *pg_query.AlterRoleStmt) (string, error) {
	tag := "ALTER ROLE"
	name, err := e.roleName(n.Role)
	if err != nil {
		return tag, err
	}
	r, err := e.x.Writer.Role(ctx, name)
	if err != nil {
		return tag, err
	}
	c := *r
	if err := roleOptions(&c, n.Options); err != nil {
		return tag, err
	}
	if name == catalog.SuperuserName && !c.Superuser {
		// The per-statement privilege check answers for the bootstrap
		// superuser without reading its role (catalog.NewAuthorizer).
		return tag, pgerror.New(pgerrcode.InsufficientPrivilege, "permission denied to alter role").
			WithDetail("The bootstrap user must have the SUPERUSER attribute.")
	}
	if catalog.IsPredefinedRole(name) {
		return tag, pgerror.New(pgerrcode.InsufficientPrivilege, "permission denied to alter role")
	}
	// A role may change its own password; anything else takes a
	// superuser (Cairn has no CREATEROLE).
	if name != e.x.User || len(n.Options) != 1 || defElems(n.Options)[0].Defname != "password" {
		if err := e.requireSuperuser(ctx, "alter role"); err != nil {
			return tag, err
		}
	}
	return tag, e.x.Writer.UpdateRole(ctx, &c)
}

func (e *executor) roleName(rs *pg_query.RoleSpec) (string, error) {
	switch rs.Roletype {
	case pg_query.RoleSpecType_ROLESPEC_CSTRING:
		return rs.Rolename, nil
	case pg_query.RoleSpecType_ROLESPEC_CURRENT_USER, pg_query.RoleSpecType_ROLESPEC_SESSION_USER, pg_query.RoleSpecType_ROLESPEC_CURRENT_ROLE:
		return e.x.User, nil
	}
	return "", notSupported("role specification %s is not supported", rs.Roletype)
}

func (e *executor) dropRole(ctx context.Context, n *pg_query.DropRoleStmt) (string, error) {
	tag := "DROP ROLE"
	for _, rn := range n.Roles {
		name, err := e.roleName(rn.GetRoleSpec())
		if err != nil {
			return tag, err
		}
		if _, err := e.x.Writer.Role(ctx, name); err != nil {
			if n.MissingOk && pgerror.Code(err) == pgerrcode.UndefinedObject {
				e.notice("00000", fmt.Sprintf("role %q does not exist, skipping", name))
				continue
			}
			return tag, err
		}
		switch name {
		case e.x.User:
			return tag, pgerror.New(pgerrcode.ObjectInUse, "current user cannot be dropped")
		case catalog.SuperuserName, catalog.DatabaseOwnerRole:
			return tag, pgerror.New(pgerrcode.DependentObjectsStillExist, "cannot drop role %s because it is required by the database system", name)
		}
		if err := e.requireSuperuser(ctx, "drop role"); err != nil {
			return tag, err
		}
		deps, err := e.roleDependents(ctx, name)
		if err != nil {
			return tag, err
		}
		if len(deps) > 0 {
			return tag, pgerror.New(pgerrcode.DependentObjectsStillExist, "role \"%s\" cannot be dropped because some objects depend on it", name).
				WithDetail("%s", strings.Join(deps, "\n"))
		}
		if err := e.x.Writer.DropRole(ctx, name); err != nil {
			return tag, err
		}
		if err := e.forgetMemberships(ctx, name); err != nil {
			return tag, err
		}
	}
	return tag, nil
}
