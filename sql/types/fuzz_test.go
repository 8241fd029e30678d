package types

import (
	"testing"
)

// FuzzParseJSON: ParseJSON never panics, and what it accepts prints to
// text that parses back to an equal value and prints identically.
func FuzzParseJSON(f *testing.F) {
	for _, s := range []string{`{"a": [1, 2.50, {"b": null}]}`, `"\u00e9"`, `[]`, `-0`, `1e400`, `{"a":1,"a":2}`, `[[[[`, `"\ud800"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		j, err := ParseJSON(s)
		if err != nil {
			return
		}
		out := j.String()
		k, err := ParseJSON(out)
		if err != nil {
			t.Fatalf("%q printed as %q, which does not parse: %v", s, out, err)
		}
		if j.Compare(k) != 0 || k.String() != out {
			t.Fatalf("%q: %q reparsed as %q", s, out, k.String())
		}
	})
}

// FuzzParseDatum: no input makes a parser panic, and accepted values print
// to text that reads back equal.
func FuzzParseDatum(f *testing.F) {
	for _, s := range []string{"1", "-1.5e10", "2024-01-02 03:04:05+05:30", "1 year -2 days 03:00", "{1,NULL,\"x\"}",
		`\x00ff`, "P1Y2DT3H", "infinity", "NaN", "24:00:00", "0001-01-01 BC", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"} {
		for i := range Scalars {
			f.Add(uint8(i), s)
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, s string) {
		all := append(append([]*T{}, Scalars...), MustArray(Int4), MustArray(Text), MustArray(Timestamp))
		typ := all[int(which)%len(all)]
		d, err := ParseDatum(nil, typ, s)
		if err != nil {
			return
		}
		out := Format(nil, typ, d)
		back, err := ParseDatum(nil, typ, out)
		if err != nil {
			t.Fatalf("%s: %q printed as %q, which does not parse: %v", typ, s, out, err)
		}
		if Compare(d, back) != 0 {
			t.Fatalf("%s: %q printed as %q, read back as %q", typ, s, out, Format(nil, typ, back))
		}
	})
}
