package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cairn-db/cairn/bench/internal/procstat"

	"github.com/cairn-db/cairn/test/proc"
	"github.com/cairn-db/cairn/workload"
)

// -diagnose DIR: where a schema's write throughput goes. After a schema's
// measurements, one more unthrottled sequential kv0 run of -duration,
// during which it reads each node process's CPU time (/proc/<pid>/stat),
// its cgroup's throttling under -node-cpu (cpu.stat), this process's
// own CPU time (the workload's clients), and each node's share of the
// write batches, and writes a CPU profile of every node
// (/debug/pprof/profile) to DIR/s<schema>-n<node>.pprof. It prints the
// CPU per write of each node and of the clients: with the cores or the
// quotas known, that bounds what spreading the leaseholders can gain.

func selfCPUSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

// throttled reads a node's cgroup's throttled periods and time (cgroup
// v1 cpu.stat: nr_throttled, throttled_time in ns; v2: nr_throttled,
// throttled_usec); zeros without -node-cpu.
func throttled(l *cpuLimit) (periods float64, secs float64) {
	if l == nil {
		return 0, 0
	}
	b, err := os.ReadFile(filepath.Join(l.dir, "cpu.stat"))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "nr_throttled":
			periods = v
		case "throttled_time":
			secs = v / 1e9
		case "throttled_usec":
			secs = v / 1e6
		}
	}
	return periods, secs
}

// diagnose runs schema s's extra kv0 run and prints its CPU accounting.
func diagnose(ctx context.Context, nodes []*proc.Node, limits []*cpuLimit, cfg workload.KVConfig, s schema, run int) error {
	if err := os.MkdirAll(*flagDiagnose, 0o755); err != nil {
		return err
	}
	cfg.ReadPercent = 0
	cfg.MaxRate = 0
	n := len(nodes)
	cpu0 := make([]float64, n)
	thr0 := make([][2]float64, n)
	for i, nd := range nodes {
		c, err := procstat.CPUSeconds(nd.Pid())
		if err != nil {
			return err
		}
		cpu0[i] = c
		if i < len(limits) {
			thr0[i][0], thr0[i][1] = throttled(limits[i])
		}
	}
	wb0, err := writeBatches(nodes)
	if err != nil {
		return err
	}
	ws0, err := metricSums(nodes, "cairn_store_wal_syncs_total")
	if err != nil {
		return err
	}
	rcSum0, err := metricSums(nodes, "cairn_raft_commit_duration_seconds_sum")
	if err != nil {
		return err
	}
	rcN0, err := metricSums(nodes, "cairn_raft_commit_duration_seconds_count")
	if err != nil {
		return err
	}
	self0 := selfCPUSeconds()
	start := time.Now()
	// The profiles cover the run but its last second (the run's workers
	// ramp down as it ends).
	secs := max(1, int(cfg.Duration.Seconds())-1)
	var wg sync.WaitGroup
	profErrs := make([]error, n)
	for i, nd := range nodes {
		wg.Go(func() {
			profErrs[i] = fetchProfile(nd, secs, filepath.Join(*flagDiagnose, fmt.Sprintf("s%d-r%d-n%d.pprof", s.n, run, i+1)))
		})
	}
	res, err := workload.RunKVResult(ctx, cfg)
	wg.Wait()
	if err != nil {
		return err
	}
	wall := time.Since(start).Seconds()
	self := selfCPUSeconds() - self0
	wb1, err := writeBatches(nodes)
	if err != nil {
		return err
	}
	ws1, err := metricSums(nodes, "cairn_store_wal_syncs_total")
	if err != nil {
		return err
	}
	rcSum1, err := metricSums(nodes, "cairn_raft_commit_duration_seconds_sum")
	if err != nil {
		return err
	}
	rcN1, err := metricSums(nodes, "cairn_raft_commit_duration_seconds_count")
	if err != nil {
		return err
	}
	var wbTotal float64
	for i := range nodes {
		wbTotal += wb1[i] - wb0[i]
	}
	ops := float64(res.Ops)
	fmt.Printf("diagnose %s, run %d: unthrottled kv0 %.0f writes/s (mean %.1f ms) over %.1f s wall\n", s.name, run, res.Rate(), msOf(res.Mean), wall)
	// WAL syncs: a store's commits are made durable one sync at a time
	// (one write-ahead log), each paying -sync-latency; "WAL busy" is
	// the share of the run the node's log spent in them, so near 100%
	// the node's writes wait on its log, whichever of its tablets they
	// are for. "Raft commit" is the mean time from a proposal of the
	// node's leaseholders to its application there
	// (cairn_raft_commit_duration_seconds): the replication part of a
	// write's latency.
	fmt.Println("| process | CPU cores used | CPU ms per write | write batches led | throttled periods (s) | WAL syncs/s | writes per WAL sync | WAL busy | raft commit ms (mean) |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	var total float64
	for i, nd := range nodes {
		c, err := procstat.CPUSeconds(nd.Pid())
		if err != nil {
			return err
		}
		used := c - cpu0[i]
		total += used
		var thr string
		if i < len(limits) {
			p, t := throttled(limits[i])
			thr = fmt.Sprintf("%.0f (%.1f)", p-thr0[i][0], t-thr0[i][1])
		}
		syncs := ws1[i] - ws0[i]
		rc := "-"
		if n := rcN1[i] - rcN0[i]; n > 0 {
			rc = fmt.Sprintf("%.1f", 1000*(rcSum1[i]-rcSum0[i])/n)
		}
		fmt.Printf("| node %d | %.2f | %.2f | %.0f%% | %s | %.0f | %.1f | %.0f%% | %s |\n", i+1, used/wall, 1000*used/ops, 100*(wb1[i]-wb0[i])/wbTotal, thr,
			syncs/wall, ops/max(syncs, 1), 100*syncs*flagSyncLatency.Seconds()/wall, rc)
		if profErrs[i] != nil {
			fmt.Printf("  (node %d's profile: %v)\n", i+1, profErrs[i])
		}
	}
	fmt.Printf("| nodes together | %.2f | %.2f | | | | | | |\n", total/wall, 1000*total/ops)
	fmt.Printf("| clients (this process) | %.2f | %.2f | | | | | | |\n\n", self/wall, 1000*self/ops)
	return nil
}

// fetchProfile writes node nd's CPU profile over secs seconds to path.
func fetchProfile(nd *proc.Node, secs int, path string) error {
	resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", nd.HTTP, secs))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return fmt.Errorf("%s: %s", resp.Status, b)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
