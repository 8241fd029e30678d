// Package plan owns Cairn's logical plans and the binder that makes them:
// it turns one parsed statement (SELECT, VALUES, TABLE, INSERT, UPDATE,
// DELETE) into a tree of relational nodes whose names are resolved, whose
// scalar expressions are typed, and whose columns carry query-wide IDs.
//
// Who calls it: the session binds every statement with Build (through a
// Catalog made by NewCatalog over the transaction's catalog.Reader), the
// optimizer (sql/opt) rewrites the Plan in place, the executor (sql/exec)
// runs it, and EXPLAIN prints it with Explain. It calls sql/sem for every
// scalar expression (sem.Build, sem.BuildAssign, sem.CoerceToAssign), with
// a Scope over the FROM clause and a Subqueries planner implemented here;
// sql/builtins to resolve set-returning functions (which sem rejects);
// sql/catalog for descriptors; sql/parser for catalog text (defaults,
// checks, generated columns, views). It must not read or write table data,
// choose access paths or join methods (the optimizer's job: the binder
// scans primary indexes and leaves filters as Filter nodes), or evaluate
// anything but constants sem folds.
//
//	parser.Statement ──Build──► Plan{Root, Columns, Subqueries, CTEs, Params}
//	                    │ Catalog (names), sem (expressions), builtins (SRFs)
//	Plan ──opt.Optimize──► Plan ──exec──► rows;   Plan ──Explain──► lines
//
// Files: plan.go and env.go are the contract with the optimizer and the
// executor (additive changes only); build.go (Build, scopes, name
// resolution and correlation), select.go (query expressions: SELECT lists,
// ORDER BY, DISTINCT, LIMIT, VALUES, set operations, WITH, windows,
// set-returning functions), group.go (GROUP BY and aggregates), from.go
// (tables, views, virtual tables, subqueries, functions and joins in FROM),
// dml.go (INSERT, UPDATE, DELETE, ON CONFLICT, RETURNING), view_dml.go
// (automatically updatable views: DML on a view flattened onto its base
// table, WITH CHECK OPTION), viewdef.go (pg_get_viewdef's deparse),
// groupingsets.go (GROUPING SETS, ROLLUP, CUBE, grouping()), explain.go
// (EXPLAIN text), catalog.go (NewCatalog), ast.go (AST walking).
//
// Invariants:
//
//  1. Column IDs are unique within one Plan, subqueries and CTE plans
//     included; an expression names columns only by ID, so later rewrites
//     never rename anything.
//  2. A query level resolves a name in its own FROM clause first, then in
//     the enclosing levels; every level a reference crosses records it
//     (Subquery.Outer, Join.Lateral), so the executor knows which outer
//     values each subquery needs.
//  3. Build never modifies the parse tree (prepared statements bind the
//     same tree again); where it needs a changed tree (set-returning
//     calls inside expressions) it binds a copy.
//  4. Errors carry PostgreSQL 15's SQLSTATE and wording, and a position
//     when PostgreSQL reports one.
//
// Known differences from PostgreSQL (0A000 unless noted): a data-modifying
// statement in WITH that the query never reads (the executor runs one
// when the query first reads it); DML through a view whose subquery reads a computed column of
// the view below it, and ON CONFLICT on an expression through a view; FOR UPDATE NOWAIT and SKIP LOCKED; column definition
// lists on functions in FROM; nested set-returning calls; set-returning
// functions of several columns in the select list; INSERT into an array element or a subfield, and
// UPDATE of a subfield (UPDATE of array elements and slices is supported,
// see arrays.go and sem.ArrayAssign, except where it would move the
// array's lower bound from 1); selecting
// from a sequence; (a, b) IN (SELECT ...) other than as a conjunct of
// WHERE, HAVING or ON (where it becomes an EXISTS, see rowin.go). A recursive CTE is inlined at each reference, and a
// GROUP BY of a table's primary key groups by the table's other columns
// too (they are functionally dependent, so the groups are the same).
// pg_get_viewdef prints a view with subqueries or functions in FROM, set
// operations, WITH or windows as its stored text.
package plan
