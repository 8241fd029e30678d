package store

import (
	"strings"
	"testing"
)

func TestParseLeasePreferences(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		err      bool
	}{
		{in: "", want: ""},
		{in: "spread", want: "spread"},
		{in: "region=us-west", want: "region=us-west"},
		{in: " region=eu , region=us-east ", want: "region=eu,region=us-east"},
		{in: "us-west", want: "want region=NAME", err: true},
		{in: "zone=a", want: "want region=NAME", err: true},
		{in: "region=", want: "want region=NAME", err: true},
		{in: "region=eu,region=eu", want: "given twice", err: true},
	} {
		p, err := ParseLeasePreferences(tc.in)
		if tc.err {
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseLeasePreferences(%q) = %v, %v; want an error with %q", tc.in, p, err, tc.want)
			}
			continue
		}
		if err != nil || p.String() != tc.want || p.IsZero() != (tc.in == "") {
			t.Errorf("ParseLeasePreferences(%q) = %q, %v", tc.in, p.String(), err)
		}
	}
}
