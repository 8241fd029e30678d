package ddl

import (
	"context"
	"fmt"
	"math"
	"strconv"

	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/sequence"
	"github.com/cairn-db/cairn/sql/types"
)

// reloptions PostgreSQL 15 accepts on tables (heap) and btree indexes.
// Cairn has no heap pages or vacuum, so they are recorded nowhere: they
// tune a storage engine Cairn does not have, and accepting them keeps
// pg_dump output and ORMs that set fillfactor working.
var pgRelOptions = map[string]bool{
	"fillfactor": true, "toast_tuple_target": true, "parallel_workers": true,
	"autovacuum_enabled": true, "autovacuum_vacuum_threshold": true, "autovacuum_vacuum_scale_factor": true,
	"autovacuum_vacuum_insert_threshold": true, "autovacuum_vacuum_insert_scale_factor": true,
	"autovacuum_analyze_threshold": true, "autovacuum_analyze_scale_factor": true,
	"autovacuum_vacuum_cost_delay": true, "autovacuum_vacuum_cost_limit": true,
	"autovacuum_freeze_min_age": true, "autovacuum_freeze_max_age": true, "autovacuum_freeze_table_age": true,
	"autovacuum_multixact_freeze_min_age": true, "autovacuum_multixact_freeze_max_age": true,
	"autovacuum_multixact_freeze_table_age": true, "log_autovacuum_min_duration": true,
	"user_catalog_table": true, "vacuum_index_cleanup": true, "vacuum_truncate": true,
	"deduplicate_items": true,
}

// cairnParams are the storage parameters of the Cairn dialect (the parser's
// contract, sql/parser/doc.go) and of YugabyteDB colocation. They change
// where rows live, which is not built yet: refusing them is better than
// creating a table whose layout differs from what the user asked.
var cairnParams = map[string]bool{
	"cairn_pk_order":      true,
	"cairn_split_tablets": true, "colocated": true, "colocation": true,
}

// checkStorageParams accepts PostgreSQL's reloptions and refuses the
// Cairn ones (0A000) and unknown ones (22023, as PostgreSQL).
func checkStorageParams(opts []*pg_query.Node, index bool) error {
	for _, d := range defElems(opts) {
		name := d.Defname
		if d.Defnamespace == "toast" {
			continue
		}
		if d.Defnamespace != "" {
			return pgerror.New(pgerrcode.InvalidParameterValue, "unrecognized parameter namespace %q", d.Defnamespace)
		}
		switch {
		case name == optPKHashBuckets || name == optHashBuckets:
			return pgerror.New(pgerrcode.InvalidParameterValue, "storage parameter %q does not apply here", name).
				WithHint("USING HASH goes after a primary key's or an index's column list.")
		case cairnParams[name]:
			return notSupported("storage parameter %q is not supported yet", name)
		case name == "oids":
			if v := defString(d); v == "true" || v == "on" {
				return pgerror.New(pgerrcode.FeatureNotSupported, "tables declared WITH OIDS are not supported")
			}
		case pgRelOptions[name]:
			if name == "fillfactor" {
				v, err := strconv.Atoi(defString(d))
				lo := 10
				if err != nil || v < lo || v > 100 {
					return pgerror.New(pgerrcode.InvalidParameterValue, "value %s out of bounds for option \"fillfactor\"", defString(d)).
						WithDetail("Valid values are between \"%d\" and \"100\".", lo)
				}
			}
		default:
			return pgerror.New(pgerrcode.InvalidParameterValue, "unrecognized parameter %q", name)
		}
	}
	return nil
}

// defString returns a DefElem's argument as text.
func defString(d *pg_query.DefElem) string {
	if d.Arg == nil {
		return ""
	}
	switch v := d.Arg.Node.(type) {
	case *pg_query.Node_String_:
		return v.String_.Sval
	case *pg_query.Node_Integer:
		return strconv.Itoa(int(v.Integer.Ival))
	case *pg_query.Node_Float:
		return v.Float.Fval
	case *pg_query.Node_Boolean:
		return strconv.FormatBool(v.Boolean.Boolval)
	case *pg_query.Node_TypeName:
		names := nameList(v.TypeName.Names)
		return names[len(names)-1]
	}
	return ""
}

