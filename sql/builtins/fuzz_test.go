package builtins

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzLike checks that the LIKE compiler never panics, that a pattern
// without wildcards or escapes matches exactly itself, and that a pattern
// that compiles matches consistently with and without the cache.
func FuzzLike(f *testing.F) {
	for _, s := range []string{"", "%", "_", "a%b_c", `\%`, `a\`, "%%%%", "[a-z]", "(.*)", "é_%", `\\`} {
		f.Add(s, "abc", `\`)
	}
	f.Add("a#%", "a%", "#")
	f.Add("ab", "ab", "")
	f.Fuzz(func(t *testing.T, pattern, s, esc string) {
		re, err := CompileLike(pattern, esc, false)
		if err != nil {
			return
		}
		if !utf8.ValidString(pattern) || !utf8.ValidString(s) {
			return
		}
		if !strings.ContainsAny(pattern, "%_") && (esc == "" || !strings.Contains(pattern, esc)) {
			if got, want := re.MatchString(s), s == pattern; got != want {
				t.Fatalf("%q LIKE %q = %v, want %v", s, pattern, got, want)
			}
		}
		again, err := CompileLike(pattern, esc, false)
		if err != nil || again.MatchString(s) != re.MatchString(s) {
			t.Fatalf("recompiling %q changed the result (%v)", pattern, err)
		}
	})
}

// FuzzToChar checks that no template makes to_char panic, and that a
// template without pattern letters or quotes prints itself.
func FuzzToChar(f *testing.F) {
	for _, s := range []string{"YYYY-MM-DD", "FMHH12:MI a.m.", `"quoted" \"x\"`, "DDth FMMMTH", "RM", "FM", `"`, "Y,YYY", "TZ tz", "-/.,:; "} {
		f.Add(s, int64(1709647629123456))
	}
	f.Fuzz(func(t *testing.T, tmpl string, us int64) {
		ts := time.UnixMicro(us % (1 << 50)).UTC()
		out, err := formatToChar(ts, tmpl, true)
		if err != nil {
			return
		}
		if strings.Trim(tmpl, "-/.,:; 0123456789") == "" && out != tmpl {
			t.Fatalf("literal template %q printed %q", tmpl, out)
		}
	})
}
