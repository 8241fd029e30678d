// Command applystall measures what a bulk apply on one raft group costs
// the node's other groups (raftnode, doc.go invariant 5): a small
// proposal's latency (a transaction heartbeat's, a point write's) while
// -bulk groups apply large batches, and the bulk groups' apply rate,
// with large applies inside the round (the baseline: ApplyOffloadBytes
// -1, how every apply was done before) and offloaded to workers (the
// default), in the same run, on a real engine with synced commits.
//
// Each bulk group's state machine writes every entry as -keys puts of
// -value bytes (a COPY batch's rows and index entries; the real tablet
// decodes a batch representation instead). The bulk proposers keep one
// entry in flight per group; the small proposer proposes one entry to its
// own group every -every and waits for it to be applied and observed.
// Each mode runs -runs times for -d; the medians are printed, and the
// offloaded/inline ratios.
//
//	go run ./bench/applystall -bulk 2 -keys 50000 -d 10s -runs 3
package main

import (
	"cmp"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"log"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/raftnode"
	"github.com/cairn-db/cairn/storage"
	pb "go.etcd.io/raft/v3/raftpb"
)

var (
	flagBulk  = flag.Int("bulk", 2, "groups applying bulk batches")
	flagKeys  = flag.Int("keys", 50000, "puts per bulk entry")
	flagValue = flag.Int("value", 48, "bytes per put's value")
	flagEvery = flag.Duration("every", 10*time.Millisecond, "interval between the small proposals")
	flagDur   = flag.Duration("d", 10*time.Second, "duration of each run")
	flagRuns  = flag.Int("runs", 3, "runs of each mode (medians reported)")
	flagDir   = flag.String("dir", "", "directory for the engines (default: temp dirs under /tmp)")
)

// sm is a group's state machine. A bulk entry's data is its sequence
// number followed by padding (it stands for the batch a proposal
// carries); Apply writes -keys puts for it. Applied signals every
// observed entry's sequence number on seen.
type sm struct {
	tablet uint64
	bulk   bool
	val    []byte
	seen   chan uint64
}

func (m *sm) Apply(b *storage.Batch, e *pb.Entry) error {
	d := e.GetData()
	if !m.bulk {
		return b.Put(storage.MVCCKey{Key: keys.TabletReplicated(m.tablet, "s"+string(d[:8]))}, d)
	}
	prefix := keys.TabletReplicated(m.tablet, "b")
	k := make([]byte, 0, len(prefix)+16)
	for i := range *flagKeys {
		k = binary.BigEndian.AppendUint64(append(k[:0], prefix...), e.GetIndex())
		k = binary.BigEndian.AppendUint64(k, uint64(i))
		if err := b.Put(storage.MVCCKey{Key: k}, m.val); err != nil {
			return err
		}
	}
	return nil
}

func (m *sm) Applied(entries []*pb.Entry, _ bool) {
	for _, e := range entries {
		if len(e.GetData()) >= 8 {
			m.seen <- binary.BigEndian.Uint64(e.GetData())
		}
	}
}

func (m *sm) LeaseAcquired(uint64, bool)                       {}
func (m *sm) Snapshot() ([]byte, error)                        { return nil, nil }
func (m *sm) ApplySnapshot(*storage.Batch, *pb.Snapshot) error { return nil }

// waitLease waits until n's replica of tablet holds its lease.
func waitLease(n *raftnode.Node, tablet uint64) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		if t, _ := n.Replica(tablet).Lease(); t != 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}

// result is one run's figures.
type result struct {
	p50, p99, max time.Duration // the small proposals' latency
	small         int           // small proposals answered
	bulkPerSec    float64       // bulk entries applied per second, all groups
	offloaded     int64
}

