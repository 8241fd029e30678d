// Command cluster measures what replication costs and how fast a
// replicated cluster recovers, in one run: point reads and writes through
// the KV client on an in-process cluster of one node (every tablet a raft
// group of one voter, RF 1) and of three nodes (RF 3) talking gRPC over
// loopback, then the failover time of the three-node cluster.
//
// Rows:
//
//	read   DB.Get of a random preloaded key (served by the leaseholder, no consensus round)
//	write  DB.Put of a random preloaded key (one-phase commit through the raft log)
//
// Each row runs -c clients for -d; client i sends through node i mod N, so
// with three nodes two thirds of the requests reach the leaseholder by one
// more RPC, as they would from SQL gateways spread over the cluster. The
// ratio column is RF 3 over RF 1 measured in the same run.
//
// The nodes use the raft tick and maximum clock offset of `cairn start
// --join` members (server/cluster.go), so elections, and so failovers,
// take as long as they would there.
//
// Every node keeps its store on an in-memory filesystem whose syncs cost
// nothing, so the figures are the CPU and loopback cost of replication,
// not of the disk (bench/kv measures RF 1 on disk). -crash uses Pebble's
// crashable in-memory filesystem instead, whose every sync copies the
// whole file: a test device, far slower for writes as the WAL grows.
//
// Failover: -failovers times per run, pick a tablet, find its leaseholder,
// cut it off (Partition: the others stop hearing it at that instant) and
// kill it (Stop: the process dies, what it wrote stays as the OS page
// cache would keep it; with -crash, Crash: unsynced data lost), then write
// a key of that tablet through another node until a write succeeds; the
// time from the cut to that success is one sample. The node is restarted
// and the cluster settled before the next sample.
//
// The whole measurement repeats -runs times; throughput and latency are
// the medians over runs, failover samples are pooled over runs.
//
// Leases: with -balance (the default) every node runs cairn start's
// default lease balancer (leases balanced by count over the nodes), and
// each measurement and failover sample starts once the counts are within
// one; -balance=false leaves them where elections put them (mostly on one
// node), as every run before 2026-11-27 did.
//
// Usage: go run ./bench/cluster [-runs 3] [-c 16] [-d 3s] [-keys 10000] [-tick 50ms] [-maxoffset 500ms]
// [-value 64] [-failovers 3] [-balance=false] [-crash] [-only rf1|rf3] [-op read|write] [-cpuprofile f]
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/cairn-db/cairn/bench/internal/benchflag"
)

var (
	flagRuns      = flag.Int("runs", 3, "repetitions; medians over runs are reported")
	flagConc      = flag.Int("c", 16, "concurrent clients per measurement")
	flagDur       = flag.Duration("d", 3*time.Second, "duration of each throughput measurement")
	flagKeys      = flag.Int("keys", 10_000, "keys preloaded (spread over the tablets) before measuring")
	flagValue     = flag.Int("value", 64, "value size in bytes")
	flagFailovers = flag.Int("failovers", 3, "leaseholder kills per run in the three-node cluster")
	flagTick      = flag.Duration("tick", 50*time.Millisecond, "raft tick (cairn start's: elections after 10–20 ticks)")
	flagMaxOffset = flag.Duration("maxoffset", 500*time.Millisecond, "maximum clock offset (cairn start --join's)")
	flagProfile   = flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flagOnly      = flag.String("only", "", "run only this configuration: rf1 or rf3 (either alone skips the ratio; rf1 skips failover)")
	flagBalance   = flag.Bool("balance", true, "run cairn start's default lease balancer on every node (leases balanced by count; measured once balanced); false: leases stay where elections put them, as before 2026-11-27")
	flagCrash     = flag.Bool("crash", false, "crashable in-memory filesystems (every sync copies the whole file) and a crash (unsynced data lost) instead of a kill in the failovers")
	flagOp        = flag.String("op", "", "run only this operation: read or write (for profiling one path)")
)

// config is one cluster shape measured.
type config struct {
	name  string
	nodes int
}

var configs = []config{{"1 node RF1", 1}, {"3 nodes RF3", 3}}

