package types

import (
	"encoding/json"
	"strings"
)

// JSONTextNode is one value of a json (not jsonb) text, keeping the text
// it was written as: the json operators and functions return sub-values
// exactly as written (whitespace, key order, duplicate keys), as
// PostgreSQL's json does.
type JSONTextNode struct {
	Kind JSONKind
	// Raw is the value's text without surrounding whitespace.
	Raw string
	// Str is a string's value, unescaped.
	Str string
	// Keys are an object's keys in order, duplicates kept; Vals are its
	// values (parallel to Keys) or an array's elements.
	Keys []string
	Vals []JSONTextNode
}

// ParseJSONText parses a json text into nodes. The text is checked with
// ParseJSON first, so syntax errors have jsonb's (PostgreSQL's) wording.
func ParseJSONText(s string) (JSONTextNode, error) {
	if _, err := ParseDatum(nil, JSONText, s); err != nil {
		return JSONTextNode{}, err
	}
	p := jsonTextParser{s: s}
	n := p.value()
	return n, nil
}

// jsonTextParser is a recursive-descent reader of already validated JSON.
type jsonTextParser struct {
	s string
	i int
}

func (p *jsonTextParser) skipSpace() {
	for p.i < len(p.s) && strings.IndexByte(" \t\n\r", p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *jsonTextParser) value() JSONTextNode {
	p.skipSpace()
	start := p.i
	var n JSONTextNode
	switch c := p.s[p.i]; {
	case c == '{':
		n.Kind = JSONObject
		p.i++
		p.skipSpace()
		for p.s[p.i] != '}' {
			k := p.value()
			n.Keys = append(n.Keys, k.Str)
			p.skipSpace()
			p.i++ // ':'
			n.Vals = append(n.Vals, p.value())
			p.skipSpace()
			if p.s[p.i] == ',' {
				p.i++
				p.skipSpace()
			}
		}
		p.i++
	case c == '[':
		n.Kind = JSONArray
		p.i++
		p.skipSpace()
		for p.s[p.i] != ']' {
			n.Vals = append(n.Vals, p.value())
			p.skipSpace()
			if p.s[p.i] == ',' {
				p.i++
				p.skipSpace()
			}
		}
		p.i++
	case c == '"':
		n.Kind = JSONString
		p.i++
		for p.s[p.i] != '"' {
			if p.s[p.i] == '\\' {
				p.i++
			}
			p.i++
		}
		p.i++
		// A validated string token unmarshals; \u0000 becomes a NUL.
		_ = json.Unmarshal([]byte(p.s[start:p.i]), &n.Str)
	case c == 't' || c == 'f':
		n.Kind = JSONBool
		for p.i < len(p.s) && p.s[p.i] >= 'a' && p.s[p.i] <= 'z' {
			p.i++
		}
	case c == 'n':
		n.Kind = JSONNull
		p.i += len("null")
	default:
		n.Kind = JSONNumber
		for p.i < len(p.s) && strings.IndexByte("+-0123456789.eE", p.s[p.i]) >= 0 {
			p.i++
		}
	}
	n.Raw = p.s[start:p.i]
	return n
}

// Field returns an object's value for key: the last one written when the
// key repeats, as PostgreSQL's json -> does.
func (n JSONTextNode) Field(key string) (JSONTextNode, bool) {
	if n.Kind != JSONObject {
		return JSONTextNode{}, false
	}
	for i := len(n.Keys) - 1; i >= 0; i-- {
		if n.Keys[i] == key {
			return n.Vals[i], true
		}
	}
	return JSONTextNode{}, false
}

// Index returns an array's element i (negative counts from the end).
func (n JSONTextNode) Index(i int64) (JSONTextNode, bool) {
	if n.Kind != JSONArray {
		return JSONTextNode{}, false
	}
	if i < 0 {
		i += int64(len(n.Vals))
	}
	if i < 0 || i >= int64(len(n.Vals)) {
		return JSONTextNode{}, false
	}
	return n.Vals[i], true
}

// Text is what ->> returns: a string's value, NULL for null, else the
// value's text.
func (n JSONTextNode) Text() Datum {
	switch n.Kind {
	case JSONNull:
		return DNull
	case JSONString:
		return DString(n.Str)
	}
	return DString(n.Raw)
}

// AppendJSONString appends s as a JSON string literal, escaped as
// PostgreSQL's escape_json does.
func AppendJSONString(dst []byte, s string) []byte { return appendJSONString(dst, s) }
