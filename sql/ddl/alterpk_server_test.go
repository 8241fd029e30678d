package ddl_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// TestRebucketUnderWrites changes a secondary index's bucket count and
// then the primary key (to other columns, hash-sharded) while other
// sessions insert and update rows: every acknowledged write must be in
// the table afterwards, read through the new primary key and the
// rebucketed index alike.
func TestRebucketUnderWrites(t *testing.T) {
	s, url := startNode(t, t.TempDir())
	defer s.Stop(context.Background())
	ctx := context.Background()
	admin := connect(t, url, "postgres")
	mustExec(t, admin, "CREATE TABLE w (id int PRIMARY KEY, k int NOT NULL, v int)")
	mustExec(t, admin, "INSERT INTO w SELECT g, g, 0 FROM generate_series(1, 2000) g")
	mustExec(t, admin, "CREATE INDEX w_v ON w (v) USING HASH WITH (bucket_count = 4)")

	const writers = 3
	var (
		stop  atomic.Bool
		wg    sync.WaitGroup
		mu    sync.Mutex
		acked = map[int64]int64{} // id -> v of every acknowledged write
		ops   atomic.Int64
		errs  = make(chan error, writers)
	)
	// Each writer inserts its own ids and bumps v of its own initial
	// rows, retrying what fails with 40001 (not acknowledged).
	started := make(chan struct{}, writers)
	for w := range writers {
		c := connect(t, url, "postgres")
		wg.Go(func() {
			next := int64(10000 + w*100000)
			for i := 0; !stop.Load() || i < 20; i++ {
				if i == 20 {
					started <- struct{}{}
				}
				var sql string
				var id, v int64
				if i%2 == 0 {
					id, v = next, int64(i)
					next++
					sql = fmt.Sprintf("INSERT INTO w VALUES (%d, %d, %d)", id, id, v)
				} else {
					id, v = int64(1+w+writers*(i%600)), int64(i)
					sql = fmt.Sprintf("UPDATE w SET v = %d WHERE id = %d", v, id)
				}
				for {
					_, err := c.Exec(ctx, sql)
					if sqlState(err) == "40001" {
						continue
					}
					if err != nil {
						errs <- fmt.Errorf("%s: %w", sql, err)
						return
					}
					break
				}
				mu.Lock()
				acked[id] = v
				mu.Unlock()
				ops.Add(1)
			}
		})
	}
	for range writers {
		<-started
	}
	mustExec(t, admin, "ALTER INDEX w_v SET (bucket_count = 7)")
	mustExec(t, admin, "ALTER TABLE w ALTER PRIMARY KEY USING COLUMNS (k) USING HASH WITH (bucket_count = 5)")
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d writes acknowledged around the two changes", ops.Load())

	var n int64
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM w").Scan(&n); err != nil {
		t.Fatal(err)
	}
	inserted := int64(0)
	for id := range acked {
		if id >= 10000 {
			inserted++
		}
	}
	if n != 2000+inserted {
		t.Errorf("%d rows, want %d (2000 and %d acknowledged inserts)", n, 2000+inserted, inserted)
	}
	for id, v := range acked {
		var got, gotByV int64
		if err := admin.QueryRow(ctx, "SELECT v FROM w WHERE k = $1", id).Scan(&got); err != nil {
			t.Fatalf("row %d: %v", id, err)
		}
		if got != v {
			t.Errorf("row %d: v = %d, acknowledged %d", id, got, v)
		}
		// Through the rebucketed index.
		if err := admin.QueryRow(ctx, "SELECT count(*) FROM w WHERE v = $1 AND id = $2", v, id).Scan(&gotByV); err != nil {
			t.Fatal(err)
		}
		if gotByV != 1 {
			t.Errorf("row %d not found through w_v with v = %d", id, v)
		}
	}
	var show string
	if err := admin.QueryRow(ctx, "SELECT cairn_show_create_table('w'::regclass)").Scan(&show); err != nil {
		t.Fatal(err)
	}
	t.Log(show)
}
