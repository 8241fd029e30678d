package exec_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Schema changes racing READ COMMITTED writers (docs/architecture.md,
// "Bulk loads"): a writer whose statement resolved a table's descriptor
// before CREATE INDEX committed must not commit a row the index build
// missed. Each round runs writers in explicit READ COMMITTED transactions
// (retrying on 40001, as drivers do) and one in implicit transactions
// while CREATE INDEX runs on the table, then compares what the new index
// returns with what the table holds.

// rcWriter runs op in BEGIN ... COMMIT until it commits, retrying on
// 40001; it returns how many attempts failed with 40001.
func rcWriter(ctx context.Context, c *pgx.Conn, op func(tx pgx.Tx) error) (retries int, err error) {
	for {
		tx, err := c.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
		if err != nil {
			return retries, err
		}
		err = op(tx)
		if err == nil {
			err = tx.Commit(ctx)
		}
		if err == nil {
			return retries, nil
		}
		_ = tx.Rollback(ctx)
		if sqlState(err) != "40001" {
			return retries, err
		}
		retries++
	}
}

func queryInts(t *testing.T, c *pgx.Conn, sql string, args ...any) []int64 {
	t.Helper()
	rows, err := c.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}

func explain(t *testing.T, c *pgx.Conn, sql string) string {
	t.Helper()
	var b strings.Builder
	for _, l := range queryRowsText(t, c, "EXPLAIN "+sql) {
		b.WriteString(l + "\n")
	}
	return b.String()
}

func queryRowsText(t *testing.T, c *pgx.Conn, sql string) []string {
	t.Helper()
	rows, err := c.Query(context.Background(), sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}

func TestCreateIndexRacingReadCommittedWriters(t *testing.T) {
	s, url := startNode(t, t.TempDir())
	defer s.Stop(context.Background())
	ctx := context.Background()
	admin := connect(t, url)
	exec(t, admin, "CREATE TABLE t (k INT PRIMARY KEY, b INT NOT NULL)")
	exec(t, admin, "CREATE TABLE u (k INT PRIMARY KEY, b INT NOT NULL)")

	const writers = 4
	conns := make([]*pgx.Conn, writers)
	for i := range conns {
		conns[i] = connect(t, url)
	}
	var nextKey atomic.Int64
	// run makes the writers insert (and update) rows of table until ddl
	// returns, and a little longer; it returns the writers' 40001 count.
	run := func(table string, ddl func()) int {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var retries atomic.Int64
		errs := make(chan error, writers)
		for i := range writers {
			wg.Add(1)
			go func(c *pgx.Conn, w int) {
				defer wg.Done()
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					k := nextKey.Add(1)
					insert := fmt.Sprintf("INSERT INTO %s (k, b) VALUES ($1, $2)", table)
					if w == 0 {
						// An implicit transaction over the simple
						// protocol: a failed validation reruns it in the
						// session, unseen. (Over the extended protocol
						// the commit comes at Sync, after the result
						// went out, and fails with 40001 instead.)
						if _, err := c.Exec(ctx, insert, pgx.QueryExecModeSimpleProtocol, k, k%101); err != nil {
							errs <- err
							return
						}
						continue
					}
					r, err := rcWriter(ctx, c, func(tx pgx.Tx) error {
						if _, err := tx.Exec(ctx, insert, k, k%101); err != nil {
							return err
						}
						if table == "t" && n%3 == 2 {
							// An UPDATE of a row this writer inserted
							// earlier moves its index entry.
							if _, err := tx.Exec(ctx, "UPDATE t SET b = b + 1000 WHERE k = $1", k-writers); err != nil {
								return err
							}
						}
						// Keep the transaction open across the DDL's
						// commit now and then.
						time.Sleep(time.Duration(w%2) * time.Millisecond)
						return nil
					})
					retries.Add(int64(r))
					if err != nil {
						errs <- err
						return
					}
				}
			}(conns[i], i)
		}
		time.Sleep(20 * time.Millisecond)
		ddl()
		time.Sleep(20 * time.Millisecond)
		close(stop)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("writer: %v", err)
		}
		return int(retries.Load())
	}
	// ddlRetry runs a schema change, retrying on 40001 as a client would.
	ddlRetry := func(sql string) {
		for {
			_, err := admin.Exec(ctx, sql)
			if err == nil {
				return
			}
			if sqlState(err) != "40001" {
				t.Fatalf("%s: %v", sql, err)
			}
		}
	}
	for round := range 8 {
		idx := fmt.Sprintf("t_b_%d", round)
		run("t", func() { ddlRetry(fmt.Sprintf("CREATE INDEX %s ON t (b)", idx)) })
		exec(t, admin, "ANALYZE t")
		// Every value b can hold (k%101, plus 1000 once updated), each
		// read through the index and through the table.
		viaIndex := "SELECT k FROM t WHERE b = $1"
		if p := explain(t, admin, strings.Replace(viaIndex, "$1", "7", 1)); !strings.Contains(p, idx) {
			t.Fatalf("round %d: %s does not use %s:\n%s", round, viaIndex, idx, p)
		}
		viaTable := "SELECT k FROM t WHERE b + 0 = $1"
		if p := explain(t, admin, strings.Replace(viaTable, "$1", "7", 1)); !strings.Contains(p, "Seq Scan on t") {
			t.Fatalf("round %d: %s is not a table scan:\n%s", round, viaTable, p)
		}
		total := 0
		for _, base := range []int{0, 1000} {
			for v := base; v <= base+100; v++ {
				got, want := queryInts(t, admin, viaIndex, v), queryInts(t, admin, viaTable, v)
				slices.Sort(got)
				slices.Sort(want)
				if !slices.Equal(got, want) {
					missing, extra := diffInts(want, got)
					t.Fatalf("round %d: b = %d: index %s holds %d rows, the table %d; missing from the index %v, extra %v",
						round, v, idx, len(got), len(want), head(missing), head(extra))
				}
				total += len(want)
			}
		}
		if n := queryInts(t, admin, "SELECT count(*) FROM t"); n[0] != int64(total) {
			t.Fatalf("round %d: t has %d rows, %d with the b values checked", round, n[0], total)
		}
		// Later rounds' indexes must not all be used at once: drop this
		// one so the next round's build is the one the query reads.
		exec(t, admin, "DROP INDEX "+idx)
	}

	// DDL on u leaves t's writers alone: inserts of fresh keys into t
	// conflict with nothing, so none of them may fail with 40001.
	for round := range 3 {
		idx := fmt.Sprintf("u_b_%d", round)
		if r := run("t", func() { ddlRetry(fmt.Sprintf("CREATE INDEX %s ON u (b)", idx)) }); r != 0 {
			t.Fatalf("round %d: CREATE INDEX on u made %d writes to t fail with 40001", round, r)
		}
		exec(t, admin, "DROP INDEX "+idx)
	}
}

