package parser

import "strings"

// CockroachDB's SHOW CREATE [TABLE] name (rule show-create of dialect.go),
// which the PostgreSQL grammar does not have:
//
//	SHOW CREATE TABLE t  → SELECT 't' AS table_name,
//	                              cairn_show_create_table('t'::regclass) AS create_statement
//
// The name is passed as written (quoted identifiers included) to regclass,
// so it resolves as any relation name does (42P01 when there is none).
// The statement text comes from the descriptor (sql/pgcatalog
// showcreate.go) and uses the dialect's own syntax where the table was
// created with it (USING HASH), so running it creates the same table.

func applyShowCreate(w *stmtRewriter, i int) (int, error) {
	if i != 0 || w.word(0) != "show" || w.word(1) != "create" {
		return i, nil
	}
	first := 2
	if w.word(2) == "table" {
		first = 3
	}
	end := len(w.toks) - 1
	if first > end {
		return i, w.errorAt(first, "expected a table name")
	}
	// A name: identifiers separated by dots.
	for k := first; k <= end; k++ {
		if (k-first)%2 == 0 {
			if !w.tok(k).isName() {
				return i, w.errorAt(k, "expected a table name")
			}
		} else if w.word(k) != "." {
			return i, w.errorAt(k, "expected the end of SHOW CREATE TABLE")
		}
	}
	if (end-first)%2 != 0 {
		return i, w.errorAt(end+1, "expected a table name")
	}
	name := w.src[w.toks[first].start:w.toks[end].end]
	lit := "'" + strings.ReplaceAll(name, "'", "''") + "'"
	w.note(&w.notes, "show-create", 0, end)
	return len(w.toks), w.replace(0, end, synth(w.toks[0].start,
		"SELECT "+lit+"::text AS table_name, cairn_show_create_table("+lit+"::regclass) AS create_statement"))
}
