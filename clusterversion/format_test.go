package clusterversion

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// The first byte tells the unversioned 1.0 form (a non-negative
// big-endian integer) from a versioned one; a version above the reader's
// is refused by name, one of 0 and an empty value as malformed.
func TestSplitFormat(t *testing.T) {
	for _, tc := range []struct {
		in      []byte
		v       int
		payload []byte
		err     string
		future  bool
	}{
		{in: []byte{0x00, 0, 0, 0, 0, 0, 0, 7}, v: 0, payload: []byte{0x00, 0, 0, 0, 0, 0, 0, 7}},
		{in: []byte{0x7f, 1}, v: 0, payload: []byte{0x7f, 1}},
		{in: AppendFormat(nil, 1), v: 1, payload: []byte{}},
		{in: append(AppendFormat(nil, 1), 9, 9), v: 1, payload: []byte{9, 9}},
		{in: append(AppendFormat(nil, 2), 9), err: "the value is in format version 2, and this binary (version " + Binary.String() + ") reads up to 1: a newer binary wrote it", future: true},
		{in: AppendFormat(nil, 127), err: "format version 127", future: true},
		{in: []byte{0x80, 1}, err: "version byte 0x80 names no format"},
		{in: nil, err: "empty value"},
	} {
		v, p, err := SplitFormat("the value", tc.in, 1)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || errors.Is(err, ErrFutureFormat) != tc.future {
				t.Errorf("%x: %v, want an error with %q (future %v)", tc.in, err, tc.err, tc.future)
			}
			continue
		}
		if err != nil || v != tc.v || !bytes.Equal(p, tc.payload) {
			t.Errorf("%x: version %d payload %x %v, want %d %x", tc.in, v, p, err, tc.v, tc.payload)
		}
	}
}

// A JSON record gains "format_version" first; a record without it is
// version 0 (what 1.0 wrote), one above the reader's is refused by name,
// and a reader that ignores the member (a 1.0 binary's encoding/json)
// still reads the rest.
func TestJSONFormat(t *testing.T) {
	type rec struct {
		A int    `json:"a"`
		B string `json:"b,omitempty"`
	}
	for _, tc := range []struct {
		in   any
		want string
	}{
		{rec{A: 1, B: "x"}, `{"format_version":1,"a":1,"b":"x"}`},
		{struct{}{}, `{"format_version":1}`},
	} {
		b, err := MarshalFormat(tc.in, 1)
		if err != nil || string(b) != tc.want {
			t.Errorf("MarshalFormat(%+v) = %s, %v; want %s", tc.in, b, err, tc.want)
		}
	}
	if _, err := MarshalFormat([]int{1}, 1); err == nil {
		t.Error("MarshalFormat of a JSON array succeeded")
	}
	b, _ := MarshalFormat(rec{A: 7}, 1)
	var old rec
	if err := json.Unmarshal(b, &old); err != nil || old != (rec{A: 7}) {
		t.Errorf("a reader without the member: %+v, %v", old, err)
	}
	for _, tc := range []struct {
		in     string
		v      int
		err    string
		future bool
	}{
		{in: `{"a":1}`, v: 0},
		{in: `{"format_version":1,"a":1}`, v: 1},
		{in: `{"format_version":2,"a":1}`, err: "the record is in format version 2", future: true},
		{in: `{"format_version":-1}`, err: "format version -1"},
		{in: `[1]`, err: "the record: json"},
	} {
		v, err := JSONFormat("the record", []byte(tc.in), 1)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || errors.Is(err, ErrFutureFormat) != tc.future {
				t.Errorf("%s: %v, want an error with %q (future %v)", tc.in, err, tc.err, tc.future)
			}
			continue
		}
		if err != nil || v != tc.v {
			t.Errorf("%s: %d, %v; want %d", tc.in, v, err, tc.v)
		}
	}
}
