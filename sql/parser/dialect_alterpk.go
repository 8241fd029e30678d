package parser

import "strings"

// CockroachDB's ALTER PRIMARY KEY (rule alter-primary-key of dialect.go),
// which the PostgreSQL grammar has no form for:
//
//	ALTER TABLE [IF EXISTS] t ALTER PRIMARY KEY USING COLUMNS (cols) [USING HASH ...]
//	→ ALTER TABLE [IF EXISTS] t ADD PRIMARY KEY (cols) WITH (cairn_alter_primary_key = true[, cairn_pk_hash_buckets = n])
//
// ADD PRIMARY KEY keeps the column list in the grammar's hands (quoting,
// case folding, positions of errors in it); the option tells the DDL to
// replace the table's primary key rather than add one (sql/ddl/alterpk.go).

// optAlterPK marks an ADD PRIMARY KEY that is an ALTER PRIMARY KEY.
const optAlterPK = "cairn_alter_primary_key"

func applyAlterPrimaryKey(w *stmtRewriter, i int) (int, error) {
	if i != 0 || w.word(0) != "alter" || w.word(1) != "table" {
		return i, nil
	}
	k := 2
	if w.word(k) == "if" && w.word(k+1) == "exists" {
		k += 2
	}
	last := w.qualName(k)
	if last < 0 || w.word(last+1) != "alter" || w.word(last+2) != "primary" || w.word(last+3) != "key" {
		return i, nil
	}
	j := last + 4
	if w.word(j) != "using" || w.word(j+1) != "columns" || w.word(j+2) != "(" {
		return i, w.errorAt(j, "expected USING COLUMNS (columns) after ALTER PRIMARY KEY")
	}
	closing := matching(w.toks, j+2)
	if closing < 0 {
		return i, w.errorAt(j+2, "expected ) to close the column list")
	}
	opts := []string{optAlterPK + " = true"}
	end := closing
	if w.word(closing+1) == "using" && w.word(closing+2) == "hash" {
		hl, value, err := w.hashClause(closing + 1)
		if err != nil {
			return i, err
		}
		opts = append(opts, optPKHashBuckets+" = "+value)
		end = hl
	}
	if end != len(w.toks)-1 {
		return i, w.errorAt(end+1, "expected end of statement after ALTER PRIMARY KEY USING COLUMNS (...)")
	}
	w.note(&w.notes, "alter-primary-key", last+1, end)
	cols := w.src[w.toks[j+2].start:w.toks[closing].end]
	return len(w.toks), w.replace(last+1, end, synth(w.toks[last+1].start,
		"ADD PRIMARY KEY "+cols+" WITH ("+strings.Join(opts, ", ")+")"))
}
