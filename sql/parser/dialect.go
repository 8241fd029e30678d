package parser

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// This file is the dialect rewriter (DESIGN §8): CockroachDB and YugabyteDB
// syntax the seeds use, turned into PostgreSQL 17 syntax on the token stream
// before the real grammar sees it. The rules table below is the whole
// dialect; walk.go decides where in a statement each site is.

// Annotation records one dialect construct the rewriter replaced, so later
// layers can tell what the user typed (SHOW CREATE TABLE, error hints).
// The meaning itself travels in the rewritten SQL (storage parameters),
// never only here.
type Annotation struct {
	Rule     string // name of the rule in the rules table
	Position int    // 1-based character offset of the construct in the original text
	Text     string // the construct as the user typed it
}

// String renders an annotation the way the tests print it.
func (a Annotation) String() string {
	return fmt.Sprintf("%s @%d: %s", a.Rule, a.Position, a.Text)
}

// site is a place in a statement where rules are tried.
type site int

const (
	// siteTableElement is the first token of each CREATE TABLE element.
	siteTableElement site = iota
	// siteColumnType is the first token of a type name: a column's type, a
	// `::` cast target, the target of CAST(... AS type).
	siteColumnType
	// siteConstraint is each top-level token of a column definition after
	// its name, and of a table constraint.
	siteConstraint
	// siteTableTail is each top-level token after CREATE TABLE's elements.
	siteTableTail
	// siteIndexTail is each top-level token after CREATE INDEX's columns.
	siteIndexTail
	// siteStatement is a statement's first token: rules that rewrite a
	// whole statement the grammar has no form for (dialect_zone.go).
	siteStatement
)

// rule is one dialect construct. apply is tried at every position of its
// sites; it returns the index of the first token it did not consume (i when
// it consumed nothing, in which case later rules are tried at i too), or a
// SyntaxError for a construct that is recognisably ours but malformed.
type rule struct {
	name  string
	sites []site
	// before and after document the rewrite; TestRulesHaveCases checks every
	// rule has test cases under its name.
	before, after string
	apply         func(w *stmtRewriter, i int) (next int, err error)
}

// Storage parameter names: the contract with the binder (see doc.go).
const (
	optPKHashBuckets = "cairn_pk_hash_buckets"
	optHashBuckets   = "cairn_hash_buckets"
	optPKOrder       = "cairn_pk_order"
	optSplitTablets  = "cairn_split_tablets"
)

// Bounds on counts a user may write. BUCKET_COUNT follows CockroachDB;
// tablets are bounded by the 16-bit hash space tablets are cut from.
const (
	minBuckets, maxBuckets = 2, 2048
	minTablets, maxTablets = 1, 65536
)

var rules []rule