// defInt64 returns a DefElem's integer argument.
func defInt64(d *pg_query.DefElem) (int64, error) {
	s := defString(d)
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, pgerror.New(pgerrcode.InvalidParameterValue, "%s requires a numeric value", d.Defname)
	}
	return v, nil
}

// seqTypeBounds returns the range of a sequence's AS type.
func seqTypeBounds(oid uint32) (lo, hi int64) {
	switch oid {
	case types.Int2.Oid:
		return math.MinInt16, math.MaxInt16
	case types.Int4.Oid:
		return math.MinInt32, math.MaxInt32
	}
	return math.MinInt64, math.MaxInt64
}

func seqTypeName(oid uint32) string {
	switch oid {
	case types.Int2.Oid:
		return "smallint"
	case types.Int4.Oid:
		return "integer"
	}
	return "bigint"
}

// applySequenceOptions applies CREATE/ALTER SEQUENCE options to seq
// (init: a new sequence, so unset options take PostgreSQL's defaults),
// with PostgreSQL's checks and messages (init_params in sequence.c).
// typ is the AS type a serial or identity column implies (nil: bigint,
// or the current type when altering). restart reports RESTART [WITH n].
func applySequenceOptions(seq *catalog.Sequence, opts []*pg_query.Node, init bool, typ *types.T) error {
	_, _, err := applySeqOpts(seq, opts, init, typ)
	return err
}

