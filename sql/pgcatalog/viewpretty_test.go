package pgcatalog

import "testing"

// The expected forms are PostgreSQL 15's pg_get_viewdef(oid, true) for
// views whose pg_get_viewdef(oid) is the input.
func TestPrettyViewDef(t *testing.T) {
	for _, tc := range []struct{ plain, want string }{
		{" SELECT vv.a,\n    vv.b\n   FROM vv\n  WHERE ((vv.a >= 18) AND ((vv.b < 3) OR (vv.b > 5)));",
			" SELECT vv.a,\n    vv.b\n   FROM vv\n  WHERE vv.a >= 18 AND (vv.b < 3 OR vv.b > 5);"},
		{" SELECT vv.a,\n    count(*) AS count\n   FROM vv\n  GROUP BY vv.a\n HAVING (count(*) > 1);",
			" SELECT vv.a,\n    count(*) AS count\n   FROM vv\n  GROUP BY vv.a\n HAVING count(*) > 1;"},
		{" SELECT vv.a\n   FROM vv;", " SELECT vv.a\n   FROM vv;"},
	} {
		if got := prettyViewDef(tc.plain); got != tc.want {
			t.Errorf("prettyViewDef(%q) = %q, want %q", tc.plain, got, tc.want)
		}
	}
}
