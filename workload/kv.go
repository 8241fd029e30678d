// Package workload owns `cairn workload`: load generators that talk to a
// cluster over the PostgreSQL protocol, as CockroachDB's `cockroach
// workload` does, and print its per-second and summary lines so figures
// read the same.
//
// kv (this file) is CockroachDB's kv workload: a table kv (k int8, v
// bytea) with a primary key on k, optionally hash-sharded, read and
// written by --concurrency workers, each operation a batch of --batch keys
// (a multi-row upsert, or a SELECT ... WHERE k IN (...)).
//
// Who calls it: cmd/cairn (workload.go). It calls pgx only; it never
// imports the server.
//
// Invariants:
//
//  1. Keys come from sequence numbers: a write takes the next one, a read
//     one already taken, so reads find rows. --sequential uses the number
//     as the key (the hot-spot pattern hash sharding exists for); without
//     it the key is a hash of the number, spread over the int8 range.
//  2. Only operations that returned are counted; an operation's latency
//     runs from before its statement is sent until its result is read.
//  3. Lines go to the configured writer only, in CockroachDB's layout:
//     per second `_elapsed___errors__ops/sec(inst)___ops/sec(cum)__p50(ms)
//     __p95(ms)__p99(ms)_pMax(ms)` per operation, and at the end
//     `_elapsed___errors_____ops(total)___ops/sec(cum)__avg(ms)__p50(ms)
//     __p95(ms)__p99(ms)_pMax(ms)__total`.
package workload

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// KVConfig configures the kv workload.
type KVConfig struct {
	URL string
	// URLs, when set, are the gateways the workers of a run connect to,
	// round-robin (as CockroachDB's workload takes every node's URL), so
	// no one node parses every statement; URL still serves init.
	URLs        []string
	Sequential  bool
	ReadPercent int // 0..100
	Concurrency int
	Duration    time.Duration // 0: until ctx is done
	Batch       int
	HashSharded bool
	Buckets     int // bucket count with HashSharded (0: the server's default)
	// SecondaryIndex gives kv an index on v (the seed's schemas 3 and 4).
	SecondaryIndex bool
	// Drop makes init drop an existing kv table first.
	Drop bool
	// Out receives the report lines.
	Out io.Writer
	// Tick is the report interval (a second unless set; tests shorten it).
	Tick time.Duration
	// MaxRate caps the operations per second of all workers together
	// (0: as fast as they go).
	MaxRate float64
	// Quiet leaves out the per-second lines (the summary still prints).
	Quiet bool
}

// KVResult is what a run measured, all operations together.
type KVResult struct {
	Ops     uint64
	Errors  uint64
	Elapsed time.Duration
	Mean    time.Duration
	// Reads and Writes are the summaries of each kind of operation.
	Reads, Writes OpSummary
}

// OpSummary is one kind of operation's summary line.
type OpSummary struct {
	Ops, Errors uint64
	Rate        float64 // per second
	Mean        time.Duration
	P50, P99    time.Duration
}

// Rate is the run's operations per second.
func (r KVResult) Rate() float64 { return float64(r.Ops) / r.Elapsed.Seconds() }

// limiter spaces operations 1/rate apart across workers.
type limiter struct {
	mu       sync.Mutex
	interval time.Duration
	next     time.Time
}