func applySeqOpts(seq *catalog.Sequence, opts []*pg_query.Node, init bool, typ *types.T) (restart bool, restartWith *int64, err error) {
	var inc, minv, maxv, start, cache *int64
	var noMin, noMax, asGiven bool
	seen := map[string]bool{}
	for _, d := range defElems(opts) {
		if seen[d.Defname] {
			return false, nil, pgerror.New(pgerrcode.SyntaxError, "conflicting or redundant options")
		}
		seen[d.Defname] = true
		switch d.Defname {
		case "as":
			tn := d.Arg.GetTypeName()
			t, err := sem.TypeFromAST(nil, tn)
			if err != nil {
				return false, nil, err
			}
			switch t.Oid {
			case types.Int2.Oid, types.Int4.Oid, types.Int8.Oid:
			default:
				return false, nil, pgerror.New(pgerrcode.InvalidParameterValue, "sequence type must be smallint, integer, or bigint")
			}
			typ, asGiven = t, true
		case "increment", "minvalue", "maxvalue", "start", "cache", "restart":
			if d.Arg == nil {
				switch d.Defname {
				case "minvalue":
					noMin = true
					continue
				case "maxvalue":
					noMax = true
					continue
				case "restart":
					restart = true
					continue
				}
				return false, nil, pgerror.New(pgerrcode.InvalidParameterValue, "%s requires a numeric value", d.Defname)
			}
			v, err := defInt64(d)
			if err != nil {
				return false, nil, err
			}
			switch d.Defname {
			case "increment":
				inc = &v
			case "minvalue":
				minv = &v
			case "maxvalue":
				maxv = &v
			case "start":
				start = &v
			case "cache":
				cache = &v
			case "restart":
				restart, restartWith = true, &v
			}
		case "cycle":
			seq.Cycle = d.Arg == nil || defString(d) == "true"
		case "owned_by":
			// Handled by the caller (it needs the catalog).
		case "sequence_name":
			// Identity options: handled by the caller.
		default:
			return false, nil, pgerror.New(pgerrcode.SyntaxError, "option %q not recognized", d.Defname)
		}
	}
	oldOID := seq.TypeOID
	if typ != nil && (init || asGiven) {
		seq.TypeOID = typ.Oid
	}
	if seq.TypeOID == 0 {
		seq.TypeOID = types.Int8.Oid
	}
	tlo, thi := seqTypeBounds(seq.TypeOID)
	if inc != nil {
		if *inc == 0 {
			return false, nil, pgerror.New(pgerrcode.InvalidParameterValue, "INCREMENT must not be zero")
		}
		seq.Increment = *inc
	} else if init {
		seq.Increment = 1
	}
	// When the type changes, min and max at the old type's limits follow it
	// (as PostgreSQL's init_params does).
	olo, ohi := seqTypeBounds(oldOID)
	if maxv != nil {
		seq.Max = *maxv
	} else if init || noMax || (asGiven && seq.Max == ohi) || (asGiven && seq.Max == -1 && seq.Increment < 0) {
		if seq.Increment > 0 {
			seq.Max = thi
		} else {
			seq.Max = -1
		}
	}
	if minv != nil {
		seq.Min = *minv
	} else if init || noMin || (asGiven && seq.Min == olo) || (asGiven && seq.Min == 1 && seq.Increment > 0) {
		if seq.Increment > 0 {
			seq.Min = 1
		} else {
			seq.Min = tlo
		}
	}
	name := seqTypeName(seq.TypeOID)
	if seq.Max < tlo || seq.Max > thi {
		return false, nil, pgerror.New(pgerrcode.InvalidParameterValue, "MAXVALUE (%d) is out of range for sequence data type %s", seq.Max, name)
	}
	if seq.Min < tlo || seq.Min > thi {
		return false, nil, pgerror.New(pgerrcode.InvalidParameterValue, "MINVALUE (%d) is out of range for sequence data type %s", seq.Min, name)
	}
	if seq.Min >= seq.Max {
		return false, nil, pgerror.New(pgerrcode.InvalidParameterValue, "MINVALUE (%d) must be less than MAXVALUE (%d)", seq.Min, seq.Max)
	}
	if start != nil {
		seq.Start = *start
	} else if init {
		if seq.Increment > 0 {
			seq.Start = seq.Min
		} else {
			seq.Start = seq.Max
		}
	}
	if seq.Start < seq.Min {
		return false, nil, pgerror.New(pgerrcode.InvalidParameterValue, "START value (%d) cannot be less than MINVALUE (%d)", seq.Start, seq.Min)
	}
	if seq.Start > seq.Max {
		return false, nil, pgerror.New(pgerrcode.InvalidParameterValue, "START value (%d) cannot be greater than MAXVALUE (%d)", seq.Start, seq.Max)
	}
	if restartWith != nil {
		if *restartWith < seq.Min {
			return false, nil, pgerror.New(pgerrcode.InvalidParameterValue, "RESTART value (%d) cannot be less than MINVALUE (%d)", *restartWith, seq.Min)
		}
		if *restartWith > seq.Max {
			return false, nil, pgerror.New(pgerrcode.InvalidParameterValue, "RESTART value (%d) cannot be greater than MAXVALUE (%d)", *restartWith, seq.Max)
		}
	}
	if cache != nil {
		if *cache <= 0 {
			return false, nil, pgerror.New(pgerrcode.InvalidParameterValue, "CACHE (%d) must be greater than zero", *cache)
		}
		seq.Cache = *cache
	} else if init {
		seq.Cache = 1
	}
	return restart, restartWith, nil
}

func (e *executor) createSequence(ctx context.Context, n *pg_query.CreateSeqStmt) error {
	schema, err := e.creationSchema(ctx, n.Sequence)
	if err != nil {
		return err
	}
	name := truncateIdent(n.Sequence.Relname)
	if _, err := e.x.Writer.Relation(ctx, e.x.Database.ID, schema.ID, name); err == nil {
		if n.IfNotExists {
			e.notice(pgerrcode.DuplicateTable, fmt.Sprintf("relation %q already exists, skipping", name))
			return nil
		}
		return pgerror.New(pgerrcode.DuplicateTable, "relation %q already exists", name)
	} else if pgerror.Code(err) != pgerrcode.UndefinedTable {
		return err
	}
	seq := &catalog.Sequence{DatabaseID: e.x.Database.ID, SchemaID: schema.ID, Name: name, Owner: e.x.User}
	if err := applySequenceOptions(seq, n.Options, true, nil); err != nil {
		return err
	}
	if err := e.seqOwnedBy(ctx, seq, n.Options, schema); err != nil {
		return err
	}
	return e.x.Writer.Create(ctx, seq)
}

