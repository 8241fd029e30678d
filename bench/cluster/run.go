package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/store"
	"github.com/cairn-db/cairn/testcluster"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// splitKeys cut the loaded keys ("\x03k/NN/...") into four tablets.
var splitKeys = []string{"\x03k/25", "\x03k/50", "\x03k/75"}

func key(i int) []byte { return fmt.Appendf(nil, "\x03k/%02d/%08d", i%100, i) }

// runOnce measures every configuration on a fresh cluster each. Every
// second run measures RF 3 first, so a change of load on the shared machine during a
// run does not always favour the same side of the ratio.
func runOnce(run int) (runResult, error) {
	out := runResult{ops: map[string]map[string]opResult{}}
	order := slices.Clone(configs)
	if run%2 == 1 {
		slices.Reverse(order)
	}
	for _, cfg := range order {
		if *flagOnly != "" && *flagOnly != fmt.Sprintf("rf%d", cfg.nodes) {
			continue
		}
		res, fo, err := measure(cfg, run)
		if err != nil {
			return out, fmt.Errorf("%s: %w", cfg.name, err)
		}
		out.ops[cfg.name] = res
		out.failovers = append(out.failovers, fo...)
	}
	return out, nil
}

// measure starts a cluster of cfg.nodes, splits and loads it, runs the
// read and write rows and, with more than one node, the failovers.
func measure(cfg config, run int) (map[string]opResult, []failoverSample, error) {
	ctx := context.Background()
	newFS := vfs.NewMem
	if *flagCrash {
		newFS = vfs.NewCrashableMem
	}
	opts := testcluster.ClusterOptions{Nodes: cfg.nodes, Tick: *flagTick, MaxOffset: *flagMaxOffset}
	if *flagBalance && cfg.nodes > 1 {
		// cairn start's default placement: leases balanced by count.
		opts.LeaseBalancer = &store.LeaseBalancerConfig{}
	}
	c, err := testcluster.OpenCluster(opts, newFS)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err := c.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "close %s: %v\n", cfg.name, err)
		}
	}()
	tablets, err := prepare(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	if *flagBalance && cfg.nodes > 1 {
		if err := waitBalanced(c); err != nil {
			return nil, nil, err
		}
	}
	if cfg.nodes > 1 {
		// Where the leases are decides how many requests take an extra
		// hop from their gateway: worth knowing when reading the figures.
		var lhs []string
		for _, d := range tablets {
			lhs = append(lhs, fmt.Sprintf("t%d→n%d", d.TabletID, c.Leader(d.TabletID)))
		}
		fmt.Fprintf(os.Stderr, "run %d, %s: leaseholders %s\n", run+1, cfg.name, strings.Join(lhs, " "))
	}
	value := bytes.Repeat([]byte("v"), *flagValue)
	res := map[string]opResult{}
	want := func(op string) bool { return *flagOp == "" || *flagOp == op }
	if want("read") {
		res["read"], err = workload(ctx, c, run, func(db *kv.DB, k []byte) error {
			_, ok, err := db.Get(ctx, k)
			if err == nil && !ok {
				err = fmt.Errorf("key %q missing", k)
			}
			return err
		})
		if err != nil {
			return nil, nil, fmt.Errorf("read: %w", err)
		}
	}
	if want("write") {
		res["write"], err = workload(ctx, c, run, func(db *kv.DB, k []byte) error { return db.Put(ctx, k, value) })
		if err != nil {
			return nil, nil, fmt.Errorf("write: %w", err)
		}
	}
	if cfg.nodes == 1 {
		return res, nil, nil
	}
	var fo []failoverSample
	for i := range *flagFailovers {
		d, err := failover(ctx, c, tablets, tablets[(run**flagFailovers+i)%len(tablets)], value, uint64(run*100+i))
		if err != nil {
			return nil, nil, fmt.Errorf("failover %d: %w", i+1, err)
		}
		fo = append(fo, d)
	}
	return res, fo, nil
}

