package clusterversion

import (
	"errors"
	"testing"
)

func TestParseAndOrder(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Version
		bad  bool
	}{
		{in: "1.0", want: Version{1, 0}},
		{in: " 2.13 ", want: Version{2, 13}},
		{in: "1", bad: true},
		{in: "1.x", bad: true},
		{in: "-1.0", bad: true},
		{in: "", bad: true},
	} {
		v, err := Parse(tc.in)
		if (err != nil) != tc.bad || (!tc.bad && v != tc.want) {
			t.Errorf("Parse(%q) = %v, %v", tc.in, v, err)
		}
		if !tc.bad && v.String() != trim(tc.in) {
			t.Errorf("%v prints as %q", v, v.String())
		}
	}
	if !(Version{1, 9}).Less(Version{1, 10}) || !(Version{1, 10}).Less(Version{2, 0}) || (Version{2, 0}).Less(Version{2, 0}) {
		t.Error("versions are not ordered by major, then minor")
	}
	for i := 1; i < len(Versions); i++ {
		if !Versions[i-1].Version.Less(Versions[i].Version) {
			t.Errorf("Versions out of order at %d (invariant 3)", i)
		}
	}
	if Binary.Less(MinSupported) {
		t.Errorf("Binary %s is older than MinSupported %s", Binary, MinSupported)
	}
}

func trim(s string) string {
	for len(s) > 0 && s[0] == ' ' {
		s = s[1:]
	}
	for len(s) > 0 && s[len(s)-1] == ' ' {
		s = s[:len(s)-1]
	}
	return s
}

// A binary runs in a cluster whose version is between its oldest supported
// version and its own (invariant 2).
func TestCheck(t *testing.T) {
	v10, v11, v12 := Version{1, 0}, Version{1, 1}, Version{1, 2}
	for _, tc := range []struct {
		binary, min, cluster Version
		want                 error
	}{
		{v11, v10, v10, nil},
		{v11, v10, v11, nil},
		{v10, v10, v11, ErrBinaryTooOld},
		{v12, v11, v10, ErrBinaryTooNew},
		{v12, v11, v12, nil},
	} {
		if err := Check(tc.binary, tc.min, tc.cluster); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("Check(binary %s, min %s, cluster %s) = %v, want %v", tc.binary, tc.min, tc.cluster, err, tc.want)
		}
	}
}

func TestHandleOnlyRises(t *testing.T) {
	h := NewHandle(Version{1, 2}, Version{1, 0})
	if h.Active() != (Version{1, 0}) || h.IsActive(Version{1, 1}) {
		t.Fatalf("a new handle is at %s", h.Active())
	}
	h.SetActive(Version{1, 2})
	h.SetActive(Version{1, 1})
	if h.Active() != (Version{1, 2}) || !h.IsActive(Version{1, 1}) || h.IsActive(Version{1, 3}) {
		t.Fatalf("after raising to 1.2 and lowering to 1.1: %s", h.Active())
	}
	if d := NewHandle(Version{}, Version{}); d.Binary() != Binary || d.MinSupported() != MinSupported {
		t.Fatalf("the default handle is %s/%s", d.Binary(), d.MinSupported())
	}
}

// A test build may claim an older binary version it knows
// (testingBinary); anything else is refused at start.
func TestBuildVersion(t *testing.T) {
	v11 := Version{1, 1}
	if got := buildVersion("", v11); got != v11 {
		t.Errorf("no test version: %s", got)
	}
	if got := buildVersion("1.0", v11); got != V1_0 {
		t.Errorf("test version 1.0: %s", got)
	}
	for _, bad := range []string{"1.2", "0.9", "one"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("test version %q was taken", bad)
				}
			}()
			buildVersion(bad, v11)
		}()
	}
}
