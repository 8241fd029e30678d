package types

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/cockroachdb/apd/v3"
	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
)

// jsonParser reads JSON text into a JSON value in one pass over the
// string. It replaced a walk over encoding/json's Decoder.Token, which
// boxed every token in an interface and copied every string: jsonb is
// stored as text (rowenc), so every row read parses it, and a profile of
// the distributed-tables seed's containment query spent two thirds of its
// CPU there.
//
// It accepts exactly the grammar of RFC 8259 (what encoding/json
// accepted) with the same value semantics: a lone UTF-16 surrogate in a
// \u escape reads as U+FFFD, as encoding/json decoded it; FuzzJSONParser
// checks the two agree on every input.
type jsonParser struct {
	s string
	i int
}

// errJSONSyntax is a syntax error at the parser's position; ParseJSON
// turns it into 22P02 with the text as the detail.
type errJSONSyntax string

func (e errJSONSyntax) Error() string { return string(e) }

// fail words a syntax error as PostgreSQL's detail does: `Expected X,
// but found "c".` or that the input ended.
func (p *jsonParser) fail(expected string) error {
	if p.i >= len(p.s) {
		return errJSONSyntax("The input string ended unexpectedly.")
	}
	r, _ := utf8.DecodeRuneInString(p.s[p.i:])
	return errJSONSyntax(fmt.Sprintf("Expected %s, but found \"%c\".", expected, r))
}

// failf is a syntax error worded in full.
func failf(format string, args ...any) error { return errJSONSyntax(fmt.Sprintf(format, args...)) }

func (p *jsonParser) skipSpace() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// value reads one value at nesting depth depth, after skipping the
// whitespace before it.
func (p *jsonParser) value(depth int) (JSON, error) {
	if depth > maxJSONDepth {
		return JSON{}, pgerror.New(pgerrcode.StatementTooComplex, "stack depth limit exceeded")
	}
	p.skipSpace()
	if p.i >= len(p.s) {
		return JSON{}, p.fail("JSON value")
	}
	switch c := p.s[p.i]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		s, err := p.str()
		if err != nil {
			return JSON{}, err
		}
		return jsonString(s)
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case strings.HasPrefix(p.s[p.i:], "true"):
		p.i += 4
		return JSONBoolValue(true), nil
	case strings.HasPrefix(p.s[p.i:], "false"):
		p.i += 5
		return JSONBoolValue(false), nil
	case strings.HasPrefix(p.s[p.i:], "null"):
		p.i += 4
		return JSONNullValue, nil
	}
	return JSON{}, p.fail("JSON value")
}

func (p *jsonParser) array(depth int) (JSON, error) {
	p.i++ // '['
	elems := []JSON{}
	p.skipSpace()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		return JSONArrayValue(elems...), nil
	}
	for {
		e, err := p.value(depth + 1)
		if err != nil {
			return JSON{}, err
		}
		elems = append(elems, e)
		p.skipSpace()
		if p.i < len(p.s) {
			switch p.s[p.i] {
			case ',':
				p.i++
				continue
			case ']':
				p.i++
				return JSONArrayValue(elems...), nil
			}
		}
		return JSON{}, p.fail(`"," or "]"`)
	}
}

func (p *jsonParser) object(depth int) (JSON, error) {
	p.i++ // '{'
	pairs := []JSONPair{}
	p.skipSpace()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return JSON{Kind: JSONObject, Pairs: pairs}, nil
	}
	for {
		p.skipSpace()
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return JSON{}, p.fail("string")
		}
		k, err := p.str()
		if err != nil {
			return JSON{}, err
		}
		key, err := jsonString(k)
		if err != nil {
			return JSON{}, err
		}
		p.skipSpace()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return JSON{}, p.fail(`":"`)
		}
		p.i++
		v, err := p.value(depth + 1)
		if err != nil {
			return JSON{}, err
		}
		pairs = append(pairs, JSONPair{Key: key.Str, Value: v})
		p.skipSpace()
		if p.i < len(p.s) {
			switch p.s[p.i] {
			case ',':
				p.i++
				continue
			case '}':
				p.i++
				return jsonObjectOwned(pairs), nil
			}
		}
		return JSON{}, p.fail(`"," or "}"`)
	}
}

