// Package builtins owns Cairn's SQL functions, operators, aggregates and
// window functions over sql/types datums, and Postgres's rules for
// choosing among their overloads.
//
// Who calls it: the binder resolves calls and operators (ResolveFunc,
// LookupBinaryOp, LookupUnaryOp) and inserts casts to Resolved.ArgTypes;
// the executor evaluates them (Resolved.Eval, Overload.SRF,
// Overload.NewAggregate, Overload.NewWindow / AggregateWindow) and the
// catalog lists them (Names, Lookup, ByOID) for pg_proc and \df.
// Hash-sharded indexes call ShardHash. It calls sql/types, sql/pgerror
// and sql/rowenc's key encoding (which ShardHash hashes) only; what a function needs of the session (time zone, now(), user,
// advisory locks) comes through the small EvalContext interface, so the
// package never imports session, catalog or KV code.
//
//	        binder                          executor
//	          │ ResolveFunc / Lookup*Op        │ Eval, SRF, Aggregate, WindowFunc
//	          ▼                                ▼
//	registry (name → []*Overload) ──► Fn(ctx EvalContext, args)
//	          │                                │
//	          └──────────── sql/types ◄────────┘
//
// Files: overload.go (Overload, the registry), resolve.go (overload
// resolution), resolve_named.go (named arguments and defaults), ops_*.go
// (operators), fn_*.go (functions by family), agg.go, agg_ordered.go
// (ordered-set aggregates), window.go, like.go (LIKE and regex
// compilation), tochar.go / tochar_num.go / todate.go (to_char,
// to_date, to_timestamp templates), crmath.go (correctly rounded float8
// functions), numeric.go (numeric scale rules), context.go
// (EvalContext), errors.go.
//
// Invariants:
//
//  1. The registry is filled by init functions and read-only afterwards,
//     so lookups and evaluation need no locks; every overload has a
//     distinct OID derived from its signature, stable across releases.
//  2. Resolution follows Postgres's documented algorithm (exact match,
//     implicit coercion, exact-match count, preferred types, unknown
//     literals by category), and its failures are Postgres's: 42883 with
//     "function f(integer) does not exist" / "operator does not exist:
//     integer + text", or 42725 "... is not unique", with Postgres's HINT.
//  3. Fn receives arguments already coerced to Resolved.ArgTypes; a Strict
//     overload is never called with a NULL (Resolved.Eval returns NULL).
//  4. Every user-facing error carries Postgres's SQLSTATE and wording
//     (built in errors.go): 22003 for overflow, 22012 for division by
//     zero, 22P02/22023 for bad input.
//  5. Aggregates: the executor deduplicates (DISTINCT), sorts (ORDER BY
//     inside the call) and filters (FILTER) before Add; accumulators skip
//     NULLs where Postgres's aggregate is strict; Result does not change
//     the state; Merge of partial states equals one accumulator over all
//     rows.
//  6. Window functions see a whole partition sorted by the executor; their
//     results depend only on the partition, its order and the frame.
//  7. fnv*/crc32* and ShardHash values are part of the on-disk format of
//     hash-sharded indexes and never change.
//
// Known differences from Postgres: regular expressions are Go's RE2 (no
// backreferences or lookaround; see like.go); to_char supports the
// patterns listed in tochar.go and tochar_num.go and rejects others with
// 0A000 (to_char(interval) and numeric RN, EEEE, V, PL, SG among them);
// float8 elementary functions are correctly rounded, which is what glibc
// gives except in rare cases (asin, and sinh/cosh/tanh, which use Go's
// math); upper/lower/initcap convert all of Unicode, as Postgres does
// under a UTF-8 LC_CTYPE (under LC_CTYPE=C it converts ASCII only); functions
// over rows (row_to_json) wait for the executor's row type; numeric ln,
// log, exp and fractional powers are computed by apd with guard digits
// and rounded once to Postgres's result scale, so the last digit could in
// principle differ where Postgres's own algorithm rounds differently.
package builtins
