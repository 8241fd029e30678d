package builtins

import (
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// SIMILAR TO, regexp_matches, regexp_split_to_table and PostgreSQL 15's
// regexp_count, regexp_instr, regexp_like and regexp_substr, over the same
// RE2 engine and flags as fn_regex.go. Positions and start offsets count
// characters, not bytes, as Postgres does.

// similarToRegex translates a SQL SIMILAR TO pattern into the regular
// expression Postgres's similar_to_escape makes (similar_escape_internal):
// anchored, % and _ as .* and ., parentheses non-capturing, bracket
// expressions copied, regex metacharacters that SQL does not treat
// specially (. ^ $ and a literal backslash) escaped. esc is the escape
// character, or -1 for none.
//
// The escape character followed by a double quote separates the part
// substring(s SIMILAR pat ESCAPE e) returns: Postgres makes the first
// separator "){1,1}?(" and the second "){1,1}(?:", so the middle part is
// the first capture group; a third is 2200C.
func similarToRegex(pat string, esc rune) (string, error) {
	var b strings.Builder
	b.WriteString("^(?:")
	afterEscape, inBracket, bracketStart, nquotes := false, false, 0, 0
	for i, c := range pat {
		switch {
		case afterEscape && c == '"':
			switch nquotes {
			case 0:
				b.WriteString("){1,1}?(")
			case 1:
				b.WriteString("){1,1}(?:")
			default:
				return "", pgerror.New(pgerrcode.InvalidUseOfEscapeCharacter,
					"SQL regular expression may not contain more than two escape-double-quote separators")
			}
			nquotes++
			afterEscape = false
		case afterEscape:
			// An escaped character is passed on escaped, as Postgres
			// does (so an escaped % or _ is literal).
			b.WriteByte('\\')
			b.WriteRune(c)
			afterEscape = false
		case c == esc:
			afterEscape = true
		case inBracket:
			// ']' right after '[' or '[^' is a member, not the end.
			if c == ']' && i > bracketStart {
				inBracket = false
			}
			if c == '\\' {
				b.WriteString(`\\`)
			} else {
				b.WriteRune(c)
			}
		case c == '[':
			inBracket = true
			b.WriteRune(c)
			bracketStart = i + 1
			if strings.HasPrefix(pat[i+1:], "^") {
				bracketStart++
			}
		case c == '%':
			b.WriteString(".*")
		case c == '_':
			b.WriteString(".")
		case c == '(':
			b.WriteString("(?:")
		case c == '\\', c == '.', c == '^', c == '$':
			b.WriteByte('\\')
			b.WriteRune(c)
		default:
			b.WriteRune(c)
		}
	}
	if afterEscape {
		// A trailing escape matches itself, as Postgres's translation
		// leaves it.
		b.WriteString(regexp.QuoteMeta(string(esc)))
	}
	b.WriteString(")$")
	return b.String(), nil
}

// runeOffset converts a 1-based character position into a byte offset of
// s (len(s) past the end).
func runeOffset(s string, pos int64) int {
	n := int64(1)
	for i := range s {
		if n == pos {
			return i
		}
		n++
	}
	return len(s)
}

// charPos is the 1-based character position of byte offset off in s.
func charPos(s string, off int) int64 { return int64(utf8.RuneCountInString(s[:off])) + 1 }

// reArgs are the optional arguments of the PostgreSQL 15 regexp_*
// functions after (string, pattern).
type reArgs struct {
	start, n, endOpt, subexpr int64
	flags                     string
}

func compileRe(fn, pattern, flags string) (*regexp.Regexp, error) {
	f, err := parseReFlags(flags, false, fn)
	if err != nil {
		if strings.ContainsRune(flags, 'g') {
			// Only regexp_match's error carries the hint in Postgres.
			return nil, errInvalidParam("%s() does not support the \"global\" option", fn)
		}
		return nil, err
	}
	return compileRegex(pattern, f.fold)
}

// reMatches returns the submatch indexes of the matches of re in s from
// byte offset from, at most limit (-1: all).
func reMatches(re *regexp.Regexp, s string, from, limit int) [][]int {
	ms := re.FindAllStringSubmatchIndex(s[from:], limit)
	for _, m := range ms {
		for i := range m {
			if m[i] >= 0 {
				m[i] += from
			}
		}
	}
	return ms
}

func checkStart(fn string, start int64) error {
	if start <= 0 {
		return errInvalidParam("invalid value for parameter \"%s\": %d", "start", start)
	}
	return nil
}

// regexpSubmatchArray is one regexp_matches row: the capture groups, or
// the whole match when the pattern has none.
func regexpSubmatchArray(s string, m []int) types.Datum {
	out := types.NewArray(types.Text)
	if len(m) == 2 {
		out.Elems = append(out.Elems, types.DString(s[m[0]:m[1]]))
		return out
	}
	for g := 1; 2*g < len(m); g++ {
		if m[2*g] < 0 {
			out.Elems = append(out.Elems, types.DNull)
		} else {
			out.Elems = append(out.Elems, types.DString(s[m[2*g]:m[2*g+1]]))
		}
	}
	return out
}

func init() {
	text, i4 := types.Text, types.Int4
	textArr := types.MustArray(text)

	simFn := func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		esc := '\\'
		if len(a) > 1 {
			e := str(a[1])
			switch utf8.RuneCountInString(e) {
			case 0:
				esc = -1
			case 1:
				esc, _ = utf8.DecodeRuneInString(e)
			default:
				return nil, errInvalidEscapeString()
			}
		}
		re, err := similarToRegex(str(a[0]), esc)
		return types.DString(re), err
	}
	registerFn("similar_to_escape",
		Overload{Args: []*types.T{text}, Return: Fixed(text), Strict: true, Fn: simFn},
		Overload{Args: []*types.T{text, text}, Return: Fixed(text), Strict: true, Fn: simFn})
	// similar_escape is the pre-14 spelling; a NULL escape means none.
	registerFn("similar_escape", Overload{Args: []*types.T{text, text}, Return: Fixed(text),
		Fn: func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
			if types.IsNull(a[0]) {
				return types.DNull, nil
			}
			if types.IsNull(a[1]) {
				return simFn(ctx, a[:1])
			}
			return simFn(ctx, a)
		}})

	for _, n := range []int{2, 3} {
		args := []*types.T{text, text, text}[:n]
		flagsOf := func(a []types.Datum) string {
			if len(a) > 2 {
				return str(a[2])
			}
			return ""
		}
		registerFn("regexp_matches", Overload{Args: args, Class: Generator, Strict: true, Return: Fixed(textArr),
			Columns: func([]*types.T) []Column { return []Column{{"regexp_matches", textArr}} },
			SRF: func(_ EvalContext, a []types.Datum) (RowIter, error) {
				f, err := parseReFlags(flagsOf(a), true, "regexp_matches")
				if err != nil {
					return nil, err
				}
				re, err := compileRegex(str(a[1]), f.fold)
				if err != nil {
					return nil, err
				}
				limit := 1
				if f.global {
					limit = -1
				}
				s := str(a[0])
				it := &sliceIter{}
				for _, m := range re.FindAllStringSubmatchIndex(s, limit) {
					it.rows = append(it.rows, []types.Datum{regexpSubmatchArray(s, m)})
				}
				return it, nil
			}})
		registerFn("regexp_split_to_table", Overload{Args: args, Class: Generator, Strict: true, Return: Fixed(text),
			Columns: func([]*types.T) []Column { return []Column{{"regexp_split_to_table", text}} },
			SRF: func(_ EvalContext, a []types.Datum) (RowIter, error) {
				re, err := compileRe("regexp_split_to_table", str(a[1]), flagsOf(a))
				if err != nil {
					return nil, err
				}
				it := &sliceIter{}
				for _, p := range regexpSplit(str(a[0]), re) {
					it.rows = append(it.rows, []types.Datum{types.DString(p)})
				}
				return it, nil
			}})
		registerFn("regexp_like", Overload{Args: args, Return: Fixed(types.Bool), Strict: true,
			Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
				re, err := compileRe("regexp_like", str(a[1]), flagsOf(a))
				if err != nil {
					return nil, err
				}
				return types.DBool(re.MatchString(str(a[0]))), nil
			}})
	}

	// regexp_count(string, pattern [, start [, flags]]).
	for _, n := range []int{2, 3, 4} {
		registerFn("regexp_count", Overload{Args: []*types.T{text, text, i4, text}[:n], Return: Fixed(i4), Strict: true,
			Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
				ra := reArgs{start: 1}
				if len(a) > 2 {
					ra.start = i64(a[2])
				}
				if len(a) > 3 {
					ra.flags = str(a[3])
				}
				if err := checkStart("regexp_count", ra.start); err != nil {
					return nil, err
				}
				re, err := compileRe("regexp_count", str(a[1]), ra.flags)
				if err != nil {
					return nil, err
				}
				s := str(a[0])
				return types.DInt(len(reMatches(re, s, runeOffset(s, ra.start), -1))), nil
			}})
	}

	// nthMatch finds the n-th match at or after start, nil when none.
	nthMatch := func(fn string, a []types.Datum, ra reArgs) (string, []int, error) {
		if err := checkStart(fn, ra.start); err != nil {
			return "", nil, err
		}
		if ra.n <= 0 {
			return "", nil, errInvalidParam("invalid value for parameter \"%s\": %d", "n", ra.n)
		}
		if ra.subexpr < 0 {
			return "", nil, errInvalidParam("invalid value for parameter \"%s\": %d", "subexpr", ra.subexpr)
		}
		re, err := compileRe(fn, str(a[1]), ra.flags)
		if err != nil {
			return "", nil, err
		}
		s := str(a[0])
		ms := reMatches(re, s, runeOffset(s, ra.start), int(ra.n))
		if int64(len(ms)) < ra.n {
			return s, nil, nil
		}
		m := ms[ra.n-1]
		if ra.subexpr > 0 {
			if 2*ra.subexpr+1 >= int64(len(m)) || m[2*ra.subexpr] < 0 {
				return s, nil, nil
			}
			return s, m[2*ra.subexpr : 2*ra.subexpr+2], nil
		}
		return s, m[:2], nil
	}

	// regexp_instr(string, pattern [, start [, N [, endoption [, flags [, subexpr]]]]]).
	instrArgs := []*types.T{text, text, i4, i4, i4, text, i4}
	for n := 2; n <= len(instrArgs); n++ {
		registerFn("regexp_instr", Overload{Args: instrArgs[:n], Return: Fixed(i4), Strict: true,
			Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
				ra := reArgs{start: 1, n: 1}
				for i, p := range []*int64{&ra.start, &ra.n, &ra.endOpt} {
					if len(a) > i+2 {
						*p = i64(a[i+2])
					}
				}
				if len(a) > 5 {
					ra.flags = str(a[5])
				}
				if len(a) > 6 {
					ra.subexpr = i64(a[6])
				}
				if ra.endOpt != 0 && ra.endOpt != 1 {
					return nil, errInvalidParam("invalid value for parameter \"%s\": %d", "endoption", ra.endOpt)
				}
				s, m, err := nthMatch("regexp_instr", a, ra)
				if err != nil || m == nil {
					return types.DInt(0), err
				}
				if ra.endOpt == 1 {
					return types.DInt(charPos(s, m[1])), nil
				}
				return types.DInt(charPos(s, m[0])), nil
			}})
	}

	// regexp_substr(string, pattern [, start [, N [, flags [, subexpr]]]]).
	substrArgs := []*types.T{text, text, i4, i4, text, i4}
	for n := 2; n <= len(substrArgs); n++ {
		registerFn("regexp_substr", Overload{Args: substrArgs[:n], Return: Fixed(text), Strict: true,
			Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
				ra := reArgs{start: 1, n: 1}
				if len(a) > 2 {
					ra.start = i64(a[2])
				}
				if len(a) > 3 {
					ra.n = i64(a[3])
				}
				if len(a) > 4 {
					ra.flags = str(a[4])
				}
				if len(a) > 5 {
					ra.subexpr = i64(a[5])
				}
				s, m, err := nthMatch("regexp_substr", a, ra)
				if err != nil || m == nil {
					return types.DNull, err
				}
				return types.DString(s[m[0]:m[1]]), nil
			}})
	}

	// substring(s FROM pattern) with a text pattern is a regular
	// expression match: the first capture group, or the whole match.
	registerFn("substring", Overload{Args: []*types.T{text, text}, Return: Fixed(text), Strict: true,
		Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			return substringMatch(str(a[0]), str(a[1]))
		}})
	// substring(s SIMILAR pat ESCAPE e), also spelled substring(s FROM
	// pat FOR e): the part between the escape-double-quote separators,
	// or the whole match when there are none.
	registerFn("substring", Overload{Args: []*types.T{text, text, text}, Return: Fixed(text), Strict: true,
		Fn: func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
			pat, err := simFn(ctx, a[1:])
			if err != nil {
				return nil, err
			}
			return substringMatch(str(a[0]), str(pat))
		}})

	// PostgreSQL 15's regexp_replace(s, pattern, replacement, start [, N
	// [, flags]]): replace the N-th match at or after start (N = 0: all
	// of them; no N: the first, or all with the g flag).
	replArgs := []*types.T{text, text, text, i4, i4, text}
	for n := 4; n <= len(replArgs); n++ {
		registerFn("regexp_replace", Overload{Args: replArgs[:n], Return: Fixed(text), Strict: true,
			Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
				start, nth, flags := i64(a[3]), int64(1), ""
				if len(a) > 4 {
					nth = i64(a[4])
				}
				if len(a) > 5 {
					flags = str(a[5])
				}
				if err := checkStart("regexp_replace", start); err != nil {
					return nil, err
				}
				if nth < 0 {
					return nil, errInvalidParam("invalid value for parameter \"%s\": %d", "n", nth)
				}
				f, err := parseReFlags(flags, true, "regexp_replace")
				if err != nil {
					return nil, err
				}
				if f.global && len(a) <= 4 {
					nth = 0
				}
				re, err := compileRegex(str(a[1]), f.fold)
				if err != nil {
					return nil, err
				}
				s, repl := str(a[0]), str(a[2])
				var b strings.Builder
				last := 0
				for i, m := range reMatches(re, s, runeOffset(s, start), -1) {
					if nth != 0 && int64(i+1) != nth {
						continue
					}
					b.WriteString(s[last:m[0]])
					expandReplacement(&b, repl, s, m)
					last = m[1]
					if nth != 0 {
						break
					}
				}
				b.WriteString(s[last:])
				return types.DString(b.String()), nil
			}})
	}
}

// substringMatch is substring(s FROM pattern) once the pattern is a
// regular expression: the part of s its first capture group matched (NULL
// when that group took no part in the match), or the whole match when it
// has no group; NULL when it does not match.
func substringMatch(s, pattern string) (types.Datum, error) {
	re, err := compileRegex(pattern, false)
	if err != nil {
		return nil, err
	}
	m := re.FindStringSubmatchIndex(s)
	switch {
	case m == nil:
		return types.DNull, nil
	case len(m) > 2:
		if m[2] < 0 {
			return types.DNull, nil
		}
		return types.DString(s[m[2]:m[3]]), nil
	}
	return types.DString(s[m[0]:m[1]]), nil
}
