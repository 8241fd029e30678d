// Package types owns Cairn's SQL type system: type descriptors (T), values
// (Datum), comparison and hashing, Postgres's text input and output
// functions, binary wire encodings (through pgx's pgtype), casts and
// coercion rules, and jsonb.
//
// Who calls it: the binder (type resolution: LookupName, CommonType,
// CastKindOf), the executor and builtins (Compare, Hash, Cast, JSON
// operators), pgwire (Format, ParseDatum, EncodeBinary, DecodeBinary, OIDs
// for RowDescription), rowenc (storage encodings) and the catalog (type
// names and typmods). It imports only sql/pgerror and libraries; it knows
// nothing of storage, keys or sessions beyond the Context it is handed.
//
// Representation. A Datum is a small interface value; see datum.go for why
// it omits the type's width and modifiers, which the column's *T supplies.
// Numeric is apd.Decimal (exact, with Postgres's display scale); jsonb is a
// parsed tree with keys in jsonb order; json (JSONText, DJSONText) is its
// validated input text, kept as written, with JSONTextNode to read parts
// of it; timestamps are int64 microseconds
// since 1970 with infinities at the int64 extremes.
//
// Invariants:
//
//  1. Format and ParseDatum are inverses: ParseDatum(t, Format(t, d))
//     compares equal to d and prints identically (TestTextRoundTrip).
//  2. EncodeBinary and DecodeBinary are inverses and produce exactly
//     pgtype's bytes (TestBinaryRoundTrip).
//  3. Compare is a total order per family (NULL last), and
//     Compare(a, b) == 0 implies Hash(a) == Hash(b), also across int,
//     float and numeric (TestCompareIsAnOrder, TestCrossNumericEquality).
//  4. Every error returned to users carries a SQLSTATE (pgerror.Code),
//     built in errors.go with Postgres's wording.
//  5. Datums are immutable once built; pointer datums (*DDecimal, *DJSON,
//     *DArray) may be shared between rows.
//
// Known differences from Postgres, all deliberate: the only collation is C
// (bytewise); timestamps end at 294247-01-01 instead of 294277-01-01;
// 'now', 'today' and friends are resolved by the evaluator, not here; date
// input accepts ISO and MDY numeric forms but not month names; arrays are
// one-dimensional with lower bound 1 (0 for the vector types), so
// assignments that would move the lower bound are refused (array.go).
package types
