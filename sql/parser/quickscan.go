package parser

import pg_query "github.com/pganalyze/pg_query_go/v6"

// quickTokens splits sql into the tokens PostgreSQL's scanner would give,
// without calling it, for the everyday text of a point query: ASCII
// identifiers and keywords, unsigned integers, plain quoted strings,
// punctuation and the common one- and two-character operators. For
// anything else (a comment, a double-quoted identifier, a number with a
// fraction or a trailing letter, an E'x' or other prefixed string, strings
// continued over a newline, a parameter, a longer operator, non-ASCII
// text) it answers ok=false and the caller asks the real scanner, so its
// answers need only be right where it gives them: a token's boundaries
// and, for constants, its kind (ICONST or SCONST; every other token is
// reported as IDENT, which Shape treats like any non-constant).
//
// Why: the scan by libpg_query (a cgo call and a protobuf answer) was 8%
// of the CPU of pgbench's select-only, whose query is the same every time
// but for its constant. TestQuickTokens and FuzzQuickTokens hold it to
// the real scanner.
//
// toks is appended to (Shape passes an array on its stack).
func quickTokens(sql string, toks []scanToken) ([]scanToken, bool) {
	i := 0
	for i < len(sql) {
		c := sql[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case isQuickIdentStart(c):
			j := i + 1
			for j < len(sql) && isQuickIdentCont(sql[j]) {
				j++
			}
			if j < len(sql) && (sql[j] == '\'' || sql[j] == '"' || sql[j] >= 0x80) {
				return nil, false // E'...', U&"..." and friends, or non-ASCII
			}
			toks = append(toks, scanToken{start: i, end: j, kind: pg_query.Token_IDENT})
			i = j
		case c >= '0' && c <= '9':
			j := i + 1
			for j < len(sql) && sql[j] >= '0' && sql[j] <= '9' {
				j++
			}
			if j < len(sql) && (sql[j] == '.' || isQuickIdentCont(sql[j]) || sql[j] >= 0x80) {
				return nil, false // 1.5, 1e5, 0x1f, 1_000, trailing junk
			}
			toks = append(toks, scanToken{start: i, end: j, kind: pg_query.Token_ICONST})
			i = j
		case c == '\'':
			j := i + 1
			for {
				if j >= len(sql) {
					return nil, false // unterminated
				}
				d := sql[j]
				if d == '\\' || d < 0x20 || d >= 0x80 {
					return nil, false
				}
				if d == '\'' {
					if j+1 < len(sql) && sql[j+1] == '\'' {
						j += 2
						continue
					}
					break
				}
				j++
			}
			j++ // the closing quote
			// A string followed by another after a newline is one
			// constant to the grammar; leave that to the real scanner.
			k := j
			for k < len(sql) && (sql[k] == ' ' || sql[k] == '\t' || sql[k] == '\n' || sql[k] == '\r') {
				k++
			}
			if k < len(sql) && sql[k] == '\'' {
				return nil, false
			}
			toks = append(toks, scanToken{start: i, end: j, kind: pg_query.Token_SCONST})
			i = j
		case c == ',' || c == '(' || c == ')' || c == ';' || c == '[' || c == ']':
			toks = append(toks, scanToken{start: i, end: i + 1, kind: pg_query.Token_IDENT})
			i++
		case c == '.':
			if i+1 < len(sql) && (sql[i+1] == '.' || (sql[i+1] >= '0' && sql[i+1] <= '9')) {
				return nil, false // .5, ..
			}
			toks = append(toks, scanToken{start: i, end: i + 1, kind: pg_query.Token_IDENT})
			i++
		case c == ':':
			if i+1 < len(sql) && sql[i+1] == ':' && (i+2 >= len(sql) || sql[i+2] != ':' && sql[i+2] != '=') {
				toks = append(toks, scanToken{start: i, end: i + 2, kind: pg_query.Token_IDENT})
				i += 2
				continue
			}
			return nil, false
		case isQuickOpChar(c):
			j := i + 1
			for j < len(sql) && isQuickOpChar(sql[j]) {
				j++
			}
			switch op := sql[i:j]; op {
			case "=", "<", ">", "+", "-", "*", "/", "%", "<=", ">=", "<>", "!=":
				toks = append(toks, scanToken{start: i, end: j, kind: pg_query.Token_IDENT})
				i = j
			default:
				return nil, false // comments, longer or rarer operators
			}
		default:
			return nil, false
		}
	}
	return toks, true
}

func isQuickIdentStart(c byte) bool {
	return c == '_' || (c|0x20 >= 'a' && c|0x20 <= 'z')
}

func isQuickIdentCont(c byte) bool {
	return isQuickIdentStart(c) || c == '$' || (c >= '0' && c <= '9')
}

// isQuickOpChar: PostgreSQL's op_chars (scan.l).
func isQuickOpChar(c byte) bool {
	switch c {
	case '~', '!', '@', '#', '^', '&', '|', '`', '?', '+', '-', '*', '/', '%', '<', '>', '=':
		return true
	}
	return false
}
