package session_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-db/cairn/sql/session"
	"github.com/jackc/pgx/v5"
)

// BenchmarkSimpleUpdate runs pgbench's simple-update transaction (`pgbench
// -N`) as pgbench sends it, in the simple protocol with literal values, on
// one in-process node, so that a CPU or allocation profile shows what the
// SQL layer does per statement:
//
//	go test ./sql/session/ -run '^$' -bench SimpleUpdate -memprofile m.out -memprofilerate 1
func BenchmarkSimpleUpdate(b *testing.B) { benchSimpleUpdate(b) }

// BenchmarkSimpleUpdateGeneral is BenchmarkSimpleUpdate with the fast
// point UPDATE turned off (fastupdate.go): the general path's figures to
// compare with.
func BenchmarkSimpleUpdateGeneral(b *testing.B) {
	defer session.SetFastUpdateOff()()
	benchSimpleUpdate(b)
}

func benchSimpleUpdate(b *testing.B) {
	ctx := context.Background()
	_, url := startNode(b)
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		b.Fatal(err)
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	const rows = 10000
	for _, sql := range []string{
		"CREATE TABLE pgbench_accounts (aid int NOT NULL PRIMARY KEY, bid int, abalance int, filler char(84))",
		"CREATE TABLE pgbench_history (tid int, bid int, aid int, delta int, mtime timestamp, filler char(22))",
		fmt.Sprintf("INSERT INTO pgbench_accounts SELECT g, 1, 0, '' FROM generate_series(1, %d) g", rows),
	} {
		if _, err := c.Exec(ctx, sql); err != nil {
			b.Fatalf("%s: %v", sql, err)
		}
	}
	run := func(sql string) {
		if _, err := c.Exec(ctx, sql); err != nil {
			b.Fatalf("%s: %v", sql, err)
		}
	}
	// The process's CPU time per transaction (the in-process node's and
	// the client's), steadier than the wall time on a shared machine.
	cpu0 := cpuTime()
	for i := 0; b.Loop(); i++ {
		aid, delta, tid := 1+(i*7919)%rows, i%10000-5000, 1+i%10
		run("BEGIN;")
		run(fmt.Sprintf("UPDATE pgbench_accounts SET abalance = abalance + %d WHERE aid = %d;", delta, aid))
		run(fmt.Sprintf("SELECT abalance FROM pgbench_accounts WHERE aid = %d;", aid))
		run(fmt.Sprintf("INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (%d, %d, %d, %d, CURRENT_TIMESTAMP);", tid, 1, aid, delta))
		run("END;")
	}
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
