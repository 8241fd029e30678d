package ddl_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/server"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/ddl"
	"github.com/cairn-db/cairn/sql/jobs"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

// Online CREATE INDEX (index_job.go) over pgwire against a whole node:
// writers run through every state of the build, and afterwards the index
// holds exactly one entry per row.

// indexWriters run transactions against table t (k, v, w) on keys of
// their own (k % n == i) until stopped, counting commits and 40001s.
type indexWriters struct {
	commits  atomic.Int64
	retries  atomic.Int64
	stop     chan struct{}
	wg       sync.WaitGroup
	errs     chan error
	conflict string // a SQLSTATE the writers count as refused, not as failure
	refused  atomic.Int64
}

func startIndexWriters(t *testing.T, url string, n int, initial int64, conflict string) *indexWriters {
	ws := &indexWriters{stop: make(chan struct{}), errs: make(chan error, n), conflict: conflict}
	ctx := context.Background()
	for i := range n {
		c := connect(t, url, "postgres")
		ws.wg.Add(1)
		go func() {
			defer ws.wg.Done()
			rng := rand.New(rand.NewSource(int64(i)))
			next := initial + int64(i) + 1
			for next%int64(n) != int64(i) {
				next++
			}
			for {
				select {
				case <-ws.stop:
					return
				default:
				}
				err := ws.one(ctx, c, i, n, rng, &next, initial)
				switch {
				case err == nil:
					ws.commits.Add(1)
				case sqlState(err) == "40001":
					ws.retries.Add(1)
				case conflict != "" && sqlState(err) == conflict:
					ws.refused.Add(1)
				default:
					ws.errs <- fmt.Errorf("writer %d: %w", i, err)
					return
				}
			}
		}()
	}
	return ws
}