// wait blocks until the caller's slot (false when ctx ends first).
func (l *limiter) wait(ctx context.Context) bool {
	if l == nil {
		return true
	}
	l.mu.Lock()
	now := time.Now()
	at := l.next
	if at.Before(now) {
		at = now
	}
	l.next = at.Add(l.interval)
	l.mu.Unlock()
	if d := time.Until(at); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

func (c *KVConfig) check(run bool) error {
	switch {
	case c.Buckets != 0 && (c.Buckets < 2 || c.Buckets > 2048):
		return fmt.Errorf("--buckets must be between 2 and 2048, not %d", c.Buckets)
	case c.Buckets != 0 && !c.HashSharded:
		return errors.New("--buckets needs --hash-sharded")
	case !run:
		return nil
	case c.ReadPercent < 0 || c.ReadPercent > 100:
		return fmt.Errorf("--read-percent must be between 0 and 100, not %d", c.ReadPercent)
	case c.Concurrency < 1:
		return fmt.Errorf("--concurrency must be at least 1, not %d", c.Concurrency)
	case c.Batch < 1:
		return fmt.Errorf("--batch must be at least 1, not %d", c.Batch)
	}
	return nil
}

// KVSchema is the CREATE TABLE statement of kv under cfg.
func KVSchema(cfg KVConfig) string {
	pk := "PRIMARY KEY (k)"
	if cfg.HashSharded {
		pk += " USING HASH"
		if cfg.Buckets > 0 {
			pk += fmt.Sprintf(" WITH (bucket_count = %d)", cfg.Buckets)
		}
	}
	if cfg.SecondaryIndex {
		pk += ", INDEX (v)"
	}
	return "CREATE TABLE IF NOT EXISTS kv (k INT8 NOT NULL, v BYTEA NOT NULL, " + pk + ")"
}

// InitKV creates the kv table.
func InitKV(ctx context.Context, cfg KVConfig) error {
	if err := cfg.check(false); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, cfg.URL)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())
	if cfg.Drop {
		if _, err := conn.Exec(ctx, "DROP TABLE IF EXISTS kv"); err != nil {
			return fmt.Errorf("drop kv: %w", err)
		}
	}
	if _, err := conn.Exec(ctx, KVSchema(cfg)); err != nil {
		return fmt.Errorf("create kv: %w", err)
	}
	return nil
}

// op is one kind of operation: its histograms, for the current interval
// and since the start.
type op struct {
	name string
	mu   sync.Mutex
	tick histogram
	cum  histogram
	errs uint64
}

func (o *op) record(d time.Duration, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err != nil {
		o.errs++
		return
	}
	o.tick.record(d)
}

// RunKV runs the kv workload until cfg.Duration passes or ctx is done, and
// prints the report. It fails only when no worker could connect or the
// table is missing; statement errors are counted.
func RunKV(ctx context.Context, cfg KVConfig) error {
	_, err := runKV(ctx, cfg)
	return err
}

// RunKVResult is RunKV returning what it measured (benchmarks).
func RunKVResult(ctx context.Context, cfg KVConfig) (KVResult, error) {
	return runKV(ctx, cfg)
}

func runKV(ctx context.Context, cfg KVConfig) (KVResult, error) {
	if err := cfg.check(true); err != nil {
		return KVResult{}, err
	}
	if cfg.Tick == 0 {
		cfg.Tick = time.Second
	}
	if cfg.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Duration)
		defer cancel()
	}
	conns := make([]*pgx.Conn, cfg.Concurrency)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close(context.Background())
			}
		}
	}()
	for i := range conns {
		url := cfg.URL
		if len(cfg.URLs) > 0 {
			url = cfg.URLs[i%len(cfg.URLs)]
		}
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			return KVResult{}, fmt.Errorf("connect worker %d: %w", i, err)
		}
		conns[i] = c
	}
	k := &kvGen{sequential: cfg.Sequential}
	// Reads need written keys: start from the rows already there.
	var n int64
	if err := conns[0].QueryRow(ctx, "SELECT count(*) FROM kv").Scan(&n); err != nil {
		return KVResult{}, fmt.Errorf("kv table (run init first): %w", err)
	}
	k.written.Store(n)
	k.next.Store(n)
	read, write := &op{name: "read"}, &op{name: "write"}
	ops := []*op{read, write}
	if cfg.ReadPercent == 0 {
		ops = []*op{write}
	} else if cfg.ReadPercent == 100 {
		ops = []*op{read}
	}
	var lim *limiter
	if cfg.MaxRate > 0 {
		lim = &limiter{interval: time.Duration(float64(time.Second) / cfg.MaxRate)}
	}
	start := time.Now()
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func(c *pgx.Conn, seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(start.UnixNano())))
			for ctx.Err() == nil {
				if !lim.wait(ctx) {
					return
				}
				isRead := rng.IntN(100) < cfg.ReadPercent && k.written.Load() > 0
				t0 := time.Now()
				var err error
				if isRead {
					err = k.read(ctx, c, rng, cfg.Batch)
				} else {
					err = k.write(ctx, c, rng, cfg.Batch)
				}
				if ctx.Err() != nil {
					return // cut short by the end of the run: not counted
				}
				if isRead {
					read.record(time.Since(t0), err)
				} else {
					write.record(time.Since(t0), err)
				}
			}
		}(c, uint64(i))
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	ticker := time.NewTicker(cfg.Tick)
	defer ticker.Stop()
	lines := 0
	report := func(now time.Time) {
		elapsed := now.Sub(start)
		for _, o := range ops {
			o.mu.Lock()
			t := o.tick
			o.tick = histogram{}
			o.cum.merge(&t)
			cum, errs := o.cum.n, o.errs
			o.mu.Unlock()
			if cfg.Quiet {
				continue
			}
			if lines%20 == 0 {
				fmt.Fprintln(cfg.Out, "_elapsed___errors__ops/sec(inst)___ops/sec(cum)__p50(ms)__p95(ms)__p99(ms)_pMax(ms)")
			}
			lines++
			fmt.Fprintf(cfg.Out, "%7.1fs %8d %14.1f %14.1f %8.1f %8.1f %8.1f %8.1f %s\n",
				elapsed.Seconds(), errs, float64(t.n)/cfg.Tick.Seconds(), float64(cum)/elapsed.Seconds(),
				ms(t.quantile(0.50)), ms(t.quantile(0.95)), ms(t.quantile(0.99)), ms(t.max), o.name)
		}
	}
