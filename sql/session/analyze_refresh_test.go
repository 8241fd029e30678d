package session_test

import (
	"slices"
	"sync"
	"testing"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/session"
)

// TestAnalyzeTakesChangesOffRefresher: a committed ANALYZE of a whole
// table hands the automatic refresher the changes counted when it
// started, which the refresher takes off the table's count
// (stats.Refresher.Analyzed, as PostgreSQL's ANALYZE resets
// n_mod_since_analyze); a rolled-back ANALYZE and an ANALYZE of some
// columns hand nothing. The second whole ANALYZE sees only the rows
// changed since the first: the first took its 300 off.
func TestAnalyzeTakesChangesOffRefresher(t *testing.T) {
	c := connect(t, startServer(t), nil)
	var mu sync.Mutex
	var got []int64
	defer session.SetAnalyzedHook(func(_ catalog.ID, n int64) {
		mu.Lock()
		got = append(got, n)
		mu.Unlock()
	})()
	calls := func() []int64 {
		mu.Lock()
		defer mu.Unlock()
		return append([]int64(nil), got...)
	}
	exec := func(sql string) {
		t.Helper()
		if _, err := simple(c, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec("CREATE TABLE t (a int8 PRIMARY KEY, b int8)")
	exec("INSERT INTO t SELECT g, g FROM generate_series(1, 300) g")
	for _, step := range []struct {
		sql  []string
		want []int64
	}{
		{[]string{"BEGIN", "ANALYZE t", "ROLLBACK"}, nil},
		{[]string{"ANALYZE t (b)"}, nil},
		{[]string{"ANALYZE t"}, []int64{300}},
		{[]string{"INSERT INTO t SELECT g, g FROM generate_series(301, 305) g", "VACUUM ANALYZE t"}, []int64{300, 5}},
	} {
		for _, sql := range step.sql {
			exec(sql)
		}
		if g := calls(); !slices.Equal(g, step.want) {
			t.Errorf("after %v: the refresher was handed %v, want %v", step.sql, g, step.want)
		}
	}
}