// one runs one transaction: writer 0 in implicit ones over the simple
// protocol, odd writers at SERIALIZABLE, the others at READ COMMITTED;
// each inserts a row, updates one of its rows' v, and now and then
// deletes one.
func (ws *indexWriters) one(ctx context.Context, c *pgx.Conn, i, n int, rng *rand.Rand, next *int64, initial int64) error {
	own := func() int64 {
		k := rng.Int63n(initial + 1)
		return k - k%int64(n) + int64(i)
	}
	k := *next
	v := rng.Int63n(1000)
	if i == 0 {
		if _, err := c.Exec(ctx, "INSERT INTO t VALUES ($1, $2, $3)", pgx.QueryExecModeSimpleProtocol, k, v, k); err != nil {
			return err
		}
		*next += int64(n)
		_, err := c.Exec(ctx, "UPDATE t SET v = v + 1 WHERE k = $1", pgx.QueryExecModeSimpleProtocol, own())
		return err
	}
	iso := pgx.ReadCommitted
	if i%2 == 1 {
		iso = pgx.Serializable
	}
	tx, err := c.BeginTx(ctx, pgx.TxOptions{IsoLevel: iso})
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "INSERT INTO t VALUES ($1, $2, $3)", k, v, k); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "UPDATE t SET v = $2 WHERE k = $1", own(), rng.Int63n(1000)); err != nil {
		return err
	}
	if rng.Intn(4) == 0 {
		if _, err := tx.Exec(ctx, "DELETE FROM t WHERE k = $1", own()); err != nil {
			return err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	*next += int64(n)
	return nil
}

// waitCommits waits until the writers have committed d more transactions.
func (ws *indexWriters) waitCommits(d int64) error {
	want := ws.commits.Load() + d
	deadline := time.Now().Add(30 * time.Second)
	for ws.commits.Load() < want {
		if time.Now().After(deadline) {
			return fmt.Errorf("writers stuck at %d commits (want %d)", ws.commits.Load(), want)
		}
		select {
		case err := <-ws.errs:
			ws.errs <- err
			return err
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}

func (ws *indexWriters) finish(t *testing.T) {
	t.Helper()
	close(ws.stop)
	ws.wg.Wait()
	close(ws.errs)
	for err := range ws.errs {
		t.Fatal(err)
	}
}

// checkIndexExact reads every row of t and the index's whole span and
// fails unless the index holds exactly the rows' entries.
func checkIndexExact(t *testing.T, s *server.Server, c *pgx.Conn, index string) {
	t.Helper()
	ctx := context.Background()
	desc := moveState(t, s, c, "t")
	ix := desc.IndexByName(index)
	if ix == nil || ix.State != catalog.IndexPublic || ix.JobID != 0 {
		t.Fatalf("index %s: %+v", index, ix)
	}
	layout, err := desc.Layout()
	if err != nil {
		t.Fatal(err)
	}
	il := layout.Index(uint32(ix.ID))
	rows, err := c.Query(ctx, "SELECT k, v, w FROM t")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	n := 0
	for rows.Next() {
		var k, v, w int64
		if err := rows.Scan(&k, &v, &w); err != nil {
			t.Fatal(err)
		}
		ent, err := layout.EncodeIndexEntry(il, []types.Datum{types.DInt(k), types.DInt(v), types.DInt(w)})
		if err != nil {
			t.Fatal(err)
		}
		want[string(ent.Key)] = true
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	sp := layout.IndexSpan(il)
	kvs, err := s.DB().Scan(ctx, sp.Key, sp.EndKey, 0)
	if err != nil {
		t.Fatal(err)
	}
	extra, entries := 0, 0
	keyID := il.KeyID
	if keyID == 0 {
		keyID = il.ID
	}
	for _, kv := range kvs {
		// A hash-partitioned table's local index shares its buckets with
		// the rows: its span holds them too.
		if p, _, err := rowenc.DecodeKeyPrefix(kv.Key); err != nil || p.Index != keyID {
			continue
		}
		entries++
		if !want[string(kv.Key)] {
			extra++
		}
		delete(want, string(kv.Key))
	}
	if extra != 0 || len(want) != 0 {
		t.Fatalf("index %s over %d rows: %d entries, %d extra, %d rows missing", index, n, entries, extra, len(want))
	}
	t.Logf("index %s: %d entries for %d rows", index, entries, n)
}

func setIndexHooks(t *testing.T, atState func(int64, catalog.IndexState) error, afterPage func(int64, int64) error) {
	prevS, prevP := ddl.SetIndexHooks(atState, afterPage)
	t.Cleanup(func() { ddl.SetIndexHooks(prevS, prevP) })
}

// TestOnlineCreateIndexUnderWriters runs writers (implicit, READ
// COMMITTED and SERIALIZABLE transactions) through every state of a
// CREATE INDEX: none may fail, and the index must be exact afterwards.
func TestOnlineCreateIndexUnderWriters(t *testing.T) {
	s, url := startNode(t, t.TempDir())
	c := connect(t, url, "postgres")
	const initial = 6000
	mustExec(t, c, "CREATE TABLE t (k INT PRIMARY KEY, v INT, w INT)")
	mustExec(t, c, fmt.Sprintf("INSERT INTO t SELECT g, g %% 1000, g FROM generate_series(1, %d) g", initial))
	ws := startIndexWriters(t, url, 4, initial, "")
	var states []catalog.IndexState
	var pages atomic.Int64
	setIndexHooks(t, func(_ int64, st catalog.IndexState) error {
		states = append(states, st)
		return ws.waitCommits(20)
	}, func(_ int64, _ int64) error {
		if pages.Add(1) <= 2 {
			return ws.waitCommits(10)
		}
		return nil
	})
	if err := ws.waitCommits(10); err != nil {
		t.Fatal(err)
	}
	mustExec(t, c, "CREATE INDEX t_v ON t (v)")
	if err := ws.waitCommits(10); err != nil {
		t.Fatal(err)
	}
	ws.finish(t)
	t.Logf("writers: %d commits, %d 40001; states %v; backfill pages %d", ws.commits.Load(), ws.retries.Load(), states, pages.Load())
	if got := fmt.Sprint(states); got != "[delete_only write_only backfilling validating]" {
		t.Errorf("states seen: %s", got)
	}
	// The hook runs at least once mid-backfill (every 2,000 rows read)
	// and once when the reads are done, before any entry is written.
	if pages.Load() < 2 {
		t.Errorf("backfill progress reports %d: the writers did not run through the backfill", pages.Load())
	}
	if n := ws.retries.Load(); n != 0 {
		t.Errorf("%d writer transactions failed with 40001 during the build", n)
	}
	checkIndexExact(t, s, c, "t_v")
	var status string
	var frac float64
	if err := c.QueryRow(context.Background(), "SELECT status, fraction_completed FROM cairn_catalog.jobs WHERE job_type = 'CREATE INDEX'").Scan(&status, &frac); err != nil {
		t.Fatal(err)
	}
	if status != "succeeded" || frac != 1 {
		t.Errorf("job: %s %v", status, frac)
	}
}

// TestOnlineCreateUniqueIndexDuplicate builds a unique index over rows
// with a duplicate, and while writers insert a duplicate of an existing
// row during the build: the build fails with 23505 naming the key, the
// index is gone from the descriptor and its storage is empty, and the job
// is failed.
func TestOnlineCreateUniqueIndexDuplicate(t *testing.T) {
	s, url := startNode(t, t.TempDir())
	c := connect(t, url, "postgres")
	ctx := context.Background()
	mustExec(t, c, "CREATE TABLE t (k INT PRIMARY KEY, v INT, w INT)")
	mustExec(t, c, "INSERT INTO t SELECT g, g, g FROM generate_series(1, 3000) g")
	mustExec(t, c, "UPDATE t SET v = 1234 WHERE k = 2999")

	before := moveState(t, s, c, "t")
	_, err := c.Exec(ctx, "CREATE UNIQUE INDEX t_v ON t (v)")
	if sqlState(err) != "23505" || !strings.Contains(err.Error(), `could not create unique index "t_v"`) {
		t.Fatalf("CREATE UNIQUE INDEX over a duplicate: %v", err)
	}
	if detail := pgDetail(err); detail != "Key (v)=(1234) is duplicated." {
		t.Errorf("detail %q", detail)
	}
	after := moveState(t, s, c, "t")
	if len(after.Indexes) != len(before.Indexes) {
		t.Fatalf("indexes after the failed build: %+v", after.Indexes)
	}
	assertNoIndexStorage(t, s, before, after)
	var status, jerr string
	if err := c.QueryRow(ctx, "SELECT status, error FROM cairn_catalog.jobs WHERE job_type = 'CREATE INDEX'").Scan(&status, &jerr); err != nil {
		t.Fatal(err)
	}
	if status != "failed" || !strings.Contains(jerr, "could not create unique index") {
		t.Errorf("job: %s %q", status, jerr)
	}
	// The name is free again and a unique index builds once the
	// duplicate is gone.
	mustExec(t, c, "UPDATE t SET v = 2999 WHERE k = 2999")
	mustExec(t, c, "CREATE UNIQUE INDEX t_v ON t (v)")
	checkIndexExact(t, s, c, "t_v")
	if _, err := c.Exec(ctx, "INSERT INTO t VALUES (5000, 7, 7)"); sqlState(err) != "23505" {
		t.Errorf("insert of a duplicate after the build: %v", err)
	}
}

// TestOnlineCreateUniqueIndexRacingDuplicate inserts, while the index is
// write-only and before the backfill, a row whose key duplicates an
// existing row's: the writer's entry shadows the backfill's, and the
// validation finds the duplicate.
func TestOnlineCreateUniqueIndexRacingDuplicate(t *testing.T) {
	s, url := startNode(t, t.TempDir())
	c := connect(t, url, "postgres")
	other := connect(t, url, "postgres")
	ctx := context.Background()
	mustExec(t, c, "CREATE TABLE t (k INT PRIMARY KEY, v INT, w INT)")
	mustExec(t, c, "INSERT INTO t SELECT g, g, g FROM generate_series(1, 3000) g")
	before := moveState(t, s, c, "t")
	setIndexHooks(t, func(_ int64, st catalog.IndexState) error {
		if st == catalog.IndexBackfilling {
			// Write-only and before the backfill: the unique check of
			// this insert cannot see row 17's entry yet.
			_, err := other.Exec(ctx, "INSERT INTO t VALUES (9000, 17, 0)")
			return err
		}
		return nil
	}, nil)
	_, err := c.Exec(ctx, "CREATE UNIQUE INDEX t_v ON t (v)")
	if sqlState(err) != "23505" || pgDetail(err) != "Key (v)=(17) is duplicated." {
		t.Fatalf("CREATE UNIQUE INDEX racing a duplicate: %v (%s)", err, pgDetail(err))
	}
	after := moveState(t, s, c, "t")
	if len(after.Indexes) != len(before.Indexes) {
		t.Fatalf("indexes after the failed build: %+v", after.Indexes)
	}
	assertNoIndexStorage(t, s, before, after)
}

// assertNoIndexStorage fails if any key of t's group belongs to an index
// that neither descriptor names.
func assertNoIndexStorage(t *testing.T, s *server.Server, before, after *catalog.Table) {
	t.Helper()
	named := map[uint32]bool{uint32(after.PrimaryIndex.ID): true, after.PrimaryIndex.StorageID: true}
	for _, d := range []*catalog.Table{before, after} {
		for _, ix := range d.Indexes {
			named[uint32(ix.ID)], named[ix.StorageID] = true, true
		}
	}
	for id, n := range keysByIndex(t, s, after) {
		if !named[id] {
			t.Errorf("%d keys left under index or storage ID %d", n, id)
		}
	}
}

// TestOnlineCreateIndexCanceled cancels a build mid-backfill with CANCEL
// JOB: the statement fails with 57014, the index is rolled back.
func TestOnlineCreateIndexCanceled(t *testing.T) {
	s, url := startNode(t, t.TempDir())
	c := connect(t, url, "postgres")
	other := connect(t, url, "postgres")
	ctx := context.Background()
	mustExec(t, c, "CREATE TABLE t (k INT PRIMARY KEY, v INT, w INT)")
	mustExec(t, c, "INSERT INTO t SELECT g, g, g FROM generate_series(1, 5000) g")
	before := moveState(t, s, c, "t")
	paused := make(chan int64, 1)
	release := make(chan struct{})
	var once sync.Once
	setIndexHooks(t, nil, func(job int64, _ int64) error {
		once.Do(func() { paused <- job; <-release })
		return nil
	})
	done := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, "CREATE INDEX t_v ON t (v)")
		done <- err
	}()
	job := <-paused
	var phase string
	var tuples int64
	if err := other.QueryRow(ctx, "SELECT phase, tuples_done FROM pg_stat_progress_create_index WHERE relid = 't'::regclass").Scan(&phase, &tuples); err != nil {
		t.Fatal(err)
	}
	if phase != "building index: scanning table" {
		t.Errorf("phase %q tuples %d", phase, tuples)
	}
	mustExec(t, other, fmt.Sprintf("CANCEL JOB %d", job))
	close(release)
	if err := <-done; sqlState(err) != "57014" {
		t.Fatalf("canceled CREATE INDEX: %v", err)
	}
	var status string
	if err := other.QueryRow(ctx, "SELECT status FROM cairn_catalog.jobs WHERE job_id = $1", job).Scan(&status); err != nil {
		t.Fatal(err)
	}
	if status != string(jobs.StatusCanceled) {
		t.Errorf("job status %s", status)
	}
	if _, err := other.Exec(ctx, fmt.Sprintf("CANCEL JOB %d", job)); sqlState(err) != "55000" {
		t.Errorf("CANCEL JOB of a finished job: %v", err)
	}
	if _, err := other.Exec(ctx, "CANCEL JOB 987654"); sqlState(err) != "42704" {
		t.Errorf("CANCEL JOB of no job: %v", err)
	}
	tx, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "CREATE INDEX CONCURRENTLY t_w ON t (w)"); sqlState(err) != "25001" {
		t.Errorf("CREATE INDEX CONCURRENTLY in a block: %v", err)
	}
	_ = tx.Rollback(ctx)
	after := moveState(t, s, c, "t")
	if len(after.Indexes) != len(before.Indexes) {
		t.Fatalf("indexes after the canceled build: %+v", after.Indexes)
	}
	assertNoIndexStorage(t, s, before, after)
}

// keysByIndex counts the table data keys of desc's table by the index
// (or storage) ID they carry, over the whole table keyspace (a rolled-back
// global index had a group of its own that no descriptor names now).
func keysByIndex(t *testing.T, s *server.Server, desc *catalog.Table) map[uint32]int {
	t.Helper()
	kvs, err := s.DB().Scan(context.Background(), keys.TableDataMin, []byte{0xff, 0xff}, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint32]int{}
	for _, kv := range kvs {
		if p, _, err := rowenc.DecodeKeyPrefix(kv.Key); err == nil && p.Table == uint32(desc.ID) {
			out[p.Index]++
		}
	}
	return out
}

// pgDetail is a PostgreSQL error's DETAIL.
func pgDetail(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Detail
	}
	return ""
}

