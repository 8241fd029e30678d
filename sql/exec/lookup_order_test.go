package exec

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
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
