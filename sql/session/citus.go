package session

// Citus's distributed-table functions (issue 17; docs/distributed.md):
// `SELECT create_distributed_table('t', 'col')` and its kin are DDL in
// the shape of a SELECT. The session recognizes such a statement (one
// call, nothing else, constant arguments) and runs the ALTER TABLE it
// stands for, which moves the table online as a job
// (ddl.alterDistribution); the client gets the one void row Citus
// returns. They run through the simple query protocol, as psql and
// Citus's own scripts send them.

import (
	"fmt"
	"strconv"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/cairn-db/cairn/pgwire"
	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/parser"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
)

// citusCall is a recognized call: the function and its arguments by
// parameter name (positional ones named by the function's signature).
type citusCall struct {
	fn   string
	args map[string]string
}

// citusParams are the parameters of each function, in order.
var citusParams = map[string][]string{
	"create_distributed_table":              {"table_name", "distribution_column", "distribution_type", "colocate_with", "shard_count"},
	"create_distributed_table_concurrently": {"table_name", "distribution_column", "distribution_type", "colocate_with", "shard_count"},
	"undistribute_table":                    {"table_name", "cascade_via_foreign_keys"},
	"alter_distributed_table":               {"table_name", "distribution_column", "shard_count", "colocate_with", "cascade_to_colocated"},
	"create_reference_table":                {"table_name"},
	// Not DDL: lease transfers (rebalance.go).
	"rebalance_table_shards": {"relation", "threshold", "max_shard_moves", "excluded_shard_list", "shard_transfer_mode", "drain_only", "rebalance_strategy"},
	"citus_rebalance_start":  {"rebalance_strategy", "drain_only", "shard_transfer_mode", "parallel_transfer_reference_tables", "parallel_transfer_colocated_shards"},
	"citus_rebalance_wait":   {},
	"citus_rebalance_stop":   {},
}

