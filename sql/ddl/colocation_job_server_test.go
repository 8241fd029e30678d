package ddl_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/server"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/ddl"
	"github.com/cairn-db/cairn/sql/jobs"
	"github.com/cairn-db/cairn/sql/rowenc"
)

// The online move of a table in and out of its database's colocation
// tablet (colocation_job.go), driven over pgwire against a whole node:
// while the ALTER runs, other sessions write the table and its neighbour
// and watch the job's progress.

func startNode(t *testing.T, dir string) (*server.Server, string) {
	t.Helper()
	s, err := server.Start(context.Background(), server.Config{
		StoreDir: dir, Insecure: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	// Stopped before dir is removed (t.TempDir's cleanup, registered
	// first, runs last): a node left running writes its disk probe into
	// dir each second, and the removal then fails the test ("directory
	// not empty"). Stop is idempotent, so a test may stop it itself.
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	return s, fmt.Sprintf("postgres://postgres@%s/%%s?sslmode=disable", s.Addr())
}

func connect(t *testing.T, url, db string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), fmt.Sprintf(url, db))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func mustExec(t *testing.T, c *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := c.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func sqlState(err error) string {
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		return pe.Code
	}
	return ""
}

// row is what a writer knows of one row it owns.
type row struct{ v, u int64 }

// writer changes rows of table with autocommit statements and keeps the
// model of what was acknowledged: it owns the initial rows [lo, hi) and
// the rows it inserts, from next on.
type writer struct {
	table  string
	lo, hi int64
	next   int64 // next id to insert (above every initial id)
	model  map[int64]row
	ops    int
	dupErr int // unique violations seen for deliberate duplicates
	// retries counts statements that failed with 40001 (not acknowledged:
	// the model is unchanged) and were run again, as a client would.
	retries int
	// retryErrs are the first few of those errors, for the log.
	retryErrs []string
}

// execRetry runs an autocommit statement until it does not fail with
// 40001.
func (w *writer) execRetry(ctx context.Context, c *pgx.Conn, sql string, args ...any) (pgconn.CommandTag, error) {
	for {
		tag, err := c.Exec(ctx, sql, args...)
		if sqlState(err) != "40001" {
			return tag, err
		}
		if w.retries++; len(w.retryErrs) < 3 {
			w.retryErrs = append(w.retryErrs, err.Error())
		}
	}
}

// holders says which rows hold u, through the unique index and through
// the table, for the message of an unexpected 23505.
func (w *writer) holders(ctx context.Context, c *pgx.Conn, u int64) string {
	var out []string
	for _, q := range []string{"SELECT id FROM " + w.table + " WHERE u = $1", "SELECT id FROM " + w.table + " WHERE u + 0 = $1"} {
		rows, err := c.Query(ctx, q, u)
		if err != nil {
			return err.Error()
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return err.Error()
		}
		out = append(out, fmt.Sprintf("%s: %v", q, ids))
	}
	return strings.Join(out, "; ")
}

func (w *writer) step(ctx context.Context, c *pgx.Conn, rng *rand.Rand) error {
	w.ops++
	ids := make([]int64, 0, len(w.model))
	for id := range w.model {
		ids = append(ids, id)
	}
	switch op := rng.Intn(10); {
	case op < 3 || len(ids) == 0: // insert
		id := w.next
		w.next++
		r := row{v: id % 97, u: id}
		if _, err := w.execRetry(ctx, c, "INSERT INTO "+w.table+" (id, v, u, note) VALUES ($1, $2, $3, 'w')", id, r.v, r.u); err != nil {
			return fmt.Errorf("insert %d: %w", id, err)
		}
		w.model[id] = r
	case op < 6: // update both indexed columns
		id := ids[rng.Intn(len(ids))]
		r := w.model[id]
		r.v, r.u = r.v+1, r.u+10_000_000
		tag, err := w.execRetry(ctx, c, "UPDATE "+w.table+" SET v = $2, u = $3 WHERE id = $1", id, r.v, r.u)
		if err != nil {
			return fmt.Errorf("update %d to u=%d: %w (%s)", id, r.u, err, w.holders(ctx, c, r.u))
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("update %d: %d rows, want 1", id, tag.RowsAffected())
		}
		w.model[id] = r
	case op < 9: // delete
		id := ids[rng.Intn(len(ids))]
		tag, err := w.execRetry(ctx, c, "DELETE FROM "+w.table+" WHERE id = $1", id)
		if err != nil {
			return fmt.Errorf("delete %d: %w", id, err)
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("delete %d: %d rows, want 1", id, tag.RowsAffected())
		}
		delete(w.model, id)
	default: // a duplicate of a unique value someone holds: 23505
		id := ids[rng.Intn(len(ids))]
		_, err := w.execRetry(ctx, c, "INSERT INTO "+w.table+" (id, v, u) VALUES ($1, 0, $2)", w.next, w.model[id].u)
		if sqlState(err) != "23505" {
			return fmt.Errorf("duplicate u=%d: want 23505, got %v", w.model[id].u, err)
		}
		w.dupErr++
	}
	return nil
}

// checkTable compares the table, read through its primary index and
// through each secondary index, with the writers' models (initial rows
// outside their ranges must be untouched).
func checkTable(t *testing.T, c *pgx.Conn, table string, initial int64, ws []*writer) {
	t.Helper()
	ctx := context.Background()
	want := map[int64]row{}
	for id := int64(1); id <= initial; id++ {
		want[id] = row{v: id % 97, u: id}
	}
	for _, w := range ws {
		for id := w.lo; id < w.hi; id++ {
			delete(want, id) // the model says what is left of them
		}
		for id, r := range w.model {
			want[id] = r
		}
	}
	mustExec(t, c, "ANALYZE "+table)
	// explain fails unless sql's plan contains use.
	explain := func(sql, use string) {
		t.Helper()
		rows, err := c.Query(ctx, "EXPLAIN "+sql)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		if p := strings.Join(lines, "\n"); !strings.Contains(p, use) {
			t.Fatalf("EXPLAIN %s: want %q in\n%s", sql, use, p)
		}
	}
	// read adds the rows sql returns to got, counting duplicates.
	read := func(got map[int64]row, sql string) (dups int) {
		t.Helper()
		rows, err := c.Query(ctx, sql)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		for rows.Next() {
			var id int64
			var r row
			if err := rows.Scan(&id, &r.v, &r.u); err != nil {
				t.Fatal(err)
			}
			if _, dup := got[id]; dup {
				dups++
			}
			got[id] = r
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return dups
	}
	compare := func(what string, got map[int64]row, dups int) {
		t.Helper()
		if dups > 0 {
			t.Errorf("%s %s: %d rows read twice", table, what, dups)
		}
		if len(got) != len(want) {
			t.Errorf("%s %s: %d rows, want %d", table, what, len(got), len(want))
		}
		bad := 0
		for id, r := range want {
			if g, ok := got[id]; !ok || g != r {
				if bad++; bad <= 5 {
					t.Errorf("%s %s: id %d = %+v (present %v), want %+v", table, what, id, g, ok, r)
				}
			}
		}
		for id, g := range got {
			if _, ok := want[id]; !ok {
				if bad++; bad <= 10 {
					t.Errorf("%s %s: id %d = %+v, which should not be there", table, what, id, g)
				}
			}
		}
	}
	q := "SELECT id, v, u FROM " + table
	if strings.Contains(table, "hs") {
		// Hash sharded: a span per bucket of the primary key.
		explain(q, "Index Scan using "+table+"_pkey")
	} else {
		explain(q, "Seq Scan")
	}
	got := map[int64]row{}
	compare("table scan", got, read(got, q))

	// Through each index, whatever the planner would rather do for a
	// range this wide (PostgreSQL's enable_seqscan).
	mustExec(t, c, "SET enable_seqscan = off")
	defer mustExec(t, c, "RESET enable_seqscan")

	// Index on v: every value v can hold (initial values, each raised by
	// updates), one index lookup each.
	maxV := int64(0)
	for _, r := range want {
		maxV = max(maxV, r.v)
	}
	explain(q+" WHERE v = 7", table+"_v_idx")
	got, dups := map[int64]row{}, 0
	for v := int64(0); v <= maxV+1; v++ {
		dups += read(got, fmt.Sprintf("%s WHERE v = %d", q, v))
	}
	compare("index "+table+"_v_idx", got, dups)

	// Unique index on u: contiguous ranges covering every value (all are
	// positive), each holding at most 100 of the wanted rows.
	var us []int64
	for _, r := range want {
		us = append(us, r.u)
	}
	slices.Sort(us)
	got, dups = map[int64]row{}, 0
	lo := int64(0)
	for i := 0; i < len(us); i += 100 {
		hi := us[min(i+99, len(us)-1)]
		rq := fmt.Sprintf("%s WHERE u >= %d AND u <= %d", q, lo, hi)
		explain(rq, table+"_u_key")
		dups += read(got, rq)
		lo = hi + 1
	}
	rq := fmt.Sprintf("%s WHERE u >= %d", q, lo)
	explain(rq, table+"_u_key")
	dups += read(got, rq)
	compare("index "+table+"_u_key", got, dups)
}

// placement returns yb_table_properties' num_tablets and is_colocated and
// the distinct tablets cairn_catalog.tablets shows for the table's rows.
func placement(t *testing.T, c *pgx.Conn, table string) (tablets int64, colocated bool, ids []int64) {
	t.Helper()
	ctx := context.Background()
	if err := c.QueryRow(ctx, "SELECT num_tablets, is_colocated FROM yb_table_properties('"+table+"'::regclass)").Scan(&tablets, &colocated); err != nil {
		t.Fatal(err)
	}
	rows, err := c.Query(ctx, "SELECT DISTINCT tablet_id FROM cairn_catalog.tablets WHERE table_name = $1 AND index_name IS NULL ORDER BY 1", table)
	if err != nil {
		t.Fatal(err)
	}
	ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	return tablets, colocated, ids
}

// TestOnlineMoveUnderLoad moves a 20,000-row table out of its database's
// colocation tablet and back while writers change it and its neighbour
// with INSERT, UPDATE and DELETE and try duplicate unique values, and a
// watcher reads the job's progress from another session. Then every
// acknowledged write is there exactly once, through the table and each
// index; the placement is the new one; the old storage holds no key; the
// job rows say succeeded.
func TestOnlineMoveUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node and moves 20,000 rows twice")
	}
	defer func(d time.Duration) { ddl.MoveClearDelay = d }(ddl.MoveClearDelay)
	ddl.MoveClearDelay = 200 * time.Millisecond
	s, url := startNode(t, t.TempDir())
	defer s.Stop(context.Background())
	ctx := context.Background()
	admin := connect(t, url, "postgres")
	mustExec(t, admin, "CREATE DATABASE co WITH colocated = true")
	c := connect(t, url, "co")
	const initial = 20000
	for _, tb := range []string{"big", "nb"} {
		mustExec(t, c, "CREATE TABLE "+tb+" (id int PRIMARY KEY, v int NOT NULL, u int UNIQUE, note text)")
		mustExec(t, c, "CREATE INDEX "+tb+"_v_idx ON "+tb+" (v)")
	}
	mustExec(t, c, fmt.Sprintf("INSERT INTO big SELECT i, i %% 97, i, 'r' || i FROM generate_series(1, %d) i", initial))
	mustExec(t, c, "INSERT INTO nb SELECT i, i % 97, i, 'r' || i FROM generate_series(1, 1000) i")
	var bigID, group int64
	if err := c.QueryRow(ctx, "SELECT 'big'::regclass::oid::int8, tablegroup_oid::int8 FROM yb_table_properties('big'::regclass)").Scan(&bigID, &group); err != nil {
		t.Fatal(err)
	}
	_, _, nbTablets := placement(t, c, "nb")

	// Writers: two on big (disjoint ranges of existing ids plus their own
	// new ids), one on nb.
	ws := []*writer{
		{table: "big", lo: 1, hi: 2000, next: 100_000},
		{table: "big", lo: 2000, hi: 4000, next: 200_000},
		{table: "nb", lo: 1, hi: 1001, next: 100_000},
	}
	for _, w := range ws {
		w.model = map[int64]row{}
		for id := w.lo; id < w.hi; id++ {
			w.model[id] = row{v: id % 97, u: id}
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, len(ws)+1)
	for i, w := range ws {
		wc := connect(t, url, "co")
		if i == 1 {
			// The simple protocol: its autocommit statements go through
			// the session's write buffer (cairn_buffered_writes = auto),
			// so buffered writers race the move too.
			wc = connect(t, strings.Replace(url, "sslmode=disable", "sslmode=disable&default_query_exec_mode=simple_protocol", 1), "co")
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(i + 1)))
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := w.step(ctx, wc, rng); err != nil {
					errs <- fmt.Errorf("writer %d (%s): %w", i, w.table, err)
					return
				}
			}
		}()
	}
	// The watcher: the running move's progress as another session sees it.
	// seen is each job's progress readings, in order.
	seen := map[int64][]float64{}
	var seenMu sync.Mutex
	var moving atomic.Bool
	watch := connect(t, url, "co")
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			var id int64
			var f float64
			err := watch.QueryRow(ctx, "SELECT job_id, fraction_completed FROM cairn_catalog.jobs WHERE status = 'running' AND job_type = 'MOVE TABLE'").Scan(&id, &f)
			if errors.Is(err, pgx.ErrNoRows) {
				continue
			}
			if err != nil {
				errs <- fmt.Errorf("watcher: %w", err)
				return
			}
			seenMu.Lock()
			seen[id] = append(seen[id], f)
			seenMu.Unlock()
			moving.Store(true)
		}
	}()

	time.Sleep(200 * time.Millisecond) // the writers are under way
	start := time.Now()
	mustExec(t, c, "ALTER TABLE big SET (colocated = false)")
	t.Logf("move out: %v", time.Since(start))
	if tablets, colocated, ids := placement(t, c, "big"); tablets != ddl.DefaultSplitTablets || colocated || len(ids) != ddl.DefaultSplitTablets {
		t.Errorf("big after the move out: num_tablets %d, is_colocated %v, tablets %v", tablets, colocated, ids)
	}
	// The old storage, in the colocation group, holds no key of big.
	if n := keysOf(t, s, uint64(group), uint32(bigID)); n != 0 {
		t.Errorf("colocation group still holds %d keys of big after the move out", n)
	}
	start = time.Now()
	mustExec(t, c, "ALTER TABLE big SET (colocated = true)")
	t.Logf("move back in: %v", time.Since(start))
	time.Sleep(100 * time.Millisecond)
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, w := range ws {
		t.Logf("writer %s [%d,%d): %d ops, %d duplicates refused, %d statements rerun after 40001", w.table, w.lo, w.hi, w.ops, w.dupErr, w.retries)
		if w.ops < 10 {
			t.Errorf("writer on %s ran only %d operations during the moves", w.table, w.ops)
		}
	}
	checkTable(t, c, "big", initial, ws[:2])
	checkTable(t, c, "nb", 1000, ws[2:])
	if tablets, colocated, ids := placement(t, c, "big"); tablets != 1 || !colocated || len(ids) != 1 || len(nbTablets) != 1 || ids[0] != nbTablets[0] {
		t.Errorf("big after the move back: num_tablets %d, is_colocated %v, tablets %v (nb's: %v)", tablets, colocated, ids, nbTablets)
	}
	if n := keysOf(t, s, uint64(group), uint32(bigID)); n == 0 {
		t.Errorf("colocation group holds no key of big after the move back")
	}

	seenMu.Lock()
	defer seenMu.Unlock()
	mid, readings := 0, 0
	for id, fs := range seen {
		for i, f := range fs {
			readings++
			if f > 0 && f < 1 {
				mid++
			}
			if i > 0 && f < fs[i-1] {
				t.Errorf("job %d: progress went back: %v", id, fs)
				break
			}
		}
	}
	t.Logf("progress seen from another session: %d readings of %d jobs, %d strictly between 0 and 1", readings, len(seen), mid)
	if mid == 0 {
		t.Errorf("no progress strictly between 0 and 1 was seen mid-move: %v", seen)
	}
	rows, err := c.Query(ctx, "SELECT job_type, description, user_name, status, fraction_completed, error IS NULL, finished >= started FROM cairn_catalog.jobs WHERE job_type IN ('MOVE TABLE', 'SCHEMA CHANGE') ORDER BY job_id")
	if err != nil {
		t.Fatal(err)
	}
	type jobRow struct {
		typ, desc, user, status string
		frac                    float64
		noErr, ordered          bool
	}
	var got []jobRow
	for rows.Next() {
		var j jobRow
		if err := rows.Scan(&j.typ, &j.desc, &j.user, &j.status, &j.frac, &j.noErr, &j.ordered); err != nil {
			t.Fatal(err)
		}
		got = append(got, j)
	}
	want := []jobRow{
		{ddl.MoveJobType, "ALTER TABLE big SET (colocated = false)", "postgres", string(jobs.StatusSucceeded), 1, true, true},
		{ddl.MoveJobType, "ALTER TABLE big SET (colocated = true)", "postgres", string(jobs.StatusSucceeded), 1, true, true},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("jobs:\n got %v\nwant %v", got, want)
	}
}