func init() {
	// Order matters only within a site: hash-sharded-primary-key edits the
	// USING HASH tail without consuming, so primary-key-order still sees
	// the column list that precedes it.
	rules = []rule{{
		name:   "inline-index",
		sites:  []site{siteTableElement},
		before: "CREATE TABLE t (..., [UNIQUE] INDEX [name] (cols) [USING HASH ...])",
		after:  "CREATE TABLE t (...); CREATE [UNIQUE] INDEX [name] ON t (cols) [WITH (cairn_hash_buckets = n)]",
		apply:  applyInlineIndex,
	}, {
		name:   "type-alias",
		sites:  []site{siteColumnType},
		before: "STRING, STRING(n), BYTES",
		after:  "text, varchar(n), bytea",
		apply:  applyTypeAlias,
	}, {
		name:   "hash-sharded-primary-key",
		sites:  []site{siteConstraint},
		before: "PRIMARY KEY [(cols)] USING HASH WITH BUCKET_COUNT = n",
		after:  "PRIMARY KEY [(cols)] ... WITH (cairn_pk_hash_buckets = n)",
		apply:  applyHashPrimaryKey,
	}, {
		name:   "primary-key-order",
		sites:  []site{siteConstraint},
		before: "PRIMARY KEY ((a, b) HASH, c ASC, d DESC)",
		after:  "PRIMARY KEY (a, b, c, d) ... WITH (cairn_pk_order = 'hash,hash,asc,desc')",
		apply:  applyPrimaryKeyOrder,
	}, {
		name:   "computed-column",
		sites:  []site{siteConstraint},
		before: "col type AS (expr) STORED",
		after:  "col type GENERATED ALWAYS AS (expr) STORED",
		apply:  applyComputedColumn,
	}, {
		name:   "hash-sharded-index",
		sites:  []site{siteIndexTail},
		before: "CREATE INDEX ... (cols) USING HASH WITH BUCKET_COUNT = n",
		after:  "CREATE INDEX ... (cols) WITH (cairn_hash_buckets = n)",
		apply:  applyHashIndex,
	}, {
		name:   "split-into-tablets",
		sites:  []site{siteTableTail, siteIndexTail},
		before: "CREATE TABLE|INDEX ... SPLIT INTO n TABLETS",
		after:  "CREATE TABLE|INDEX ... WITH (cairn_split_tablets = n)",
		apply:  applySplitInto,
	}, {
		name:   "configure-zone",
		sites:  []site{siteStatement},
		before: "ALTER DATABASE d | TABLE t CONFIGURE ZONE USING k = v, ... | DISCARD",
		after:  "ALTER DATABASE d WITH cairn_zone_k = v ... | ALTER TABLE t SET (cairn_zone_k = v, ...)",
		apply:  applyConfigureZone,
	}, {
		name:   "alter-primary-key",
		sites:  []site{siteStatement},
		before: "ALTER TABLE t ALTER PRIMARY KEY USING COLUMNS (cols) [USING HASH ...]",
		after:  "ALTER TABLE t ADD PRIMARY KEY (cols) WITH (cairn_alter_primary_key = true[, cairn_pk_hash_buckets = n])",
		apply:  applyAlterPrimaryKey,
	}, {
		name:   "show-zone",
		sites:  []site{siteStatement},
		before: "SHOW ZONE CONFIGURATION FOR DATABASE d | TABLE t; SHOW [ALL] ZONE CONFIGURATIONS",
		after:  "SELECT target, raw_config_sql FROM cairn_catalog.zones WHERE ...",
		apply:  applyShowZone,
	}, {
		name:   "show-create",
		sites:  []site{siteStatement},
		before: "SHOW CREATE [TABLE] t",
		after:  "SELECT 't' AS table_name, cairn_show_create_table('t'::regclass) AS create_statement",
		apply:  applyShowCreate,
	}, {
		name:   "cluster-setting",
		sites:  []site{siteStatement},
		before: "SET CLUSTER SETTING name = value | DEFAULT; SHOW CLUSTER SETTING name",
		after:  "ALTER SYSTEM SET name = value | ALTER SYSTEM RESET name; SHOW name",
		apply:  applyClusterSetting,
	}, {
		name:   "show-jobs",
		sites:  []site{siteStatement},
		before: "SHOW JOBS; SHOW JOB n; CANCEL JOB n",
		after:  "SELECT ... FROM cairn_catalog.jobs [WHERE job_id = n]; SELECT cairn_cancel_job(n)",
		apply:  applyShowJobs,
	}, {
		name:   "as-of-system-time",
		sites:  []site{siteStatement},
		before: "SELECT ... FROM ... AS OF SYSTEM TIME e; BEGIN AS OF SYSTEM TIME e; SET TRANSACTION AS OF SYSTEM TIME e",
		after:  "WITH cairn_as_of_system_time AS (SELECT e) SELECT ...; BEGIN; SET LOCAL cairn_as_of_system_time = 'e'",
		apply:  applyAsOfSystemTime,
	}}
}

// try runs the rules of site s at toks[i] and returns where the walk goes
// on: past what a rule consumed, or i if none did.
func (w *stmtRewriter) try(s site, i int) (int, error) {
	if i >= len(w.toks) || w.claimed[i] {
		return i, nil
	}
	for _, r := range rules {
		if !hasSite(r.sites, s) {
			continue
		}
		next, err := r.apply(w, i)
		if err != nil {
			return i, err
		}
		if next > i {
			return next, nil
		}
	}
	return i, nil
}

func hasSite(sites []site, s site) bool {
	for _, x := range sites {
		if x == s {
			return true
		}
	}
	return false
}

func applyTypeAlias(w *stmtRewriter, i int) (int, error) {
	repl := w.typeAlias(i)
	if repl == "" {
		return i, nil
	}
	w.note(&w.notes, "type-alias", i, i)
	if err := w.replace(i, i, synth(w.toks[i].start, repl)); err != nil {
		return i, err
	}
	return i + 1, nil
}

// typeAlias returns the Postgres name for the type alias at toks[i], which
// must be in a type position, or "" if there is none.
func (w *stmtRewriter) typeAlias(i int) string {
	if w.word(i+1) == "." { // a schema-qualified name, not the alias
		return ""
	}
	switch w.word(i) {
	case "string":
		if w.word(i+1) == "(" {
			// STRING(n) is CockroachDB's bounded string; text takes no
			// length in Postgres.
			return "varchar"
		}
		return "text"
	case "bytes":
		return "bytea"
	}
	return ""
}