// prepare waits for the first tablet's leaseholder, splits the keyspace,
// waits until every node has every tablet with a leaseholder, and loads
// the keys. It returns the loaded keys' tablets.
func prepare(ctx context.Context, c *testcluster.Cluster) ([]kvpb.TabletDescriptor, error) {
	if _, err := c.LeaderWithin(1, 20*time.Second); err != nil {
		return nil, err
	}
	gw := c.Nodes[0].DB
	for _, k := range splitKeys {
		ba := &kvpb.BatchRequest{}
		ba.Add(&kvpb.SplitRequest{SplitKey: []byte(k)})
		if _, err := gw.Send(ctx, ba); err != nil {
			return nil, fmt.Errorf("split at %q: %w", k, err)
		}
	}
	want := len(splitKeys) + 1
	deadline := time.Now().Add(20 * time.Second)
	for _, n := range c.Nodes {
		for len(n.Store.Tablets()) != want {
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("node %d has %d tablets after the splits, want %d", n.ID, len(n.Store.Tablets()), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	var loaded []kvpb.TabletDescriptor
	for _, d := range c.Nodes[0].Store.Tablets() {
		if _, err := c.LeaderWithin(d.TabletID, 20*time.Second); err != nil {
			return nil, err
		}
		if bytes.Compare(d.EndKey, []byte("\x03k/")) > 0 || len(d.EndKey) == 0 {
			loaded = append(loaded, d)
		}
	}
	value := bytes.Repeat([]byte("v"), *flagValue)
	for i := 0; i < *flagKeys; i += 500 {
		b := &kv.Batch{}
		for j := i; j < min(i+500, *flagKeys); j++ {
			b.Put(key(j), value)
		}
		if err := retryAmbiguous(func() error { return gw.Run(ctx, b) }); err != nil {
			return nil, fmt.Errorf("load: %w", err)
		}
	}
	return loaded, nil
}

// retryAmbiguous retries fn, an idempotent write, when its outcome was
// ambiguous.
func retryAmbiguous(fn func() error) error {
	for attempt := 0; ; attempt++ {
		err := fn()
		var amb *kvpb.AmbiguousResultError
		if err == nil || !errors.As(err, &amb) || attempt >= 5 {
			return err
		}
	}
}

// workload runs *flagConc clients for *flagDur, client i sending op through
// node i mod N on random preloaded keys, and returns the throughput and the
// latency percentiles of every operation completed.
func workload(ctx context.Context, c *testcluster.Cluster, run int, op func(db *kv.DB, k []byte) error) (opResult, error) {
	var (
		wg       sync.WaitGroup
		stop     atomic.Bool
		mu       sync.Mutex
		all      []time.Duration
		firstErr error
	)
	use0 := readCPUUse()
	start := time.Now()
	for i := range *flagConc {
		db := c.Nodes[i%len(c.Nodes)].DB
		rng := rand.New(rand.NewPCG(uint64(run), uint64(i)))
		wg.Go(func() {
			lat := make([]time.Duration, 0, 4096)
			var err error
			for !stop.Load() {
				k := key(rng.IntN(*flagKeys))
				t0 := time.Now()
				if err = op(db, k); err != nil {
					break
				}
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			all = append(all, lat...)
			if err != nil && firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
		})
	}
	time.Sleep(*flagDur)
	stop.Store(true)
	wg.Wait()
	elapsed := time.Since(start)
	use := readCPUUse()
	if firstErr != nil {
		return opResult{}, firstErr
	}
	if len(all) == 0 {
		return opResult{}, fmt.Errorf("no operation completed in %s", *flagDur)
	}
	slices.Sort(all)
	pct := func(p float64) time.Duration { return all[min(len(all)-1, int(p*float64(len(all))))] }
	return opResult{
		opsPerSec: float64(len(all)) / elapsed.Seconds(),
		p50:       pct(0.50),
		p99:       pct(0.99),
		cores:     (use.cpu - use0.cpu).Seconds() / elapsed.Seconds(),
		waiting:   (use.waited - use0.waited).Seconds() / elapsed.Seconds(),
	}, nil
}

// failover cuts tablet's leaseholder off and kills (or crashes) it, then writes a key
// of the tablet through another node until a write succeeds, and returns
// the time from the cut to that success. It restarts the node and waits
// until the cluster serves writes on every tablet through every node
// again before returning.
func failover(ctx context.Context, c *testcluster.Cluster, tablets []kvpb.TabletDescriptor, d kvpb.TabletDescriptor, value []byte, seed uint64) (failoverSample, error) {
	var zero failoverSample
	lh, err := c.LeaderWithin(d.TabletID, 20*time.Second)
	if err != nil {
		return zero, err
	}
	victim := c.Nodes[lh-1]
	gateway := c.Nodes[int(lh)%len(c.Nodes)]
	k, err := keyIn(d)
	if err != nil {
		return zero, err
	}

	// Watch for another node taking the lease, to split the sample into
	// the election (and lease) and what the first write waits for after.
	leaseCh := make(chan time.Duration, 1)
	watchDone := make(chan struct{})
	defer close(watchDone)
	start := time.Now()
	go func() {
		for {
			select {
			case <-watchDone:
				return
			default:
			}
			if l := c.Leader(d.TabletID); l != 0 && l != lh {
				leaseCh <- time.Since(start)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	c.Partition(victim.ID)
	kill := victim.Stop
	if *flagCrash {
		kill = func() error { return victim.Crash(seed) }
	}
	if err := kill(); err != nil {
		return zero, fmt.Errorf("kill node %d: %w", victim.ID, err)
	}
	var took, lease time.Duration
	for {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := gateway.DB.Put(actx, k, value)
		cancel()
		if err == nil {
			took = time.Since(start)
			// The write needed a leaseholder: the watcher has seen it or
			// is about to (it polls every millisecond).
			select {
			case lease = <-leaseCh:
			case <-time.After(time.Second):
				lease = -1
			}
			break
		}
		if time.Since(start) > 60*time.Second {
			return zero, fmt.Errorf("no write on tablet %d through node %d within 60s after crashing node %d: %w", d.TabletID, gateway.ID, victim.ID, err)
		}
		time.Sleep(time.Millisecond)
	}

	c.Heal()
	if err := victim.Restart(); err != nil {
		return zero, fmt.Errorf("restart node %d: %w", victim.ID, err)
	}
	// Settle: every tablet writable through every node (the restarted one
	// included), so the next sample starts from a whole cluster.
	settle := time.Now().Add(60 * time.Second)
	for _, t := range tablets {
		sk, err := keyIn(t)
		if err != nil {
			return zero, err
		}
		for _, n := range c.Nodes {
			for {
				actx, cancel := context.WithTimeout(ctx, 2*time.Second)
				err := n.DB.Put(actx, sk, value)
				cancel()
				if err == nil {
					break
				}
				if time.Now().After(settle) {
					return zero, fmt.Errorf("settling after restarting node %d: write %q through node %d: %w", victim.ID, sk, n.ID, err)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	if *flagBalance {
		// The restarted node gets its leases back before the next
		// sample, so a move does not land in the middle of it.
		if err := waitBalanced(c); err != nil {
			return zero, err
		}
	}
	return failoverSample{write: took, lease: lease}, nil
}

// waitBalanced waits until every tablet has a leaseholder and the nodes'
// lease counts are within one of each other (the lease balancer's goal).
func waitBalanced(c *testcluster.Cluster) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		counts := map[uint64]int{}
		all := true
		for _, d := range c.Nodes[0].Store.Tablets() {
			l := c.Leader(d.TabletID)
			all = all && l != 0
			counts[l]++
		}
		lo, hi := -1, 0
		for _, n := range c.Nodes {
			if lo < 0 || counts[n.ID] < lo {
				lo = counts[n.ID]
			}
			hi = max(hi, counts[n.ID])
		}
		if all && hi-lo <= 1 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("leases not balanced within 60s: %v", counts)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// keyIn returns a preloaded key on tablet d.
func keyIn(d kvpb.TabletDescriptor) ([]byte, error) {
	for i := range min(100, *flagKeys) {
		if k := key(i); d.ContainsKey(k) {
			return k, nil
		}
	}
	return nil, fmt.Errorf("no preloaded key on tablet %d [%q, %q)", d.TabletID, d.StartKey, d.EndKey)
}
