package builtins

import (
	"regexp"
	"strings"

	"github.com/cairn-db/cairn/sql/types"
)

// regexp_* functions. Flags: g (all matches, regexp_replace only), i
// (case-insensitive), c (case-sensitive, the default); others are 22023.

type reFlags struct{ global, fold bool }

func parseReFlags(s string, allowGlobal bool, fn string) (reFlags, error) {
	var f reFlags
	for _, c := range s {
		switch c {
		case 'g':
			if !allowGlobal {
				return f, errInvalidParam("%s() does not support the \"global\" option", fn).
					WithHint("Use the regexp_matches function instead.")
			}
			f.global = true
		case 'i':
			f.fold = true
		case 'c':
			f.fold = false
		default:
			return f, errInvalidParam("invalid regular expression option: \"%c\"", c)
		}
	}
	return f, nil
}

// expandReplacement applies Postgres's replacement syntax: \1..\9 are
// groups, \& the whole match, \\ a backslash.
func expandReplacement(b *strings.Builder, repl, src string, m []int) {
	for i := 0; i < len(repl); i++ {
		c := repl[i]
		if c != '\\' || i+1 >= len(repl) {
			b.WriteByte(c)
			continue
		}
		n := repl[i+1]
		switch {
		case n >= '1' && n <= '9':
			g := int(n - '0')
			if 2*g+1 < len(m) && m[2*g] >= 0 {
				b.WriteString(src[m[2*g]:m[2*g+1]])
			}
			i++
		case n == '&':
			b.WriteString(src[m[0]:m[1]])
			i++
		case n == '\\':
			b.WriteByte('\\')
			i++
		default:
			b.WriteByte(c)
		}
	}
}

func regexpReplace(s, pattern, repl, flags string) (string, error) {
	f, err := parseReFlags(flags, true, "regexp_replace")
	if err != nil {
		return "", err
	}
	re, err := compileRegex(pattern, f.fold)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	last := 0
	for _, m := range re.FindAllStringSubmatchIndex(s, -1) {
		b.WriteString(s[last:m[0]])
		expandReplacement(&b, repl, s, m)
		last = m[1]
		if !f.global {
			break
		}
	}
	b.WriteString(s[last:])
	return b.String(), nil
}

func regexpMatch(s string, re *regexp.Regexp) types.Datum {
	m := re.FindStringSubmatchIndex(s)
	if m == nil {
		return types.DNull
	}
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

// regexpSplit splits s around matches; like Postgres, an empty match
// splits between characters but never at the start or end.
func regexpSplit(s string, re *regexp.Regexp) []string {
	var parts []string
	start := 0
	for _, m := range re.FindAllStringIndex(s, -1) {
		if m[0] == m[1] && (m[0] == 0 || m[0] >= len(s)) {
			continue
		}
		if m[1] == m[0] && m[0] == start && start != 0 {
			continue
		}
		parts = append(parts, s[start:m[0]])
		start = m[1]
	}
	return append(parts, s[start:])
}

func init() {
	text := types.Text
	for _, n := range []int{3, 4} {
		args := []*types.T{text, text, text, text}[:n]
		textFn("regexp_replace", args, text, func(a []types.Datum) (types.Datum, error) {
			flags := ""
			if len(a) > 3 {
				flags = str(a[3])
			}
			s, err := regexpReplace(str(a[0]), str(a[1]), str(a[2]), flags)
			return types.DString(s), err
		})
	}
	for _, n := range []int{2, 3} {
		args := []*types.T{text, text, text}[:n]
		compile := func(a []types.Datum, fn string) (*regexp.Regexp, error) {
			flags := ""
			if len(a) > 2 {
				flags = str(a[2])
			}
			f, err := parseReFlags(flags, false, fn)
			if err != nil {
				return nil, err
			}
			return compileRegex(str(a[1]), f.fold)
		}
		textFn("regexp_match", args, types.MustArray(text), func(a []types.Datum) (types.Datum, error) {
			re, err := compile(a, "regexp_match")
			if err != nil {
				return nil, err
			}
			return regexpMatch(str(a[0]), re), nil
		})
		textFn("regexp_split_to_array", args, types.MustArray(text), func(a []types.Datum) (types.Datum, error) {
			re, err := compile(a, "regexp_split_to_array")
			if err != nil {
				return nil, err
			}
			out := types.NewArray(text)
			for _, p := range regexpSplit(str(a[0]), re) {
				out.Elems = append(out.Elems, types.DString(p))
			}
			return out, nil
		})
	}
}
