package tablet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/mvcc"
	pb "go.etcd.io/raft/v3/raftpb"
)

// readRow reads the row span of row at ts through the replica, as a point
// read outside a transaction does.
func (h *harness) readRow(row []byte, ts hlc.Timestamp) ([]kvpb.KeyValue, error) {
	br, err := h.sendAt(ts, &kvpb.ScanRequest{Key: row, EndKey: keys.PrefixEnd(row)})
	if err != nil {
		return nil, err
	}
	return br.Responses[0].(*kvpb.ScanResponse).Rows, nil
}

// engineRow is the oracle: the row span read from the engine directly.
func (h *harness) engineRow(t *testing.T, row []byte, ts hlc.Timestamp) []kvpb.KeyValue {
	t.Helper()
	res, err := mvcc.Scan(h.eng, row, keys.PrefixEnd(row), ts, mvcc.ScanOptions{})
	if err != nil {
		t.Fatalf("engine read of %q at %s: %v", row, ts, err)
	}
	return res.Rows
}

func sameRows(a, b []kvpb.KeyValue) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i].Key, b[i].Key) || !bytes.Equal(a[i].Value, b[i].Value) || a[i].Timestamp != b[i].Timestamp {
			return false
		}
	}
	return true
}

func fmtCacheRows(rows []kvpb.KeyValue) string {
	var b bytes.Buffer
	for _, kv := range rows {
		fmt.Fprintf(&b, "%q=%q@%s ", kv.Key, kv.Value, kv.Timestamp)
	}
	return b.String()
}

// hits is how many reads the replica's row cache answered.
func (h *harness) hits() uint64 {
	h.r.valid.mu.Lock()
	defer h.r.valid.mu.Unlock()
	return h.r.valid.rowHits
}