// TestOnlineCreateIndexOrphanResumed: the job stops after its backfill
// as if its node died, the node restarts, and its orphan check takes the
// job over (jobs.Claim) and finishes it from the validating state: the
// index is public and exact, with the rows written while it was orphaned.
func TestOnlineCreateIndexOrphanResumed(t *testing.T) {
	defer func(o, h time.Duration) { jobs.OrphanAfter, jobs.HeartbeatEvery = o, h }(jobs.OrphanAfter, jobs.HeartbeatEvery)
	jobs.OrphanAfter, jobs.HeartbeatEvery = time.Second, 50*time.Millisecond
	dir := t.TempDir()
	s, url := startNode(t, dir)
	ctx := context.Background()
	c := connect(t, url, "postgres")
	mustExec(t, c, "CREATE TABLE t (k INT PRIMARY KEY, v INT, w INT)")
	mustExec(t, c, "INSERT INTO t SELECT g, g, g FROM generate_series(1, 5000) g")
	setIndexHooks(t, func(_ int64, st catalog.IndexState) error {
		if st == catalog.IndexValidating {
			return ddl.ErrJobDied // after the backfill wrote every entry
		}
		return nil
	}, nil)
	if _, err := c.Exec(ctx, "CREATE INDEX t_v ON t (v)"); err == nil {
		t.Fatal("the dying build succeeded")
	}
	mid := moveState(t, s, c, "t")
	ix := mid.IndexByName("t_v")
	if ix == nil || ix.State != catalog.IndexValidating {
		t.Fatalf("mid-build index: %+v", ix)
	}
	if n := keysByIndex(t, s, mid)[ix.StorageID]; n != 5000 {
		t.Fatalf("the backfill wrote %d entries, want 5000", n)
	}
	setIndexHooks(t, nil, nil)
	c.Close(ctx)
	s.Stop(ctx)
	s, url = startNode(t, dir)
	c = connect(t, url, "postgres")
	// Writers keep writing meanwhile (they maintain the half-built index).
	mustExec(t, c, "INSERT INTO t VALUES (6000, 6, 6)")
	status, jerr := waitIndexJob(t, c, 60*time.Second)
	if status != "succeeded" {
		t.Fatalf("orphaned job: %s %q", status, jerr)
	}
	mustExec(t, c, "INSERT INTO t VALUES (6001, 7, 7)")
	checkIndexExact(t, s, c, "t_v")
	var n int
	if err := c.QueryRow(ctx, "SELECT count(*) FROM t WHERE v = 6").Scan(&n); err != nil || n != 2 {
		t.Fatalf("rows with v = 6: %d %v", n, err)
	}
}

