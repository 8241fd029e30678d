package exec

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/sstable/colblk"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/cairn-db/cairn/storage"
	"github.com/cairn-db/cairn/storage/simfs"
	"github.com/cairn-db/cairn/testcluster"
)

// recordingSender passes batches to the store and records, per batch a
// tablet answers (one refused for stale routing is sent again), the start
// keys of its scans under prefix.
type recordingSender struct {
	inner  kvpb.Sender
	mu     sync.Mutex
	prefix []byte
	scans  [][][]byte
}

func (r *recordingSender) Send(ctx context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
	br, err := r.inner.Send(ctx, ba)
	if err != nil {
		return br, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var keys [][]byte
	for _, req := range ba.Requests {
		if s, ok := req.(*kvpb.ScanRequest); ok && r.prefix != nil && bytes.HasPrefix(s.Key, r.prefix) {
			keys = append(keys, s.Key)
		}
	}
	if len(keys) > 0 {
		r.scans = append(r.scans, keys)
	}
	return br, nil
}

func (r *recordingSender) take() [][][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.scans
	r.scans = nil
	return out
}

// TestLookupsInStorageOrder checks what reaches each tablet of a lookup
// join whose input is shuffled (with repeats and a NULL): the primary
// keys arrive sorted in every batch a tablet receives, each distinct key
// once, and the join's rows still come out in input order. With
// LookupInputOrder (the old behaviour) the same join sends the keys
// unsorted, repeats and all, which shows the assertion can fail.
func TestLookupsInStorageOrder(t *testing.T) {
	ctx := context.Background()
	n := testcluster.StartNode(t, testcluster.Options{})
	rec := &recordingSender{inner: n.Store}
	db := kv.NewDB(rec, n.Store, n.Clock, kv.Options{})
	t.Cleanup(db.Close)
	e := &env{t: t, db: db, nextID: 100}
	e.txn(func(ctx context.Context, txn *kv.Txn) error { return catalog.Bootstrap(ctx, txn, "") })
	var rows [][]types.Datum
	for i := int64(1); i <= 2000; i++ {
		rows = append(rows, ints(i, -i))
	}
	tbl := e.createTable(tableSpec{name: "ord", cols: []string{"k int8", "v int8"}, pk: []string{"k"}, packed: true}, rows...)
	l, err := tbl.Layout()
	if err != nil {
		t.Fatal(err)
	}
	prefix := l.IndexPrefix(nil, &l.Primary, 0)
	split, err := rowenc.EncodeKey(append([]byte(nil), prefix...), types.DInt(1000), rowenc.Asc)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := n.Store.Split(ctx, split); err != nil {
		t.Fatal(err)
	}

	// 600 probes of 400 distinct keys on both sides of the split, in a
	// fixed random order, plus a NULL that matches nothing.
	rng := rand.New(rand.NewPCG(1, 2))
	var in []string
	var want strings.Builder
	for i := range 600 {
		k := int64(rng.IntN(400))*5 + 1
		if i == 300 {
			in = append(in, "NULL::int8")
			continue
		}
		in = append(in, fmt.Sprint(k))
		fmt.Fprintf(&want, "%d %d %d\n", k, k, -k)
	}
	distinct := map[string]bool{}
	for _, k := range in {
		if k != "NULL::int8" {
			distinct[k] = true
		}
	}
	v := e.vals("x", in...)
	pk := e.scan(tbl, nil, "k", "v")
	j := &plan.LookupJoin{Kind: plan.InnerJoin, Input: v, Table: tbl, KeyCols: []sem.ColumnID{v.Cols[0].ID}, Cols: pk.Cols, TableCols: pk.TableCols}

	run := func(inputOrder bool, batch int) (string, [][][]byte) {
		t.Helper()
		rec.take()
		rec.mu.Lock()
		rec.prefix = prefix
		rec.mu.Unlock()
		var sb strings.Builder
		err := db.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
			sb.Reset()
			rs, err := Start(ctx, &Context{Txn: txn, Eval: &sem.EvalContext{}, LookupInputOrder: inputOrder, LookupBatch: batch}, &plan.Plan{Root: j})
			if err != nil {
				return err
			}
			defer rs.Close()
			for {
				row, err := rs.Next(ctx)
				if err != nil || row == nil {
					return err
				}
				for i, d := range row {
					if i > 0 {
						sb.WriteByte(' ')
					}
					sb.WriteString(d.String())
				}
				sb.WriteByte('\n')
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		return sb.String(), rec.take()
	}
	sorted := func(keys [][]byte) bool {
		for i := 1; i < len(keys); i++ {
			if bytes.Compare(keys[i-1], keys[i]) >= 0 {
				return false
			}
		}
		return true
	}

	got, batches := run(false, 0)
	if got != want.String() {
		t.Errorf("sorted lookups changed the join's rows or their order:\n%s", got)
	}
	total := 0
	for i, b := range batches {
		total += len(b)
		if !sorted(b) {
			t.Errorf("batch %d of %d reached its tablet unsorted", i, len(batches))
		}
	}
	if len(batches) != 2 || total != len(distinct) {
		t.Errorf("%d batches with %d scans, want one per tablet (2) and one scan per distinct key (%d)", len(batches), total, len(distinct))
	}

	got, batches = run(true, 0)
	if got != want.String() {
		t.Errorf("lookups in input order changed the join's rows:\n%s", got)
	}
	unsorted, total := 0, 0
	for _, b := range batches {
		total += len(b)
		if !sorted(b) {
			unsorted++
		}
	}
	if unsorted == 0 || total != len(in)-1 {
		t.Errorf("in input order: %d unsorted batches of %d, %d scans; want unsorted ones and a scan per non-NULL probe (%d)", unsorted, len(batches), total, len(in)-1)
	}

	// Batches of 100 input rows (what a profile may ask for): six
	// kv.Batches, each split over the two tablets, each part sorted.
	got, batches = run(false, 100)
	if got != want.String() {
		t.Errorf("batches of 100 changed the join's rows:\n%s", got)
	}
	for i, b := range batches {
		if !sorted(b) {
			t.Errorf("batch %d of %d (of 100 rows) reached its tablet unsorted", i, len(batches))
		}
	}
	if len(batches) != 12 {
		t.Errorf("batches of 100 rows: %d tablet batches, want 6 on each of 2 tablets", len(batches))
	}
}

// TestLookupsReachPebbleInOrder checks the order of a lookup batch's
// keys where they reach Pebble: in the SST's reads. Its data blocks are
// laid out in key order, so the batch's keys reach Pebble sorted exactly
// when the data blocks it reads from each file come in increasing
// order. The store is on a filesystem that records every read
// (storage/simfs's OnRead; no read-ahead in between), those a tablet
// makes are kept, and each is mapped to the data block it starts, by the
// file's layout as Pebble's sstable reader gives it. Sorted, a batch of 300 random keys reads its
// blocks front to back; in input order (LookupInputOrder, Cairn before
// reads in storage order) the same kind of batch goes back and forth,
// which shows the check can fail. Each join reads its own half of the
// table, so the second does not find the first's blocks in the block
// cache.
func TestLookupsReachPebbleInOrder(t *testing.T) {
	ctx := context.Background()
	mem := vfs.NewMem()
	// layout maps the offset of each data block of an SST to its
	// position in the file (key order).
	layout := func(name string) (map[int64]int, error) {
		f, err := mem.Open(name)
		if err != nil {
			return nil, err
		}
		rf, err := objstorageprovider.NewFileReadable(f, mem, objstorageprovider.NewReadaheadConfig(), name)
		if err != nil {
			return nil, err
		}
		ks := colblk.DefaultKeySchema(storage.Comparer, 16)
		r, err := sstable.NewReader(ctx, rf, sstable.ReaderOptions{Comparer: storage.Comparer, KeySchemas: sstable.MakeKeySchemas(&ks)})
		if err != nil {
			return nil, err
		}
		defer r.Close()
		l, err := r.Layout()
		if err != nil {
			return nil, err
		}
		m := map[int64]int{}
		for i, h := range l.Data {
			m[int64(h.Offset)] = i
		}
		return m, nil
	}
	var mu sync.Mutex
	var reads []simfs.Read
	blocks := map[string]map[int64]int{} // by file, its layout
	recording := false
	disk := simfs.New(mem, simfs.Options{OnRead: func(r simfs.Read) {
		mu.Lock()
		defer mu.Unlock()
		if !recording || !strings.HasSuffix(r.Name, ".sst") {
			return
		}
		// Only the reads a tablet makes evaluating a request: Pebble's
		// own compactions and table stats read the same files in the
		// background, whenever they are scheduled.
		buf := make([]byte, 32<<10)
		if !bytes.Contains(buf[:runtime.Stack(buf, false)], []byte("cairn/tablet.")) {
			return
		}
		// The layout is read now: the file exists while it is read,
		// but a compaction may remove it later.
		if _, ok := blocks[r.Name]; !ok {
			m, err := layout(r.Name)
			if err != nil {
				t.Errorf("layout of %s: %v", r.Name, err)
			}
			blocks[r.Name] = m
		}
		reads = append(reads, r)
	}})
	n := testcluster.StartNode(t, testcluster.Options{FS: disk})
	// The table is loaded through a client of its own, closed once the
	// load's intents are all resolved: their resolution, in the
	// background, reads the table front to back, and its reads must not
	// mix with the joins'.
	loader := kv.NewDB(n.Store, n.Store, n.Clock, kv.Options{})
	e := &env{t: t, db: loader, nextID: 100}
	e.txn(func(ctx context.Context, txn *kv.Txn) error { return catalog.Bootstrap(ctx, txn, "") })
	const rows = 20000
	var data [][]types.Datum
	for i := int64(1); i <= rows; i++ {
		data = append(data, ints(i, -i))
	}
	tbl := e.createTable(tableSpec{name: "big", cols: []string{"k int8", "v int8"}, pk: []string{"k"}, packed: true}, data...)
	locks := func() bool {
		lo, hi := keys.LockSpan(keys.Min, keys.Max)
		it, err := n.Engine.NewIter(storage.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		return it.First()
	}
	for locks() {
		runtime.Gosched()
	}
	loader.Close()
	e.db = n.DB
	if err := n.Engine.Flush(); err != nil {
		t.Fatal(err)
	}

	// join looks up 300 random keys of [lo, lo+half) in one batch and
	// returns, per file, the data blocks read in the order read, and how
	// many of them came before a block earlier in the file.
	rng := rand.New(rand.NewPCG(3, 4))
	join := func(lo int, inputOrder bool) (map[string][]int, int) {
		t.Helper()
		var in []string
		for range 300 {
			in = append(in, fmt.Sprint(lo+rng.IntN(rows/2)))
		}
		v := e.vals("x", in...)
		pk := e.scan(tbl, nil, "k", "v")
		j := &plan.LookupJoin{Kind: plan.InnerJoin, Input: v, Table: tbl, KeyCols: []sem.ColumnID{v.Cols[0].ID}, Cols: pk.Cols, TableCols: pk.TableCols}
		found := 0
		var got []simfs.Read
		err := e.db.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
			// Only the last attempt's join (a retry reads again), and
			// not the commit (a refresh may read the spans again).
			mu.Lock()
			reads, recording = nil, true
			mu.Unlock()
			defer func() {
				mu.Lock()
				got, recording = reads, false
				mu.Unlock()
			}()
			found = 0
			rs, err := Start(ctx, &Context{Txn: txn, Eval: &sem.EvalContext{}, LookupInputOrder: inputOrder, LookupBatch: 1000}, &plan.Plan{Root: j})
			if err != nil {
				return err
			}
			defer rs.Close()
			for {
				row, err := rs.Next(ctx)
				if err != nil || row == nil {
					return err
				}
				found++
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if found != len(in) {
			t.Fatalf("the join found %d rows for %d keys", found, len(in))
		}
		order := map[string][]int{}
		back := 0
		mu.Lock()
		defer mu.Unlock()
		for _, r := range got {
			b, ok := blocks[r.Name][r.Off]
			if !ok {
				continue // an index or filter block
			}
			if prev := order[r.Name]; len(prev) > 0 && b < prev[len(prev)-1] {
				back++
			}
			order[r.Name] = append(order[r.Name], b)
		}
		return order, back
	}

	sorted, back := join(1, false)
	total := 0
	for name, bs := range sorted {
		total += len(bs)
		t.Logf("sorted: %s: %d data blocks read", name, len(bs))
	}
	// 300 keys among 10,000 rows: many blocks, or the check shows nothing.
	if total < 20 {
		t.Fatalf("the sorted join read %d data blocks from the disk: the table is not where the test thinks", total)
	}
	if back > 0 {
		t.Errorf("sorted lookups reached Pebble out of order: %d data block reads went back in their file: %v", back, sorted)
	}
	input, back := join(rows/2+1, true)
	total = 0
	for _, bs := range input {
		total += len(bs)
	}
	t.Logf("input order: %d data blocks read, %d of them back in the file", total, back)
	if back == 0 {
		t.Errorf("lookups in input order read their %d data blocks in order: the check cannot fail", total)
	}
}
