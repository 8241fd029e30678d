package server

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-db/cairn/storage/simfs"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestDiskFullStopsNode fills a single node's disk: the INSERT that meets
// it fails with 53100 disk_full (not acknowledged), the node reports
// that it cannot go on (Failed, on which cairn start exits), and a node
// started again on the healed disk has every row acknowledged before.
func TestDiskFullStopsNode(t *testing.T) {
	disk := simfs.New(vfs.NewMem(), simfs.Options{})
	cfg := Config{Insecure: true, FS: disk, StoreDir: "store"}
	s := start(t, cfg)
	ctx := context.Background()
	conn := connect(t, s)
	if _, err := conn.Exec(ctx, "CREATE TABLE t (k INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	for k := range 20 {
		if _, err := conn.Exec(ctx, "INSERT INTO t VALUES ($1)", k); err != nil {
			t.Fatal(err)
		}
	}
	disk.InjectWriteError(syscall.ENOSPC)
	_, err := conn.Exec(ctx, "INSERT INTO t VALUES (100)")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != pgerrcode.DiskFull {
		t.Fatalf("INSERT on a full disk: %v, want SQLSTATE %s", err, pgerrcode.DiskFull)
	}
	select {
	case ferr := <-s.Failed():
		if !errors.Is(ferr, syscall.ENOSPC) {
			t.Errorf("Failed yielded %v", ferr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the node did not report its failed engine")
	}
	conn.Close(ctx)
	_ = s.Stop(ctx) // closing a failed engine reports its error

	disk.InjectWriteError(nil)
	s2 := start(t, cfg)
	defer s2.Stop(ctx)
	conn2 := connect(t, s2)
	defer conn2.Close(ctx)
	var n int
	if err := conn2.QueryRow(ctx, "SELECT count(*) FROM t WHERE k < 20").Scan(&n); err != nil || n != 20 {
		t.Fatalf("after a restart on a healed disk: %d rows of 20, %v", n, err)
	}
}
