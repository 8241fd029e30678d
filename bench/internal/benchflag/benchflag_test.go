package benchflag

import (
	"slices"
	"strings"
	"testing"
)

// TestCounts: lists parse in order with spaces allowed; a bad element or
// one below the minimum fails the whole list, naming the flag and the
// element.
func TestCounts(t *testing.T) {
	for _, tc := range []struct {
		list    string
		min     int
		want    []int
		wantErr string
	}{
		{"0,1000, 5000 ,10000", 0, []int{0, 1000, 5000, 10000}, ""},
		{"64,24,64", 2, []int{64, 24, 64}, ""},
		{"24,x", 2, nil, `-f "24,x": "x" is not a count of at least 2`},
		{"1,3", 2, nil, `"1" is not a count of at least 2`},
		{"", 0, nil, `"" is not a count`},
	} {
		got, err := Counts("f", tc.list, tc.min)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%q: %v", tc.list, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%q: error %v, want one containing %s", tc.list, err, tc.wantErr)
		case !slices.Equal(got, tc.want):
			t.Errorf("%q: %v, want %v", tc.list, got, tc.want)
		}
	}
	if _, err := Counts[int]("rows", "9223372036854775807", 1); err != nil {
		t.Errorf("the largest int64 as an int on a 64-bit build: %v", err)
	}
	if got, err := Counts[int64]("rows", "1000000,3000000", 1); err != nil || !slices.Equal(got, []int64{1000000, 3000000}) {
		t.Errorf("int64 counts: %v, %v", got, err)
	}
}
