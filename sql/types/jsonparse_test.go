package types

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cockroachdb/apd/v3"
	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
)

// parseJSONStd is ParseJSON as it was written over encoding/json's token
// stream, kept as the reference jsonParser must agree with.
func parseJSONStd(s string) (JSON, error) {
	if !utf8.ValidString(s) {
		return JSON{}, errInvalidUTF8(s)
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	v, err := parseJSONValue(dec, 0)
	if err == nil {
		if _, err2 := dec.Token(); err2 != io.EOF {
			err = errors.New("extra data after the JSON value")
		}
	}
	if err != nil {
		var pe *pgerror.Error
		if errors.As(err, &pe) {
			return JSON{}, err
		}
		return JSON{}, pgerror.New(pgerrcode.InvalidTextRepresentation, "invalid input syntax for type json")
	}
	return v, nil
}

func parseJSONValue(dec *json.Decoder, depth int) (JSON, error) {
	if depth > maxJSONDepth {
		return JSON{}, pgerror.New(pgerrcode.StatementTooComplex, "stack depth limit exceeded")
	}
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			return JSON{}, errors.New("the input string ended unexpectedly")
		}
		return JSON{}, err
	}
	switch v := tok.(type) {
	case nil:
		return JSONNullValue, nil
	case bool:
		return JSONBoolValue(v), nil
	case string:
		return jsonString(v)
	case json.Number:
		d, _, err := apd.NewFromString(string(v))
		if err != nil {
			return JSON{}, err
		}
		if !numericInRange(d) {
			return JSON{}, pgerror.New(pgerrcode.NumericValueOutOfRange, "value overflows numeric format")
		}
		normalizeZero(d)
		return JSON{Kind: JSONNumber, Num: d}, nil
	case json.Delim:
		switch v {
		case '[':
			elems := []JSON{}
			for dec.More() {
				e, err := parseJSONValue(dec, depth+1)
				if err != nil {
					return JSON{}, err
				}
				elems = append(elems, e)
			}
			if _, err := dec.Token(); err != nil {
				return JSON{}, err
			}
			return JSONArrayValue(elems...), nil
		case '{':
			pairs := []JSONPair{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return JSON{}, err
				}
				key, err := jsonString(kt.(string))
				if err != nil {
					return JSON{}, err
				}
				val, err := parseJSONValue(dec, depth+1)
				if err != nil {
					return JSON{}, err
				}
				pairs = append(pairs, JSONPair{Key: key.Str, Value: val})
			}
			if _, err := dec.Token(); err != nil {
				return JSON{}, err
			}
			return JSONObjectValue(pairs...), nil
		}
	}
	return JSON{}, errors.New("unexpected token")
}

// FuzzJSONParser: the one-pass parser and the encoding/json reference
// accept the same texts, give equal values (printed identically, numbers
// with the same exponent), and fail with the same SQLSTATE.
func FuzzJSONParser(f *testing.F) {
	for _, s := range jsonParserCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkJSONParser(t, s) })
}

var jsonParserCases = []string{
	`{"a": [1, 2.50, {"b": null}]}`, `"\u00e9"`, `[]`, `{}`, `-0`, `-0.0`, `1e400`, `1E+2`, `1e-2`, `{"a":1,"a":2}`,
	`[[[[`, `"\ud800"`, `"\ud83d\ude00"`, `"\ud83d\u0041"`, `"\udc00\ud800"`, `"\u0000"`, `{"\u0000": 1}`,
	` [ 1 , 2 ] `, `[1,]`, `[,1]`, `{"a" 1}`, `{1: 2}`, `01`, `-`, `1.`, `.5`, `1e`, `tru`, `true1`, `[true1]`,
	`nul`, `"abc`, `"a\"`, `"\x"`, "\"a\x01\"", "\"a\tb\"", `"\/\b\f\n\r\t"`, ``, ` `, `1 2`, `"é"`,
	`123456789012345678`, `1234567890123456789`, `-123456789012345678`, `99999999999999999999999999`,
	`{"b":1,"a":2,"aa":3,"a":4}`, `[{"k": [{"k": []}]}]`, `1e131073`, `1e-16384`, `0e-99999`,
	`{"a":{}, "b":[], "c":""}`, `"\uD834\uDD1E"`, `"\u12"`, `"\u12G4"`,
}