func applyHashPrimaryKey(w *stmtRewriter, i int) (int, error) {
	if w.word(i) != "primary" || w.word(i+1) != "key" {
		return i, nil
	}
	j := i + 2
	if w.word(j) == "(" {
		if j = matching(w.toks, j); j < 0 {
			return i, nil
		}
		j++
	}
	if w.word(j) != "using" || w.word(j+1) != "hash" {
		return i, nil
	}
	if w.kind != stmtCreateTable {
		return i, w.errorAt(j, "hash-sharded primary keys are only supported in CREATE TABLE")
	}
	last, value, err := w.hashClause(j)
	if err != nil {
		return i, err
	}
	w.note(&w.notes, "hash-sharded-primary-key", j, last)
	w.addOption(j, optPKHashBuckets, value)
	return i, w.remove(j, last)
}

func applyHashIndex(w *stmtRewriter, i int) (int, error) {
	if w.word(i) != "using" || w.word(i+1) != "hash" {
		return i, nil
	}
	last, value, err := w.hashClause(i)
	if err != nil {
		return i, err
	}
	w.note(&w.notes, "hash-sharded-index", i, last)
	w.addOption(i, optHashBuckets, value)
	return last + 1, w.remove(i, last)
}

// hashClause parses CockroachDB's USING HASH [WITH BUCKET_COUNT [=] n |
// WITH (bucket_count = n)] at toks[j] (USING). It returns the index of the
// clause's last token and the storage parameter value: n, or default when
// the count is left to the cluster setting.
func (w *stmtRewriter) hashClause(j int) (last int, value string, err error) {
	k := j + 2
	switch w.word(k) {
	case "(":
		return 0, "", w.errorAt(k, "USING HASH (columns) is not supported: the shard is computed from the index columns")
	case "with":
	default:
		return j + 1, "default", nil
	}
	switch w.word(k + 1) {
	case "bucket_count":
		n := k + 2
		if w.word(n) == "=" {
			n++
		}
		v, err := w.count(n, "BUCKET_COUNT", minBuckets, maxBuckets)
		return n, v, err
	case "(":
		if w.word(k+2) != "bucket_count" || w.word(k+3) != "=" {
			return 0, "", w.errorAt(k+2, "expected bucket_count = n in USING HASH WITH (...)")
		}
		v, err := w.count(k+4, "bucket_count", minBuckets, maxBuckets)
		if err != nil {
			return 0, "", err
		}
		if w.word(k+5) != ")" {
			return 0, "", w.errorAt(k+5, "expected ) after USING HASH WITH (bucket_count = n")
		}
		return k + 5, v, nil
	default:
		return 0, "", w.errorAt(k+1, "expected BUCKET_COUNT = n after USING HASH WITH")
	}
}

// count checks that toks[i] is an integer constant in [lo, hi] and returns
// it in decimal.
func (w *stmtRewriter) count(i int, what string, lo, hi int64) (string, error) {
	if i >= len(w.toks) {
		return "", w.errorAt(i, "expected an integer after %s", what)
	}
	t := w.toks[i]
	if w.word(i) == "-" && i+1 < len(w.toks) && w.toks[i+1].isNumber() {
		return "", w.errorAt(i, "%s must be between %d and %d", what, lo, hi)
	}
	if t.kind != pg_query.Token_ICONST {
		return "", w.errorAt(i, "%s must be an integer constant, not %s", what, w.src[t.start:t.end])
	}
	v, err := parseInteger(w.src[t.start:t.end])
	if err != nil || v < lo || v > hi {
		return "", w.errorAt(i, "%s must be between %d and %d, not %s", what, lo, hi, w.src[t.start:t.end])
	}
	return strconv.FormatInt(v, 10), nil
}

// parseInteger reads an integer literal as Postgres 17 writes them:
// decimal, 0x/0o/0b prefixed, with optional underscores. Leading zeros are
// decimal, unlike Go's base-0 rule.
func parseInteger(s string) (int64, error) {
	s = strings.ReplaceAll(s, "_", "")
	if len(s) > 2 && s[0] == '0' && strings.ContainsRune("xXoObB", rune(s[1])) {
		return strconv.ParseInt(s, 0, 64)
	}
	return strconv.ParseInt(s, 10, 64)
}

func applySplitInto(w *stmtRewriter, i int) (int, error) {
	if w.word(i) != "split" || w.word(i+1) != "into" {
		return i, nil
	}
	v, err := w.count(i+2, "SPLIT INTO", minTablets, maxTablets)
	if err != nil {
		return i, err
	}
	if w.word(i+3) != "tablets" {
		return i, w.errorAt(i+3, "expected TABLETS after SPLIT INTO %s", v)
	}
	w.note(&w.notes, "split-into-tablets", i, i+3)
	w.addOption(i, optSplitTablets, v)
	return i + 4, w.remove(i, i+3)
}

