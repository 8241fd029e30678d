package parser

import (
	"sort"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// Statement is one statement of a query string, parsed.
type Statement struct {
	// AST is the Postgres parse tree. Its Location fields (and
	// StmtLocation) are byte offsets into the whole rewritten query text,
	// not into SQL or Original; use Position to report them to a client.
	AST *pg_query.RawStmt
	// SQL is the PostgreSQL text of this statement alone, after the
	// dialect rewrite, without the terminating semicolon. Comments that
	// preceded the statement are kept at its start.
	SQL string
	// Original is the statement as the user typed it, without the
	// terminating semicolon. Statements derived from one typed statement
	// share its Original.
	Original string
	// Derived is set on statements the rewriter added after the one the
	// user typed (an inline INDEX of CREATE TABLE becomes a CREATE INDEX
	// that follows it). The session runs them as part of that statement:
	// one command tag, one transaction. When CREATE TABLE IF NOT EXISTS
	// finds the table already there, the session skips its derived
	// statements: an unnamed index cannot carry IF NOT EXISTS in Postgres
	// (named ones do).
	Derived bool
	// Annotations lists the dialect constructs rewritten into this
	// statement, in the order they appear in Original.
	Annotations []Annotation
	// AsOf is the expression of a SELECT's AS OF SYSTEM TIME, taken out
	// of AST (dialect_aost.go); nil when it has none.
	AsOf *pg_query.Node

	rw *rewritten
}

// Parse rewrites the dialect constructs of sql and parses the result with
// the PostgreSQL 17 grammar. It returns one Statement per statement, in
// order (none for an empty or comment-only string). Statement boundaries
// come from the grammar, so semicolons in strings, dollar quotes, quoted
// identifiers, comments and BEGIN ATOMIC bodies never split. Errors are
// *SyntaxError with positions in sql. Parse is safe for concurrent use.
func Parse(sql string) ([]Statement, error) {
	if Plain(sql) {
		return parsePlain(sql)
	}
	return parseRewritten(sql)
}

func parseRewritten(sql string) ([]Statement, error) {
	rw, err := rewrite(sql)
	if err != nil {
		return nil, err
	}
	tree, err := pg_query.Parse(rw.text)
	if err != nil {
		return nil, fromPgError(err, rw.toOriginalPos)
	}
	stmts := make([]Statement, 0, len(tree.Stmts))
	mainSeen := make([]bool, len(rw.pieces))
	for _, raw := range tree.Stmts {
		loc := int(raw.StmtLocation)
		end := len(rw.text)
		if raw.StmtLen > 0 {
			end = loc + int(raw.StmtLen)
		}
		k := sort.Search(len(rw.pieces), func(k int) bool { return rw.pieces[k].rwFrom > loc }) - 1
		st := Statement{
			AST:  raw,
			SQL:  strings.TrimSpace(rw.text[loc:end]),
			AsOf: extractAsOf(raw),
			rw:   rw,
		}
		if k >= 0 {
			p := &rw.pieces[k]
			st.Original = p.originalText(rw.src)
			for d, sp := range p.derived {
				if loc >= sp.from && loc < sp.to {
					st.Derived, st.Annotations = true, p.notes[d+1]
				}
			}
			// The piece's own statement is its first non-derived one; a
			// second could only come from a split that disagrees with the
			// grammar's, and gets no annotations rather than wrong ones.
			if !st.Derived && !mainSeen[k] {
				mainSeen[k] = true
				st.Annotations = p.notes[0]
			}
		}
		stmts = append(stmts, st)
	}
	return stmts, nil
}

// Plain reports whether sql can hold no dialect construct and no comment,
// so that parsing it needs no rewrite, hence no scan (the scan is a second
// call into libpg_query: a tenth of the CPU of a point SELECT sent as a
// simple query). Every rule starts from CREATE, ALTER, SHOW ZONE, SHOW
// JOB[S], SET|SHOW CLUSTER SETTING, AS OF SYSTEM TIME or a type alias
// (STRING, BYTES; walk.go), so text without those
// letters, in any case, is left byte for byte; without comments, a
// statement's text as the grammar delimits it, trimmed, is what the pieces
// of the scan would give as Original.
func Plain(sql string) bool {
	for i := 0; i+1 < len(sql); i++ {
		if (sql[i] == '-' && sql[i+1] == '-') || (sql[i] == '/' && sql[i+1] == '*') {
			return false
		}
		switch c := sql[i] | 0x20; c { // ASCII lower case; EqualFold checks
		case 'c', 'a', 's', 'b', 'z', 'j':
			rest := sql[i:]
			for _, w := range [...]string{"create", "alter", "string", "bytes", "zone", "job", "cluster", "system"} {
				if len(rest) >= len(w) && w[0] == c && strings.EqualFold(rest[:len(w)], w) {
					return false
				}
			}
		}
	}
	return true
}

// parsePlain is Parse of text that plain accepted.
func parsePlain(sql string) ([]Statement, error) {
	if err := checkEncoding(sql); err != nil {
		return nil, err
	}
	tree, err := pg_query.Parse(sql)
	if err != nil {
		return nil, fromPgError(err, func(pos int) int { return pos })
	}
	_, m, _, _, err := render(sql, nil, nil)
	if err != nil {
		return nil, &SyntaxError{Code: CodeSyntaxError, Message: "internal error: " + err.Error()}
	}
	rw := &rewritten{src: sql, text: sql, m: m}
	stmts := make([]Statement, 0, len(tree.Stmts))
	for _, raw := range tree.Stmts {
		loc := int(raw.StmtLocation)
		end := len(sql)
		if raw.StmtLen > 0 {
			end = loc + int(raw.StmtLen)
		}
		text := strings.TrimSpace(sql[loc:end])
		stmts = append(stmts, Statement{AST: raw, SQL: text, Original: text, rw: rw})
	}
	return stmts, nil
}

// Position maps a Location from the statement's AST (a byte offset into
// the rewritten text) to a Postgres cursor position in the original query
// string: a 1-based character offset. It returns 0 for an unknown location
// (negative, as Postgres marks them).
func (s *Statement) Position(location int32) int {
	if location < 0 || s.rw == nil {
		return 0
	}
	return charPos(s.rw.src, s.rw.m.toOriginal(int(location)))
}

// Fingerprint identifies the statement's shape, ignoring constants and
// formatting (pg_query's fingerprint of SQL): the plan cache key.
func (s *Statement) Fingerprint() (uint64, error) {
	return pg_query.FingerprintToUInt64(s.SQL)
}

// IsTransactionControl reports whether the statement is BEGIN, COMMIT,
// ROLLBACK, SAVEPOINT and the like, which the session handles itself.
func (s *Statement) IsTransactionControl() bool {
	return s.AST.GetStmt().GetTransactionStmt() != nil
}
