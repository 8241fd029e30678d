package ddl_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/ddl"
)

// TestRekeyOnlineUnderLoad changes the bucket counts of a hash-sharded
// table's secondary indexes (one unique) and of its primary key, each as
// a job (rekey.go), while two writers insert, update and delete rows and
// try duplicate unique values, and a watcher reads the jobs' progress.
// One change is held mid-copy: writes and reads of the table must then
// complete, which an in-transaction rewrite would not let them do. After
// all three, every acknowledged write is there exactly once, through the
// table and each index; the plans use the new bucket counts; the old
// storage holds no key; the jobs say succeeded.
func TestRekeyOnlineUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node and rewrites 10,000 rows three times")
	}
	defer func(d time.Duration) { ddl.MoveClearDelay = d }(ddl.MoveClearDelay)
	ddl.MoveClearDelay = 200 * time.Millisecond
	s, url := startNode(t, t.TempDir())
	defer s.Stop(context.Background())
	ctx := context.Background()
	c := connect(t, url, "postgres")
	const initial = 10000
	mustExec(t, c, "CREATE TABLE hs (id int PRIMARY KEY USING HASH WITH (bucket_count = 4), v int NOT NULL, u int, note text)")
	mustExec(t, c, "CREATE INDEX hs_v_idx ON hs (v) USING HASH WITH (bucket_count = 4)")
	mustExec(t, c, "CREATE UNIQUE INDEX hs_u_key ON hs (u) USING HASH WITH (bucket_count = 3)")
	mustExec(t, c, fmt.Sprintf("INSERT INTO hs SELECT i, i %% 97, i, 'r' || i FROM generate_series(1, %d) i", initial))
	before := moveState(t, s, c, "hs")
	oldLayout, err := before.Layout()
	if err != nil {
		t.Fatal(err)
	}

	ws := []*writer{
		{table: "hs", lo: 1, hi: 2000, next: 100_000},
		{table: "hs", lo: 2000, hi: 4000, next: 200_000},
	}
	for _, w := range ws {
		w.model = map[int64]row{}
		for id := w.lo; id < w.hi; id++ {
			w.model[id] = row{v: id % 97, u: id}
		}
	}
	// hold, when set, pauses the writers (the held-job check below
	// drives the first writer itself).
	var hold sync.RWMutex
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, len(ws)+1)
	wcs := make([]*pgx.Conn, len(ws))
	for i, w := range ws {
		wcs[i] = connect(t, url, "postgres")
		if i == 1 {
			// The simple protocol: the session reruns its implicit
			// transactions itself, commit included.
			wcs[i] = connect(t, strings.Replace(url, "sslmode=disable", "sslmode=disable&default_query_exec_mode=simple_protocol", 1), "postgres")
		}
		wg.Go(func() {
			rng := rand.New(rand.NewSource(int64(i + 1)))
			for {
				select {
				case <-stop:
					return
				default:
				}
				hold.RLock()
				err := w.step(ctx, wcs[i], rng)
				hold.RUnlock()
				if err != nil {
					errs <- fmt.Errorf("writer %d: %w", i, err)
					return
				}
			}
		})
	}
	seen := map[int64][]float64{}
	var seenMu sync.Mutex
	watch := connect(t, url, "postgres")
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			var id int64
			var f float64
			err := watch.QueryRow(ctx, "SELECT job_id, fraction_completed FROM cairn_catalog.jobs WHERE status = 'running' AND job_type = $1", ddl.RekeyJobType).Scan(&id, &f)
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
		}
	})

	time.Sleep(200 * time.Millisecond) // the writers are under way
	alter := func(sql string) {
		t.Helper()
		start := time.Now()
		mustExec(t, c, sql)
		t.Logf("%s: %v", sql, time.Since(start))
	}
	alter("ALTER INDEX hs_v_idx SET (bucket_count = 7)")

	// The unique index's change is held after its second page: the
	// table takes writes and reads meanwhile, and other schema changes
	// of it wait.
	paused, release := pauseMove(t)
	defer release(nil)
	alterErr := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, "ALTER INDEX hs_u_key SET (bucket_count = 5)")
		alterErr <- err
	}()
	var jobID int64
	select {
	case jobID = <-paused:
	case err := <-alterErr:
		t.Fatalf("the change ended before its second page: %v", err)
	}
	hold.Lock()
	other := connect(t, url, "postgres")
	var status string
	var frac float64
	if err := other.QueryRow(ctx, "SELECT status, fraction_completed FROM cairn_catalog.jobs WHERE job_id = $1", jobID).Scan(&status, &frac); err != nil {
		t.Fatal(err)
	}
	if status != "running" || frac <= 0 || frac >= 1 {
		t.Errorf("job %d held mid-copy: %s %v, want running strictly between 0 and 1", jobID, status, frac)
	}
	rng := rand.New(rand.NewSource(99))
	for range 40 {
		if err := ws[0].step(ctx, other, rng); err != nil {
			t.Fatalf("a write while the change is held: %v", err)
		}
	}
	// u = 5000 belongs to a row no writer owns ([1,4000) are theirs):
	// a writer may have deleted or renumbered any row in its range
	// before the hold, so only an untouched row has a known answer.
	var n int64
	if err := other.QueryRow(ctx, "SELECT count(*) FROM hs WHERE u = 5000").Scan(&n); err != nil || n != 1 {
		t.Errorf("a read through hs_u_key while the change is held: %d rows, %v", n, err)
	}
	if _, err := other.Exec(ctx, "ALTER TABLE hs ADD COLUMN z int"); sqlState(err) != "55000" || !strings.Contains(err.Error(), "rewritten by job") {
		t.Errorf("ADD COLUMN while the change is held: want 55000 (being rewritten), got %v", err)
	}
	hold.Unlock()
	release(nil)
	if err := <-alterErr; err != nil {
		t.Fatalf("ALTER INDEX hs_u_key SET (bucket_count = 5): %v", err)
	}

	alter("ALTER TABLE hs ALTER PRIMARY KEY USING COLUMNS (id) USING HASH WITH (bucket_count = 6)")
	time.Sleep(100 * time.Millisecond)
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, w := range ws {
		t.Logf("writer [%d,%d): %d ops, %d duplicates refused, %d statements rerun after 40001 %q", w.lo, w.hi, w.ops, w.dupErr, w.retries, w.retryErrs)
		if w.ops < 10 {
			t.Errorf("writer [%d,%d) ran only %d operations during the changes", w.lo, w.hi, w.ops)
		}
	}
	// The simple-protocol writer never saw a 40001: its implicit
	// transactions, commit included, are rerun by the session. (An
	// extended-protocol implicit transaction commits at Sync, after its
	// result went out, so a commit-time 40001 reaches the client, as
	// writer 0's may: a session limit, not the job's.)
	if ws[1].retries != 0 {
		t.Errorf("the simple-protocol writer saw %d 40001 errors: %q", ws[1].retries, ws[1].retryErrs)
	}
	checkTable(t, c, "hs", initial, ws)

	// The new layout is what plans use.
	for q, want := range map[string]string{
		"SELECT * FROM hs WHERE id = 5": "Buckets: 1 of 6",
		"SELECT * FROM hs WHERE v = 5":  "Buckets: 1 of 7",
		"SELECT * FROM hs WHERE u = 5":  "Buckets: 1 of 5",
	} {
		rows, err := c.Query(ctx, "EXPLAIN "+q)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		if p := strings.Join(lines, "\n"); !strings.Contains(p, want) {
			t.Errorf("EXPLAIN %s: want %q in\n%s", q, want, p)
		}
	}
	var name, show string
	if err := c.QueryRow(ctx, "SHOW CREATE TABLE hs").Scan(&name, &show); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"bucket_count = 6", "bucket_count = 7", "bucket_count = 5"} {
		if !strings.Contains(show, want) {
			t.Errorf("SHOW CREATE TABLE hs lacks %q:\n%s", want, show)
		}
	}
	if strings.Contains(show, "bucket_count = 4") || strings.Contains(show, "bucket_count = 3") {
		t.Errorf("SHOW CREATE TABLE hs still shows an old bucket count:\n%s", show)
	}
	// The old storage was freed.
	after := moveState(t, s, c, "hs")
	if after.Move != nil {
		t.Errorf("a move is left in the descriptor: %+v", after.Move)
	}
	if n := spanKeys(t, s, oldLayout.IndexSpan(&oldLayout.Primary)); n != 0 {
		t.Errorf("the old primary storage still holds %d keys", n)
	}
	for i := range oldLayout.Secondary {
		if n := spanKeys(t, s, oldLayout.IndexSpan(&oldLayout.Secondary[i])); n != 0 {
			t.Errorf("the old storage of index %d still holds %d keys", oldLayout.Secondary[i].ID, n)
		}
	}

	seenMu.Lock()
	defer seenMu.Unlock()
	for id, fs := range seen {
		for i := 1; i < len(fs); i++ {
			if fs[i] < fs[i-1] {
				t.Errorf("job %d: progress went back: %v", id, fs)
				break
			}
		}
	}
	got := rekeyJobRows(t, c)
	want := []string{"succeeded: ", "succeeded: ", "succeeded: "}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("jobs: %q, want %q", got, want)
	}
	var types []string
	rows, err := c.Query(ctx, "SELECT job_type FROM cairn_catalog.jobs ORDER BY job_id")
	if err != nil {
		t.Fatal(err)
	}
	if types, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	for _, ty := range types {
		if ty != ddl.RekeyJobType {
			t.Errorf("job types %q, want %q each", types, ddl.RekeyJobType)
			break
		}
	}
}

