package server

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/sql/jobs"
	"github.com/cairn-db/cairn/sql/plan"
)

// TestActivityPages: the statements, sessions and jobs pages and their
// JSON show what ran on the node, who is connected and the schema
// change's job with its progress.
func TestActivityPages(t *testing.T) {
	s := start(t, Config{Insecure: true})
	defer s.Stop(context.Background())
	pg := connectDB(t, s, "postgres")
	execAll(t, pg, "CREATE TABLE kv (k int PRIMARY KEY, v int)", "INSERT INTO kv VALUES (1, 1), (2, 2)",
		"CREATE INDEX kv_v ON kv (v)", "SET application_name = 'activity-test'")

	var stmts []StatementInfo
	getJSON(t, s, "/api/statements", &stmts)
	found := false
	for _, st := range stmts {
		found = found || (strings.HasPrefix(st.Query, "INSERT INTO kv VALUES") && st.Calls == 1 && st.Rows == 2 && st.User == "postgres")
	}
	if !found {
		t.Errorf("/api/statements has no INSERT with 1 call and 2 rows: %+v", stmts)
	}
	var sess []plan.SessionActivity
	getJSON(t, s, "/api/sessions", &sess)
	found = false
	for _, a := range sess {
		found = found || a.ApplicationName == "activity-test"
	}
	if !found {
		t.Errorf("/api/sessions lacks the test's session: %+v", sess)
	}
	var recs []jobs.Record
	getJSON(t, s, "/api/jobs", &recs)
	found = false
	for _, r := range recs {
		found = found || (strings.Contains(r.Description, "kv_v") && r.Status == jobs.StatusSucceeded && r.Fraction == 1)
	}
	if !found {
		b, _ := json.Marshal(recs)
		t.Errorf("/api/jobs lacks the CREATE INDEX job, succeeded: %s", b)
	}
	for path, want := range map[string]string{
		"/statements": "INSERT INTO kv VALUES",
		"/sessions":   "activity-test",
		"/jobs":       `<progress max="1" value="1"></progress> 100%`,
	} {
		code, _, body := httpGet(t, s, path)
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("%s: %d, want %q in\n%s", path, code, want, body)
		}
	}
}
