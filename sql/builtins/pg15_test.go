package builtins

import (
	"strconv"
	"testing"

	"github.com/cockroachdb/apd/v3"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// The expected values below are PostgreSQL 15's answers (psql, with
// extra_float_digits = 1 for floats).

func TestCbrtMatchesGlibc(t *testing.T) {
	for _, tc := range []struct {
		x    float64
		want string
	}{
		{27, "3.0000000000000004"}, {-27, "-3.0000000000000004"}, {8, "2"}, {2, "1.2599210498948734"},
		{3, "1.4422495703074083"}, {1e300, "1e+100"}, {0.001, "0.1"}, {1e-310, "4.641588833612775e-104"},
	} {
		if got := strconv.FormatFloat(cbrtGlibc(tc.x), 'g', -1, 64); got != tc.want {
			t.Errorf("cbrt(%g) = %s, want %s", tc.x, got, tc.want)
		}
	}
}

func TestToCharNumber(t *testing.T) {
	dec := func(s string) numDigits {
		d, _, err := apd.NewFromString(s)
		if err != nil {
			t.Fatal(err)
		}
		return decDigits(d)
	}
	for _, tc := range []struct {
		n, f, want string
	}{
		{"-12", "9999", "  -12"}, {"12", "9999", "   12"}, {"1234.5", "9999.00", " 1234.50"},
		{"-12", "MI9999", "-  12"}, {"-12", "S9999", "  -12"}, {"12", "S9999", "  +12"}, {"-12", "9999S", "  12-"},
		{"-12", "9999PR", "  <12>"}, {"12", "9999PR", "   12 "}, {"12", "FM9999PR", "12"},
		{"1", "FM9.9", "1."}, {"0.5", "9.99", "  .50"}, {"0.5", "FM9.99", ".5"}, {"0.5", "0.99", " 0.50"},
		{"1234567", "9,999,999", " 1,234,567"}, {"12", "9,999", "    12"}, {"-1234567.891", "FM9,999,999.00", "-1,234,567.89"},
		{"123", "00000", " 00123"}, {"12345", "999", " ###"}, {"-0.4", "9", " 0"}, {"0", "FM9", "0"},
		{"12", "L99", "  12"}, {"12", `"Total: "999`, "Total:   12"}, {"0.01", "FM.99", ".##"},
	} {
		got, err := formatNumber(tc.f, dec(tc.n))
		if err != nil || got != tc.want {
			t.Errorf("to_char(%s, %q) = %q, %v; want %q", tc.n, tc.f, got, err, tc.want)
		}
	}
	if _, err := formatNumber("S99MI", dec("1")); pgerror.Code(err) != "42601" {
		t.Errorf("S with MI: %v, want 42601", err)
	}
	if _, err := formatNumber("RN", dec("1")); pgerror.Code(err) != "0A000" {
		t.Errorf("RN: %v, want 0A000 until it is supported", err)
	}
}

func TestSimilarToRegex(t *testing.T) {
	for _, tc := range []struct {
		pat  string
		esc  rune
		want string
	}{
		{`a%b_c(d|e)[^x.]\.$`, '\\', `^(?:a.*b.c(?:d|e)[^x.]\.\$)$`},
		{`a#%b`, '#', `^(?:a\%b)$`},
		{`a%`, -1, `^(?:a.*)$`},
		{`f#"o+#"b%`, '#', `^(?:f){1,1}?(o+){1,1}(?:b.*)$`},
	} {
		if got, err := similarToRegex(tc.pat, tc.esc); err != nil || got != tc.want {
			t.Errorf("similar_to_escape(%q) = %q, %v; want %q", tc.pat, got, err, tc.want)
		}
	}
	if _, err := similarToRegex(`#"a#"b#"`, '#'); pgerror.Code(err) != "2200C" {
		t.Errorf("three separators: %v, want 2200C", err)
	}
}

func TestOverlaps(t *testing.T) {
	d := func(s string) types.Datum {
		if s == "" {
			return types.DNull
		}
		n, _ := strconv.Atoi(s)
		return types.DDate(n)
	}
	for _, tc := range []struct {
		s1, e1, s2, e2, want string
	}{
		{"1", "5", "3", "8", "t"}, {"1", "5", "5", "8", "f"}, {"5", "1", "4", "8", "t"},
		{"1", "", "2", "3", "NULL"}, {"3", "", "1", "5", "t"}, {"1", "1", "1", "1", "t"}, {"", "", "1", "2", "NULL"},
	} {
		if got := overlaps(d(tc.s1), d(tc.e1), d(tc.s2), d(tc.e2)).String(); got != tc.want {
			t.Errorf("(%s, %s) OVERLAPS (%s, %s) = %s, want %s", tc.s1, tc.e1, tc.s2, tc.e2, got, tc.want)
		}
	}
}

func TestResolveFuncNamed(t *testing.T) {
	i4 := types.Int4
	r, err := ResolveFuncNamed("make_interval", []*types.T{i4, i4}, []string{"hours", "days"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{-1, -1, -1, 1, 0, -1, -1}; len(r.Order) != len(want) {
		t.Fatalf("order %v, want %v", r.Order, want)
	} else {
		for i := range want {
			if r.Order[i] != want[i] {
				t.Fatalf("order %v, want %v", r.Order, want)
			}
		}
	}
	for _, tc := range []struct {
		args  []*types.T
		names []string
		code  string
	}{
		{[]*types.T{i4}, []string{"nope"}, "42883"},
		{[]*types.T{i4, i4}, []string{"", "years"}, "42883"}, // years given twice
		{[]*types.T{i4}, []string{"day"}, "42883"},
	} {
		if _, err := ResolveFuncNamed("make_interval", tc.args, tc.names); pgerror.Code(err) != tc.code {
			t.Errorf("make_interval%v%v: %v, want %s", tc.names, tc.args, err, tc.code)
		}
	}
	// make_date has no defaults: every parameter must be supplied.
	if _, err := ResolveFuncNamed("make_date", []*types.T{i4, i4}, []string{"year", "month"}); pgerror.Code(err) != "42883" {
		t.Errorf("make_date without day: %v", err)
	}
}

func TestOrderedSetAggregates(t *testing.T) {
	run := func(name string, args []*types.T, direct types.Datum, vals ...types.Datum) string {
		t.Helper()
		r, err := ResolveFunc(name, args)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Overload.OrderedSet {
			t.Fatalf("%s is not ordered-set", name)
		}
		agg := r.Overload.NewAggregate(r.ArgTypes)
		for _, v := range vals { // already in WITHIN GROUP order
			a := []types.Datum{v}
			if direct != nil {
				a = []types.Datum{direct, v}
			}
			if err := agg.Add(nil, a); err != nil {
				t.Fatal(err)
			}
		}
		d, err := agg.Result()
		if err != nil {
			return "error " + pgerror.Code(err)
		}
		return d.String()
	}
	f8, i4 := types.Float8, types.Int4
	fl := func(fs ...float64) []types.Datum {
		out := make([]types.Datum, len(fs))
		for i, f := range fs {
			out[i] = types.DFloat(f)
		}
		return out
	}
	for _, tc := range []struct{ got, want string }{
		{run("percentile_cont", []*types.T{f8, f8}, types.DFloat(0.5), fl(1, 2, 2, 4, 10)...), "2"},
		{run("percentile_cont", []*types.T{f8, f8}, types.DFloat(0.25), fl(1, 2, 3, 4)...), "1.75"},
		{run("percentile_cont", []*types.T{f8, f8}, types.DFloat(0.5)), "NULL"},
		{run("percentile_cont", []*types.T{f8, f8}, types.DFloat(1.5), fl(1)...), "error 22003"},
		{run("percentile_disc", []*types.T{f8, i4}, types.DFloat(0.5), types.DInt(1), types.DInt(2), types.DInt(3), types.DInt(4)), "2"},
		{run("percentile_disc", []*types.T{f8, i4}, types.DFloat(0), types.DInt(7), types.DInt(9)), "7"},
		{run("mode", []*types.T{i4}, nil, types.DInt(1), types.DInt(2), types.DInt(2), types.DNull, types.DInt(3), types.DInt(3)), "2"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %s, want %s", tc.got, tc.want)
		}
	}
}

func TestToDate(t *testing.T) {
	for _, tc := range []struct{ in, tmpl, want, code string }{
		{"05 Mar 2024", "DD Mon YYYY", "2024-03-05", ""},
		{"20240229", "YYYYMMDD", "2024-02-29", ""},
		{"99-01-01", "YY-MM-DD", "1999-01-01", ""},
		{"69-01-01", "YY-MM-DD", "2069-01-01", ""},
		{"2024 060", "YYYY DDD", "2024-02-29", ""},
		{"2023-02-29", "YYYY-MM-DD", "", "22008"},
		{"abc", "YYYY", "", "22007"},
	} {
		r, err := ResolveFunc("to_date", []*types.T{types.Text, types.Text})
		if err != nil {
			t.Fatal(err)
		}
		d, err := r.Eval(testCtx(), []types.Datum{types.DString(tc.in), types.DString(tc.tmpl)})
		if tc.code != "" {
			if pgerror.Code(err) != tc.code {
				t.Errorf("to_date(%q, %q): %v, want %s", tc.in, tc.tmpl, err, tc.code)
			}
			continue
		}
		if err != nil || d.String() != tc.want {
			t.Errorf("to_date(%q, %q) = %v, %v; want %s", tc.in, tc.tmpl, d, err, tc.want)
		}
	}
}

func TestScaleFunctions(t *testing.T) {
	for _, tc := range []struct{ in, scale, minScale, trimmed string }{
		{"1.2300", "4", "2", "1.23"}, {"100", "0", "0", "100"}, {"0.000", "3", "0", "0"}, {"-5.50", "2", "1", "-5.5"},
	} {
		d, _, err := apd.NewFromString(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		got := []string{strconv.Itoa(int(decScale(d))), strconv.Itoa(int(decScale(decTrim(d)))), decTrim(d).Text('f')}
		if got[0] != tc.scale || got[1] != tc.minScale || got[2] != tc.trimmed {
			t.Errorf("%s: scale, min_scale, trim_scale = %v, want %s %s %s", tc.in, got, tc.scale, tc.minScale, tc.trimmed)
		}
	}
}