// asCitusCall returns sel as a Citus call, or nil when it is anything
// else (then it runs as the query it is).
func asCitusCall(sel *pg_query.SelectStmt) (*citusCall, error) {
	if sel == nil || len(sel.TargetList) != 1 || len(sel.FromClause) > 0 || sel.WhereClause != nil ||
		sel.Op != pg_query.SetOperation_SETOP_NONE || sel.WithClause != nil {
		return nil, nil
	}
	rt := sel.TargetList[0].GetResTarget()
	if rt == nil || rt.Val == nil || rt.Val.GetFuncCall() == nil {
		return nil, nil
	}
	fc := rt.Val.GetFuncCall()
	var parts []string
	for _, n := range fc.Funcname {
		parts = append(parts, n.GetString_().GetSval())
	}
	name := parts[len(parts)-1]
	if len(parts) > 1 && parts[0] != "pg_catalog" && parts[0] != "public" {
		return nil, nil
	}
	params, ok := citusParams[name]
	if !ok {
		return nil, nil
	}
	c := &citusCall{fn: name, args: map[string]string{}}
	for i, a := range fc.Args {
		pname := ""
		if na := a.GetNamedArgExpr(); na != nil {
			pname, a = na.Name, na.Arg
		} else if i < len(params) {
			pname = params[i]
		}
		if pname == "" || !containsStr(params, pname) {
			return nil, pgerror.New(pgerrcode.UndefinedFunction, "function %s has no parameter %q", name, pname)
		}
		v, ok := constArg(a)
		if !ok {
			return nil, pgerror.New(pgerrcode.FeatureNotSupported, "%s takes constant arguments", name)
		}
		c.args[pname] = v
	}
	if containsStr(params, "table_name") && c.args["table_name"] == "" {
		return nil, pgerror.New(pgerrcode.UndefinedFunction, "function %s needs a table_name", name)
	}
	return c, nil
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// constArg is a literal argument's text ('t', 32, 't'::regclass).
func constArg(n *pg_query.Node) (string, bool) {
	if tc := n.GetTypeCast(); tc != nil {
		n = tc.Arg
	}
	ac := n.GetAConst()
	if ac == nil || ac.Isnull {
		return "", false
	}
	switch {
	case ac.GetSval() != nil:
		return ac.GetSval().Sval, true
	case ac.GetIval() != nil:
		return strconv.Itoa(int(ac.GetIval().Ival)), true
	case ac.GetFval() != nil:
		return ac.GetFval().Fval, true
	case ac.GetBoolval() != nil:
		return strconv.FormatBool(ac.GetBoolval().Boolval), true
	}
	return "", false
}

// quotedRelation turns a regclass text ('s.t', '"T"') into a quoted
// qualified name, refusing anything that is not one.
func quotedRelation(text string) (string, error) {
	res, err := pg_query.Parse("SELECT 1 FROM " + text)
	if err == nil && len(res.Stmts) == 1 {
		if sel := res.Stmts[0].Stmt.GetSelectStmt(); sel != nil && len(sel.FromClause) == 1 && sel.FromClause[0].GetRangeVar() != nil &&
			sel.FromClause[0].GetRangeVar().Alias == nil {
			rv := sel.FromClause[0].GetRangeVar()
			q := builtins.QuoteIdent(rv.Relname)
			if rv.Schemaname != "" {
				q = builtins.QuoteIdent(rv.Schemaname) + "." + q
			}
			return q, nil
		}
	}
	return "", pgerror.New(pgerrcode.InvalidTextRepresentation, "invalid name syntax: %q", text)
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// runCitus runs c as the ALTER TABLE it stands for and answers as the
// function would: one row holding void (an empty value, as PostgreSQL
// prints void).
func (s *Session) runCitus(x *stmtState, st *parser.Statement, c *citusCall, w pgwire.ResultWriter) error {
	switch c.fn {
	case "rebalance_table_shards":
		if err := s.rebalanceShards(x, st, c); err != nil {
			return err
		}
		return citusVoid(c, w)
	case "citus_rebalance_start":
		id, ok, err := s.rebalanceStart(x, st, c)
		if err != nil {
			return err
		}
		var v []byte // NULL: nothing to move
		if ok {
			v = []byte(id)
		}
		return citusRow(c, w, v)
	case "citus_rebalance_wait":
		if err := s.rebalanceWait(x); err != nil {
			return err
		}
		return citusVoid(c, w)
	case "citus_rebalance_stop":
		if err := s.rebalanceStop(x); err != nil {
			return err
		}
		return citusVoid(c, w)
	}
	rel, err := quotedRelation(c.args["table_name"])
	if err != nil {
		return err
	}
	if err := s.runCitusDDL(x, st, c, rel, w); err != nil {
		return err
	}
	if c.fn == "create_reference_table" && holdCitusResult(c, w) {
		// Sent after the commit, so a retryable failure of the commit
		// (another transaction may push the zone record it writes; the
		// nodes' own zone readers no longer do, kv.DB.ScanCommitted)
		// reruns the call instead of failing it. Only this one:
		// the others run an online move whose own transactions have
		// committed, and a rerun would find the table moved.
		return w.Complete("SELECT 1")
	}
	return citusVoid(c, w)
}

// runCitusDDL runs c, a call on the table rel (quoted), as the ALTER
// TABLE it stands for.
func (s *Session) runCitusDDL(x *stmtState, st *parser.Statement, c *citusCall, rel string, w pgwire.ResultWriter) error {
	var opts []string
	if c.fn == "alter_distributed_table" {
		cascade, err := cascadeOption(c)
		if err != nil {
			return err
		}
		if cascade != "" {
			opts = append(opts, "cairn_cascade_colocated = "+quoteLiteral(cascade))
		}
	}
	switch c.fn {
	case "create_distributed_table", "create_distributed_table_concurrently", "alter_distributed_table":
		if t, ok := c.args["distribution_type"]; ok && t != "hash" {
			return pgerror.New(pgerrcode.FeatureNotSupported, "distribution_type %q is not supported: Cairn distributes by hash", t)
		}
		// colocate_with: 'default' (Citus's default: the group of a
		// table with the same shard count and column type), 'none' (a
		// group of its own) or a table, whose shard count the new one
		// takes (ddl.colocationWith).
		cw := c.args["colocate_with"]
		named := false
		switch cw {
		case "":
			if c.fn != "alter_distributed_table" {
				cw = "default"
			}
		case "default", "none":
		default:
			q, err := quotedRelation(cw)
			if err != nil {
				return err
			}
			cw, named = q, true
		}
		if cw != "" {
			opts = append(opts, "cairn_colocate_with = "+quoteLiteral(cw))
		}
		if c.fn != "alter_distributed_table" {
			opts = append(opts, "cairn_citus_create = true")
		}
		col, ok := c.args["distribution_column"]
		if !ok && c.fn != "alter_distributed_table" {
			return pgerror.New(pgerrcode.UndefinedFunction, "function %s needs a distribution_column", c.fn)
		}
		n := c.args["shard_count"]
		if !ok && n == "" && !named {
			return pgerror.New(pgerrcode.FeatureNotSupported, "alter_distributed_table changes distribution_column, shard_count or colocate_with (a table); other changes are not supported yet")
		}
		// Without a column (alter_distributed_table(t, shard_count =>
		// n)) the table keeps its own (ddl.alterDistribution).
		opts = append(opts, "cairn_distribution_column = "+quoteLiteral(col))
		if n == "" && !named && c.fn != "alter_distributed_table" {
			// alter_distributed_table keeps the table's shard count when
			// none is given, as Citus does (ddl.alterDistribution).
			n = s.vars["citus.shard_count"]
		}
		if n != "" {
			if _, err := strconv.Atoi(n); err != nil {
				return pgerror.New(pgerrcode.InvalidParameterValue, "shard_count must be an integer, not %q", n)
			}
			opts = append(opts, "cairn_split_tablets = "+n)
		}
	case "undistribute_table":
		opts = append(opts, "cairn_distribution_column = ''")
	case "create_reference_table":
		opts = append(opts, "cairn_distribution_column = ''", "cairn_reference = true")
	}
	stmts, err := parser.Parse(fmt.Sprintf("ALTER TABLE %s SET (%s)", rel, strings.Join(opts, ", ")))
	if err != nil {
		return err
	}
	// The job (SHOW JOBS) is described by what the user typed.
	stmts[0].Original = st.SQL
	if st.Original != "" {
		stmts[0].Original = st.Original
	}
	return s.execDDL(x, stmtGroup{main: &stmts[0]}, quietWriter{w})
}

// citusVoid answers a Citus call with its one void row.
func citusVoid(c *citusCall, w pgwire.ResultWriter) error { return citusRow(c, w, []byte{}) }

// citusRow answers a Citus call with one row of one value in text (nil:
// NULL), typed unknown as citusColumns says.
func citusRow(c *citusCall, w pgwire.ResultWriter, v []byte) error {
	if err := w.BeginRows(describeColumns(citusColumns(c), nil)); err != nil {
		return err
	}
	if err := w.WriteRow([][]byte{v}); err != nil {
		return err
	}
	return w.Complete("SELECT 1")
}

// holdCitusResult hands the call's one void row to an implicit
// transaction's writer to send after the commit, and reports whether it
// did (trackingWriter.holdRows).
func holdCitusResult(c *citusCall, w pgwire.ResultWriter) bool {
	h, ok := w.(rowHolder)
	return ok && h.holdRows(describeColumns(citusColumns(c), nil), [][][]byte{{{}}})
}

// citusColumns is a Citus call's result: one column named after the
// function, of PostgreSQL's void (typed unknown here: Cairn has no void
// type; its one value is empty, as void prints).
func citusColumns(c *citusCall) []plan.Column {
	return []plan.Column{{Name: c.fn, T: types.Unknown}}
}

// quietWriter drops the ALTER TABLE's own command tag.
type quietWriter struct{ pgwire.ResultWriter }

func (quietWriter) Complete(string) error { return nil }

// cascadeOption checks alter_distributed_table's cascade_to_colocated
// against the other arguments as Citus does, and returns the
// cairn_cascade_colocated option it stands for (ddl.alterDistribution):
// "true" (the tables colocated with this one follow it), "unspecified"
// (a new shard count without the argument: refused if the table has
// colocated tables, as in Citus) or "" (nothing to check: false, or no
// new shard count).
func cascadeOption(c *citusCall) (string, error) {
	v, given := c.args["cascade_to_colocated"]
	_, shards := c.args["shard_count"]
	if !given {
		if shards {
			return "unspecified", nil
		}
		return "", nil
	}
	cascade, err := strconv.ParseBool(v)
	if err != nil {
		return "", pgerror.New(pgerrcode.InvalidTextRepresentation, "invalid input syntax for type boolean: %q", v)
	}
	if !cascade {
		return "", nil
	}
	cw := c.args["colocate_with"]
	switch {
	case c.args["distribution_column"] != "":
		return "", pgerror.New(pgerrcode.InvalidParameterValue, "distribution_column changes cannot be cascaded to colocated tables")
	case !shards && cw == "":
		return "", pgerror.New(pgerrcode.InvalidParameterValue, "shard_count or colocate_with is necessary for cascading to colocated tables")
	case cw == "none":
		return "", pgerror.New(pgerrcode.InvalidParameterValue, "colocate_with := 'none' cannot be cascaded to colocated tables")
	}
	return "true", nil
}
