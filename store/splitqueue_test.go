package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

// sqlRow is a row as the SQL layer lays it out: its row key, written
// with a packed value, and column entries under it (the row key plus a
// column ID), which a split must never separate from it.
type sqlRow struct {
	key  []byte
	cols [][]byte
}

// sqlRows builds n rows of table in group (group == table: an ordinary
// table; otherwise a colocated database's group).
func sqlRows(t *testing.T, group uint64, table uint32, n int) []sqlRow {
	t.Helper()
	var out []sqlRow
	for i := range n {
		p := binary.BigEndian.AppendUint16(rowenc.GroupPrefix(nil, group), 0)
		p = rowenc.EncodeTableIndexPrefix(p, table, 1)
		k, err := rowenc.EncodeKey(p, types.DInt(i), rowenc.Asc)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, sqlRow{key: k, cols: [][]byte{rowenc.ColumnKey(nil, k, 2), rowenc.ColumnKey(nil, k, 3)}})
	}
	return out
}

func (e *env) putRows(rows []sqlRow, valueSize int) {
	e.t.Helper()
	for _, r := range rows {
		ba := &kvpb.BatchRequest{}
		for _, k := range append([][]byte{r.key}, r.cols...) {
			// Random: sizes are of compressed files.
			v := make([]byte, valueSize)
			for i := range v {
				v[i] = byte(rand.IntN(256))
			}
			ba.Add(&kvpb.PutRequest{Key: k, Value: v})
		}
		if _, err := e.send(context.Background(), ba); err != nil {
			e.t.Fatalf("put row %x: %v", r.key, err)
		}
	}
}

// checkRows reads every row and column entry back and checks no tablet
// boundary falls inside a row's key family [row, PrefixEnd(row)).
func (e *env) checkRows(rows []sqlRow) {
	e.t.Helper()
	for _, r := range rows {
		for _, k := range append([][]byte{r.key}, r.cols...) {
			if v := e.get(string(k)); len(v) == 0 {
				e.t.Fatalf("key %x not readable", k)
			}
		}
	}
	for _, d := range e.s.Tablets() {
		for _, r := range rows {
			if bytes.Compare(d.StartKey, r.key) > 0 && bytes.Compare(d.StartKey, keys.PrefixEnd(r.key)) < 0 {
				e.t.Fatalf("tablet %s starts inside the row %x", &d, r.key)
			}
		}
	}
}

// runSplitPasses runs the split queue until a few passes in a row split
// nothing (in raft mode a new right side needs a moment to elect).
func (e *env) runSplitPasses(q *splitQueue) int {
	e.t.Helper()
	total, idle := 0, 0
	for i := 0; i < 200 && idle < 3; i++ {
		if err := e.eng.Flush(); err != nil {
			e.t.Fatal(err)
		}
		e.settle()
		n := q.pass(context.Background())
		total += n
		if n == 0 {
			idle++
		} else {
			idle = 0
		}
	}
	return total
}