// opResult is one operation in one configuration in one run.
type opResult struct {
	opsPerSec float64
	p50, p99  time.Duration
	// cores is the CPU the process used (1: one core busy); waiting is
	// how many of its threads were, on average, runnable but waiting for
	// a CPU the machine's other work held.
	cores, waiting float64
}

// runResult is everything one run measured.
type runResult struct {
	ops       map[string]map[string]opResult // config name → op → result
	failovers []failoverSample
}

// failoverSample is one leaseholder kill: the time from the kill to the
// first successful write on its tablet, and to another node holding the
// tablet's lease (-1: not seen).
type failoverSample struct {
	write, lease time.Duration
}

var ops = []string{"read", "write"}

func main() {
	flag.Parse()
	stopProfile, err := benchflag.CPUProfile(*flagProfile)
	if err != nil {
		log.Fatal(err)
	}
	defer stopProfile()
	startUse, startWall := readCPUUse(), time.Now()
	var runs []runResult
	for i := range *flagRuns {
		r, err := runOnce(i)
		if err != nil {
			log.Fatalf("run %d: %v", i+1, err)
		}
		runs = append(runs, r)
		fmt.Fprintf(os.Stderr, "run %d/%d done\n", i+1, *flagRuns)
	}
	report(runs)
	fmt.Printf("\nprocess: %s\n", readCPUUse().since(startUse, time.Since(startWall)))
}

func report(runs []runResult) {
	fmt.Printf("bench/cluster: -c %d -d %s -keys %d -value %d -balance=%v, median of %d runs\n\n", *flagConc, *flagDur, *flagKeys, *flagValue, *flagBalance, len(runs))
	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "configuration\top\tops/s\tp50 µs\tp99 µs\tvs RF1\tcpu cores\tcpu µs/op\twaiting for cpu\t\n")
	for _, op := range ops {
		for _, cfg := range configs {
			var tput, p50, p99, ratio, cores, cpuPerOp, waiting []float64
			for _, r := range runs {
				res, ok := r.ops[cfg.name][op]
				if !ok {
					continue
				}
				tput = append(tput, res.opsPerSec)
				p50 = append(p50, float64(res.p50.Microseconds()))
				p99 = append(p99, float64(res.p99.Microseconds()))
				cores = append(cores, res.cores)
				cpuPerOp = append(cpuPerOp, 1e6*res.cores/res.opsPerSec)
				waiting = append(waiting, res.waiting)
				if base, ok := r.ops[configs[0].name][op]; ok {
					ratio = append(ratio, res.opsPerSec/base.opsPerSec)
				}
			}
			if len(tput) == 0 {
				continue
			}
			rs := "-"
			if len(ratio) > 0 {
				rs = fmt.Sprintf("%.2fx", median(ratio))
			}
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.0f\t%.0f\t%s\t%.2f\t%.0f\t%.2f\t\n", cfg.name, op, median(tput), median(p50), median(p99), rs, median(cores), median(cpuPerOp), median(waiting))
		}
	}
	tw.Flush()

	var writes, leases []time.Duration
	for _, r := range runs {
		for _, f := range r.failovers {
			writes = append(writes, f.write)
			if f.lease >= 0 {
				leases = append(leases, f.lease)
			}
		}
	}
	if len(writes) == 0 {
		return
	}
	fmt.Printf("\nfailover (3 nodes RF3, leaseholder cut off and %s), %d samples:\n", map[bool]string{false: "killed", true: "crashed"}[*flagCrash], len(writes))
	fmt.Printf("  first write on its tablet through another node: %s\n", spread(writes))
	if len(leases) > 0 {
		fmt.Printf("  another node holds the lease:                   %s\n", spread(leases))
	}
}

// spread prints min, median and max of ds.
func spread(ds []time.Duration) string {
	s := slices.Clone(ds)
	slices.Sort(s)
	ms := func(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d.Microseconds())/1000) }
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return fmt.Sprintf("min %s  median %s  max %s", ms(s[0]), ms(med), ms(s[len(s)-1]))
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