func applyComputedColumn(w *stmtRewriter, i int) (int, error) {
	if w.word(i) != "as" {
		return i, nil
	}
	switch w.word(i - 1) {
	case "always", "default": // GENERATED ALWAYS AS ..., GENERATED BY DEFAULT AS IDENTITY
		return i, nil
	}
	if w.word(i+1) == "(" {
		c := matching(w.toks, i+1)
		if c < 0 || c >= w.elemEnd {
			return i, nil
		}
		if w.word(c+1) != "stored" {
			return i, w.errorAt(c+1, "computed columns must be STORED: write AS (expr) STORED")
		}
		w.note(&w.notes, "computed-column", i, c+1)
		return c + 2, w.insertBefore(i, synth(w.toks[i].start, "GENERATED ALWAYS "))
	}
	// CockroachDB also accepts an unparenthesised expression up to STORED;
	// Postgres needs the parentheses.
	for j := i + 1; j < w.elemEnd; j++ {
		switch w.word(j) {
		case "(":
			if j = matching(w.toks, j); j < 0 || j >= w.elemEnd {
				return i, nil
			}
		case "stored":
			if j == i+1 {
				return i, nil
			}
			w.note(&w.notes, "computed-column", i, j)
			if err := w.insertBefore(i, synth(w.toks[i].start, "GENERATED ALWAYS ")); err != nil {
				return i, err
			}
			if err := w.insertBefore(i+1, synth(w.toks[i+1].start, "(")); err != nil {
				return i, err
			}
			return j + 1, w.insertAfter(j-1, synth(w.toks[j-1].end, ")"))
		}
	}
	return i, nil
}

func applyPrimaryKeyOrder(w *stmtRewriter, i int) (int, error) {
	if w.word(i) != "primary" || w.word(i+1) != "key" || w.word(i+2) != "(" {
		return i, nil
	}
	open := i + 2
	close := matching(w.toks, open)
	if close < 0 {
		return i, nil
	}
	var names []int     // token index of each key column
	var orders []string // one entry per key column
	modified := false
	for a := open + 1; a < close; {
		b := a // end (exclusive) of this element
		for b < close && w.word(b) != "," {
			if w.word(b) == "(" {
				if b = matching(w.toks, b); b < 0 {
					return i, nil
				}
			}
			b++
		}
		switch {
		case w.word(a) == "(": // (a, b) HASH
			g := matching(w.toks, a)
			if g+2 != b || w.word(g+1) != "hash" {
				return i, nil
			}
			if len(names) > 0 {
				return i, w.errorAt(g+1, "HASH columns must come first in the primary key")
			}
			for k := a + 1; k < g; k += 2 {
				if !w.tok(k).isName() || (k+1 < g && w.word(k+1) != ",") {
					return i, nil
				}
				names = append(names, k)
				orders = append(orders, "hash")
			}
			modified = true
		case !w.tok(a).isName():
			return i, nil
		case b == a+1:
			names = append(names, a)
			orders = append(orders, "default")
		case b == a+2:
			o := w.word(a + 1)
			switch o {
			case "hash":
				if len(names) > 0 {
					return i, w.errorAt(a+1, "HASH columns must come first in the primary key; write ((a, b) HASH, c) to hash on several columns")
				}
			case "asc", "desc":
			default:
				return i, nil
			}
			names = append(names, a)
			orders = append(orders, o)
			modified = true
		default:
			return i, nil
		}
		a = b + 1
	}
	if !modified || len(names) == 0 {
		return i, nil
	}
	var with []chunk
	for k, n := range names {
		if k > 0 {
			with = append(with, synth(w.toks[n].start, ", "))
		}
		with = append(with, copyOf(w.src, w.toks[n].start, w.toks[n].end))
	}
	w.note(&w.notes, "primary-key-order", open, close)
	w.addOption(open, optPKOrder, "'"+strings.Join(orders, ",")+"'")
	return close + 1, w.replace(open+1, close-1, with...)
}

