package types

import (
	"cmp"
	"errors"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cockroachdb/apd/v3"
	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
)

// JSONKind is the kind of a JSON value, declared in jsonb's sort order:
// null < string < number < boolean < array < object.
type JSONKind uint8

// The JSON kinds.
const (
	JSONNull JSONKind = iota
	JSONString
	JSONNumber
	JSONBool
	JSONArray
	JSONObject
)

var jsonKindNames = [...]string{"null", "string", "number", "boolean", "array", "object"}

// String returns the name jsonb_typeof uses.
func (k JSONKind) String() string { return jsonKindNames[k] }

// JSON is a parsed jsonb value. Objects keep their keys in jsonb's storage
// order (shorter keys first, then bytewise) with no duplicates, so two equal
// objects have identical Pairs and printing is deterministic. Values are
// immutable once built.
type JSON struct {
	Kind  JSONKind
	Str   string       // JSONString
	Num   *apd.Decimal // JSONNumber
	Bool  bool         // JSONBool
	Elems []JSON       // JSONArray
	Pairs []JSONPair   // JSONObject, sorted by jsonKeyCompare
}

// JSONPair is one object member.
type JSONPair struct {
	Key   string
	Value JSON
}

// JSON constructors for callers that build values (builtins, tests).
var JSONNullValue = JSON{Kind: JSONNull}

// JSONStringValue returns a JSON string.
func JSONStringValue(s string) JSON { return JSON{Kind: JSONString, Str: s} }

// JSONBoolValue returns a JSON boolean.
func JSONBoolValue(b bool) JSON { return JSON{Kind: JSONBool, Bool: b} }

// JSONNumberValue returns a JSON number.
func JSONNumberValue(d *apd.Decimal) JSON {
	c := new(apd.Decimal).Set(d)
	normalizeZero(c)
	return JSON{Kind: JSONNumber, Num: c}
}

// JSONArrayValue returns a JSON array of elems.
func JSONArrayValue(elems ...JSON) JSON { return JSON{Kind: JSONArray, Elems: elems} }

// JSONObjectValue returns an object; later duplicates of a key win, as
// jsonb input does.
func JSONObjectValue(pairs ...JSONPair) JSON {
	ps := slices.Clone(pairs)
	// Stable sort keeps input order among duplicates, so the last one of a
	// run is the last written.
	slices.SortStableFunc(ps, func(a, b JSONPair) int { return jsonKeyCompare(a.Key, b.Key) })
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

// jsonKeyCompare is jsonb's key order: shorter first, then bytewise.
func jsonKeyCompare(a, b string) int {
	if c := cmp.Compare(len(a), len(b)); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

// ParseJSON parses JSON text as jsonb input does: invalid text is 22P02,
// a \u0000 escape is 22P05, numbers keep their exact decimal value.
func ParseJSON(s string) (JSON, error) {
	if !utf8.ValidString(s) {
		// encoding/json would silently substitute U+FFFD; Postgres rejects.
		return JSON{}, errInvalidUTF8(s)
	}
	p := jsonParser{s: s}
	v, err := p.value(0)
	if err == nil {
		if p.skipSpace(); p.i < len(s) {
			err = p.fail("end of input")
		}
	}
	if err != nil {
		var pe *pgerror.Error
		if errors.As(err, &pe) {
			return JSON{}, err
		}
		return JSON{}, pgerror.New(pgerrcode.InvalidTextRepresentation, "invalid input syntax for type json").
			WithDetail("%s", err.Error())
	}
	return v, nil
}

// maxJSONDepth bounds nesting so hostile input cannot exhaust the stack.
const maxJSONDepth = 1000

func jsonString(s string) (JSON, error) {
	if strings.IndexByte(s, 0) >= 0 {
		return JSON{}, pgerror.New(pgerrcode.UntranslatableCharacter, "unsupported Unicode escape sequence").
			WithDetail(`\u0000 cannot be converted to text.`)
	}
	return JSONStringValue(s), nil
}

// String returns the jsonb text form: `{"a": 1, "b": [1, 2]}`.
func (j JSON) String() string { return string(j.appendText(nil)) }

func (j JSON) appendText(dst []byte) []byte {
	switch j.Kind {
	case JSONNull:
		return append(dst, "null"...)
	case JSONBool:
		return strconv.AppendBool(dst, j.Bool)
	case JSONNumber:
		return appendDecimal(dst, j.Num)
	case JSONString:
		return appendJSONString(dst, j.Str)
	case JSONArray:
		dst = append(dst, '[')
		for i, e := range j.Elems {
			if i > 0 {
				dst = append(dst, ", "...)
			}
			dst = e.appendText(dst)
		}
		return append(dst, ']')
	default:
		dst = append(dst, '{')
		for i, p := range j.Pairs {
			if i > 0 {
				dst = append(dst, ", "...)
			}
			dst = appendJSONString(dst, p.Key)
			dst = append(dst, ": "...)
			dst = p.Value.appendText(dst)
		}
		return append(dst, '}')
	}
}

// appendJSONString escapes as Postgres's escape_json: the short escapes,
// \u00XX for other control characters, everything else verbatim.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			dst = append(dst, `\"`...)
		case '\\':
			dst = append(dst, `\\`...)
		case '\b':
			dst = append(dst, `\b`...)
		case '\f':
			dst = append(dst, `\f`...)
		case '\n':
			dst = append(dst, `\n`...)
		case '\r':
			dst = append(dst, `\r`...)
		case '\t':
			dst = append(dst, `\t`...)
		default:
			if c < 0x20 {
				dst = append(dst, `\u00`...)
				dst = append(dst, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&15])
			} else {
				dst = append(dst, c)
			}
		}
	}
	return append(dst, '"')
}