// TestRekeyOnlineFailureRollsBack makes a bucket-count change fail
// mid-copy: the ALTER reports the error, the job ends failed, the table
// keeps its old bucket count with every row, no move is left in its
// descriptor, and the target's storage holds no key.
func TestRekeyOnlineFailureRollsBack(t *testing.T) {
	s, url := startNode(t, t.TempDir())
	defer s.Stop(context.Background())
	ctx := context.Background()
	c := connect(t, url, "postgres")
	mustExec(t, c, "CREATE TABLE hs (id int PRIMARY KEY USING HASH WITH (bucket_count = 4), v int NOT NULL, u int UNIQUE, note text)")
	mustExec(t, c, "CREATE INDEX hs_v_idx ON hs (v)")
	mustExec(t, c, "INSERT INTO hs SELECT i, i % 97, i, 'r' || i FROM generate_series(1, 3000) i")

	paused, release := pauseMove(t)
	defer release(nil)
	alterErr := make(chan error, 1)
	mover := connect(t, url, "postgres")
	go func() {
		_, err := mover.Exec(ctx, "ALTER INDEX hs_pkey SET (bucket_count = 9)")
		alterErr <- err
	}()
	select {
	case <-paused:
	case err := <-alterErr:
		t.Fatalf("the change ended before its second page: %v", err)
	}
	moving := moveState(t, s, c, "hs")
	if moving.Move == nil || moving.Move.Target == nil {
		t.Fatalf("no rewrite in the descriptor mid-copy: %+v", moving.Move)
	}
	target, err := moving.MoveLayout()
	if err != nil {
		t.Fatal(err)
	}
	if n := spanKeys(t, s, target.IndexSpan(&target.Primary)); n == 0 {
		t.Fatal("the target holds no key after two pages")
	}
	release(errors.New("injected failure"))
	if err := <-alterErr; err == nil || !strings.Contains(err.Error(), "injected failure") {
		t.Fatalf("ALTER after an injected failure: %v", err)
	}
	after := moveState(t, s, c, "hs")
	if after.Move != nil || after.PrimaryIndex.HashSharding == nil || after.PrimaryIndex.HashSharding.Buckets != 4 {
		t.Errorf("after the failure: move %+v, sharding %+v; want no move, 4 buckets", after.Move, after.PrimaryIndex.HashSharding)
	}
	if n := spanKeys(t, s, target.IndexSpan(&target.Primary)); n != 0 {
		t.Errorf("the failed change's target still holds %d keys", n)
	}
	checkTable(t, c, "hs", 3000, nil)
	if got := rekeyJobRows(t, c); len(got) != 1 || !strings.HasPrefix(got[0], "failed: ") || !strings.Contains(got[0], "injected failure") {
		t.Errorf("jobs: %q", got)
	}
	// The table takes schema changes again.
	mustExec(t, c, "ALTER TABLE hs ADD COLUMN z int")
}

