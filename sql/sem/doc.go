// Package sem owns Cairn's typed scalar expressions: building them from
// the PostgreSQL AST with Postgres's typing rules, folding constants, and
// evaluating them per row.
//
// Who calls it: the binder (a later session) calls Build/BuildAssign for
// every scalar expression of a statement, giving a Scope for column names,
// ParamTypes for $n and a Subqueries planner, then extracts aggregates
// (Aggregates, Map) and hands trees to the optimizer (NormalizeBool,
// Fold, String for EXPLAIN); the executor compiles them once (Compile)
// and runs the Evaluator per row. It calls sql/builtins (overload
// resolution and function bodies), sql/types (casts, comparison, literal
// input) and sql/pgerror. It must not touch catalogs, plans, sessions or
// KV: names, subquery plans and placeholder values come in through the
// small interfaces in context.go and eval.go.
//
//	pg_query AST ──Build──► Expr (typed, folded) ──Compile──► Evaluator
//	                 │          │                                 │
//	        Scope, ParamTypes   NormalizeBool, Fold, Map     EvalContext, row
//
// Files: expr.go (the nodes), format.go (EXPLAIN-style String), build.go
// (AST → Expr), funcargs.go (named arguments, WITHIN GROUP arguments), typecheck.go (coercions, assignment, type names),
// fold.go (Fold, NormalizeBool), walk.go (Walk, Map, Aggregates), eval.go
// (Compile, Eval), context.go (BuildContext, Scope, ParamTypes), udf.go
// (inlining calls of user-defined SQL functions, found through the
// FunctionResolver the type context's resolver implements), errors.go.
//
// Invariants:
//
//  1. Exprs are immutable after Build: rewrites return new nodes and
//     share unchanged subtrees, so trees can be cached with a plan.
//  2. After Build every node's Type is concrete (never unknown): literals
//     took the type of their context (text when none), parameters the type
//     of their first typing use, and every implicit coercion is an explicit
//     Cast node whose conversion pg_cast allows in that context. The one
//     exception is a parameter no use typed ($1 IS NULL), which
//     ParamTypes.Types reports as 42P18, as Postgres's Prepare does.
//  3. Fold and NormalizeBool never change a result: the folded or
//     normalized tree evaluates to the same value (or the same error) on
//     every row (TestFoldPreservesResults).
//  4. Errors carry Postgres's SQLSTATE and wording; build errors carry the
//     position Postgres reports (ErrorPosition), mapped through
//     BuildContext.Position.
//  5. Evaluation follows Postgres's three-valued logic and short-circuits
//     AND, OR, CASE and COALESCE left to right. An Evaluator reuses
//     argument buffers and is not safe for concurrent use.
//
// Known differences from Postgres: IN lists keep their elements as a list
// (Postgres builds an array) but print the same way; BETWEEN and row
// equality are expanded as Postgres's parser does, so their operand is
// evaluated twice; row-valued expressions exist only inside comparisons
// and IS [NOT] NULL, and as the argument of to_jsonb, to_json and
// row_to_json (row.go); slices among several subscripts (which address a
// multidimensional array), field selection, COLLATE and bit strings are
// 0A000.
package sem