func applyInlineIndex(w *stmtRewriter, s int) (int, error) {
	if w.kind != stmtCreateTable {
		return s, nil
	}
	i, unique := s, false
	if w.word(i) == "unique" {
		unique = true
		i++
	}
	if w.word(i) != "index" {
		return s, nil
	}
	i++
	name := -1
	if w.word(i) != "(" {
		name = i
		i++
		if !w.tok(name).isName() || w.word(i) != "(" {
			return s, nil
		}
		if next := w.tok(i + 1); !next.isName() && next.word != "(" {
			// `index foo(10)`: a column named index with a type modifier.
			// Index columns start with a name or a parenthesised
			// expression; `index foo(a)` is read as an index, the only
			// reading anyone means.
			return s, nil
		}
	}
	open := i
	close := matching(w.toks, open)
	if close < 0 || close >= w.elemEnd {
		return s, nil
	}
	// Split the rest of the element into the hash clause and what is
	// copied over verbatim (WHERE for partial indexes, INCLUDE, ...).
	hashFrom, hashTo, buckets := -1, -1, ""
	where := -1
	for j := close + 1; j < w.elemEnd; j++ {
		switch w.word(j) {
		case "(":
			if j = matching(w.toks, j); j < 0 {
				return s, nil
			}
		case "using":
			if w.word(j+1) == "hash" && hashFrom < 0 {
				last, v, err := w.hashClause(j)
				if err != nil {
					return s, err
				}
				hashFrom, hashTo, buckets = j, last, v
				j = last
			}
		case "where":
			if where < 0 {
				where = j
			}
		}
	}
	var d derived
	anchor := w.toks[s].start
	text := "; CREATE "
	if unique {
		text += "UNIQUE "
	}
	text += "INDEX "
	d.with = append(d.with, synth(anchor, text))
	if name >= 0 {
		if w.ifNotExists {
			d.with = append(d.with, synth(anchor, "IF NOT EXISTS "))
		}
		d.with = append(d.with, w.copyToks(name, name), synth(anchor, " "))
	}
	d.with = append(d.with, synth(anchor, "ON "), w.copyToks(w.tableFrom, w.tableTo), synth(anchor, " "))
	d.with = append(d.with, w.copyAliased(&d.notes, open, close)...)
	tailEnd := w.elemEnd
	if where >= 0 {
		tailEnd = where
	}
	d.with = append(d.with, w.copyRuns(&d.notes, close+1, tailEnd, hashFrom, hashTo)...)
	if hashFrom >= 0 {
		d.with = append(d.with, synth(w.toks[hashFrom].start, fmt.Sprintf(" WITH (%s = %s)", optHashBuckets, buckets)))
	}
	if where >= 0 {
		d.with = append(d.with, w.copyRuns(&d.notes, where, w.elemEnd, hashFrom, hashTo)...)
	}
	w.note(&d.notes, "inline-index", s, w.elemEnd-1)
	if hashFrom >= 0 {
		w.note(&d.notes, "hash-sharded-index", hashFrom, hashTo)
	}
	w.derived = append(w.derived, d)
	return w.elemEnd, nil
}

// copyRuns copies the tokens [from, to) except [skipFrom, skipTo] as runs
// of original text, each preceded by a space, through copyAliased.
func (w *stmtRewriter) copyRuns(notes *[]Annotation, from, to, skipFrom, skipTo int) []chunk {
	var out []chunk
	runStart := -1
	flush := func(end int) {
		if runStart >= 0 {
			out = append(out, synth(w.toks[runStart].start, " "))
			out = append(out, w.copyAliased(notes, runStart, end-1)...)
			runStart = -1
		}
	}
	for j := from; j < to; j++ {
		if skipFrom >= 0 && j >= skipFrom && j <= skipTo {
			flush(j)
			continue
		}
		if runStart < 0 {
			runStart = j
		}
	}
	flush(to)
	return out
}

// copyAliased copies tokens [from, to] into a derived statement, with the
// type aliases of casts inside (expr::STRING, CAST(expr AS BYTES)) renamed:
// the element they sit in is removed whole, so no edit can reach them.
func (w *stmtRewriter) copyAliased(notes *[]Annotation, from, to int) []chunk {
	var out []chunk
	pos := w.toks[from].start
	for i := from; i <= to; i++ {
		if prev := w.word(i - 1); i == from || (prev != "::" && prev != "as") {
			continue
		}
		repl := w.typeAlias(i)
		if repl == "" {
			continue
		}
		w.note(notes, "type-alias", i, i)
		out = append(out, copyOf(w.src, pos, w.toks[i].start), synth(w.toks[i].start, repl))
		pos = w.toks[i].end
	}
	return append(out, copyOf(w.src, pos, w.toks[to].end))
}

// sortNotes orders annotations by where they appear in the original text.
func sortNotes(notes []Annotation) {
	sort.SliceStable(notes, func(i, j int) bool { return notes[i].Position < notes[j].Position })
}