// rekeyJobRows returns status and error of every key-change job, oldest
// first.
func rekeyJobRows(t *testing.T, c *pgx.Conn) []string {
	t.Helper()
	rows, err := c.Query(context.Background(), "SELECT status || ': ' || coalesce(error, '') FROM cairn_catalog.jobs WHERE job_type = $1 ORDER BY job_id", ddl.RekeyJobType)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRekeyWaitsForIndexBuild: while a CREATE INDEX job holds its index
// in write_only, a bucket-count change of the table is refused with 55000
// and changes nothing; once the build is done, it runs.
func TestRekeyWaitsForIndexBuild(t *testing.T) {
	s, url := startNode(t, t.TempDir())
	defer s.Stop(context.Background())
	ctx := context.Background()
	c := connect(t, url, "postgres")
	mustExec(t, c, "CREATE TABLE hs (id int PRIMARY KEY USING HASH WITH (bucket_count = 4), v int)")
	mustExec(t, c, "INSERT INTO hs SELECT i, i FROM generate_series(1, 500) i")
	held := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	prevS, prevP := ddl.SetIndexHooks(func(_ int64, st catalog.IndexState) error {
		if st == catalog.IndexWriteOnly {
			once.Do(func() { close(held); <-release })
		}
		return nil
	}, nil)
	defer ddl.SetIndexHooks(prevS, prevP)
	built := make(chan error, 1)
	go func() {
		_, err := connect(t, url, "postgres").Exec(ctx, "CREATE INDEX hs_v ON hs (v)")
		built <- err
	}()
	select {
	case <-held:
	case err := <-built:
		t.Fatalf("CREATE INDEX ended before write_only: %v", err)
	}
	_, err := c.Exec(ctx, "ALTER INDEX hs_pkey SET (bucket_count = 6)")
	close(release)
	if sqlState(err) != "55000" || !strings.Contains(err.Error(), `index "hs_v" of table "hs" is being built`) {
		t.Errorf("ALTER INDEX during an index build: want 55000 (being built), got %v", err)
	}
	if err := <-built; err != nil {
		t.Fatalf("CREATE INDEX: %v", err)
	}
	if got := moveState(t, s, c, "hs").PrimaryIndex.HashSharding.Buckets; got != 4 {
		t.Errorf("bucket count %d after the refused change, want 4", got)
	}
	mustExec(t, c, "ALTER INDEX hs_pkey SET (bucket_count = 6)")
	var n int64
	if err := c.QueryRow(ctx, "SELECT count(*) FROM hs WHERE v BETWEEN 1 AND 500").Scan(&n); err != nil || n != 500 {
		t.Errorf("after the change: %d rows, %v", n, err)
	}
}