func checkJSONParser(t *testing.T, s string) {
	t.Helper()
	got, gerr := ParseJSON(s)
	want, werr := parseJSONStd(s)
	if (gerr == nil) != (werr == nil) {
		t.Fatalf("%q: parser error %v, reference error %v", s, gerr, werr)
	}
	if gerr != nil {
		if g, w := pgerror.Code(gerr), pgerror.Code(werr); g != w {
			t.Fatalf("%q: parser SQLSTATE %s (%v), reference %s (%v)", s, g, gerr, w, werr)
		}
		return
	}
	if got.Compare(want) != 0 || got.String() != want.String() || !sameNumbers(got, want) {
		t.Fatalf("%q: parser %s, reference %s", s, got, want)
	}
}

// sameNumbers compares two equal values' numbers digit for digit
// (Compare ignores an exponent that does not change the value).
func sameNumbers(a, b JSON) bool {
	if a.Kind != b.Kind || len(a.Elems) != len(b.Elems) || len(a.Pairs) != len(b.Pairs) {
		return false
	}
	if a.Kind == JSONNumber {
		return a.Num.Coeff.Cmp(&b.Num.Coeff) == 0 && a.Num.Exponent == b.Num.Exponent && a.Num.Negative == b.Num.Negative
	}
	for i := range a.Elems {
		if !sameNumbers(a.Elems[i], b.Elems[i]) {
			return false
		}
	}
	for i := range a.Pairs {
		if a.Pairs[i].Key != b.Pairs[i].Key || !sameNumbers(a.Pairs[i].Value, b.Pairs[i].Value) {
			return false
		}
	}
	return true
}

// TestJSONParserAgainstReference runs the cases above, deeply nested
// texts at the depth limit, and the datadriven JSON inputs of this
// package's tests.
func TestJSONParserAgainstReference(t *testing.T) {
	cases := append([]string{}, jsonParserCases...)
	for _, n := range []int{maxJSONDepth - 1, maxJSONDepth, maxJSONDepth + 1, maxJSONDepth + 2} {
		cases = append(cases, strings.Repeat("[", n)+strings.Repeat("]", n))
		cases = append(cases, strings.Repeat("[", n)+"1"+strings.Repeat("]", n))
		cases = append(cases, strings.Repeat(`{"a":`, n)+"1"+strings.Repeat("}", n))
	}
	for _, s := range cases {
		checkJSONParser(t, s)
	}
}

// benchJSON is shaped like the github-events seed's PushEvent payloads.
const benchJSON = `{"push_id": 536863970, "size": 2, "distinct_size": 2, "ref": "refs/heads/master",
 "head": "6a2b37c2b4b9e8d7", "before": "c5b7b8f2e0a1d3c4",
 "commits": [{"sha": "6a2b37c2b4b9e8d7", "author": {"email": "dev17@example.com", "name": "Dev Seventeen"},
  "message": "Fix the \"parser\" when input ends early\n\nSee #12.", "distinct": true,
  "url": "https://api.github.com/repos/o/r/commits/6a2b37c2b4b9e8d7"},
 {"sha": "c5b7b8f2e0a1d3c4", "author": {"email": "test@gmail.com", "name": "Test"}, "message": "Bump version to 1.2.3",
  "distinct": true, "url": "https://api.github.com/repos/o/r/commits/c5b7b8f2e0a1d3c4"}]}`

// BenchmarkParseJSON compares the one-pass parser (ParseJSON) with the
// encoding/json reference it replaced, on a seed-shaped payload.
func BenchmarkParseJSON(b *testing.B) {
	for _, bc := range []struct {
		name  string
		parse func(string) (JSON, error)
	}{{"onepass", ParseJSON}, {"encoding_json", parseJSONStd}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(benchJSON)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bc.parse(benchJSON); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
