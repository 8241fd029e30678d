// Command ddl measures what DDL costs as tables accumulate (issue 16,
// "Tablets are cheap to create"): on a plain `cairn start` (built from this
// tree, its ports from -port), it creates tables t_1, t_2, ... each with
// `CREATE TABLE t_i (k INT PRIMARY KEY, v INT)` and `CREATE INDEX ON t_i
// (v)`, and at each checkpoint of -at (0 included: the baseline) times
// -sample such pairs and prints the median time of one pair, and its ratio
// to the time at 0 tables. The goal is the ratio at 10,000 tables
// within 1.5×. Then it creates one -buckets-bucket hash-sharded index and
// times it (each bucket is its own tablet, split before the index takes
// writes), and with -idle it measures the node's CPU over -idle seconds
// and its RSS with every table in place.
//
// With -lock FILE the node fills its tables at nice -fill-nice (19 by
// default) without the lock and holds an exclusive flock on FILE, at nice
// 0, only while it times (each checkpoint's samples, the hash-sharded
// index, the idle measurement), so that a shared machine's benchmark lock
// is held minutes, not the half hour that filling 10,000 tables takes.
// -fill-conns N fills over N connections at once: a pair mostly waits on
// its synced raft commits, so at nice 19 on a loaded machine one
// connection took an hour to reach 10,000 tables. What is timed is the
// same either way: each checkpoint's pairs, one after another on one
// connection, after the fill has finished.
//
// With -ref a second node, which holds only the tables of the samples,
// times the same sample in the same locked window, runs alternating, and
// each checkpoint prints its pair's time over the reference's: on a
// shared machine whose load and disk change over the half hour of a
// fill, the ratio to the first checkpoint measures the machine as much
// as the tables (issue 16's bench/ddl section of bench/README.md).
//
// Usage: go run ./bench/ddl [-at 0,1000,5000,10000] [-sample 50] [-runs 3]
// [-buckets 2048] [-idle 30s] [-port 48100] [-cpuprofile-at 5000]
// [-lock /work/bench.lock] [-fill-nice 19] [-fill-conns 1] [-ref]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cairn-db/cairn/bench/internal/procstat"

	"github.com/cairn-db/cairn/bench/internal/benchflag"
	"github.com/cairn-db/cairn/bench/internal/benchnode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

var (
	flagAt       = flag.String("at", "0,1000,5000,10000", "table counts at which to time DDL")
	flagSample   = flag.Int("sample", 50, "CREATE TABLE + CREATE INDEX pairs timed at each checkpoint")
	flagRuns     = flag.Int("runs", 3, "repetitions of each checkpoint's sample; the median run is reported")
	flagBuckets  = flag.Int("buckets", 2048, "bucket count of the hash-sharded index timed at the end (0: none)")
	flagIdle     = flag.Duration("idle", 30*time.Second, "measure idle CPU over this long at the end (0: skip)")
	flagPort     = flag.Int("port", 48100, "first of three ports: SQL, HTTP, RPC")
	flagProfile  = flag.Int("cpuprofile-at", -1, "take a 20s CPU profile of the node while creating tables past this count (-1: none)")
	flagKeep     = flag.Bool("keep", false, "keep the store directory")
	flagIdleProf = flag.String("idle-cpuprofile", "", "after the idle measurement, write a 20s CPU profile of the idle node here")
	flagHeapProf = flag.String("heapprofile", "", "at the end, write a heap profile of the node here")
	flagLock     = flag.String("lock", "", "hold an exclusive flock on this file only while timing; fill at nice 19 outside it")
	flagFillNice = flag.Int("fill-nice", 19, "with -lock, the nice value of the node (and this process) while filling, outside the lock")
	flagConns    = flag.Int("fill-conns", 1, "connections that fill the tables between checkpoints, each creating its own tables (timing uses one)")
	flagRef      = flag.Bool("ref", false, "also time each checkpoint's sample on a second node without the tables (ports -port+3..+5), in the same locked window, runs alternating: the ratio to it is the growth with the tables, whatever the machine did meanwhile")
)