// jsonObjectOwned is JSONObjectValue for a slice the caller gives up:
// sorted and deduplicated in place (later duplicates win).
func jsonObjectOwned(ps []JSONPair) JSON {
	if !slices.IsSortedFunc(ps, func(a, b JSONPair) int { return jsonKeyCompare(a.Key, b.Key) }) {
		slices.SortStableFunc(ps, func(a, b JSONPair) int { return jsonKeyCompare(a.Key, b.Key) })
	}
	out := ps[:0]
	for _, p := range ps {
		if n := len(out); n > 0 && out[n-1].Key == p.Key {
			out[n-1] = p
			continue
		}
		out = append(out, p)
	}
	return JSON{Kind: JSONObject, Pairs: out}
}

// str reads a string literal at p.i (its opening quote) and returns its
// value. A literal without escapes is a substring of the input, not a
// copy.
func (p *jsonParser) str() (string, error) {
	p.i++ // '"'
	start := p.i
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			s := p.s[start:p.i]
			p.i++
			return s, nil
		case c == '\\':
			return p.strEscaped(start)
		case c < 0x20:
			return "", failf("Character with value 0x%02x must be escaped.", c)
		}
		p.i++
	}
	return "", p.fail("end of string")
}

// strEscaped finishes a string literal that holds an escape; start is the
// offset of its first byte after the opening quote.
func (p *jsonParser) strEscaped(start int) (string, error) {
	b := make([]byte, 0, p.i-start+16)
	b = append(b, p.s[start:p.i]...)
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return string(b), nil
		case c < 0x20:
			return "", failf("Character with value 0x%02x must be escaped.", c)
		case c != '\\':
			b = append(b, c)
			p.i++
			continue
		}
		// An escape.
		if p.i+1 >= len(p.s) {
			p.i = len(p.s)
			return "", p.fail("end of string")
		}
		e := p.s[p.i+1]
		p.i += 2
		switch e {
		case '"', '\\', '/':
			b = append(b, e)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, ok := hex4(p.s, p.i)
			if !ok {
				return "", failf(`"\u" must be followed by four hexadecimal digits.`)
			}
			p.i += 4
			if utf16.IsSurrogate(r) {
				// A high surrogate followed by \u and a low one is one
				// character; anything else is U+FFFD, as encoding/json read
				// it (the next escape, if any, is read on its own).
				if p.i+1 < len(p.s) && p.s[p.i] == '\\' && p.s[p.i+1] == 'u' {
					if r2, ok := hex4(p.s, p.i+2); ok {
						if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
							b = utf8.AppendRune(b, d)
							p.i += 6
							continue
						}
					}
				}
				r = utf8.RuneError
			}
			b = utf8.AppendRune(b, r)
		default:
			r, _ := utf8.DecodeRuneInString(p.s[p.i-1:])
			return "", failf(`Escape sequence "\%c" is invalid.`, r)
		}
	}
	return "", p.fail("end of string")
}

// hex4 reads four hexadecimal digits at s[i:].
func hex4(s string, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[i : i+4]) {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r*16 + rune(c)
	}
	return r, true
}

// number reads a number literal: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (p *jsonParser) number() (JSON, error) {
	start := p.i
	digits := func() int {
		n := 0
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.s[p.i] == '-' {
		p.i++
	}
	if p.i < len(p.s) && p.s[p.i] == '0' {
		p.i++
	} else if digits() == 0 {
		return JSON{}, failf(`Token "%s" is invalid.`, p.s[start:p.i])
	}
	integer := true
	if p.i < len(p.s) && p.s[p.i] == '.' {
		integer = false
		p.i++
		if digits() == 0 {
			return JSON{}, failf(`Token "%s" is invalid.`, p.s[start:p.i])
		}
	}
	if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		integer = false
		p.i++
		if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return JSON{}, failf(`Token "%s" is invalid.`, p.s[start:p.i])
		}
	}
	lit := p.s[start:p.i]
	// Short integers, most numbers in real documents, skip apd's parser;
	// the result is the value it would give (exponent 0).
	if integer && len(lit) <= 18 {
		var n int64
		neg := lit[0] == '-'
		for _, c := range []byte(strings.TrimPrefix(lit, "-")) {
			n = n*10 + int64(c-'0')
		}
		if neg {
			n = -n
		}
		return JSON{Kind: JSONNumber, Num: apd.New(n, 0)}, nil
	}
	d, _, err := apd.NewFromString(lit)
	if err != nil {
		return JSON{}, err
	}
	if !numericInRange(d) {
		return JSON{}, pgerror.New(pgerrcode.NumericValueOutOfRange, "value overflows numeric format")
	}
	normalizeZero(d)
	return JSON{Kind: JSONNumber, Num: d}, nil
}