loop:
	for {
		select {
		case now := <-ticker.C:
			report(now)
		case <-done:
			break loop
		}
	}
	elapsed := time.Since(start)
	fmt.Fprintln(cfg.Out)
	fmt.Fprintln(cfg.Out, "_elapsed___errors_____ops(total)___ops/sec(cum)__avg(ms)__p50(ms)__p95(ms)__p99(ms)_pMax(ms)__total")
	res := KVResult{Elapsed: elapsed}
	var all histogram
	for _, o := range ops {
		o.mu.Lock()
		o.cum.merge(&o.tick)
		o.tick = histogram{}
		h := o.cum
		o.mu.Unlock()
		all.merge(&h)
		res.Errors += o.errs
		sum := OpSummary{Ops: h.n, Errors: o.errs, Rate: float64(h.n) / elapsed.Seconds(), Mean: h.mean(), P50: h.quantile(0.50), P99: h.quantile(0.99)}
		if o == read {
			res.Reads = sum
		} else {
			res.Writes = sum
		}
		fmt.Fprintf(cfg.Out, "%7.1fs %8d %14d %14.1f %8.1f %8.1f %8.1f %8.1f %8.1f  %s\n",
			elapsed.Seconds(), o.errs, h.n, float64(h.n)/elapsed.Seconds(), ms(h.mean()),
			ms(h.quantile(0.50)), ms(h.quantile(0.95)), ms(h.quantile(0.99)), ms(h.max), o.name)
	}
	res.Ops, res.Mean = all.n, all.mean()
	return res, nil
}

// SearchKV looks for the highest rate whose mean latency stays at or
// under maxMean, as the seed's kv0bench does: a first round runs
// unthrottled; if its mean is over the bound, rounds of cfg.Duration at
// rates between 0 and that throughput bisect for rounds more rounds. Each
// round prints its summary and a verdict line; the result is the best
// passing round (zero Ops when none passed).
func SearchKV(ctx context.Context, cfg KVConfig, maxMean time.Duration, rounds int) (KVResult, error) {
	best, _, err := SearchKVDetail(ctx, cfg, maxMean, rounds)
	return best, err
}