// waitIndexJob waits until the CREATE INDEX job is no longer running and
// returns its status and error.
func waitIndexJob(t *testing.T, c *pgx.Conn, within time.Duration) (status, jerr string) {
	t.Helper()
	for deadline := time.Now().Add(within); ; {
		if err := c.QueryRow(context.Background(), "SELECT status, coalesce(error, '') FROM cairn_catalog.jobs WHERE job_type = 'CREATE INDEX'").Scan(&status, &jerr); err != nil {
			t.Fatal(err)
		}
		if status != "running" || time.Now().After(deadline) {
			return status, jerr
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestOnlineCreateIndexResumedOnAnotherNode: in a three-node cluster in
// this process, the build's coordinator (node 1) dies in the middle of
// the backfill and is stopped; another node claims the orphaned job and
// runs the build to the end while writers go on through node 2: the index
// is public and exact, and the planner reads it.
func TestOnlineCreateIndexResumedOnAnotherNode(t *testing.T) {
	defer func(o, h, d time.Duration) { jobs.OrphanAfter, jobs.HeartbeatEvery, ddl.DrainTimeout = o, h, d }(jobs.OrphanAfter, jobs.HeartbeatEvery, ddl.DrainTimeout)
	// The dead node's drain record stays until it is a minute old:
	// the resumed build's drains wait out DrainTimeout, then go on.
	jobs.OrphanAfter, jobs.HeartbeatEvery, ddl.DrainTimeout = time.Second, 50*time.Millisecond, 3*time.Second
	ctx := context.Background()
	servers := startCluster(t, 3)
	url := func(i int) string {
		return fmt.Sprintf("postgres://postgres@%s/%%s?sslmode=disable", servers[i].Addr())
	}
	c1 := connect(t, url(0), "postgres")
	mustExec(t, c1, "CREATE TABLE t (k INT PRIMARY KEY, v INT, w INT)")
	mustExec(t, c1, "INSERT INTO t SELECT g, g % 100, g FROM generate_series(1, 5000) g")
	var died atomic.Bool
	setIndexHooks(t, nil, func(_ int64, rows int64) error {
		if rows > 0 && died.CompareAndSwap(false, true) {
			return ddl.ErrJobDied
		}
		return nil
	})
	if _, err := c1.Exec(ctx, "CREATE INDEX t_v ON t (v)"); err == nil {
		t.Fatal("the dying build succeeded")
	}
	if !died.Load() {
		t.Fatal("the build never reached its backfill")
	}
	c1.Close(ctx)
	if err := servers[0].Stop(ctx); err != nil {
		t.Fatal(err)
	}
	servers[0] = nil
	c2 := connect(t, url(1), "postgres")
	mustExec(t, c2, "INSERT INTO t VALUES (6000, 6, 6)")
	mustExec(t, c2, "UPDATE t SET v = 6 WHERE k = 7")
	status, jerr := waitIndexJob(t, c2, 120*time.Second)
	if status != "succeeded" {
		t.Fatalf("orphaned job on the surviving nodes: %s %q", status, jerr)
	}
	checkIndexExact(t, servers[1], c2, "t_v")
	var n int
	if err := c2.QueryRow(ctx, "SELECT count(*) FROM t WHERE v = 6").Scan(&n); err != nil || n != 52 {
		t.Fatalf("rows with v = 6: %d %v (want 52)", n, err)
	}
}

// startCluster starts n members of one replicated cluster in this
// process; the test's cleanup stops those still running (nil entries
// were stopped by the test).
func startCluster(t *testing.T, n int) []*server.Server {
	t.Helper()
	ctx := context.Background()
	var lns []net.Listener
	var join []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		join = append(join, ln.Addr().String())
	}
	servers := make([]*server.Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			servers[i], errs[i] = server.Start(ctx, server.Config{Insecure: true, Join: join, RPCAddr: join[i], RPCListener: lns[i],
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d: %v", i+1, err)
		}
	}
	t.Cleanup(func() {
		for _, s := range servers {
			if s != nil {
				_ = s.Stop(ctx)
			}
		}
	})
	return servers
}

// TestOnlineBackfillSortedSpilled builds an index of a table split into
// several tablets with a sort budget far below the entries' size: the
// backfill reads one piece per tablet, spills sorted runs, merges them,
// and the index is exact; a unique build over a duplicate whose two rows
// live in different tablets fails on the sorted stream's adjacent keys.
func TestOnlineBackfillSortedSpilled(t *testing.T) {
	defer ddl.SetIndexBuildMemory(ddl.SetIndexBuildMemory(64 << 10))
	s, url := startNode(t, t.TempDir())
	c := connect(t, url, "postgres")
	ctx := context.Background()
	mustExec(t, c, "CREATE TABLE t (k INT PRIMARY KEY, v INT, w INT) SPLIT INTO 4 TABLETS")
	mustExec(t, c, "INSERT INTO t SELECT g, (g * 7919) % 20000, g FROM generate_series(1, 20000) g")
	mustExec(t, c, "CREATE INDEX t_v ON t (v)")
	pieces, runs, entries := ddl.LastBackfill()
	t.Logf("backfill: %d pieces, %d sorted runs, %d entries, %d SSTs", pieces, runs, entries, ddl.LastBackfillSSTs())
	if pieces < 4 || runs < 2 || entries != 20000 {
		t.Errorf("backfill: %d pieces (want >= 4), %d runs (want >= 2), %d entries (want 20000)", pieces, runs, entries)
	}
	// The sorters spilled, so they filled their shares of the budget:
	// their high-water mark (what bench/indexbuild reports from the log)
	// is at least half of it. It may pass the budget: a spilled sort's
	// merge reserves a read buffer per run past work_mem
	// (rowcontainer.EntrySorter.Range), hundreds of runs under this
	// test's 64 KiB.
	if peak, limit := ddl.LastBackfillSortMemory(); limit != 64<<10 || peak < limit/2 {
		t.Errorf("sort memory high-water mark %d of a budget of %d, want at least half the budget of %d", peak, limit, 64<<10)
	}
	// The index's fresh storage is one tablet, and 20,000 entries are far
	// under an SST's size: however many pieces and runs, one SST (cut
	// per batch or per run, a sorted stream is many small files that
	// every later scan of the index pays for in seeks on an hdd).
	if n := ddl.LastBackfillSSTs(); n != 1 {
		t.Errorf("backfill ingested %d SSTs, want 1", n)
	}
	checkIndexExact(t, s, c, "t_v")
	var n int64
	if err := c.QueryRow(ctx, "SELECT count(*) FROM t WHERE v = 7919").Scan(&n); err != nil || n != 1 {
		t.Errorf("count through the index: %d %v", n, err)
	}
	// A duplicate near the end of the sorted stream (w = 19990 in the
	// rows 3, 19990 and 19999, in different tablets): it is found while
	// the index's one SST is being cut, which is dropped, not ingested.
	mustExec(t, c, "UPDATE t SET w = 19990 WHERE k = 19999")
	mustExec(t, c, "UPDATE t SET w = 19990 WHERE k = 3")
	var ingested atomic.Int32
	defer ddl.SetBeforeIngest(ddl.SetBeforeIngest(func(int64, []byte, []byte) error {
		ingested.Add(1)
		return nil
	}))
	_, err := c.Exec(ctx, "CREATE UNIQUE INDEX t_w ON t (w)")
	if sqlState(err) != "23505" || pgDetail(err) != "Key (w)=(19990) is duplicated." {
		t.Fatalf("unique build over a duplicate: %v (%s)", err, pgDetail(err))
	}
	if n := ingested.Load(); n != 0 {
		t.Errorf("a unique build failing on its one SST ingested %d SSTs", n)
	}
}

// TestOnlineBackfillSplitsIndexTablet: a build splits the tablet of a
// global index as it fills it (at the first key of the next SST, every
// backfillSplitBytes), so the split queue never has to read a tablet the
// build filled to find its middle; a local index of a distributed table,
// whose entries share the rows' tablets, is not split at its entries.
func TestOnlineBackfillSplitsIndexTablet(t *testing.T) {
	defer ddl.SetBackfillSSTBytes(ddl.SetBackfillSSTBytes(16 << 10))
	defer ddl.SetBackfillSplitBytes(ddl.SetBackfillSplitBytes(64 << 10))
	s, url := startNode(t, t.TempDir())
	c := connect(t, url, "postgres")
	mustExec(t, c, "CREATE TABLE t (k INT PRIMARY KEY, v INT, w INT)")
	mustExec(t, c, "INSERT INTO t SELECT g, (g * 7919) % 20000, g FROM generate_series(1, 20000) g")
	mustExec(t, c, "CREATE INDEX t_v ON t (v)")
	splits, ssts := ddl.LastBackfillSplits(), ddl.LastBackfillSSTs()
	var tablets int
	if err := c.QueryRow(context.Background(),
		"SELECT count(*) FROM cairn_catalog.tablets WHERE table_name = 't' AND index_name = 't_v'").Scan(&tablets); err != nil {
		t.Fatal(err)
	}
	t.Logf("t_v: %d SSTs, %d splits, %d tablets", ssts, splits, tablets)
	// About 600 KB of entries: a split every 64 KiB.
	if splits < 4 || tablets < splits+1 {
		t.Errorf("t_v: %d splits, %d tablets (want >= 4 splits, a tablet more than splits)", splits, tablets)
	}
	checkIndexExact(t, s, c, "t_v")

	mustExec(t, c, "SET citus.shard_count = 4")
	mustExec(t, c, "SELECT create_distributed_table('t', 'k')")
	mustExec(t, c, "CREATE INDEX t_w ON t (w)")
	if n := ddl.LastBackfillSplits(); n != 0 {
		t.Errorf("a local index of a distributed table: %d splits at its entries, want 0", n)
	}
	checkIndexExact(t, s, c, "t_w")
}

// TestOnlineIndexDistributedTable builds an index of a Citus-style
// distributed table (hash-partitioned into shards, its other indexes
// local): the backfill reads one piece per shard tablet, and every entry
// lands in the same tablet as its row.
func TestOnlineIndexDistributedTable(t *testing.T) {
	s, url := startNode(t, t.TempDir())
	c := connect(t, url, "postgres")
	ctx := context.Background()
	mustExec(t, c, "CREATE TABLE t (k INT PRIMARY KEY, v INT, w INT)")
	mustExec(t, c, "INSERT INTO t SELECT g, g % 500, g FROM generate_series(1, 8000) g")
	mustExec(t, c, "SET citus.shard_count = 4")
	mustExec(t, c, "SELECT create_distributed_table('t', 'k')")
	mustExec(t, c, "CREATE INDEX t_v ON t (v)")
	pieces, _, entries := ddl.LastBackfill()
	if pieces < 4 || entries != 8000 {
		t.Errorf("backfill: %d pieces (want >= 4, one per shard), %d entries", pieces, entries)
	}
	checkIndexExact(t, s, c, "t_v")
	desc := moveState(t, s, c, "t")
	layout, err := desc.Layout()
	if err != nil {
		t.Fatal(err)
	}
	il := layout.Index(uint32(desc.IndexByName("t_v").ID))
	if !il.Local {
		t.Fatalf("t_v is not local")
	}
	// Each entry's tablet is its row's tablet.
	rows, err := c.Query(ctx, "SELECT k, v, w FROM t")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for rows.Next() {
		var k, v, w int64
		if err := rows.Scan(&k, &v, &w); err != nil {
			t.Fatal(err)
		}
		row := []types.Datum{types.DInt(k), types.DInt(v), types.DInt(w)}
		pk, err := layout.PrimaryKey(nil, row)
		if err != nil {
			t.Fatal(err)
		}
		ent, err := layout.EncodeIndexEntry(il, row)
		if err != nil {
			t.Fatal(err)
		}
		a, err := s.DB().TabletCache().Lookup(ctx, pk, false)
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.DB().TabletCache().Lookup(ctx, ent.Key, false)
		if err != nil {
			t.Fatal(err)
		}
		if a.TabletID != b.TabletID {
			t.Fatalf("row %d in tablet %d, its entry in tablet %d", k, a.TabletID, b.TabletID)
		}
		checked++
	}
	if checked != 8000 {
		t.Fatalf("checked %d rows", checked)
	}
}

// TestOnlineBackfillSplitDuringIngest builds an index while writers
// change the table, its entries cut into many small SSTs; before the
// second SST is sent, the tablet it was cut for splits inside its span.
// The SST is cut again at the new bound (each tablet ingests its part)
// and the index is exact.
func TestOnlineBackfillSplitDuringIngest(t *testing.T) {
	defer ddl.SetBackfillSSTBytes(ddl.SetBackfillSSTBytes(32 << 10))
	s, url := startNode(t, t.TempDir())
	c := connect(t, url, "postgres")
	ctx := context.Background()
	const initial = 20000
	mustExec(t, c, "CREATE TABLE t (k INT PRIMARY KEY, v INT, w INT)")
	mustExec(t, c, fmt.Sprintf("INSERT INTO t SELECT g, (g * 7919) %% 5000, g FROM generate_series(1, %d) g", initial))
	ws := startIndexWriters(t, url, 3, initial, "")
	var calls atomic.Int32
	var split atomic.Pointer[[]byte]
	prev := ddl.SetBeforeIngest(func(_ int64, start, end []byte) error {
		if calls.Add(1) != 2 {
			return nil
		}
		// Between the SST's first entry and the next one.
		splitAt := keys.Next(start)
		split.Store(&splitAt)
		ba := &kvpb.BatchRequest{}
		ba.Add(&kvpb.SplitRequest{SplitKey: splitAt})
		if _, err := s.DB().Send(ctx, ba); err != nil {
			return fmt.Errorf("splitting at %q: %w", splitAt, err)
		}
		return nil
	})
	t.Cleanup(func() { ddl.SetBeforeIngest(prev) })
	if err := ws.waitCommits(10); err != nil {
		t.Fatal(err)
	}
	mustExec(t, c, "CREATE INDEX t_v ON t (v)")
	if err := ws.waitCommits(10); err != nil {
		t.Fatal(err)
	}
	ws.finish(t)
	if split.Load() == nil {
		t.Fatalf("the build sent %d SSTs; the split never happened", calls.Load())
	}
	splitAt := *split.Load()
	d, err := s.DB().TabletCache().Lookup(ctx, splitAt, false)
	if err != nil {
		t.Fatal(err)
	}
	if string(d.StartKey) != string(splitAt) {
		t.Fatalf("the tablet holding %q starts at %q", splitAt, d.StartKey)
	}
	t.Logf("%d SSTs, split at %q; writers: %d commits, %d 40001", ddl.LastBackfillSSTs(), splitAt, ws.commits.Load(), ws.retries.Load())
	if n := ddl.LastBackfillSSTs(); n < 3 {
		t.Errorf("backfill cut %d SSTs, want several", n)
	}
	checkIndexExact(t, s, c, "t_v")
}