// TestSplitQueueBySize: an ordinary table's tablet over the split size
// splits repeatedly, only at row boundaries, and every row stays
// readable; a colocated group of two tables, also over the size, stays
// one tablet.
func TestSplitQueueBySize(t *testing.T) {
	const splitSize = 16 << 10
	e := newEnv(t, Config{SplitSize: splitSize, SplitQPS: -1, SplitUnit: rowenc.SplitUnit})
	ctx := context.Background()
	// A colocated database's group (50: the database's ID) holding
	// tables 51 and 52, split off as DDL does, then an ordinary table 100.
	coloc := rowenc.GroupSpan(50)
	for _, k := range [][]byte{coloc.Key, coloc.EndKey} {
		if _, _, err := e.s.Split(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	e.settle()
	colocRows := append(sqlRows(t, 50, 51, 150), sqlRows(t, 50, 52, 150)...)
	tableRows := sqlRows(t, 100, 100, 300)
	e.putRows(colocRows, 100)
	e.putRows(tableRows, 100)
	if err := e.eng.Flush(); err != nil {
		t.Fatal(err)
	}
	colocTablet := func() kvpb.TabletDescriptor {
		for _, d := range e.s.Tablets() {
			if bytes.Equal(d.StartKey, coloc.Key) {
				return d
			}
		}
		t.Fatalf("no tablet starts at the colocated group: %v", e.s.Tablets())
		return kvpb.TabletDescriptor{}
	}
	before := colocTablet()
	if size, err := e.eng.EstimateDiskUsage(before.StartKey, before.EndKey); err != nil || size <= splitSize {
		t.Fatalf("colocation tablet is %d bytes (%v): the test needs it over %d", size, err, splitSize)
	}
	n := e.runSplitPasses(newSplitQueue(e.s))
	if st := e.s.SplitQueueStats(); n < 4 || st.BySize != int64(n) {
		t.Fatalf("%d splits (stats %+v), want at least 4 by size; tablets %v", n, st, e.s.Tablets())
	}
	if after := colocTablet(); after.String() != before.String() {
		t.Fatalf("colocation tablet %s became %s", &before, &after)
	}
	inTable := 0
	for _, d := range e.s.Tablets() {
		if bytes.HasPrefix(d.StartKey, rowenc.GroupPrefix(nil, 100)) {
			inTable++
		}
	}
	if inTable < 4 {
		t.Fatalf("table 100 was split %d times, want at least 4: %v", inTable, e.s.Tablets())
	}
	e.checkRows(append(colocRows, tableRows...))
	e.reopen()
	e.checkRows(append(colocRows, tableRows...))
}

// TestSplitQueueByLoad: reads spread over a table push its tablet over
// the load threshold; it splits at a row boundary that divides the
// sampled reads, and everything stays readable. A single hot row is
// not split.
func TestSplitQueueByLoad(t *testing.T) {
	e := newEnv(t, Config{SplitSize: -1, SplitQPS: 100, SplitUnit: rowenc.SplitUnit})
	rows := sqlRows(t, 100, 100, 200)
	e.putRows(rows, 10)
	q := newSplitQueue(e.s)
	read := func(pick func() sqlRow, d time.Duration) int {
		total := 0
		for end := time.Now().Add(d); time.Now().Before(end); {
			for range 200 {
				e.get(string(pick().key))
			}
			e.settle()
			total += q.pass(context.Background())
			time.Sleep(20 * time.Millisecond)
		}
		return total
	}
	// One hot row: over the threshold, but no split divides its load.
	if n := read(func() sqlRow { return rows[7] }, 1300*time.Millisecond); n != 0 {
		t.Fatalf("a single hot row split its tablet %d times: %v", n, e.s.Tablets())
	}
	if len(q.backoff) == 0 {
		t.Fatal("the hot row's tablet was never found over the load threshold")
	}
	q = newSplitQueue(e.s) // forget the hot row's backoff
	for _, d := range e.s.Tablets() {
		e.s.Replica(d.TabletID).ResetLoadSamples()
	}
	n := read(func() sqlRow { return rows[rand.IntN(len(rows))] }, 2500*time.Millisecond)
	if st := e.s.SplitQueueStats(); n == 0 || st.ByLoad != int64(n) {
		t.Fatalf("%d splits (stats %+v) under spread load, want some by load; tablets %v", n, st, e.s.Tablets())
	}
	e.checkRows(rows)
	var starts []string
	for _, d := range e.s.Tablets() {
		starts = append(starts, fmt.Sprintf("%x", d.StartKey))
	}
	t.Logf("tablets start at %s", strings.Join(starts, " "))
}

// TestSplitQueueDefaults: with no thresholds configured the queue splits
// by load past DefaultSplitQPS (and by size past DefaultSplitSize), and a
// tablet under light load, as in most tests, is measured but not split.
func TestSplitQueueDefaults(t *testing.T) {
	e := newEnv(t, Config{SplitUnit: rowenc.SplitUnit})
	q := newSplitQueue(e.s)
	if q.qps != DefaultSplitQPS || q.size != DefaultSplitSize {
		t.Fatalf("default thresholds %v batches/s, %d bytes; want %v, %d", q.qps, q.size, float64(DefaultSplitQPS), DefaultSplitSize)
	}
	rows := sqlRows(t, 100, 100, 200)
	e.putRows(rows, 10)
	splits := 0
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); {
		for range 4 {
			e.get(string(rows[rand.IntN(len(rows))].key))
		}
		splits += q.pass(context.Background())
		time.Sleep(20 * time.Millisecond)
	}
	if splits != 0 {
		t.Fatalf("%d splits under light load: %v", splits, e.s.Tablets())
	}
	// The queue did measure the load: it just was far under the default.
	var rate float64
	for _, d := range e.s.Tablets() {
		if d.ContainsKey(rows[0].key) {
			m := e.s.Replica(d.TabletID).Metrics()
			rate = q.rate(d.TabletID, time.Now(), m.ReadBatches.Load()+m.WriteBatches.Load())
		}
	}
	if rate < 20 || rate > DefaultSplitQPS/2 {
		t.Fatalf("measured %.0f batches/s, want the light load (20 to %d)", rate, DefaultSplitQPS/2)
	}
}

// TestSplitQueueByLoadKeepsUnitsWhole: load spread over a colocated
// database's group of two tables, and over the system span, past the load
// threshold splits neither: a split may fall only at their bounds.
func TestSplitQueueByLoadKeepsUnitsWhole(t *testing.T) {
	e := newEnv(t, Config{SplitSize: -1, SplitQPS: 100, SplitUnit: rowenc.SplitUnit})
	ctx := context.Background()
	coloc := rowenc.GroupSpan(50)
	for _, k := range [][]byte{coloc.Key, coloc.EndKey} {
		if _, _, err := e.s.Split(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	e.settle()
	rows := append(sqlRows(t, 50, 51, 100), sqlRows(t, 50, 52, 100)...)
	e.putRows(rows, 10)
	var system [][]byte
	for i := range 100 {
		k := fmt.Appendf(keys.Min[:len(keys.Min):len(keys.Min)], "load-%03d", i)
		system = append(system, k)
		ba := &kvpb.BatchRequest{}
		ba.Add(&kvpb.PutRequest{Key: k, Value: []byte("v")})
		if _, err := e.send(ctx, ba); err != nil {
			t.Fatal(err)
		}
	}
	q := newSplitQueue(e.s)
	splits := 0
	for end := time.Now().Add(2500 * time.Millisecond); time.Now().Before(end); {
		for range 100 {
			e.get(string(rows[rand.IntN(len(rows))].key))
			e.get(string(system[rand.IntN(len(system))]))
		}
		e.settle()
		splits += q.pass(ctx)
		time.Sleep(20 * time.Millisecond)
	}
	if len(q.backoff) == 0 {
		t.Fatalf("no tablet was found over the load threshold (%d splits): %v", splits, e.s.Tablets())
	}
	for _, d := range e.s.Tablets() {
		if bytes.Compare(d.StartKey, coloc.Key) > 0 && bytes.Compare(d.StartKey, coloc.EndKey) < 0 {
			t.Errorf("tablet %s starts inside the colocated group %s", &d, coloc)
		}
		if bytes.Compare(d.StartKey, keys.Min) > 0 && bytes.Compare(d.StartKey, keys.TableDataMin) < 0 {
			t.Errorf("tablet %s starts inside the system span", &d)
		}
	}
	e.checkRows(rows)
	t.Logf("%d splits (at unit bounds); tablets %v", splits, e.s.Tablets())
}

// TestSplitQueueEstimatesSizeAfterWrites: the queue estimates a tablet's
// size again only once it has taken a write since the last estimate, or
// the engine flushed or ingested since (the estimate sees only SSTs), or
// the estimate is sizeRecheck old, so idle tablets cost no estimate per
// pass; a tablet written past the split size is split as soon as its rows
// reach an SST.
func TestSplitQueueEstimatesSizeAfterWrites(t *testing.T) {
	const splitSize = 16 << 10
	e := newEnv(t, Config{SplitSize: splitSize, SplitQPS: -1, SplitUnit: rowenc.SplitUnit})
	ctx := context.Background()
	for _, k := range [][]byte{rowenc.GroupSpan(100).Key, rowenc.GroupSpan(101).Key, rowenc.GroupSpan(101).EndKey} {
		if _, _, err := e.s.Split(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	e.settle()
	tablets := len(e.s.Tablets())
	q := newSplitQueue(e.s)
	pass := func(what string, wantEstimates, wantSplits int) {
		t.Helper()
		before := q.estimates
		if n := q.pass(ctx); n != wantSplits || q.estimates-before != wantEstimates {
			t.Fatalf("%s: %d estimates and %d splits, want %d and %d", what, q.estimates-before, n, wantEstimates, wantSplits)
		}
	}
	pass("first pass", tablets, 0)
	pass("no writes", 0, 0)
	e.putRows(sqlRows(t, 100, 100, 5), 10)
	pass("five rows into group 100", 1, 0)
	pass("no writes again", 0, 0)
	for id, c := range q.sized {
		c.at = c.at.Add(-sizeRecheck)
		q.sized[id] = c
	}
	pass("estimates sizeRecheck old", tablets, 0)
	e.putRows(sqlRows(t, 101, 101, 300), 100)
	// The estimate sees only SSTs: written past the split size, group
	// 101 still looks small while its rows sit in the memtable.
	pass("group 101 written past the split size, in the memtable", 1, 0)
	if err := e.eng.Flush(); err != nil {
		t.Fatal(err)
	}
	// No write since that estimate, but a flush: every tablet is
	// estimated again, and group 101 splits (it waited a minute for
	// sizeRecheck before).
	pass("after a flush", tablets, 1)
}

// TestSplitQueueByLoadOnlyWhenUseful: while Config.SplitByLoadUseful says
// no (a cluster of one node), load over the threshold splits nothing;
// nor while Config.SplitHeldByLoad says the tablet's requests hold its
// lease here (one gateway sends them); once both allow it, the same load
// splits the tablet.
func TestSplitQueueByLoadOnlyWhenUseful(t *testing.T) {
	var useful, held atomic.Bool
	heldAsked := map[uint64]bool{}
	var mu sync.Mutex
	heldBy := func(tablet uint64) bool {
		mu.Lock()
		heldAsked[tablet] = true
		mu.Unlock()
		return held.Load()
	}
	e := newEnv(t, Config{SplitSize: -1, SplitQPS: 100, SplitUnit: rowenc.SplitUnit, SplitByLoadUseful: useful.Load, SplitHeldByLoad: heldBy})
	rows := sqlRows(t, 100, 100, 200)
	e.putRows(rows, 10)
	q := newSplitQueue(e.s)
	read := func(d time.Duration) int {
		total := 0
		for end := time.Now().Add(d); time.Now().Before(end); {
			for range 200 {
				e.get(string(rows[rand.IntN(len(rows))].key))
			}
			e.settle()
			total += q.pass(context.Background())
			time.Sleep(20 * time.Millisecond)
		}
		return total
	}
	if n := read(2500 * time.Millisecond); n != 0 {
		t.Fatalf("%d splits by load while splitting was of no use; tablets %v", n, e.s.Tablets())
	}
	useful.Store(true)
	held.Store(true)
	if n := read(2500 * time.Millisecond); n != 0 {
		t.Fatalf("%d splits by load while the tablet's requests held its lease here; tablets %v", n, e.s.Tablets())
	}
	mu.Lock()
	asked := len(heldAsked)
	mu.Unlock()
	if asked == 0 {
		t.Fatal("SplitHeldByLoad was never asked")
	}
	held.Store(false)
	if n := read(2500 * time.Millisecond); n == 0 {
		t.Fatalf("no split by load once it was of use; stats %+v", e.s.SplitQueueStats())
	}
	e.checkRows(rows)
}
