package builtins

import (
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"
)

// LIKE patterns compile to anchored Go regexps, cached by (pattern,
// escape, case-folding) since the same pattern usually runs for every row.
// The default escape is backslash; an empty escape disables escaping.

type likeKey struct {
	pattern, escape string
	fold            bool
}

var likeCache sync.Map // likeKey -> *regexp.Regexp

// likeCacheMax bounds the cache; past it, new patterns compile uncached
// (patterns from columns, not literals, would otherwise grow it forever).
const likeCacheMax = 4096

var likeCacheLen struct {
	sync.Mutex
	n int
}

// CompileLike compiles a LIKE pattern: % matches any run of characters,
// _ one character, and escape (at most one character) makes the next
// character literal. A pattern ending in the escape character is 22025.
func CompileLike(pattern, escape string, fold bool) (*regexp.Regexp, error) {
	key := likeKey{pattern, escape, fold}
	if re, ok := likeCache.Load(key); ok {
		return re.(*regexp.Regexp), nil
	}
	if utf8.RuneCountInString(escape) > 1 {
		return nil, errInvalidEscapeString()
	}
	esc, _ := utf8.DecodeRuneInString(escape)
	if escape == "" {
		esc = -1
	}
	var b strings.Builder
	b.WriteString(`^(?s`)
	if fold {
		b.WriteString(`i`)
	}
	b.WriteString(`)`)
	for i := 0; i < len(pattern); {
		r, n := utf8.DecodeRuneInString(pattern[i:])
		i += n
		switch {
		case r == esc:
			if i >= len(pattern) {
				return nil, errInvalidEscape()
			}
			r, n = utf8.DecodeRuneInString(pattern[i:])
			i += n
			b.WriteString(regexp.QuoteMeta(string(r)))
		case r == '%':
			b.WriteString(`.*`)
		case r == '_':
			b.WriteString(`.`)
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString(`$`)
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil, errInternal("LIKE pattern %q compiled to a bad regexp: %w", pattern, err)
	}
	likeCacheLen.Lock()
	if likeCacheLen.n < likeCacheMax {
		likeCacheLen.n++
		likeCache.Store(key, re)
	}
	likeCacheLen.Unlock()
	return re, nil
}

// Like reports whether s matches pattern under LIKE (fold: ILIKE) with the
// default backslash escape.
//
// A pattern ending in the escape character is an error only when matching
// reaches that character, as in Postgres's matcher: 'a' LIKE 'a\' is
// false, 'ab' LIKE 'a\' is 22025. Here "reaches" means the text matches
// the pattern before the escape with characters left over.
func Like(s, pattern string, fold bool) (bool, error) {
	re, err := CompileLike(pattern, `\`, fold)
	if err == nil {
		return re.MatchString(s), nil
	}
	prefix, ok := trailingEscape(pattern)
	if !ok {
		return false, err
	}
	pre, perr := CompileLike(prefix+"_%", `\`, fold)
	if perr != nil {
		return false, err
	}
	if pre.MatchString(s) {
		return false, err
	}
	return false, nil
}

// trailingEscape reports whether pattern ends in an unescaped backslash,
// returning the pattern without it.
func trailingEscape(pattern string) (string, bool) {
	n := 0
	for i := len(pattern) - 1; i >= 0 && pattern[i] == '\\'; i-- {
		n++
	}
	if n%2 == 1 {
		return pattern[:len(pattern)-1], true
	}
	return "", false
}

// Regular expressions (~, ~*, regexp_*) use Go's RE2 syntax, which is
// Postgres's ARE minus backreferences (\1), lookahead/lookbehind
// ((?=...), (?!...)), possessive quantifiers, \m \M \y word-boundary
// escapes and the embedded options (?b) (?e) (?q) (?x) of ARE; such
// patterns are 2201B errors here instead of matches. In exchange matching
// is linear-time, so a hostile pattern cannot stall a node.

var regexCache sync.Map // string(flags + "\x00" + pattern) -> *regexp.Regexp

func compileRegex(pattern string, fold bool) (*regexp.Regexp, error) {
	key := pattern
	if fold {
		key = "i\x00" + pattern
	}
	if re, ok := regexCache.Load(key); ok {
		return re.(*regexp.Regexp), nil
	}
	src := pattern
	if fold {
		src = "(?i)" + src
	}
	re, err := regexp.Compile(src)
	if err != nil {
		return nil, errRegex(err)
	}
	likeCacheLen.Lock()
	if likeCacheLen.n < likeCacheMax {
		likeCacheLen.n++
		regexCache.Store(key, re)
	}
	likeCacheLen.Unlock()
	return re, nil
}