func diffInts(want, got []int64) (missing, extra []int64) {
	for _, k := range want {
		if _, ok := slices.BinarySearch(got, k); !ok {
			missing = append(missing, k)
		}
	}
	for _, k := range got {
		if _, ok := slices.BinarySearch(want, k); !ok {
			extra = append(extra, k)
		}
	}
	return missing, extra
}

func head(s []int64) []int64 {
	if len(s) > 10 {
		return s[:10]
	}
	return s
}

// TestAlterRewriteRacingWriters: ALTER TABLE's rewrites (ADD PRIMARY KEY,
// ALTER COLUMN TYPE) move the table to fresh storage while writers insert
// into it; every row a writer committed must be in the table afterwards,
// and nothing else.
func TestAlterRewriteRacingWriters(t *testing.T) {
	s, url := startNode(t, t.TempDir())
	defer s.Stop(context.Background())
	ctx := context.Background()
	admin := connect(t, url)
	const writers = 3
	conns := make([]*pgx.Conn, writers)
	for i := range conns {
		conns[i] = connect(t, url)
	}
	var nextKey atomic.Int64
	for round := range 4 {
		table := fmt.Sprintf("r%d", round)
		exec(t, admin, fmt.Sprintf("CREATE TABLE %s (k int8 NOT NULL, b int8)", table))
		exec(t, admin, fmt.Sprintf("INSERT INTO %s SELECT -i, i FROM generate_series(1, 2000) AS i", table))
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		committed := map[int64]bool{}
		errs := make(chan error, writers)
		for i := range writers {
			wg.Add(1)
			go func(c *pgx.Conn, w int) {
				defer wg.Done()
				insert := fmt.Sprintf("INSERT INTO %s (k, b) VALUES ($1, $2)", table)
				for {
					select {
					case <-stop:
						return
					default:
					}
					k := nextKey.Add(1)
					var err error
					if w == 0 {
						_, err = c.Exec(ctx, insert, pgx.QueryExecModeSimpleProtocol, k, k%101)
					} else {
						_, err = rcWriter(ctx, c, func(tx pgx.Tx) error {
							_, err := tx.Exec(ctx, insert, k, k%101)
							time.Sleep(time.Duration(w%2) * time.Millisecond)
							return err
						})
					}
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					committed[k] = true
					mu.Unlock()
				}
			}(conns[i], i)
		}
		for _, ddl := range []string{
			"ALTER TABLE %s ADD PRIMARY KEY (k)",
			"ALTER TABLE %s ALTER COLUMN b TYPE numeric",
			"ALTER TABLE %s ALTER COLUMN k TYPE numeric",
		} {
			time.Sleep(20 * time.Millisecond)
			for {
				_, err := admin.Exec(ctx, fmt.Sprintf(ddl, table))
				if err == nil {
					break
				}
				if sqlState(err) != "40001" {
					t.Fatalf("round %d: %s: %v", round, fmt.Sprintf(ddl, table), err)
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
		close(stop)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: writer: %v", round, err)
		}
		got := queryInts(t, admin, fmt.Sprintf("SELECT k::int8 FROM %s WHERE k > 0", table))
		slices.Sort(got)
		var want []int64
		for k := range committed {
			want = append(want, k)
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			missing, extra := diffInts(want, got)
			t.Fatalf("round %d: %s holds %d written rows, the writers committed %d; missing %v, extra %v",
				round, table, len(got), len(want), head(missing), head(extra))
		}
		t.Logf("round %d: %d rows written by the writers", round, len(want))
		if n := queryInts(t, admin, fmt.Sprintf("SELECT count(*) FROM %s WHERE k < 0", table)); n[0] != 2000 {
			t.Fatalf("round %d: %s holds %d of its 2000 first rows", round, table, n[0])
		}
		if _, err := admin.Exec(ctx, fmt.Sprintf("INSERT INTO %s VALUES (-1, 0)", table)); sqlState(err) != "23505" {
			t.Fatalf("round %d: duplicate of the new key: %v, want 23505", round, err)
		}
	}
}
