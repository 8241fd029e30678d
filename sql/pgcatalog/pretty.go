package pgcatalog

import "strings"

// Pretty-printing of stored expressions, as ruleutils' PRETTY_PAREN mode.
//
// Cairn stores an expression (a CHECK constraint, an index predicate) as
// the text PostgreSQL's non-pretty deparser prints: every operator, test
// and boolean expression in its own parentheses, a cast's argument in
// parentheses ("((total >= (0)::numeric))"). The pretty form
// (pg_get_constraintdef(oid, true), pg_get_indexdef(oid, 0, true), what
// psql's \d shows) drops the parentheses that isSimpleNode finds
// redundant. prettyExpr does that on the text: it finds each
// expression-grouping pair of parentheses (not a call's or a list's) and
// drops it when PostgreSQL's rules would not print it, keeping every pair
// it cannot classify, so the result always means what the stored text
// means.

type ptok struct {
	kind       byte // 'w' word, 'q' quoted identifier, 's' string, 'n' number, 'o' operator, 'p' punctuation
	text       string
	start, end int // byte offsets in the source
}

func tokenize(s string) []ptok {
	var out []ptok
	isWord := func(c byte) bool {
		return c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
	}
	for i := 0; i < len(s); {
		c := s[i]
		start := i
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
			continue
		case c == '\'' || (c == 'E' || c == 'e') && i+1 < len(s) && s[i+1] == '\'':
			if c != '\'' {
				i++
			}
			i++
			for i < len(s) {
				if s[i] == '\\' && c != '\'' {
					i += 2
					continue
				}
				if s[i] == '\'' {
					if i+1 < len(s) && s[i+1] == '\'' {
						i += 2
						continue
					}
					i++
					break
				}
				i++
			}
			out = append(out, ptok{'s', s[start:min(i, len(s))], start, min(i, len(s))})
		case c == '"':
			i++
			for i < len(s) {
				if s[i] == '"' {
					if i+1 < len(s) && s[i+1] == '"' {
						i += 2
						continue
					}
					i++
					break
				}
				i++
			}
			out = append(out, ptok{'q', s[start:min(i, len(s))], start, min(i, len(s))})
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9':
			for i < len(s) && (isWord(s[i]) || s[i] == '.') {
				i++
			}
			out = append(out, ptok{'n', s[start:i], start, i})
		case isWord(c):
			for i < len(s) && isWord(s[i]) {
				i++
			}
			out = append(out, ptok{'w', strings.ToUpper(s[start:i]), start, i})
		case c == ':' && i+1 < len(s) && s[i+1] == ':':
			i += 2
			out = append(out, ptok{'p', "::", start, i})
		case strings.IndexByte("()[],;.", c) >= 0:
			i++
			out = append(out, ptok{'p', string(c), start, i})
		default:
			for i < len(s) && strings.IndexByte("+-*/<>=~!@#%^&|`?", s[i]) >= 0 {
				i++
			}
			if i == start {
				i++
			}
			out = append(out, ptok{'o', s[start:i], start, i})
		}
	}
	return out
}

// groupKeywords are the words after which a "(" groups an expression
// rather than opening a call's or a list's parentheses.
var groupKeywords = map[string]bool{"AND": true, "OR": true, "NOT": true, "WHEN": true, "THEN": true, "ELSE": true, "CASE": true}

// opKeywords are the word operators: a group containing one at its top
// level is an operator expression.
var opKeywords = map[string]bool{"IS": true, "LIKE": true, "ILIKE": true, "SIMILAR": true, "IN": true, "BETWEEN": true,
	"ANY": true, "ALL": true, "SOME": true, "OVERLAPS": true, "AT": true, "COLLATE": true}