// Compare orders JSON values as jsonb's btree operator class does. At the
// top level a scalar behaves like a one-element "raw scalar" array, which
// reproduces Postgres's documented anomaly that [] sorts below null.
func (j JSON) Compare(o JSON) int {
	return compareJSONTop(j, o)
}

func compareJSONTop(a, b JSON) int {
	aScalar, bScalar := a.Kind < JSONArray, b.Kind < JSONArray
	if a.Kind == JSONObject || b.Kind == JSONObject || aScalar == bScalar {
		return compareJSON(a, b)
	}
	// One raw scalar, one array: Postgres first prefers the raw scalar as
	// smaller, then lets a differing element count override that.
	na, nb := 1, 1
	if !aScalar {
		na = len(a.Elems)
	}
	if !bScalar {
		nb = len(b.Elems)
	}
	if na != nb {
		return cmp.Compare(na, nb)
	}
	if aScalar {
		return -1
	}
	return 1
}

func compareJSON(a, b JSON) int {
	if a.Kind != b.Kind {
		return cmp.Compare(a.Kind, b.Kind)
	}
	switch a.Kind {
	case JSONNull:
		return 0
	case JSONString:
		return strings.Compare(a.Str, b.Str)
	case JSONNumber:
		return a.Num.Cmp(b.Num)
	case JSONBool:
		return compareBool(a.Bool, b.Bool)
	case JSONArray:
		if c := cmp.Compare(len(a.Elems), len(b.Elems)); c != 0 {
			return c
		}
		for i := range a.Elems {
			if c := compareJSON(a.Elems[i], b.Elems[i]); c != 0 {
				return c
			}
		}
		return 0
	default:
		if c := cmp.Compare(len(a.Pairs), len(b.Pairs)); c != 0 {
			return c
		}
		for i := range a.Pairs {
			if c := strings.Compare(a.Pairs[i].Key, b.Pairs[i].Key); c != 0 {
				return c
			}
			if c := compareJSON(a.Pairs[i].Value, b.Pairs[i].Value); c != 0 {
				return c
			}
		}
		return 0
	}
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// appendHashKey appends a byte string that is equal for Compare-equal
// values (numbers are reduced, so 1.0 and 1 agree).
func (j JSON) appendHashKey(dst []byte) []byte {
	dst = append(dst, byte(j.Kind))
	switch j.Kind {
	case JSONString:
		dst = binaryAppendString(dst, j.Str)
	case JSONNumber:
		dst = appendDecimalHashKey(dst, j.Num)
	case JSONBool:
		if j.Bool {
			dst = append(dst, 1)
		} else {
			dst = append(dst, 0)
		}
	case JSONArray:
		dst = strconv.AppendInt(dst, int64(len(j.Elems)), 10)
		for _, e := range j.Elems {
			dst = e.appendHashKey(dst)
		}
	case JSONObject:
		dst = strconv.AppendInt(dst, int64(len(j.Pairs)), 10)
		for _, p := range j.Pairs {
			dst = binaryAppendString(dst, p.Key)
			dst = p.Value.appendHashKey(dst)
		}
	}
	return dst
}

func binaryAppendString(dst []byte, s string) []byte {
	dst = strconv.AppendInt(dst, int64(len(s)), 10)
	dst = append(dst, ':')
	return append(dst, s...)
}

// TypeOf returns what jsonb_typeof returns.
func (j JSON) TypeOf() string { return j.Kind.String() }

// FetchKey is `->` with a text operand: the member of an object.
func (j JSON) FetchKey(key string) (JSON, bool) {
	if j.Kind != JSONObject {
		return JSON{}, false
	}
	i, ok := slices.BinarySearchFunc(j.Pairs, key, func(p JSONPair, k string) int { return jsonKeyCompare(p.Key, k) })
	if !ok {
		return JSON{}, false
	}
	return j.Pairs[i].Value, true
}

// FetchIndex is `->` with an integer operand: an array element, counting
// from the end when negative.
func (j JSON) FetchIndex(i int64) (JSON, bool) {
	if j.Kind != JSONArray {
		return JSON{}, false
	}
	n := int64(len(j.Elems))
	if i < 0 {
		i += n
	}
	if i < 0 || i >= n {
		return JSON{}, false
	}
	return j.Elems[i], true
}

// FetchPath is `#>`: follow keys through objects and integer subscripts
// through arrays; any miss (including a non-integer array subscript) is
// NULL. An empty path returns j itself.
func (j JSON) FetchPath(path []string) (JSON, bool) {
	cur := j
	for _, p := range path {
		var ok bool
		switch cur.Kind {
		case JSONObject:
			cur, ok = cur.FetchKey(p)
		case JSONArray:
			i, err := strconv.ParseInt(strings.TrimSpace(p), 10, 64)
			if err != nil {
				return JSON{}, false
			}
			cur, ok = cur.FetchIndex(i)
		}
		if !ok {
			return JSON{}, false
		}
	}
	return cur, true
}

// AsText is the text that `->>` and `#>>` return: a string's contents
// unescaped, SQL NULL (false) for JSON null, otherwise the JSON text.
func (j JSON) AsText() (string, bool) {
	switch j.Kind {
	case JSONNull:
		return "", false
	case JSONString:
		return j.Str, true
	}
	return j.String(), true
}

// Exists is `?`: key is a top-level object key, a string element of a
// top-level array, or the value of a top-level string scalar.
func (j JSON) Exists(key string) bool {
	switch j.Kind {
	case JSONObject:
		_, ok := j.FetchKey(key)
		return ok
	case JSONArray:
		for _, e := range j.Elems {
			if e.Kind == JSONString && e.Str == key {
				return true
			}
		}
	case JSONString:
		return j.Str == key
	}
	return false
}

// Contains is `@>` as Postgres defines it: scalars contain equal scalars;
// an object contains an object whose every key it has with a containing
// value; an array contains an array whose every element is contained by
// some element of it (order and duplicates ignored); and, at the top level
// only, an array contains a scalar that one of its elements equals.
func (j JSON) Contains(o JSON) bool {
	if j.Kind == JSONArray && o.Kind < JSONArray {
		return j.Contains(JSONArrayValue(o))
	}
	return jsonContains(j, o)
}

func jsonContains(a, b JSON) bool {
	if a.Kind != b.Kind {
		return false
	}
	switch a.Kind {
	case JSONObject:
		for _, p := range b.Pairs {
			v, ok := a.FetchKey(p.Key)
			if !ok || !jsonContains(v, p.Value) {
				return false
			}
		}
		return true
	case JSONArray:
	outer:
		for _, be := range b.Elems {
			for _, ae := range a.Elems {
				if jsonContains(ae, be) {
					continue outer
				}
			}
			return false
		}
		return true
	}
	return compareJSON(a, b) == 0
}

// validUTF8 reports whether s is valid UTF-8 without NUL bytes, which
// Postgres text cannot hold.
func validUTF8(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}
