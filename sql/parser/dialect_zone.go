package parser

import (
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// CockroachDB's zone configuration statements (rules configure-zone and
// show-zone of dialect.go), which the PostgreSQL grammar has no form for:
//
//	ALTER DATABASE d CONFIGURE ZONE USING k = v, ...  → ALTER DATABASE d WITH cairn_zone_k = v ...
//	ALTER TABLE t CONFIGURE ZONE USING k = v, ...     → ALTER TABLE t SET (cairn_zone_k = v, ...)
//	ALTER DATABASE|TABLE x CONFIGURE ZONE DISCARD     → ... cairn_zone_discard = true
//	SHOW ZONE CONFIGURATION FOR|FROM DATABASE d       → SELECT target, raw_config_sql FROM cairn_catalog.zones WHERE ...
//	SHOW ZONE CONFIGURATION FOR|FROM TABLE t          → ... WHERE table_oid = 't'::regclass::oid
//	SHOW [ALL] ZONE CONFIGURATIONS                    → every row of cairn_catalog.zones
//
// Option names are not checked here: the DDL reports an unknown one (and
// bad values) as 22023, which is what the user's mistake is; only a USING
// list that is not `name = constant, ...` is a syntax error.

// zoneOptPrefix names the options a USING list becomes (the DDL's
// contract, sql/ddl/zone.go).
const zoneOptPrefix = "cairn_zone_"

func applyConfigureZone(w *stmtRewriter, i int) (int, error) {
	if i != 0 || w.word(0) != "alter" {
		return i, nil
	}
	kind := w.word(1)
	if kind != "database" && kind != "table" {
		return i, nil
	}
	last := w.qualName(2)
	if last < 0 || w.word(last+1) != "configure" || w.word(last+2) != "zone" {
		return i, nil
	}
	if kind == "database" && last != 2 {
		return i, w.errorAt(3, "a database name cannot be qualified")
	}
	j := last + 3
	var opts []string
	switch w.word(j) {
	case "discard":
		if j+1 < len(w.toks) {
			return i, w.errorAt(j+1, "expected end of statement after CONFIGURE ZONE DISCARD")
		}
		opts = []string{zoneOptPrefix + "discard = true"}
	case "using":
		for k := j + 1; ; {
			nameEnd := w.qualName(k)
			if nameEnd < 0 {
				return i, w.errorAt(k, "expected a zone option name")
			}
			var name strings.Builder
			for n := k; n <= nameEnd; n++ {
				name.WriteString(w.nameText(n))
			}
			if w.word(nameEnd+1) != "=" {
				return i, w.errorAt(nameEnd+1, "expected = after zone option %s", name.String())
			}
			v := nameEnd + 2
			vEnd := v
			switch {
			case w.word(v) == "-" && w.tok(v+1).isNumber():
				vEnd = v + 1
			case v < len(w.toks) && (w.tok(v).isNumber() || w.tok(v).isName() || w.tok(v).kind == pg_query.Token_SCONST):
			default:
				return i, w.errorAt(v, "expected a constant value for zone option %s", name.String())
			}
			opts = append(opts, quoteOptName(zoneOptPrefix+name.String())+" = "+w.src[w.toks[v].start:w.toks[vEnd].end])
			k = vEnd + 1
			if k >= len(w.toks) {
				break
			}
			if w.word(k) != "," {
				return i, w.errorAt(k, "expected , or end of statement after the value of zone option %s", name.String())
			}
			k++
		}
	default:
		return i, w.errorAt(j, "expected USING or DISCARD after CONFIGURE ZONE")
	}
	end := len(w.toks) - 1
	w.note(&w.notes, "configure-zone", last+1, end)
	text := "SET (" + strings.Join(opts, ", ") + ")"
	if kind == "database" {
		text = "WITH " + strings.Join(opts, " ")
	}
	return len(w.toks), w.replace(last+1, end, synth(w.toks[last+1].start, text))
}

// nameText is the name token toks[n] as an identifier's value: a quoted
// identifier unquoted, a bare one lower-cased, "." kept.
func (w *stmtRewriter) nameText(n int) string {
	t := w.toks[n]
	if t.word != "" {
		return t.word
	}
	s := w.src[t.start:t.end]
	if strings.HasPrefix(s, `"`) && strings.HasSuffix(s, `"`) && len(s) >= 2 {
		return strings.ReplaceAll(s[1:len(s)-1], `""`, `"`)
	}
	return s
}

// quoteOptName writes an option name as an identifier, quoted unless it
// is a plain lower-case one.
func quoteOptName(s string) string {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
		}
	}
	return s
}

// sqlString quotes s as a string constant.
func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func applyShowZone(w *stmtRewriter, i int) (int, error) {
	if i != 0 || w.word(0) != "show" {
		return i, nil
	}
	const sel = "SELECT target, raw_config_sql FROM cairn_catalog.zones"
	end := len(w.toks) - 1
	k := 1
	if w.word(k) == "all" {
		k++
	}
	if w.word(k) == "zone" && w.word(k+1) == "configurations" && k+1 == end {
		w.note(&w.notes, "show-zone", 0, end)
		return len(w.toks), w.replace(0, end, synth(w.toks[0].start, sel+" ORDER BY database_name, schema_name NULLS FIRST, table_name NULLS FIRST"))
	}
	if k != 1 || w.word(1) != "zone" || w.word(2) != "configuration" {
		return i, nil
	}
	if w.word(3) != "for" && w.word(3) != "from" {
		return i, w.errorAt(3, "expected FOR DATABASE name or FOR TABLE name after SHOW ZONE CONFIGURATION")
	}
	var where string
	switch w.word(4) {
	case "database":
		if w.qualName(5) != 5 || end != 5 {
			return i, w.errorAt(5, "expected a database name")
		}
		where = "database_name = " + sqlString(w.nameText(5)) + " AND table_name IS NULL"
	case "table":
		last := w.qualName(5)
		if last < 0 || last != end {
			return i, w.errorAt(5, "expected a table name")
		}
		where = "table_oid = " + sqlString(w.src[w.toks[5].start:w.toks[last].end]) + "::regclass::oid"
	default:
		return i, w.errorAt(4, "expected DATABASE or TABLE (other zone targets are not supported)")
	}
	w.note(&w.notes, "show-zone", 0, end)
	return len(w.toks), w.replace(0, end, synth(w.toks[0].start, sel+" WHERE "+where))
}
