package parser

import (
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// CockroachDB's AS OF SYSTEM TIME (rule as-of-system-time of dialect.go).
// PostgreSQL has no per-statement or per-transaction read timestamp, so
// the clause travels as PostgreSQL the session recognises:
//
//	SELECT ... FROM ... AS OF SYSTEM TIME e [WHERE ...]
//	    → WITH cairn_as_of_system_time AS (SELECT e) SELECT ... FROM ... [WHERE ...]
//	      (merged first into a WITH the user wrote); Parse moves e out of
//	      the tree into Statement.AsOf and drops the CTE, so the binder
//	      never sees it.
//	EXPLAIN [ANALYZE] [VERBOSE] [(options)] SELECT ... AS OF SYSTEM TIME e ...
//	    → the same inside the EXPLAIN: the explained SELECT carries the
//	      CTE, and Statement.AsOf is the EXPLAIN's (the session runs the
//	      EXPLAIN, and so plans or runs the SELECT, at that time).
//	BEGIN | START TRANSACTION [modes] AS OF SYSTEM TIME e [modes]
//	    → BEGIN [modes]; SET LOCAL cairn_as_of_system_time = 'e'
//	      (the SET a derived statement of the BEGIN)
//	SET TRANSACTION AS OF SYSTEM TIME e
//	    → SET LOCAL cairn_as_of_system_time = 'e'
//
// e stays an expression (the SET form carries its text, which the session
// parses as `SELECT e`): the session decides what it may be
// (sql/session/asof.go). The clause anywhere else (a subquery, INSERT,
// CREATE) is an error, as in CockroachDB.

// AsOfName is the CTE and setting name that carries AS OF SYSTEM TIME.
const AsOfName = "cairn_as_of_system_time"

// selectClauseStops end the expression of a SELECT's AS OF SYSTEM TIME:
// the clauses that may follow FROM.
var selectClauseStops = map[string]bool{
	"where": true, "group": true, "having": true, "window": true, "order": true, "limit": true,
	"offset": true, "fetch": true, "for": true, "union": true, "intersect": true, "except": true,
}

// txnModeStops end the expression of BEGIN's or SET TRANSACTION's clause.
var txnModeStops = map[string]bool{",": true, "isolation": true, "read": true, "deferrable": true, "not": true}

func applyAsOfSystemTime(w *stmtRewriter, i int) (int, error) {
	if i != 0 {
		return i, nil
	}
	at, depth := -1, 0
	for k := range w.toks {
		switch w.word(k) {
		case "(":
			depth++
		case ")":
			depth--
		case "as":
			if w.word(k+1) == "of" && w.word(k+2) == "system" && w.word(k+3) == "time" {
				if at < 0 {
					at = k
				}
				if depth > 0 {
					return i, w.errorAt(k, "AS OF SYSTEM TIME must be provided on a top-level statement")
				}
			}
		}
	}
	if at < 0 {
		return i, nil
	}
	switch {
	case w.word(0) == "select" || w.word(0) == "with" || w.word(0) == "(":
		return w.asOfSelect(0, at)
	case w.word(0) == "explain":
		if q := w.explainedQuery(); q > 0 && q < at && (w.word(q) == "select" || w.word(q) == "with" || w.word(q) == "(") {
			return w.asOfSelect(q, at)
		}
	case w.word(0) == "begin" || (w.word(0) == "start" && w.word(1) == "transaction"):
		return w.asOfBegin(at)
	case w.word(0) == "set" && w.word(1) == "transaction":
		return w.asOfSetTransaction(at)
	}
	return i, w.errorAt(at, "AS OF SYSTEM TIME is only supported in SELECT, BEGIN and SET TRANSACTION")
}

// asOfExpr returns the last token of the clause's expression, which starts
// at toks[at+4] and runs to a top-level stop word or the end.
func (w *stmtRewriter) asOfExpr(at int, stops map[string]bool) (int, error) {
	depth, last := 0, -1
	for k := at + 4; k < len(w.toks); k++ {
		word := w.word(k)
		if depth == 0 && stops[word] {
			break
		}
		switch word {
		case "(":
			depth++
		case ")":
			depth--
		}
		last = k
	}
	if last < 0 {
		return 0, w.errorAt(at+4, "expected an expression after AS OF SYSTEM TIME")
	}
	return last, nil
}

// explainedQuery returns the index of the first token of the statement
// an EXPLAIN explains, after its options (0: none found).
func (w *stmtRewriter) explainedQuery() int {
	k := 1
	if w.word(k) == "(" {
		depth := 0
		for ; k < len(w.toks); k++ {
			switch w.word(k) {
			case "(":
				depth++
			case ")":
				depth--
			}
			if depth == 0 {
				return k + 1
			}
		}
		return 0
	}
	for w.word(k) == "analyze" || w.word(k) == "analyse" || w.word(k) == "verbose" {
		k++
	}
	return k
}

// asOfSelect rewrites the clause at toks[at] of the SELECT starting at
// toks[start].
func (w *stmtRewriter) asOfSelect(start, at int) (int, error) {
	if !w.fromBefore(at) {
		return 0, w.errorAt(at, "AS OF SYSTEM TIME must follow a FROM clause")
	}
	last, err := w.asOfExpr(at, selectClauseStops)
	if err != nil {
		return 0, err
	}
	w.note(&w.notes, "as-of-system-time", at, last)
	cte := []chunk{synth(w.toks[at].start, AsOfName+" AS (SELECT "), w.copyToks(at+4, last), synth(w.toks[at].start, ")")}
	if w.word(start) == "with" {
		after := start
		if w.word(start+1) == "recursive" {
			after++
		}
		cte = append([]chunk{synth(w.toks[at].start, " ")}, cte...)
		if err := w.insertAfter(after, append(cte, synth(w.toks[at].start, ","))...); err != nil {
			return 0, err
		}
	} else if err := w.insertBefore(start, append([]chunk{synth(w.toks[at].start, "WITH ")}, append(cte, synth(w.toks[at].start, " "))...)...); err != nil {
		return 0, err
	}
	return len(w.toks), w.remove(at, last)
}

// fromBefore reports whether a top-level FROM precedes toks[at].
func (w *stmtRewriter) fromBefore(at int) bool {
	depth := 0
	for k := 0; k < at; k++ {
		switch w.word(k) {
		case "(":
			depth++
		case ")":
			depth--
		case "from":
			if depth == 0 {
				return true
			}
		}
	}
	return false
}

// asOfSetLocal is the SET statement carrying the expression toks[from..to].
func (w *stmtRewriter) asOfSetLocal(anchor, from, to int) chunk {
	text := w.src[w.toks[from].start:w.toks[to].end]
	return synth(anchor, "SET LOCAL "+AsOfName+" = '"+strings.ReplaceAll(text, "'", "''")+"'")
}

func (w *stmtRewriter) asOfBegin(at int) (int, error) {
	last, err := w.asOfExpr(at, txnModeStops)
	if err != nil {
		return 0, err
	}
	w.note(&w.notes, "as-of-system-time", at, last)
	set := w.asOfSetLocal(w.toks[at].start, at+4, last)
	from, to := at, last
	// A comma that separated the clause from another mode goes with it.
	if w.word(to+1) == "," {
		to++
	} else if w.word(from-1) == "," {
		from--
	}
	if err := w.remove(from, to); err != nil {
		return 0, err
	}
	w.derived = append(w.derived, derived{with: []chunk{synth(w.toks[at].start, "; "), set}})
	return len(w.toks), w.finish(len(w.toks)-1, nil)
}

func (w *stmtRewriter) asOfSetTransaction(at int) (int, error) {
	last, err := w.asOfExpr(at, txnModeStops)
	if err != nil {
		return 0, err
	}
	if at != 2 || last != len(w.toks)-1 {
		return 0, w.errorAt(at, "SET TRANSACTION AS OF SYSTEM TIME takes no other transaction modes")
	}
	w.note(&w.notes, "as-of-system-time", at, last)
	return len(w.toks), w.replace(0, last, w.asOfSetLocal(w.toks[0].start, at+4, last))
}

// extractAsOf moves the AS OF SYSTEM TIME expression of a SELECT out of
// its tree: the CTE named AsOfName, first in the statement's WITH, is
// removed (with the WITH when it was alone) and its target returned. nil:
// the statement has none.
func extractAsOf(raw *pg_query.RawStmt) *pg_query.Node {
	stmt := raw.GetStmt()
	if ex := stmt.GetExplainStmt(); ex != nil {
		stmt = ex.Query
	}
	sel := stmt.GetSelectStmt()
	if sel == nil || sel.WithClause == nil || len(sel.WithClause.Ctes) == 0 {
		return nil
	}
	cte := sel.WithClause.Ctes[0].GetCommonTableExpr()
	if cte == nil || cte.Ctename != AsOfName {
		return nil
	}
	q := cte.Ctequery.GetSelectStmt()
	if q == nil || len(q.TargetList) != 1 || q.FromClause != nil || q.WhereClause != nil {
		return nil
	}
	rt := q.TargetList[0].GetResTarget()
	if rt == nil || rt.Val == nil {
		return nil
	}
	sel.WithClause.Ctes = sel.WithClause.Ctes[1:]
	if len(sel.WithClause.Ctes) == 0 {
		sel.WithClause = nil
	}
	return rt.Val
}