// prettyExpr is the pretty form of a stored (non-pretty) expression.
func prettyExpr(s string) string {
	toks := tokenize(s)
	n := len(toks)
	// match[i] is the index of the parenthesis matching toks[i].
	match := make([]int, n)
	var stack []int
	for i, t := range toks {
		match[i] = -1
		switch t.text {
		case "(":
			if t.kind == 'p' {
				stack = append(stack, i)
			}
		case ")":
			if t.kind == 'p' {
				if len(stack) == 0 {
					return s // unbalanced: leave it alone
				}
				o := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				match[o], match[i] = i, o
			}
		}
	}
	if len(stack) > 0 {
		return s
	}
	// grouping reports whether the "(" at i groups an expression.
	grouping := func(i int) bool {
		if i == 0 {
			return true
		}
		p := toks[i-1]
		switch p.kind {
		case 'w':
			return groupKeywords[p.text]
		case 'q', 's', 'n':
			return false
		case 'o':
			return true
		}
		return p.text == "(" || p.text == "," || p.text == "["
	}
	// class is what a group holds at its top level.
	class := func(o, c int) string {
		cls := "atom"
		for k := o + 1; k < c; k++ {
			t := toks[k]
			if t.kind == 'p' && t.text == "(" {
				k = match[k]
				continue
			}
			switch {
			case t.kind == 'w' && t.text == "OR":
				return "or"
			case t.kind == 'w' && t.text == "AND":
				cls = "and"
			case cls == "and":
			case t.kind == 'w' && t.text == "NOT" && k == o+1:
				cls = "not"
			case t.kind == 'o' || t.kind == 'w' && opKeywords[t.text]:
				if cls != "not" {
					cls = "op"
				}
			case t.kind == 'p' && t.text == "::" && cls == "atom":
				cls = "cast"
			case t.kind == 'w' && t.text == "CASE":
				return "case"
			}
		}
		return cls
	}
	// opText is the operator a group's top level applies, for a group of
	// class op.
	opText := func(o, c int) string {
		for k := o + 1; k < c; k++ {
			if toks[k].kind == 'p' && toks[k].text == "(" {
				k = match[k]
				continue
			}
			if toks[k].kind == 'o' {
				return toks[k].text
			}
		}
		return ""
	}
	prio := func(op string) int {
		switch op {
		case "+", "-":
			return 1
		case "*", "/", "%":
			return 2
		}
		return 0
	}
	drop := map[int]bool{}
	for o := 0; o < n; o++ {
		if toks[o].kind != 'p' || toks[o].text != "(" || !grouping(o) {
			continue
		}
		c := match[o]
		cls := class(o, c)
		var prev, next ptok
		if o > 0 {
			prev = toks[o-1]
		}
		if c+1 < n {
			next = toks[c+1]
		}
		remove := false
		switch {
		case o == 0 && c == n-1:
			remove = true // the whole expression
		case next.text == "::":
			remove = cls == "atom" || cls == "cast"
		case prev.kind == 'w' && prev.text == "AND" || next.kind == 'w' && next.text == "AND":
			remove = cls != "or" && cls != "case"
		case prev.kind == 'w' && prev.text == "OR" || next.kind == 'w' && next.text == "OR":
			remove = cls != "case"
		case prev.kind == 'w' && prev.text == "NOT":
			remove = cls == "op" || cls == "atom" || cls == "cast"
		case prev.kind == 'w' && (prev.text == "WHEN" || prev.text == "THEN" || prev.text == "ELSE"):
			remove = true
		case prev.kind == 'o' || next.kind == 'o':
			if cls != "op" {
				break
			}
			parent, left := prev.text, false
			if next.kind == 'o' {
				parent, left = next.text, true
			}
			child := opText(o, c)
			pc, pp := prio(child), prio(parent)
			remove = pc > 0 && pp > 0 && (pc > pp || pc == pp && left)
		case (prev.text == "(" || prev.text == ",") && (next.text == ")" || next.text == ","):
			// An argument of a function call.
			if prev.text == "(" {
				remove = o >= 2 && isCallParen(toks, o-1)
			} else {
				remove = enclosingCall(toks, match, o)
			}
		}
		if remove {
			drop[toks[o].start], drop[toks[c].start] = true, true
		}
	}
	if len(drop) == 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if !drop[i] {
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// isCallParen reports whether the "(" at i opens a function call's
// arguments: a function name (not a keyword like IN or ANY) before it.
func isCallParen(toks []ptok, i int) bool {
	if i == 0 {
		return false
	}
	p := toks[i-1]
	return p.kind == 'q' || p.kind == 'w' && !groupKeywords[p.text] && !opKeywords[p.text] && p.text != "ARRAY" && p.text != "ROW" && p.text != "VALUES"
}

// enclosingCall reports whether token i sits directly in a function call's
// argument list.
func enclosingCall(toks []ptok, match []int, i int) bool {
	depth := 0
	for k := i - 1; k >= 0; k-- {
		switch {
		case toks[k].kind == 'p' && toks[k].text == ")":
			depth++
		case toks[k].kind == 'p' && toks[k].text == "(":
			if depth == 0 {
				return isCallParen(toks, k)
			}
			depth--
		}
	}
	return false
}