// timing holds -lock's flock, with the node and this process at nice 0,
// until the returned function is called (then -fill-nice again); without
// -lock it does nothing.
func timing(pids ...int) (func(), error) {
	if *flagLock == "" {
		return func() {}, nil
	}
	f, err := os.OpenFile(*flagLock, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	for _, pid := range pids {
		nice(pid, 0)
	}
	fmt.Printf("  (lock taken after %.0f s, load average %s)\n", time.Since(t0).Seconds(), loadavg())
	return func() {
		fmt.Printf("  (lock released, load average %s)\n", loadavg())
		for _, pid := range pids {
			nice(pid, *flagFillNice)
		}
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// nice sets the nice value of every thread of the node and of this
// process (best effort; on Linux a nice value is a thread's, and threads
// started later inherit their creator's).
func nice(pid, n int) {
	for _, p := range []string{strconv.Itoa(pid), "self"} {
		tasks, _ := os.ReadDir(filepath.Join("/proc", p, "task"))
		for _, t := range tasks {
			if tid, err := strconv.Atoi(t.Name()); err == nil {
				_ = syscall.Setpriority(syscall.PRIO_PROCESS, tid, n)
			}
		}
	}
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

func main() {
	flag.Parse()
	if err := run(context.Background()); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context) error {
	at, err := benchflag.Counts("at", *flagAt, 0)
	if err != nil {
		return err
	}
	slices.Sort(at)
	dir, err := os.MkdirTemp("", "bench-ddl-")
	if err != nil {
		return err
	}
	if !*flagKeep {
		defer os.RemoveAll(dir)
	}
	bin, err := benchnode.Build(dir)
	if err != nil {
		return err
	}
	p := *flagPort
	node, err := startNode(ctx, bin, dir, "store", p)
	if node != nil {
		defer node.Kill()
	}
	if err != nil {
		return err
	}
	conn := node.conn
	defer conn.Close(ctx)
	var refNode *startedNode
	var refConn *pgx.Conn
	pids := []int{node.Pid()}
	if *flagRef {
		refNode, err = startNode(ctx, bin, dir, "ref-store", p+3)
		if refNode != nil {
			defer refNode.Kill()
		}
		if err != nil {
			return err
		}
		refConn = refNode.conn
		defer refConn.Close(ctx)
		pids = append(pids, refNode.Pid())
	}

	n := 0
	var tCreate, tIndex, tInsert []float64
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	pair := func() (time.Duration, error) {
		n++
		start := time.Now()
		if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE TABLE t_%d (k INT PRIMARY KEY, v INT)", n)); err != nil {
			return 0, err
		}
		mid := time.Now()
		if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE INDEX ON t_%d (v)", n)); err != nil {
			return 0, err
		}
		end := time.Now()
		// A write that is not DDL: does the cost grow with every
		// statement, or only with DDL?
		if _, err := conn.Exec(ctx, fmt.Sprintf("INSERT INTO t_%d VALUES (1, 1)", n)); err != nil {
			return 0, err
		}
		tCreate, tIndex, tInsert = append(tCreate, ms(mid.Sub(start))), append(tIndex, ms(end.Sub(mid))), append(tInsert, ms(time.Since(end)))
		return end.Sub(start), nil
	}
	// refPair is pair on the reference node, which has only the tables
	// of the samples (-ref).
	refN := 0
	refPair := func() (time.Duration, error) {
		refN++
		start := time.Now()
		if _, err := refConn.Exec(ctx, fmt.Sprintf("CREATE TABLE t_%d (k INT PRIMARY KEY, v INT)", refN)); err != nil {
			return 0, err
		}
		if _, err := refConn.Exec(ctx, fmt.Sprintf("CREATE INDEX ON t_%d (v)", refN)); err != nil {
			return 0, err
		}
		d := time.Since(start)
		_, err := refConn.Exec(ctx, fmt.Sprintf("INSERT INTO t_%d VALUES (1, 1)", refN))
		return d, err
	}
	fmt.Printf("cairn start (one node), pairs of CREATE TABLE + CREATE INDEX; median of %d runs of %d pairs\n\n", *flagRuns, *flagSample)
	fmt.Printf("%10s %12s %8s %10s %10s %10s %10s %10s", "tables", "ms/pair", "ratio", "table ms", "index ms", "insert ms", "fill s", "RSS MiB")
	if *flagRef {
		fmt.Printf(" %10s %8s", "ref ms", "x ref")
	}
	fmt.Println()
	rssMiB := func() int64 {
		kib, err := procstat.RSSKiB(node.Pid())
		if err != nil {
			return -1
		}
		return kib >> 10
	}
	var base float64
	if *flagLock != "" {
		for _, pid := range pids {
			nice(pid, *flagFillNice)
		}
	}
	// fillConns are -fill-conns connections to the node; the first is
	// conn, the one that times.
	fillConns := []*pgx.Conn{conn}
	for len(fillConns) < *flagConns {
		c, err := pgx.Connect(ctx, node.URL)
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		fillConns = append(fillConns, c)
	}
	fillStart := time.Now()
	profiled := false
	for _, target := range at {
		if *flagProfile >= 0 && !profiled && target > *flagProfile {
			profiled = true
			go profile(p+1, filepath.Join(os.TempDir(), "bench-ddl.prof"))
		}
		if err := fill(ctx, fillConns, &n, target); err != nil {
			return err
		}
		fill := time.Since(fillStart).Seconds()
		unlock, err := timing(pids...)
		if err != nil {
			return err
		}
		var meds, refMeds []float64
		tCreate, tIndex, tInsert = nil, nil, nil
		sample := func(f func() (time.Duration, error)) (float64, error) {
			var ts []float64
			for range *flagSample {
				d, err := f()
				if err != nil {
					return 0, err
				}
				ts = append(ts, float64(d.Microseconds())/1000)
			}
			return median(ts), nil
		}
		for range *flagRuns {
			m, err := sample(pair)
			if err != nil {
				unlock()
				return fmt.Errorf("table %d: %v", n, err)
			}
			meds = append(meds, m)
			if *flagRef {
				m, err := sample(refPair)
				if err != nil {
					unlock()
					return fmt.Errorf("reference node, table %d: %v", refN, err)
				}
				refMeds = append(refMeds, m)
			}
		}
		unlock()
		m := median(meds)
		if base == 0 {
			base = m
		}
		fmt.Printf("%10d %12.2f %7.2fx %10.2f %10.2f %10.2f %10.1f %10d", target, m, m/base, median(tCreate), median(tIndex), median(tInsert), fill, rssMiB())
		if *flagRef {
			// Per run, the pair's time over the reference's in the
			// same moments; the median of those.
			var xs []float64
			for i := range meds {
				xs = append(xs, meds[i]/refMeds[i])
			}
			fmt.Printf(" %10.2f %7.2fx", median(refMeds), median(xs))
		}
		fmt.Println()
		fillStart = time.Now()
	}
	if refNode != nil {
		// The idle measurement is of the node with the tables alone.
		refNode.Kill()
	}
	unlock, err := timing(node.Pid())
	if err != nil {
		return err
	}
	defer unlock()
	if *flagBuckets > 0 {
		if _, err := conn.Exec(ctx, "CREATE TABLE hs (k INT PRIMARY KEY, v INT)"); err != nil {
			return err
		}
		start := time.Now()
		if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE INDEX ON hs (v) USING HASH WITH (bucket_count = %d)", *flagBuckets)); err != nil {
			return err
		}
		fmt.Printf("\nCREATE INDEX ... USING HASH WITH (bucket_count = %d) with %d tables: %.2f s (RSS after: %d MiB)\n", *flagBuckets, n, time.Since(start).Seconds(), rssMiB())
	}
	var tablets int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM cairn_catalog.tablets").Scan(&tablets); err != nil {
		tablets = -1
	}
	if *flagIdle > 0 {
		pid := node.Pid()
		c0, err := procstat.CPUSeconds(pid)
		if err != nil {
			return err
		}
		t0 := time.Now()
		time.Sleep(*flagIdle)
		c1, err := procstat.CPUSeconds(pid)
		if err != nil {
			return err
		}
		cpu := (c1 - c0) / time.Since(t0).Seconds() * 100
		rss, err := procstat.RSSKiB(pid)
		if err != nil {
			return err
		}
		fmt.Printf("\nidle with %d tables (%d tablets): %.2f%% of a core over %v, RSS %d MiB\n", n, tablets, cpu, *flagIdle, rss>>10)
		if *flagIdleProf != "" {
			profile(p+1, *flagIdleProf)
		}
		if *flagHeapProf != "" {
			fetch(fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/heap", p+1), *flagHeapProf)
		}
	}
	return nil
}

// fill creates tables n+1 ... target, each with its index and one row,
// spread over conns (table i on conns[i%len(conns)]), and sets n to
// target. Nothing is timed.
func fill(ctx context.Context, conns []*pgx.Conn, n *int, target int) error {
	if *n >= target {
		return nil
	}
	errs := make(chan error, len(conns))
	for j, c := range conns {
		go func() {
			for i := *n + 1 + j; i <= target; i += len(conns) {
				for _, q := range []string{
					fmt.Sprintf("CREATE TABLE t_%d (k INT PRIMARY KEY, v INT)", i),
					fmt.Sprintf("CREATE INDEX ON t_%d (v)", i),
					fmt.Sprintf("INSERT INTO t_%d VALUES (1, 1)", i),
				} {
					// Concurrent DDL may conflict (every DDL
					// rewrites the catalog generation); a
					// statement that failed with 40001 did not
					// commit and is retried.
					for {
						_, err := c.Exec(ctx, q)
						var pgErr *pgconn.PgError
						if errors.As(err, &pgErr) && pgErr.Code == "40001" {
							continue
						}
						if err != nil {
							errs <- fmt.Errorf("table %d: %v", i, err)
							return
						}
						break
					}
				}
			}
			errs <- nil
		}()
	}
	var first error
	for range conns {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	*n = target
	return first
}

// startedNode is a benchnode.Node with its connection.
type startedNode struct {
	*benchnode.Node
	conn *pgx.Conn
}

// startNode starts `cairn start` on the store dir/name with the SQL,
// HTTP and RPC ports port, port+1 and port+2, and connects to it. The
// node is returned (to be killed) whenever it started.
func startNode(ctx context.Context, bin, dir, name string, port int) (*startedNode, error) {
	n, err := benchnode.Start(benchnode.Options{Bin: bin, Store: filepath.Join(dir, name), Log: filepath.Join(dir, name+".log"), Port: port})
	if err != nil {
		return nil, err
	}
	conn, err := n.Connect(ctx)
	if err != nil {
		return &startedNode{Node: n}, fmt.Errorf("cairn did not start: %v", err)
	}
	return &startedNode{Node: n, conn: conn}, nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func profile(httpPort int, path string) {
	fetch(fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/profile?seconds=20", httpPort), path)
}

// fetch writes what url answers to path.
func fetch(url, path string) {
	resp, err := http.Get(url)
	if err != nil {
		log.Printf("profile: %v", err)
		return
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		log.Printf("profile: %v", err)
		return
	}
	defer f.Close()
	_, _ = io.Copy(f, resp.Body)
	log.Printf("profile written to %s", path)
}