// TestRowCacheSeesEveryWrite: a row read twice is answered from the row
// cache the second time; after a write of the row by any path (a put of
// its key or of another key of its span, a delete, a range deletion, a
// transaction's intent and its commit, a one-phase commit, an ingested
// SST) the next read returns what the engine holds, and a write next to
// the row leaves the entry in place.
func TestRowCacheSeesEveryWrite(t *testing.T) {
	h := newHarness(t, Config{RowCache: NewRowCache(1 << 20)})
	ctx := context.Background()
	next := int64(100)
	var row []byte
	key := func(suffix string) []byte { return append(append([]byte(nil), row...), suffix...) }
	put := func(k []byte, v string) func(at hlc.Timestamp) {
		return func(at hlc.Timestamp) {
			if _, err := h.sendAt(at, &kvpb.PutRequest{Key: k, Value: []byte(v)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, tc := range []struct {
		name  string
		write func(at hlc.Timestamp)
		// stays: the write is outside the row, whose entry stays.
		stays bool
	}{
		{name: "put of the row's key", write: func(at hlc.Timestamp) { put(key("a"), "put")(at) }},
		{name: "put of another key of the row", write: func(at hlc.Timestamp) { put(key("z"), "other")(at) }},
		{name: "put of the next row", stays: true, write: func(at hlc.Timestamp) {
			put(append(append([]byte(nil), row[:len(row)-1]...), '0'), "next")(at)
		}},
		{name: "delete", write: func(at hlc.Timestamp) {
			if _, err := h.sendAt(at, &kvpb.DeleteRequest{Key: key("a")}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "range deletion", write: func(at hlc.Timestamp) {
			if _, err := h.sendAt(at, &kvpb.DeleteRangeRequest{Key: row, EndKey: keys.PrefixEnd(row)}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "intent, then its commit", write: func(at hlc.Timestamp) {
			name := "writer" + string(row)
			h.newTxn(name, at, 0)
			ba := &kvpb.BatchRequest{}
			ba.Add(&kvpb.PutRequest{Key: key("a"), Value: []byte("txn")})
			if _, err := h.send(ctx, ba, name); err != nil {
				t.Fatal(err)
			}
			// The intent is in the way of a transaction's read above
			// it: the read must meet it, not the cached row.
			reader := h.newTxn("reader"+string(row), wallTS(at.WallTime+5), 0)
			rb := &kvpb.BatchRequest{}
			rb.Txn = reader
			rb.Add(&kvpb.ScanRequest{Key: row, EndKey: keys.PrefixEnd(row)})
			_, _, err := h.r.Evaluate(rb)
			var wie *kvpb.WriteIntentError
			if !errors.As(err, &wie) {
				t.Fatalf("a read above an intent of the row: %v, want a WriteIntentError", err)
			}
			ba = &kvpb.BatchRequest{}
			ba.Add(&kvpb.EndTxnRequest{Key: key("a"), Commit: true, LockSpans: []kvpb.Span{{Key: key("a")}}})
			if _, err := h.send(ctx, ba, name); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "one-phase commit", write: func(at hlc.Timestamp) {
			name := "onepc" + string(row)
			h.newTxn(name, at, 0)
			ba := &kvpb.BatchRequest{}
			ba.Add(&kvpb.PutRequest{Key: key("a"), Value: []byte("1pc")})
			ba.Add(&kvpb.EndTxnRequest{Key: key("a"), Commit: true, LockSpans: []kvpb.Span{{Key: key("a")}}})
			br, err := h.send(ctx, ba, name)
			if err != nil {
				t.Fatal(err)
			}
			if !br.OnePhaseCommit {
				t.Fatal("not committed in one phase")
			}
		}},
		{name: "SST", write: func(at hlc.Timestamp) {
			k := string(key("a"))
			if _, err := h.sendAt(at, &kvpb.AddSSTableRequest{Key: []byte(k), EndKey: []byte(k + "\x00"), Data: sstOf(t, at, k, "sst")}); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			row = []byte(fmt.Sprintf("\x03row%02d/", i))
			next += 10
			put(key("a"), "old")(wallTS(next))
			put(key("b"), "old-b")(wallTS(next))
			next += 10
			readAt := wallTS(next)
			first, err := h.readRow(row, readAt)
			if err != nil {
				t.Fatal(err)
			}
			if len(first) != 2 {
				t.Fatalf("read before the write: %s, want the row's two keys", fmtCacheRows(first))
			}
			before := h.hits()
			second, err := h.readRow(row, readAt)
			if err != nil {
				t.Fatal(err)
			}
			if h.hits() != before+1 {
				t.Fatal("the second read of an unwritten row was not answered from the row cache")
			}
			if !sameRows(first, second) {
				t.Fatalf("the cache answered %s, the engine %s", fmtCacheRows(second), fmtCacheRows(first))
			}
			next += 10
			tc.write(wallTS(next))
			next += 10
			before = h.hits()
			got, err := h.readRow(row, wallTS(next))
			if err != nil {
				t.Fatal(err)
			}
			if want := h.engineRow(t, row, wallTS(next)); !sameRows(got, want) {
				t.Fatalf("after the write the replica read %s, the engine holds %s", fmtCacheRows(got), fmtCacheRows(want))
			}
			if hit := h.hits() != before; hit != tc.stays {
				t.Fatalf("answered from the cache after the write: %v, want %v", hit, tc.stays)
			}
		})
	}
}

// TestRowCacheReadTimestamps: an entry answers only reads at or above the
// newest version of its row; a read below it, and a read below a version
// written above the read (which the read does not see, and which the
// entry, holding what the read saw, must not claim), read the engine.
func TestRowCacheReadTimestamps(t *testing.T) {
	h := newHarness(t, Config{RowCache: NewRowCache(1 << 20)})
	row := []byte("\x03ts/")
	k := append(append([]byte(nil), row...), 'a')
	for _, at := range []int64{10, 20} {
		if _, err := h.sendAt(wallTS(at), &kvpb.PutRequest{Key: k, Value: []byte(fmt.Sprint("v", at))}); err != nil {
			t.Fatal(err)
		}
	}
	// Read at 30 twice: the second from the cache.
	for i := 0; i < 2; i++ {
		if _, err := h.readRow(row, wallTS(30)); err != nil {
			t.Fatal(err)
		}
	}
	if h.hits() != 1 {
		t.Fatalf("hits = %d after two reads at 30, want 1", h.hits())
	}
	// At 15 the row is v10: the entry (newest 20) must not answer.
	got, err := h.readRow(row, wallTS(15))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || string(got[0].Value) != "v10" {
		t.Fatalf("read at 15: %s, want v10", fmtCacheRows(got))
	}
	if h.hits() != 1 {
		t.Fatal("a read below the entry's newest version was answered from the cache")
	}
	// A version at 100, above the reads at 50: those read v20 from the
	// engine and install nothing that a read at 200 could take for the
	// row's contents.
	if _, err := h.sendAt(wallTS(100), &kvpb.PutRequest{Key: k, Value: []byte("v100")}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		got, err := h.readRow(row, wallTS(50))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || string(got[0].Value) != "v20" {
			t.Fatalf("read at 50: %s, want v20", fmtCacheRows(got))
		}
	}
	got, err = h.readRow(row, wallTS(200))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || string(got[0].Value) != "v100" {
		t.Fatalf("read at 200: %s, want v100", fmtCacheRows(got))
	}
	if h.hits() != 1 {
		t.Fatalf("hits = %d: a read below a newer version filled the cache", h.hits())
	}
}

// TestRowCacheAroundApply drives the raft path by hand: a read evaluated
// after a write's batch committed but before its effects were applied
// reads the write, and one evaluated before the batch committed (which
// reads the old row) installs nothing that outlives the write.
func TestRowCacheAroundApply(t *testing.T) {
	h := newHarness(t, Config{RowCache: NewRowCache(1 << 20)})
	g := &scriptedGroup{term: 5, leader: 1, proposed: make(chan []byte, 1)}
	h.r.SetRaft(g)
	sm := h.r.StateMachine()
	row := []byte("\x03applied/")
	k := append(append([]byte(nil), row...), 'a')
	index := uint64(10)
	put := func(at int64, v string) (*pb.Entry, <-chan error) {
		done := make(chan error, 1)
		go func() {
			_, err := h.sendAt(wallTS(at), &kvpb.PutRequest{Key: k, Value: []byte(v)})
			done <- err
		}()
		index++
		i, term := index, uint64(5)
		return &pb.Entry{Term: &term, Index: &i, Data: <-g.proposed}, done
	}
	// read evaluates a read at 1000 directly, as one that needs no latch
	// the write holds would.
	read := func() string {
		ba := &kvpb.BatchRequest{}
		ba.Timestamp = wallTS(1000)
		ba.Add(&kvpb.ScanRequest{Key: row, EndKey: keys.PrefixEnd(row)})
		_, br, err := h.r.Evaluate(ba)
		if err != nil {
			t.Fatal(err)
		}
		rows := br.Responses[0].(*kvpb.ScanResponse).Rows
		if len(rows) != 1 {
			t.Fatalf("read: %s, want one key", fmtCacheRows(rows))
		}
		return string(rows[0].Value)
	}
	e, done := put(10, "v10")
	b := h.eng.NewBatch()
	if err := sm.Apply(b, e); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	b.Close()
	sm.Applied([]*pb.Entry{e}, false)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	read()
	if read() != "v10" || h.hits() != 1 {
		t.Fatalf("the row was not cached after two reads (hits %d)", h.hits())
	}

	// Applied to a batch not yet committed: a read sees the old row and
	// must not install it.
	e, done = put(30, "v30")
	b = h.eng.NewBatch()
	if err := sm.Apply(b, e); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "v10" {
		t.Fatalf("before the write's batch committed: %q, want v10", got)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	b.Close()
	// Committed, effects not yet applied.
	if got := read(); got != "v30" {
		t.Fatalf("committed, not yet applied: %q, want v30", got)
	}
	sm.Applied([]*pb.Entry{e}, false)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "v30" {
		t.Fatalf("applied: %q, want v30", got)
	}
	if got := read(); got != "v30" {
		t.Fatalf("applied, read again: %q, want v30", got)
	}
}

// TestRowCacheAgainstEngine is the checker: random puts, deletes, range
// deletions and SSTs over a few rows, and reads of random rows at random
// timestamps, each compared with a read of the engine at the same
// timestamp. The cache must answer some of them (or the test shows
// nothing) and never differ.
func TestRowCacheAgainstEngine(t *testing.T) {
	for _, budget := range []int64{1 << 20, 600} {
		t.Run(fmt.Sprint("budget=", budget), func(t *testing.T) {
			h := newHarness(t, Config{RowCache: NewRowCache(budget)})
			rng := rand.New(rand.NewSource(int64(budget)))
			const rows = 6
			rowOf := func(i int) []byte { return []byte(fmt.Sprintf("\x03chk%d/", i)) }
			now := int64(1000)
			reads := 0
			for step := 0; step < 3000; step++ {
				now += 10
				row := rowOf(rng.Intn(rows))
				k := append(append([]byte(nil), row...), "abc"[rng.Intn(3)])
				var err error
				switch p := rng.Intn(100); {
				case p < 60:
					at := wallTS(now - int64(rng.Intn(200)))
					got, err := h.readRow(row, at)
					if err != nil {
						t.Fatalf("step %d: read of %q at %s: %v", step, row, at, err)
					}
					if want := h.engineRow(t, row, at); !sameRows(got, want) {
						t.Fatalf("step %d: read of %q at %s: replica %s, engine %s", step, row, at, fmtCacheRows(got), fmtCacheRows(want))
					}
					reads++
				case p < 85:
					_, err = h.sendAt(wallTS(now), &kvpb.PutRequest{Key: k, Value: []byte(fmt.Sprint("v", step))})
				case p < 93:
					_, err = h.sendAt(wallTS(now), &kvpb.DeleteRequest{Key: k})
				case p < 97:
					_, err = h.sendAt(wallTS(now), &kvpb.DeleteRangeRequest{Key: row, EndKey: keys.PrefixEnd(row)})
				default:
					_, err = h.sendAt(wallTS(now), &kvpb.AddSSTableRequest{Key: k, EndKey: append(append([]byte(nil), k...), 0),
						Data: sstOf(t, wallTS(now), string(k), fmt.Sprint("sst", step))})
				}
				if err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
				if used := h.r.cfg.RowCache.Used(); used > budget || used < 0 {
					t.Fatalf("step %d: the row cache holds %d bytes, budget %d", step, used, budget)
				}
			}
			if h.hits() == 0 {
				t.Fatalf("none of %d reads was answered from the row cache", reads)
			}
			t.Logf("%d reads, %d from the cache", reads, h.hits())
			h.r.Close()
			if used := h.r.cfg.RowCache.Used(); used != 0 {
				t.Fatalf("a closed replica's row cache still holds %d bytes of the node's budget", used)
			}
		})
	}
}

// TestRowSpan: rowSpan agrees with keys.PrefixEnd, which it computes
// without allocating.
func TestRowSpan(t *testing.T) {
	for _, start := range [][]byte{{1}, {1, 2}, {1, 0xff}, {1, 0xfe}, {0xff}, {0xff, 0xff}, {3, 0xff, 0xff}, []byte("\x03row/")} {
		end := keys.PrefixEnd(start)
		if !rowSpan(start, end) {
			t.Errorf("rowSpan(%x, PrefixEnd = %x) = false", start, end)
		}
		for _, other := range [][]byte{append(append([]byte(nil), end...), 0), end[:len(end)-1], append(append([]byte(nil), start...), 0), start} {
			if bytes.Equal(other, end) {
				continue
			}
			if rowSpan(start, other) {
				t.Errorf("rowSpan(%x, %x) = true; PrefixEnd is %x", start, other, end)
			}
		}
	}
	if rowSpan(nil, []byte{1}) {
		t.Error("rowSpan of an empty start")
	}
	if allocs := testing.AllocsPerRun(100, func() { rowSpan([]byte("\x03row/"), []byte("\x03row0")) }); allocs != 0 {
		t.Errorf("rowSpan allocates %.0f objects", allocs)
	}
}

// TestRowCacheOff: a replica without a budget (--row-cache-mib 0) reads
// every row from the engine and keeps nothing.
func TestRowCacheOff(t *testing.T) {
	h := newHarness(t, Config{})
	row := []byte("\x03off/")
	k := append(append([]byte(nil), row...), 'a')
	if _, err := h.sendAt(wallTS(10), &kvpb.PutRequest{Key: k, Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		got, err := h.readRow(row, wallTS(20))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || string(got[0].Value) != "v" {
			t.Fatalf("read: %s, want v", fmtCacheRows(got))
		}
	}
	if h.hits() != 0 || len(h.r.valid.rows) != 0 {
		t.Fatalf("with no budget the replica cached %d rows and answered %d reads from them", len(h.r.valid.rows), h.hits())
	}
}
