package chaos

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Memory (doc.go, check 7). A chaos node needs a few hundred MiB; one
// that grew to 10.8 GiB under the long run was killed by the kernel's OOM
// killer, which the run saw only as "node 4 exited by itself", with no
// last words in the node's log (bench/README.md, "Issue 22, twelfth
// session: memory"). So every run samples each node's resident memory
// and reports the peak per node, and a peak past MaxRSS is an anomaly.

// MaxRSS is the resident memory past which a node's growth is an anomaly
// (CHAOS_MAX_RSS_MIB overrides it, in MiB).
const MaxRSS = 2 << 30

// NodeMemory is every chaos node's --max-memory: the nodes share one
// machine with the workloads and other runs, so each is given a share,
// as an operator gives a node its machine's. Its Go limit (1088 MiB,
// after the 256 MiB block cache and 192 MiB of memtables) makes the
// collector keep up with a burst of garbage (a leader reading entries
// back to catch a follower up allocates hundreds of MiB a second) that
// with GOGC alone took a node's heap to 2.6 GiB with 145 MiB live; a
// node whose live memory grows past it still passes MaxRSS, and is
// reported.
const NodeMemory = "1536MiB"

// rssEvery is how often MemWatch samples.
const rssEvery = time.Second

// MemWatch samples the resident memory of a cluster's processes.
type MemWatch struct {
	c      *Cluster
	cancel context.CancelFunc
	done   chan struct{}

	mu sync.Mutex
	// peak and at are each node's largest sample and when it was taken
	// (by node index; a node added later extends them).
	peak []int64
	at   []time.Time
}

// WatchMemory starts sampling c's processes every rssEvery until Stop.
// It reads /proc/PID/status (the process's own resident set, as the OOM
// killer sees it), which needs no answer from the node: a paused or
// stalled node is measured too.
func WatchMemory(c *Cluster) *MemWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &MemWatch{c: c, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		t := time.NewTicker(rssEvery)
		defer t.Stop()
		for {
			w.sample()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return w
}

// Stop ends the sampling (after one last sample).
func (w *MemWatch) Stop() {
	w.cancel()
	<-w.done
	w.sample()
}

func (w *MemWatch) sample() {
	n := w.c.Len()
	for i := range n {
		pid := w.c.Node(i).Pid()
		if pid == 0 {
			continue
		}
		rss, ok := readRSS(pid)
		if !ok {
			continue
		}
		w.record(i, rss, time.Now())
	}
}

// record notes a sample of node i.
func (w *MemWatch) record(i int, rss int64, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.peak) <= i {
		w.peak = append(w.peak, 0)
		w.at = append(w.at, time.Time{})
	}
	if rss > w.peak[i] {
		w.peak[i], w.at[i] = rss, at
	}
}

// Peak is node i's largest resident memory sampled, in bytes.
func (w *MemWatch) Peak(i int) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if i < len(w.peak) {
		return w.peak[i]
	}
	return 0
}

// Summary is the peak per node, for the run's summaries.
func (w *MemWatch) Summary() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var b strings.Builder
	b.WriteString("memory: peak RSS")
	for i, p := range w.peak {
		if p == 0 {
			continue
		}
		fmt.Fprintf(&b, " [node %d %d MiB at %s]", i+1, p>>20, w.at[i].UTC().Format("15:04:05"))
	}
	return b.String()
}

// Anomalies are the nodes whose peak passed max.
func (w *MemWatch) Anomalies(max int64) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for i, p := range w.peak {
		if p > max {
			out = append(out, fmt.Sprintf("node %d grew to %d MiB resident at %s (the bound is %d MiB)", i+1, p>>20, w.at[i].UTC().Format("15:04:05.000"), max>>20))
		}
	}
	return out
}

// maxRSS is MaxRSS or CHAOS_MAX_RSS_MIB.
func maxRSS() int64 {
	if n, err := strconv.ParseInt(os.Getenv("CHAOS_MAX_RSS_MIB"), 10, 64); err == nil && n > 0 {
		return n << 20
	}
	return MaxRSS
}

// readRSS reads a process's resident set size (VmRSS) in bytes.
func readRSS(pid int) (int64, bool) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			fields := strings.Fields(v)
			if len(fields) == 0 {
				return 0, false
			}
			kb, err := strconv.ParseInt(fields[0], 10, 64)
			if err != nil {
				return 0, false
			}
			return kb << 10, true
		}
	}
	return 0, false
}
