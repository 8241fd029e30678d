package clusterversion

import (
	"bytes"
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