func run(offload bool) (result, error) {
	dir := *flagDir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("/tmp", "applystall"); err != nil {
			return result{}, err
		}
	} else {
		dir = fmt.Sprintf("%s/%d", dir, time.Now().UnixNano())
	}
	defer os.RemoveAll(dir)
	eng, err := storage.Open(dir, storage.Options{})
	if err != nil {
		return result{}, err
	}
	defer eng.Close()
	cfg := raftnode.Config{NodeID: 1}
	if !offload {
		cfg.ApplyOffloadBytes = -1
	}
	n := raftnode.NewNode(cfg, eng, nil)
	val := []byte(strings.Repeat("v", *flagValue))
	// Tablet 1 takes the small proposals; 2.. the bulk ones.
	sms := make([]*sm, 1+*flagBulk)
	for i := range sms {
		sms[i] = &sm{tablet: uint64(i + 1), bulk: i > 0, val: val, seen: make(chan uint64, 1024)}
		if _, err := n.AddReplica(sms[i].tablet, []uint64{1}, sms[i]); err != nil {
			return result{}, err
		}
		if err := n.Campaign(sms[i].tablet); err != nil {
			return result{}, err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- n.Run(ctx, 10*time.Millisecond) }()
	defer func() {
		cancel()
		if err := <-runErr; err != nil {
			log.Printf("Run: %v", err)
		}
	}()
	for _, m := range sms {
		if err := waitLease(n, m.tablet); err != nil {
			return result{}, fmt.Errorf("tablet %d: no lease: %w", m.tablet, err)
		}
	}
	// A bulk entry's data is at least the offload threshold's default,
	// as a COPY batch's is (its size, not its puts, decides).
	pad := make([]byte, 256<<10)
	stop := make(chan struct{})
	var bulkApplied atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for _, m := range sms[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := uint64(1); ; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				d := append(binary.BigEndian.AppendUint64(nil, seq), pad...)
				if err := n.Propose(m.tablet, d); err != nil {
					log.Printf("tablet %d: %v", m.tablet, err)
					return
				}
				select {
				case <-m.seen:
					bulkApplied.Add(1)
				case <-stop:
					return
				}
			}
		}()
	}
	var lat []time.Duration
	small := sms[0]
	tick := time.NewTicker(*flagEvery)
	end := time.After(*flagDur)
loop:
	for seq := uint64(1); ; seq++ {
		select {
		case <-end:
			break loop
		case <-tick.C:
		}
		t0 := time.Now()
		if err := n.Propose(small.tablet, binary.BigEndian.AppendUint64(nil, seq)); err != nil {
			return result{}, err
		}
		for got := range small.seen {
			if got == seq {
				break
			}
		}
		lat = append(lat, time.Since(t0))
	}
	tick.Stop()
	elapsed := time.Since(start)
	close(stop)
	wg.Wait()
	slices.Sort(lat)
	r := result{small: len(lat), bulkPerSec: float64(bulkApplied.Load()) / elapsed.Seconds(), offloaded: n.Stats().OffloadedApplies.Load()}
	if len(lat) > 0 {
		r.p50, r.p99, r.max = lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1]
	}
	return r, nil
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:3], " ")
}

func median[T cmp.Ordered](rs []result, f func(result) T) T {
	v := make([]T, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

func main() {
	flag.Parse()
	fmt.Printf("applystall: %d bulk groups, %d puts of %d B per bulk entry, a small proposal every %s, %d runs of %s per mode; load %s\n",
		*flagBulk, *flagKeys, *flagValue, *flagEvery, *flagRuns, *flagDur, loadavg())
	modes := []struct {
		name    string
		offload bool
	}{{"inline (baseline)", false}, {"offloaded", true}}
	res := map[bool][]result{}
	for i := range *flagRuns {
		for _, m := range modes {
			r, err := run(m.offload)
			if err != nil {
				log.Fatalf("%s: %v", m.name, err)
			}
			fmt.Printf("run %d %-18s small p50 %8.2f ms  p99 %8.2f ms  max %8.2f ms  (%d answered)  bulk %6.1f entries/s  offloaded %d  load %s\n",
				i+1, m.name, ms(r.p50), ms(r.p99), ms(r.max), r.small, r.bulkPerSec, r.offloaded, loadavg())
			res[m.offload] = append(res[m.offload], r)
		}
	}
	fmt.Println("\nmedians            small p50    small p99    small max    bulk entries/s")
	type row struct {
		p50, p99, max time.Duration
		bulk          float64
	}
	rows := map[bool]row{}
	for _, m := range modes {
		rs := res[m.offload]
		r := row{
			median(rs, func(r result) time.Duration { return r.p50 }),
			median(rs, func(r result) time.Duration { return r.p99 }),
			median(rs, func(r result) time.Duration { return r.max }),
			median(rs, func(r result) float64 { return r.bulkPerSec }),
		}
		rows[m.offload] = r
		fmt.Printf("%-18s %9.2f ms %9.2f ms %9.2f ms %12.1f\n", m.name, ms(r.p50), ms(r.p99), ms(r.max), r.bulk)
	}
	in, off := rows[false], rows[true]
	fmt.Printf("offloaded/inline   %9.2fx   %9.2fx   %9.2fx   %11.2fx\n",
		float64(off.p50)/float64(in.p50), float64(off.p99)/float64(in.p99), float64(off.max)/float64(in.max), off.bulk/in.bulk)
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }
