package testcluster

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
)

var splitScanDuration = flag.Duration("split-scan-duration", 4*time.Second,
	"how long TestClusterScansRacingSplits races scans against splits and writes")

// TestClusterScansRacingSplits: scans through every node race repeated
// splits (through random gateways, at random keys of the scanned span) and
// a write load that keeps adding versions above the scans' timestamp. Every
// scan reads at one fixed timestamp, so its answer is exact: every key of
// the span exactly once, in order, with the value it had then. Scans are
// forward and reverse, whole (one batch) and paginated (a row limit, the
// resume span fed back), and pairs of limited scans in one batch. A scan
// that fails (routing retries exhausted while the tablets keep moving) is
// counted, not judged; a wrong answer fails the test.
//
// It found the rows a scan returned twice in TestClusterSplitsUnderWriteLoad
// (about every other run before the fix: a span divided by descriptors
// from lookups that disagreed went out in overlapping pieces; see
// kv.DistSender.forEachTablet). -split-scan-duration runs it longer.
func TestClusterScansRacingSplits(t *testing.T) {
	c := StartCluster(t, ClusterOptions{})
	c.WaitLeader(1, 10*time.Second)
	ctx := context.Background()

	const nKeys = 400
	key := func(i int) []byte { return fmt.Appendf(nil, "\x03s%05d", i) }
	start, end := []byte("\x03s"), []byte("\x03t")
	want := make([][]byte, nKeys) // values as of readTS
	for lo := 0; lo < nKeys; lo += 50 {
		for attempt := 0; ; attempt++ {
			b := &kv.Batch{}
			for i := lo; i < lo+50; i++ {
				want[i] = fmt.Appendf(nil, "v0-%05d", i)
				b.Put(key(i), want[i])
			}
			err := c.Nodes[0].DB.Run(ctx, b)
			if err == nil {
				break
			}
			if attempt > 5 {
				t.Fatalf("seeding keys %d..: %v", lo, err)
			}
		}
	}
	// In-process every node's physical clock is the same: past the
	// maximum offset, a fresh reading is above every write acknowledged.
	time.Sleep(2 * c.opts.MaxOffset)
	readTS := c.Nodes[0].Clock.Now()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var splits, splitErrs, writes atomic.Int64
	// Splitters: split the scanned span over and over at random keys
	// (some in the middle of a row prefix, some exactly on a key).
	for s := range 2 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(s), 7))
			for {
				select {
				case <-stop:
					return
				default:
				}
				k := key(rng.IntN(nKeys))
				if rng.IntN(2) == 0 {
					k = append(k, 0x80)
				}
				ba := &kvpb.BatchRequest{}
				ba.Add(&kvpb.SplitRequest{SplitKey: k})
				n := c.Nodes[rng.IntN(len(c.Nodes))]
				if _, err := n.DB.Send(ctx, ba); err != nil {
					splitErrs.Add(1)
				} else {
					splits.Add(1)
				}
				time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
			}
		})
	}
	// Writers: new versions above readTS, invisible to the scans but
	// keeping the tablets busy (and their latches taken) while they split.
	for w := range 2 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 11))
			for {
				select {
				case <-stop:
					return
				default:
				}
				n := c.Nodes[rng.IntN(len(c.Nodes))]
				i := rng.IntN(nKeys)
				if n.DB.Put(ctx, key(i), fmt.Appendf(nil, "v1-%05d", i)) == nil {
					writes.Add(1)
				}
			}
		})
	}

	type shape struct {
		name    string
		reverse bool
		limit   int64 // rows per batch (0: none)
		pair    bool  // two limited scans of the two halves in one batch
	}
	shapes := []shape{
		{name: "forward"},
		{name: "reverse", reverse: true},
		{name: "forward-limit", limit: 37},
		{name: "reverse-limit", reverse: true, limit: 37},
		{name: "forward-limit-1", limit: 1},
		{name: "forward-pair", limit: 53, pair: true},
		{name: "reverse-pair", reverse: true, limit: 53, pair: true},
	}
	var (
		scans, scanErrs atomic.Int64
		mu              sync.Mutex
		lastErr         error
		bad             []string
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(bad) < 10 {
			bad = append(bad, fmt.Sprintf(format, args...))
		}
	}
	var scanWG sync.WaitGroup
	for sc := range 4 {
		scanWG.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(sc), 13))
			for {
				select {
				case <-stop:
					return
				default:
				}
				sh := shapes[rng.IntN(len(shapes))]
				n := c.Nodes[rng.IntN(len(c.Nodes))]
				// A sub-span with random ends, so the scans start and
				// end inside tablets as well as on their boundaries.
				lo, hi := rng.IntN(nKeys/4), nKeys-rng.IntN(nKeys/4)
				spanLo, spanHi := key(lo), key(hi)
				if lo == 0 {
					spanLo = start
				}
				if hi == nKeys {
					spanHi = end
				}
				var spans []kvpb.Span
				if sh.pair {
					mid := key((lo + hi) / 2)
					spans = []kvpb.Span{{Key: spanLo, EndKey: mid}, {Key: mid, EndKey: spanHi}}
				} else {
					spans = []kvpb.Span{{Key: spanLo, EndKey: spanHi}}
				}
				got, err := scanAll(ctx, n.DB, readTS, spans, sh.reverse, sh.limit)
				scans.Add(1)
				if err != nil {
					scanErrs.Add(1)
					mu.Lock()
					lastErr = err
					mu.Unlock()
					continue
				}
				for si, rows := range got {
					wantLo, wantHi := lo, hi
					if sh.pair {
						if si == 0 {
							wantHi = (lo + hi) / 2
						} else {
							wantLo = (lo + hi) / 2
						}
					}
					if msg := checkRows(rows, key, want, wantLo, wantHi, sh.reverse); msg != "" {
						fail("%s scan %d of keys [%d, %d) through node %d: %s", sh.name, si, wantLo, wantHi, n.ID, msg)
					}
				}
			}
		})
	}
	// Run for the duration, and on a slow (shared) machine on until a
	// fair number of scans have raced the splits.
	begin := time.Now()
	for time.Since(begin) < *splitScanDuration ||
		(scans.Load()-scanErrs.Load() < 20 && time.Since(begin) < 30*time.Second) {
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	scanWG.Wait()
	wg.Wait()
	t.Logf("%d scans (%d failed, last: %v), %d splits (%d refused), %d writes; node 1 has %d tablets",
		scans.Load(), scanErrs.Load(), lastErr, splits.Load(), splitErrs.Load(), writes.Load(), len(c.Nodes[0].Store.Tablets()))
	for _, b := range bad {
		t.Error(b)
	}
	if splits.Load() < 5 {
		t.Errorf("only %d splits: the scans raced too few", splits.Load())
	}
	if scans.Load()-scanErrs.Load() < 10 {
		t.Errorf("only %d of %d scans succeeded", scans.Load()-scanErrs.Load(), scans.Load())
	}
}

// scanAll reads every span at ts, in one batch per page: with a limit, each
// page asks for up to limit rows per scan and the next page resumes each
// unfinished scan from its resume span. It returns each span's rows.
func scanAll(ctx context.Context, db *kv.DB, ts hlc.Timestamp, spans []kvpb.Span, reverse bool, limit int64) ([][]kvpb.KeyValue, error) {
	out := make([][]kvpb.KeyValue, len(spans))
	todo := append([]kvpb.Span(nil), spans...)
	live := make([]bool, len(spans))
	for i := range live {
		live[i] = true
	}
	for pages := 0; ; pages++ {
		if pages > 100000 {
			return nil, errors.New("scan does not finish")
		}
		ba := &kvpb.BatchRequest{}
		ba.Timestamp = ts
		var idx []int
		for i, s := range todo {
			if live[i] {
				ba.Add(&kvpb.ScanRequest{Key: s.Key, EndKey: s.EndKey, MaxKeys: limit, Reverse: reverse})
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 {
			return out, nil
		}
		br, err := db.Send(ctx, ba)
		if err != nil {
			return nil, err
		}
		for j, i := range idx {
			sr := br.Responses[j].(*kvpb.ScanResponse)
			out[i] = append(out[i], sr.Rows...)
			if limit > 0 && int64(len(sr.Rows)) > limit {
				return nil, fmt.Errorf("scan with a limit of %d answered %d rows", limit, len(sr.Rows))
			}
			if sr.ResumeSpan == nil {
				live[i] = false
				continue
			}
			if limit == 0 {
				return nil, fmt.Errorf("an unlimited scan answered resume span %s", sr.ResumeSpan)
			}
			todo[i] = *sr.ResumeSpan
		}
	}
}

// checkRows reports how rows differ from keys [lo, hi) with their values
// in want, in scan order ("" if they do not).
func checkRows(rows []kvpb.KeyValue, key func(int) []byte, want [][]byte, lo, hi int, reverse bool) string {
	n := hi - lo
	if len(rows) != n {
		seen := map[string]int{}
		dups := 0
		for _, r := range rows {
			if seen[string(r.Key)]++; seen[string(r.Key)] == 2 {
				dups++
			}
		}
		var ex []string
		for k, c := range seen {
			if c > 1 && len(ex) < 5 {
				ex = append(ex, fmt.Sprintf("%q", k))
			}
		}
		return fmt.Sprintf("%d rows, want %d (%d keys more than once, e.g. %v)", len(rows), n, dups, ex)
	}
	for j, r := range rows {
		i := lo + j
		if reverse {
			i = hi - 1 - j
		}
		if !bytes.Equal(r.Key, key(i)) {
			return fmt.Sprintf("row %d is %q, want %q", j, r.Key, key(i))
		}
		if !bytes.Equal(r.Value, want[i]) {
			return fmt.Sprintf("row %d (%q) = %q, want %q", j, r.Key, r.Value, want[i])
		}
	}
	return ""
}