// keysOf counts the keys of table id in group g.
func keysOf(t *testing.T, s *server.Server, g uint64, id uint32) int {
	t.Helper()
	sp := rowenc.GroupSpan(g)
	kvs, err := s.DB().Scan(context.Background(), sp.Key, sp.EndKey, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, kv := range kvs {
		if p, _, err := rowenc.DecodeKeyPrefix(kv.Key); err == nil && p.Table == id {
			n++
		}
	}
	return n
}

// moveState reads table's committed descriptor's move (nil: none) and
// location.
func moveState(t *testing.T, s *server.Server, c *pgx.Conn, table string) *catalog.Table {
	t.Helper()
	ctx := context.Background()
	var id uint32
	if err := c.QueryRow(ctx, fmt.Sprintf("SELECT '%s'::regclass::oid", table)).Scan(&id); err != nil {
		t.Fatal(err)
	}
	txn := s.DB().NewTxn(ctx, "test", kv.Serializable)
	defer txn.Rollback(ctx)
	desc, err := catalog.NewWriter(txn, nil).TableByID(ctx, catalog.ID(id))
	if err != nil {
		t.Fatal(err)
	}
	return desc
}

// jobRows returns status and error of every move and schema-change job
// (not the CREATE INDEX jobs of the tables' indexes), oldest first.
func jobRows(t *testing.T, c *pgx.Conn) []string {
	t.Helper()
	rows, err := c.Query(context.Background(), "SELECT status || ': ' || coalesce(error, '') FROM cairn_catalog.jobs WHERE job_type IN ('MOVE TABLE', 'SCHEMA CHANGE') ORDER BY job_id")
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// newBig makes, on the node at url, the colocated database co with the
// table big (an index on v; rows 1..n, v = id % 97, u = id) that the move
// tests move, and returns a connection to co.
func newBig(t *testing.T, url string, n int) *pgx.Conn {
	t.Helper()
	admin := connect(t, url, "postgres")
	mustExec(t, admin, "CREATE DATABASE co WITH colocated = true")
	c := connect(t, url, "co")
	mustExec(t, c, "CREATE TABLE big (id int PRIMARY KEY, v int NOT NULL, u int UNIQUE, note text)")
	mustExec(t, c, "CREATE INDEX big_v_idx ON big (v)")
	mustExec(t, c, fmt.Sprintf("INSERT INTO big SELECT i, i %% 97, i, 'r' || i FROM generate_series(1, %d) i", n))
	return c
}

// pauseMove makes the next move stop after its second page until the
// returned release is called with what the hook returns then; later moves
// run through.
func pauseMove(t *testing.T) (paused <-chan int64, release func(error)) {
	p := make(chan int64, 1)
	r := make(chan error)
	var fired atomic.Bool
	prev := ddl.SetMoveAfterPage(func(jobID int64, page int) error {
		if page != 2 || fired.Swap(true) {
			return nil
		}
		p <- jobID
		return <-r
	})
	t.Cleanup(func() { ddl.SetMoveAfterPage(prev) })
	var once sync.Once
	return p, func(err error) { once.Do(func() { r <- err }) }
}

// movePaused starts ALTER TABLE big SET (colocated = false) on a
// connection of its own, with ctx, and returns once pauseMove holds the
// move after its second page: the job's ID, the hold's release (which the
// caller defers, so that the node is not stopped under a held statement)
// and the ALTER's result to come.
func movePaused(ctx context.Context, t *testing.T, url string) (jobID int64, release func(error), alterErr <-chan error) {
	t.Helper()
	paused, release := pauseMove(t)
	done := make(chan error, 1)
	mover := connect(t, url, "co")
	go func() {
		_, err := mover.Exec(ctx, "ALTER TABLE big SET (colocated = false)")
		done <- err
	}()
	select {
	case jobID = <-paused:
	case err := <-done:
		release(nil)
		t.Fatalf("the move ended before its second page: %v", err)
	}
	return jobID, release, done
}

// TestOnlineMoveOrphanRolledBack stops a move mid-copy as if its node had
// died, restarts the node, and checks that the table stayed whole and
// writable where it was, that other schema changes wait for the move, and
// that the next ALTER ... SET (colocated = ...) rolls the orphan back
// (clearing its target) and then moves the table.
func TestOnlineMoveOrphanRolledBack(t *testing.T) {
	defer func(o, h, d time.Duration) { jobs.OrphanAfter, jobs.HeartbeatEvery, ddl.MoveClearDelay = o, h, d }(jobs.OrphanAfter, jobs.HeartbeatEvery, ddl.MoveClearDelay)
	jobs.OrphanAfter, jobs.HeartbeatEvery, ddl.MoveClearDelay = time.Second, 50*time.Millisecond, 10*time.Millisecond
	dir := t.TempDir()
	s, url := startNode(t, dir)
	ctx := context.Background()
	const initial = 3000
	c := newBig(t, url, initial)
	w := &writer{table: "big", lo: 1, hi: 500, next: 100_000, model: map[int64]row{}}
	for id := w.lo; id < w.hi; id++ {
		w.model[id] = row{v: id % 97, u: id}
	}
	rng := rand.New(rand.NewSource(7))

	jobID, release, alterErr := movePaused(ctx, t, url)
	defer release(nil)
	// Mid-move: the job is running and part done; the table is written;
	// other schema changes of it wait.
	var status string
	var frac float64
	if err := c.QueryRow(ctx, "SELECT status, fraction_completed FROM cairn_catalog.jobs WHERE job_id = $1", jobID).Scan(&status, &frac); err != nil {
		t.Fatal(err)
	}
	if status != "running" || frac <= 0 || frac >= 1 {
		t.Errorf("job %d mid-move: %s %v, want running strictly between 0 and 1", jobID, status, frac)
	}
	for range 30 {
		if err := w.step(ctx, c, rng); err != nil {
			t.Fatal(err)
		}
	}
	moved := fmt.Sprintf(`table "big" is being moved by job %d`, jobID)
	for _, sql := range []string{
		"ALTER TABLE big ADD COLUMN z int",
		"DROP TABLE big",
		"ALTER TABLE big SET (colocated = false)",
		"CREATE INDEX big_note ON big (note)",
		"CREATE TABLE big_ref (id int PRIMARY KEY, big_id int REFERENCES big (id))",
	} {
		if _, err := c.Exec(ctx, sql); sqlState(err) != "55000" || !strings.Contains(err.Error(), moved) {
			t.Errorf("%s during the move: want 55000 %q, got %v", sql, moved, err)
		}
	}
	moving := moveState(t, s, c, "big")
	if moving.Move == nil || moving.Move.JobID != jobID || !moving.Colocated {
		t.Fatalf("descriptor mid-move: colocated %v, move %+v", moving.Colocated, moving.Move)
	}
	target := rowenc.GroupSpan(moving.Move.GroupID)
	if n := spanKeys(t, s, target); n == 0 {
		t.Fatalf("the move's target group holds no key after two pages")
	}

	// The node dies: the job stops where it is.
	release(ddl.ErrJobDied)
	if err := <-alterErr; err == nil {
		t.Fatal("the ALTER whose job died succeeded")
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	s, url = startNode(t, dir)
	defer s.Stop(context.Background())
	c = connect(t, url, "co")
	// The table is where it was, writes keep both places in step, and
	// other schema changes still wait until someone moves the table.
	for range 30 {
		if err := w.step(ctx, c, rng); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Exec(ctx, "ALTER TABLE big ADD COLUMN z int"); sqlState(err) != "55000" {
		t.Errorf("ADD COLUMN with an orphaned move: want 55000, got %v", err)
	}
	checkTable(t, c, "big", initial, []*writer{w})
	time.Sleep(jobs.OrphanAfter + 200*time.Millisecond)
	mustExec(t, c, "ALTER TABLE big SET (colocated = false)")
	after := moveState(t, s, c, "big")
	if after.Move != nil || after.Colocated || after.GroupID == moving.Move.GroupID {
		t.Errorf("after the new move: colocated %v group %d move %+v (the orphan's group %d)", after.Colocated, after.GroupID, after.Move, moving.Move.GroupID)
	}
	if n := spanKeys(t, s, target); n != 0 {
		t.Errorf("the orphaned move's target still holds %d keys", n)
	}
	got := jobRows(t, c)
	if len(got) != 2 || !strings.HasPrefix(got[0], "failed: ") || !strings.Contains(got[0], "node running the job stopped") || got[1] != "succeeded: " {
		t.Errorf("jobs: %q", got)
	}
	for range 30 {
		if err := w.step(ctx, c, rng); err != nil {
			t.Fatal(err)
		}
	}
	checkTable(t, c, "big", initial, []*writer{w})
	mustExec(t, c, "ALTER TABLE big ADD COLUMN z int")
}

// TestOnlineMoveCanceled cancels the ALTER mid-copy: the job ends
// canceled, the table is where it was with no move and no target left.
func TestOnlineMoveCanceled(t *testing.T) {
	s, url := startNode(t, t.TempDir())
	defer s.Stop(context.Background())
	ctx := context.Background()
	const initial = 3000
	c := newBig(t, url, initial)

	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	_, release, alterErr := movePaused(actx, t, url)
	defer release(nil)
	moving := moveState(t, s, c, "big")
	if moving.Move == nil {
		t.Fatal("no move in the descriptor mid-move")
	}
	// pgx sends a cancel request for the cancelled context; the hook
	// returns once the request has had time to reach the session.
	cancel()
	time.Sleep(300 * time.Millisecond)
	release(nil)
	if err := <-alterErr; err == nil {
		t.Fatal("the cancelled ALTER succeeded")
	}
	// The roll-back runs after the statement's context ended: wait for
	// the job to end.
	var status string
	for deadline := time.Now().Add(10 * time.Second); ; {
		if err := c.QueryRow(ctx, "SELECT status FROM cairn_catalog.jobs WHERE job_type = 'MOVE TABLE'").Scan(&status); err != nil {
			t.Fatal(err)
		}
		if status != "running" || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if status != "canceled" {
		t.Errorf("job status %q, want canceled", status)
	}
	after := moveState(t, s, c, "big")
	if after.Move != nil || !after.Colocated {
		t.Errorf("after the cancel: colocated %v move %+v", after.Colocated, after.Move)
	}
	if n := spanKeys(t, s, rowenc.GroupSpan(moving.Move.GroupID)); n != 0 {
		t.Errorf("the cancelled move's target still holds %d keys", n)
	}
	checkTable(t, c, "big", initial, nil)
	mustExec(t, c, "ALTER TABLE big ADD COLUMN z int")
}

// TestOnlineMoveCopyDuring: a COPY into a table mid-move goes the
// transactional way (docs/colocation.md), so its rows are written to both
// storages and are all there once the move has switched the table over.
func TestOnlineMoveCopyDuring(t *testing.T) {
	s, url := startNode(t, t.TempDir())
	defer s.Stop(context.Background())
	ctx := context.Background()
	const initial, copied = 3000, 200
	c := newBig(t, url, initial)

	_, release, alterErr := movePaused(ctx, t, url)
	defer release(nil)
	rows := make([][]any, copied)
	for i := range rows {
		id := initial + 1 + i
		rows[i] = []any{id, id % 97, id, fmt.Sprintf("c%d", id)}
	}
	n, err := c.CopyFrom(ctx, pgx.Identifier{"big"}, []string{"id", "v", "u", "note"}, pgx.CopyFromRows(rows))
	if err != nil || n != copied {
		t.Fatalf("COPY mid-move: %d rows, %v", n, err)
	}
	release(nil)
	if err := <-alterErr; err != nil {
		t.Fatalf("the move: %v", err)
	}
	if after := moveState(t, s, c, "big"); after.Move != nil || after.Colocated {
		t.Fatalf("after the move: colocated %v move %+v", after.Colocated, after.Move)
	}
	// Every row, and the copied ones alone, read from the new storage.
	for _, q := range []string{
		"SELECT count(*) FROM big",
		"SELECT count(*) FROM big WHERE v >= 0",
		"SELECT count(*) FROM big WHERE note LIKE 'c%'",
	} {
		var got int
		if err := c.QueryRow(ctx, q).Scan(&got); err != nil {
			t.Fatal(err)
		}
		want := initial + copied
		if strings.Contains(q, "LIKE") {
			want = copied
		}
		if got != want {
			t.Errorf("%s = %d after the move, want %d", q, got, want)
		}
	}
}

// spanKeys counts the keys of sp.
func spanKeys(t *testing.T, s *server.Server, sp kvpb.Span) int {
	t.Helper()
	kvs, err := s.DB().Scan(context.Background(), sp.Key, sp.EndKey, 0)
	if err != nil {
		t.Fatal(err)
	}
	return len(kvs)
}
