package stats_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cairn-db/cairn/server"
)

var (
	timesRE = regexp.MustCompile(`actual time=[0-9.]+\.\.[0-9.]+`)
	bytesRE = regexp.MustCompile(`\(\d+(kB| bytes)\)`)
)

// TestAnalyze runs testdata/analyze against a real node: ANALYZE, what
// pg_stats and pg_class show, plans changing once statistics exist, the
// statistics surviving a restart, and automatic collection.
//
// Commands: exec (statements; prints notices and errors), query (rows, one per line,
// columns separated by " | "), copy table=T rows=N (COPY FROM STDIN of
// 1..N), explain (EXPLAIN of the input),
// explain-analyze (EXPLAIN (ANALYZE, SUMMARY OFF) with times and sizes masked),
// restart (stops the node and starts it again on the same store), and
// poll (reruns the query until it prints the expected output, for
// background work; prints what it last got).
func TestAnalyze(t *testing.T) {
	dir := t.TempDir()
	var srv *server.Server
	var conn *pgx.Conn
	var notices []string
	start := func() {
		// The automatic collections this file polls for start at once
		// instead of a minute after their tables went stale.
		s, err := server.Start(context.Background(), server.Config{Insecure: true, StoreDir: dir,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), StatsRefreshDelay: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		srv = s
		cfg, err := pgx.ParseConfig(fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", s.Addr()))
		if err != nil {
			t.Fatal(err)
		}
		cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
			notices = append(notices, n.Severity+": "+n.Message)
		}
		c, err := pgx.ConnectConfig(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		conn = c
	}
	stop := func() {
		conn.Close(context.Background())
		if err := srv.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	start()
	defer func() { stop() }()
	query := func(sql string) string {
		rows, err := conn.Query(context.Background(), sql, pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		defer rows.Close()
		var sb strings.Builder
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				return "error: " + err.Error() + "\n"
			}
			parts := make([]string, len(vals))
			for i, v := range vals {
				if v == nil {
					parts[i] = "NULL"
				} else {
					parts[i] = fmt.Sprint(v)
				}
			}
			sb.WriteString(strings.Join(parts, " | ") + "\n")
		}
		if err := rows.Err(); err != nil {
			return "error: " + err.Error() + "\n"
		}
		return sb.String()
	}
	datadriven.RunTest(t, "testdata/analyze", func(t *testing.T, d *datadriven.TestData) string {
		switch d.Cmd {
		case "exec":
			notices = nil
			_, err := conn.Exec(context.Background(), d.Input, pgx.QueryExecModeSimpleProtocol)
			var out string
			for _, n := range notices {
				out += n + "\n"
			}
			if err != nil {
				return out + "error: " + err.Error() + "\n"
			}
			return out + "ok\n"
		case "query":
			return query(d.Input)
		case "explain":
			return query("EXPLAIN " + d.Input)
		case "explain-analyze":
			// Times and byte counts vary; the rest does not.
			out := query("EXPLAIN (ANALYZE, COSTS OFF, SUMMARY OFF) " + d.Input)
			out = timesRE.ReplaceAllString(out, "actual time=T..T")
			return bytesRE.ReplaceAllString(out, "(N bytes)")
		case "copy":
			// COPY table FROM STDIN of the integers 1..rows.
			var table string
			var n int
			d.ScanArgs(t, "table", &table)
			d.ScanArgs(t, "rows", &n)
			var data strings.Builder
			for i := 1; i <= n; i++ {
				fmt.Fprintf(&data, "%d\n", i)
			}
			tag, err := conn.PgConn().CopyFrom(context.Background(), strings.NewReader(data.String()), "COPY "+table+" FROM STDIN")
			if err != nil {
				return "error: " + err.Error() + "\n"
			}
			return tag.String() + "\n"
		case "restart":
			stop()
			start()
			return "ok\n"
		case "poll":
			var got string
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				if got = query(d.Input); got == d.Expected {
					break
				}
			}
			return got
		}
		t.Fatalf("unknown command %s", d.Cmd)
		return ""
	})
}