// seqOwnedBy applies OWNED BY table.column | NONE. The table must be in
// the sequence's schema (PostgreSQL: 55000 otherwise).
func (e *executor) seqOwnedBy(ctx context.Context, seq *catalog.Sequence, opts []*pg_query.Node, schema *catalog.Schema) error {
	for _, d := range defElems(opts) {
		if d.Defname != "owned_by" {
			continue
		}
		parts := nameList(d.Arg.GetList().GetItems())
		if len(parts) == 1 && parts[0] == "none" {
			seq.OwnedBy = nil
			return nil
		}
		if len(parts) < 2 {
			return pgerror.New(pgerrcode.SyntaxError, "invalid OWNED BY option").WithHint("Specify OWNED BY table.column or OWNED BY NONE.")
		}
		rv := &pg_query.RangeVar{Relname: parts[len(parts)-2]}
		if len(parts) > 2 {
			rv.Schemaname = parts[len(parts)-3]
		}
		t, err := e.lookupTable(ctx, rv)
		if err != nil {
			return err
		}
		if t.SchemaID != schema.ID {
			return pgerror.New(pgerrcode.ObjectNotInPrerequisiteState, "sequence must be in same schema as table it is linked to")
		}
		c := t.ColumnByName(parts[len(parts)-1])
		if c == nil {
			return pgerror.New(pgerrcode.UndefinedColumn, "column %q of relation %q does not exist", parts[len(parts)-1], t.Name)
		}
		seq.OwnedBy = &catalog.SequenceOwner{TableID: t.ID, ColumnID: c.ID}
	}
	return nil
}

func (e *executor) alterSequence(ctx context.Context, n *pg_query.AlterSeqStmt) error {
	d, schema, err := e.lookupRelation(ctx, n.Sequence)
	if err != nil {
		if n.MissingOk && pgerror.Code(err) == pgerrcode.UndefinedTable {
			e.notice(pgerrcode.UndefinedTable, fmt.Sprintf("relation %q does not exist, skipping", n.Sequence.Relname))
			return nil
		}
		return err
	}
	if err := e.checkOwner(ctx, d); err != nil {
		return err
	}
	old, ok := d.(*catalog.Sequence)
	if !ok {
		return pgerror.New(pgerrcode.WrongObjectType, "%q is not a sequence", n.Sequence.Relname)
	}
	seq := *old
	if old.OwnedBy != nil {
		o := *old.OwnedBy
		seq.OwnedBy = &o
	}
	restart, restartWith, err := applySeqOpts(&seq, n.Options, false, nil)
	if err != nil {
		return err
	}
	if err := e.seqOwnedBy(ctx, &seq, n.Options, schema); err != nil {
		return err
	}
	if err := e.x.Writer.Update(ctx, &seq); err != nil {
		return err
	}
	return e.resetSequenceValue(ctx, old, &seq, restart, restartWith)
}

// resetSequenceValue keeps a sequence's value where it was across a change
// of START or INCREMENT (the stored value is relative to them), or moves
// it for RESTART. Sequence values are not transactional in PostgreSQL
// either: a rolled-back ALTER SEQUENCE RESTART keeps the new position.
func (e *executor) resetSequenceValue(ctx context.Context, old, seq *catalog.Sequence, restart bool, restartWith *int64) error {
	if !restart && old.Start == seq.Start && old.Increment == seq.Increment {
		return nil
	}
	if e.x.DB == nil {
		return notSupported("changing a sequence's position needs the session's KV client")
	}
	if restart {
		v := seq.Start
		if restartWith != nil {
			v = *restartWith
		}
		_, err := sequence.SetValue(ctx, e.x.DB, seq, v, false)
		return err
	}
	return sequence.Rebase(ctx, e.x.DB, old, seq)
}