// SearchKVDetail is SearchKV also returning its first, unthrottled round
// (what a search that found no rate under the bound can still report).
func SearchKVDetail(ctx context.Context, cfg KVConfig, maxMean time.Duration, rounds int) (best, unthrottled KVResult, err error) {
	if cfg.Duration <= 0 {
		return KVResult{}, KVResult{}, errors.New("a search needs --duration for each round")
	}
	cfg.Quiet = true
	try := func(rate float64) (KVResult, bool, error) {
		cfg.MaxRate = rate
		r, err := runKV(ctx, cfg)
		if err != nil {
			return r, false, err
		}
		ok := r.Ops > 0 && r.Errors == 0 && r.Mean <= maxMean
		verdict := "over"
		if ok {
			verdict = "under"
		}
		target := "unthrottled"
		if rate > 0 {
			target = fmt.Sprintf("%.0f ops/s", rate)
		}
		fmt.Fprintf(cfg.Out, "search: %s: %.1f ops/s at %.1f ms mean, %s %.1f ms\n", target, r.Rate(), ms(r.Mean), verdict, ms(maxMean))
		return r, ok, nil
	}
	first, ok, err := try(0)
	if err != nil || ok {
		return first, first, err
	}
	lo, hi := 0.0, first.Rate()
	for range rounds {
		if ctx.Err() != nil {
			break
		}
		mid := (lo + hi) / 2
		r, ok, err := try(mid)
		if err != nil {
			return best, first, err
		}
		if ok {
			lo = mid
			if r.Rate() > best.Rate() || best.Ops == 0 {
				best = r
			}
		} else {
			hi = mid
		}
	}
	if best.Ops > 0 {
		fmt.Fprintf(cfg.Out, "search: max throughput under %.1f ms mean latency: %.1f ops/s\n", ms(maxMean), best.Rate())
	} else {
		fmt.Fprintf(cfg.Out, "search: no rate tried kept the mean latency under %.1f ms\n", ms(maxMean))
	}
	return best, first, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// kvGen makes the keys (invariant 1).
type kvGen struct {
	sequential bool
	next       atomic.Int64 // the next sequence number a write takes
	written    atomic.Int64 // sequence numbers below this were written
}

func (g *kvGen) key(seq int64) int64 {
	if g.sequential {
		return seq
	}
	h := fnv.New64a()
	var b [8]byte
	for i := range b {
		b[i] = byte(seq >> (8 * i))
	}
	h.Write(b[:])
	return int64(h.Sum64() >> 1)
}

func (g *kvGen) write(ctx context.Context, c *pgx.Conn, rng *rand.Rand, batch int) error {
	first := g.next.Add(int64(batch)) - int64(batch)
	var sb strings.Builder
	sb.WriteString("INSERT INTO kv (k, v) VALUES ")
	args := make([]any, 0, 2*batch)
	for i := range batch {
		if i > 0 {
			sb.WriteString(", ")
		}
		fmt.Fprintf(&sb, "($%d, $%d)", 2*i+1, 2*i+2)
		args = append(args, g.key(first+int64(i)), []byte{byte(rng.IntN(256))})
	}
	sb.WriteString(" ON CONFLICT (k) DO UPDATE SET v = excluded.v")
	_, err := c.Exec(ctx, sb.String(), args...)
	if err == nil {
		// Raise written to cover this batch once every batch below it is
		// in: approximately, since writers finish out of order; a read
		// of a key not written yet finds nothing, which is not an error.
		for {
			w := g.written.Load()
			if w >= first+int64(batch) || g.written.CompareAndSwap(w, first+int64(batch)) {
				break
			}
		}
	}
	return err
}

func (g *kvGen) read(ctx context.Context, c *pgx.Conn, rng *rand.Rand, batch int) error {
	w := g.written.Load()
	var sb strings.Builder
	sb.WriteString("SELECT k, v FROM kv WHERE k IN (")
	args := make([]any, batch)
	for i := range batch {
		if i > 0 {
			sb.WriteString(", ")
		}
		fmt.Fprintf(&sb, "$%d", i+1)
		args[i] = g.key(rng.Int64N(w))
	}
	sb.WriteString(")")
	rows, err := c.Query(ctx, sb.String(), args...)
	if err != nil {
		return err
	}
	for rows.Next() {
	}
	rows.Close()
	return rows.Err()
}
