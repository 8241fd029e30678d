package rowenc_test

import (
	"fmt"
	"sort"
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/mvcc"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/cairn-db/cairn/storage"
	"github.com/cockroachdb/pebble/v2/vfs"
	"pgregory.net/rapid"
)

// repackEnv is a table's primary index on a bare engine, written version
// by version at chosen timestamps, so GC can run at chosen thresholds.
type repackEnv struct {
	t   testing.TB
	eng *storage.Engine
	// layouts are the table's schema versions, each with the timestamp it
	// became current at.
	layouts []layoutAt
}

type layoutAt struct {
	since hlc.Timestamp
	tbl   *catalog.Table
	l     *rowenc.TableLayout
}

func newRepackEnv(t testing.TB) *repackEnv {
	eng, err := storage.Open("", storage.Options{FS: vfs.NewMem(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	tbl := testTable(120)
	tbl.Indexes, tbl.NextIndexID = nil, 2
	return &repackEnv{t: t, eng: eng, layouts: []layoutAt{{since: hlc.Timestamp{WallTime: 1}, tbl: tbl, l: mustLayout(t, tbl)}}}
}

func (e *repackEnv) cur() layoutAt { return e.layouts[len(e.layouts)-1] }

// layoutAt returns the layout a reader at ts uses.
func (e *repackEnv) layoutAt(ts hlc.Timestamp) *rowenc.TableLayout {
	l := e.layouts[0].l
	for _, la := range e.layouts {
		if la.since.LessEq(ts) {
			l = la.l
		}
	}
	return l
}

// alter makes the table's next schema version, current from ts.
func (e *repackEnv) alter(ts hlc.Timestamp, change func(*catalog.Table) error) {
	tbl, err := catalog.Clone(e.cur().tbl)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := change(tbl); err != nil {
		e.t.Fatal(err)
	}
	tbl.Version++
	e.layouts = append(e.layouts, layoutAt{since: ts, tbl: tbl, l: mustLayout(e.t, tbl)})
}

func (e *repackEnv) batch(fn func(b *storage.Batch) error) {
	b := e.eng.NewBatch()
	defer b.Close()
	if err := fn(b); err != nil {
		e.t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		e.t.Fatal(err)
	}
}

func (e *repackEnv) rowKey(k int64) []byte {
	l := e.cur().l
	key, err := l.PrimaryKey(nil, append([]types.Datum{types.DInt(k)}, make([]types.Datum, len(l.Columns)-1)...))
	if err != nil {
		e.t.Fatal(err)
	}
	return key
}

// insert writes row (current layout's Columns order) packed at ts.
func (e *repackEnv) insert(ts hlc.Timestamp, row []types.Datum) {
	ent, err := e.cur().l.EncodePrimaryRow(row, true, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	e.batch(func(b *storage.Batch) error { return mvcc.Put(b, ent.Key, ts, ent.Value, nil) })
}

// update writes column id of row k as a column entry at ts.
func (e *repackEnv) update(ts hlc.Timestamp, k int64, id rowenc.ColumnID, d types.Datum) {
	l := e.cur().l
	v, err := rowenc.EncodeColumnValue(nil, l.Columns[l.ColumnPos(id)].Type, d)
	if err != nil {
		e.t.Fatal(err)
	}
	e.batch(func(b *storage.Batch) error { return mvcc.Put(b, rowenc.ColumnKey(nil, e.rowKey(k), id), ts, v, nil) })
}

func (e *repackEnv) del(ts hlc.Timestamp, k int64) {
	e.batch(func(b *storage.Batch) error { _, err := mvcc.Delete(b, e.rowKey(k), ts, nil); return err })
}

// gc runs GC at th with a repacker that knows the current layout since
// it became current, in bounded requests, and returns what it did.
func (e *repackEnv) gc(th hlc.Timestamp, limit int) mvcc.GCStats {
	var rp rowenc.Repacker
	rp.SetTables([]rowenc.RepackTable{{Layout: e.cur().l, Since: e.cur().since}})
	span := e.cur().l.IndexSpan(&e.cur().l.Primary)
	var total mvcc.GCStats
	for from := span.Key; from != nil; {
		e.batch(func(b *storage.Batch) error {
			st, resume, err := mvcc.GCWith(b, from, span.EndKey, th, mvcc.GCOptions{MaxVersions: limit, Repacker: &rp})
			total.Versions += st.Versions
			total.Repacked += st.Repacked
			from = resume
			return err
		})
	}
	return total
}

// read returns the table's rows as a reader at ts sees them.
func (e *repackEnv) read(ts hlc.Timestamp) string {
	l := e.layoutAt(ts)
	span := l.IndexSpan(&l.Primary)
	res, err := mvcc.Scan(e.eng, span.Key, span.EndKey, ts, mvcc.ScanOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	f, err := rowenc.NewRowFetcher(l, &l.Primary, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	rows, err := f.DecodeRows(res.Rows)
	if err != nil {
		e.t.Fatalf("read at %s: %v", ts, err)
	}
	return rowsString(rows)
}

// raw returns the newest version of every key of the primary index:
// which rows are packed alone ("P<version>") and which keep column
// entries ("+c<id>").
func (e *repackEnv) raw() string {
	l := e.cur().l
	span := l.IndexSpan(&l.Primary)
	res, err := mvcc.Scan(e.eng, span.Key, span.EndKey, hlc.MaxTimestamp, mvcc.ScanOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	s := ""
	var rowKey []byte
	for _, kv := range res.Rows {
		if rowKey != nil && len(kv.Key) > len(rowKey) && string(kv.Key[:len(rowKey)]) == string(rowKey) {
			id, err := rowenc.DecodeColumnSuffix(kv.Key[len(rowKey):])
			if err != nil {
				e.t.Fatal(err)
			}
			s += fmt.Sprintf("+c%d", id)
			continue
		}
		rowKey = kv.Key
		if s != "" {
			s += " "
		}
		if rowenc.IsPacked(kv.Value) {
			s += fmt.Sprintf("P%d", kv.Value[1])
		} else {
			s += "U"
		}
	}
	return s
}

func ts(w int64) hlc.Timestamp { return hlc.Timestamp{WallTime: w} }

// Rows packed under three schema versions, partially updated under each,
// are repacked by GC into one packed row under the current version, and
// every read at or above the threshold reads what it read before. A
// repacker whose schema is newer than the threshold, or that does not know
// a column an entry names, leaves the row alone.
func TestRepackAcrossSchemaVersions(t *testing.T) {
	e := newRepackEnv(t)
	e.insert(ts(10), row(1, "x", 5, "p"))
	e.insert(ts(10), row(2, nil, nil, nil))
	e.update(ts(11), 1, 3, types.DInt(6))
	seven := "7"
	e.alter(ts(20), func(tb *catalog.Table) error { // ADD COLUMN e int4 DEFAULT 7 (id 5)
		_, err := tb.AddColumn(catalog.Column{Name: "e", Type: types.Int4, Nullable: true, MissingValue: &seven})
		return err
	})
	e.update(ts(21), 2, 5, types.DInt(8))
	e.update(ts(22), 1, 2, types.DString("y"))
	e.alter(ts(30), func(tb *catalog.Table) error { return tb.DropColumn("d") })
	e.update(ts(31), 2, 2, types.DString("z"))
	e.insert(ts(32), []types.Datum{types.DInt(3), types.DString("w"), types.DInt(1), types.DNull})
	e.update(ts(33), 3, 3, types.DNull)

	if got, want := e.raw(), "P1+c2+c3 P1+c2+c5 P3+c3"; got != want {
		t.Fatalf("before GC: %s, want %s", got, want)
	}
	before := map[int64]string{}
	for _, at := range []int64{31, 32, 33, 40} {
		before[at] = e.read(ts(at))
	}

	// The repacker's schema became current at 30: a threshold below that
	// repacks nothing.
	if st := e.gc(ts(29), 0); st.Repacked != 0 {
		t.Errorf("GC at 29 repacked %d rows under a schema current since 30", st.Repacked)
	}
	st := e.gc(ts(40), 0)
	if st.Repacked != 3 {
		t.Errorf("repacked %d rows, want 3 (%+v)", st.Repacked, st)
	}
	if got, want := e.raw(), "P3 P3 P3"; got != want {
		t.Errorf("after GC: %s, want %s", got, want)
	}
	for at, want := range before {
		if at < 40 {
			continue
		}
		if got := e.read(ts(at)); got != want {
			t.Errorf("read at %d after GC: %s, want %s", at, got, want)
		}
	}
	if got, want := e.read(ts(40)), "(1,y,6,7) (2,z,NULL,8) (3,w,NULL,NULL)"; got != want {
		t.Errorf("rows: %s, want %s", got, want)
	}

	// A column entry for a column the repacker's schema lacks (added
	// after it was read) keeps its row unpacked.
	e.alter(ts(50), func(tb *catalog.Table) error {
		_, err := tb.AddColumn(catalog.Column{Name: "f", Type: types.Int4, Nullable: true})
		return err
	})
	e.update(ts(51), 1, 6, types.DInt(9))
	stale := e.layouts[len(e.layouts)-2]
	var rp rowenc.Repacker
	rp.SetTables([]rowenc.RepackTable{{Layout: stale.l, Since: stale.since}})
	span := stale.l.IndexSpan(&stale.l.Primary)
	e.batch(func(b *storage.Batch) error {
		st, _, err := mvcc.GCWith(b, span.Key, span.EndKey, ts(60), mvcc.GCOptions{Repacker: &rp})
		if st.Repacked != 0 {
			t.Errorf("a stale schema repacked %d rows", st.Repacked)
		}
		return err
	})
	if got, want := e.read(ts(60)), "(1,y,6,7,9) (2,z,NULL,8,NULL) (3,w,NULL,NULL,NULL)"; got != want {
		t.Errorf("rows: %s, want %s", got, want)
	}
}

// TestRepackModel runs random histories of packed inserts, partial
// updates, deletes, ADD and DROP COLUMN, and GC with repacking at rising
// thresholds, in bounded requests, against a model of the table at every
// timestamp, and checks that every read at or above the threshold reads
// the model (mvcc invariants 7 and 10, rowenc invariant 3).
func TestRepackModel(t *testing.T) {
	repackRuns := 0
	defer func() {
		if repackRuns == 0 && !t.Failed() {
			t.Error("no history repacked a row: the model checked nothing about repacking")
		}
	}()
	rapid.Check(t, func(rt *rapid.T) {
		e := newRepackEnv(t)
		type snap struct {
			at   hlc.Timestamp
			rows map[int64]map[rowenc.ColumnID]types.Datum
		}
		hist := []snap{{at: ts(1), rows: map[int64]map[rowenc.ColumnID]types.Datum{}}}
		// next copies the newest state into a new one at now.
		now := int64(2)
		next := func() map[int64]map[rowenc.ColumnID]types.Datum {
			cur := hist[len(hist)-1].rows
			m := make(map[int64]map[rowenc.ColumnID]types.Datum, len(cur))
			for k, r := range cur {
				c := make(map[rowenc.ColumnID]types.Datum, len(r))
				for id, d := range r {
					c[id] = d
				}
				m[k] = c
			}
			hist = append(hist, snap{at: ts(now), rows: m})
			return m
		}
		value := func(ty *types.T, label string) types.Datum {
			if rapid.IntRange(0, 3).Draw(rt, label+"-null") == 0 {
				return types.DNull
			}
			if ty.Identical(types.Text) {
				return types.DString(rapid.SampledFrom([]string{"", "a", "bb"}).Draw(rt, label))
			}
			return types.DInt(rapid.IntRange(-2, 2).Draw(rt, label))
		}
		valueCols := func() []rowenc.Column { return e.cur().l.Schema.Live() }
		expect := func(at hlc.Timestamp) string {
			s := hist[0]
			for _, h := range hist {
				if h.at.LessEq(at) {
					s = h
				}
			}
			l := e.layoutAt(at)
			var ks []int64
			for k := range s.rows {
				ks = append(ks, k)
			}
			sort.Slice(ks, func(i, j int) bool { return ks[i] < ks[j] })
			var rows [][]types.Datum
			for _, k := range ks {
				r := []types.Datum{types.DInt(k)}
				for _, c := range l.Columns[1:] {
					d, ok := s.rows[k][c.ID]
					if !ok {
						d = types.DNull
					}
					r = append(r, d)
				}
				rows = append(rows, r)
			}
			return rowsString(rows)
		}
		var gcTh int64
		adds, drops, repacked := 0, 0, 0
		for i, n := 0, rapid.IntRange(1, 50).Draw(rt, "steps"); i < n; i++ {
			now++
			switch op := rapid.IntRange(0, 10).Draw(rt, "op"); {
			case op <= 2 || op == 10:
				// An insert (or a full update); op 10 then updates a column
				// at the same timestamp, as one transaction would.
				k := int64(rapid.IntRange(1, 3).Draw(rt, "k"))
				m := next()
				r := map[rowenc.ColumnID]types.Datum{}
				row := []types.Datum{types.DInt(k)}
				for _, c := range valueCols() {
					d := value(c.Type, "v")
					row = append(row, d)
					r[c.ID] = d
				}
				m[k] = r
				e.insert(ts(now), row)
				if op == 10 {
					c := rapid.SampledFrom(valueCols()).Draw(rt, "col")
					d := value(c.Type, "v")
					r[c.ID] = d
					e.update(ts(now), k, c.ID, d)
				}
			case op <= 5:
				k := int64(rapid.IntRange(1, 3).Draw(rt, "k"))
				cur := hist[len(hist)-1].rows
				if _, ok := cur[k]; !ok {
					continue
				}
				c := rapid.SampledFrom(valueCols()).Draw(rt, "col")
				d := value(c.Type, "v")
				next()[k][c.ID] = d
				e.update(ts(now), k, c.ID, d)
			case op == 6:
				k := int64(rapid.IntRange(1, 3).Draw(rt, "k"))
				delete(next(), k)
				e.del(ts(now), k)
			case op == 7 && adds < 2:
				adds++
				def := fmt.Sprint(adds * 7)
				var id rowenc.ColumnID
				e.alter(ts(now), func(tb *catalog.Table) (err error) {
					id, err = tb.AddColumn(catalog.Column{Name: fmt.Sprintf("e%d", adds), Type: types.Int4, Nullable: true, MissingValue: &def})
					return err
				})
				for _, r := range next() {
					r[id] = types.DInt(adds * 7)
				}
			case op == 7 && drops < 2 && len(valueCols()) > 1:
				drops++
				c := rapid.SampledFrom(valueCols()).Draw(rt, "drop")
				e.alter(ts(now), func(tb *catalog.Table) error { return tb.DropColumn(tb.ColumnByID(c.ID).Name) })
				next()
			case op == 8:
				if rapid.Bool().Draw(rt, "recent") {
					gcTh = max(gcTh, now-rapid.Int64Range(0, 2).Draw(rt, "age"))
				} else {
					gcTh = rapid.Int64Range(gcTh, now).Draw(rt, "threshold")
				}
				repacked += e.gc(ts(gcTh), rapid.IntRange(0, 3).Draw(rt, "limit")).Repacked
			default:
				at := ts(rapid.Int64Range(max(gcTh, 1), now+1).Draw(rt, "read"))
				if got, want := e.read(at), expect(at); got != want {
					rt.Fatalf("read at %s (threshold %d): %s, model %s", at, gcTh, got, want)
				}
			}
		}
		repackRuns += min(repacked, 1)
		for at := max(gcTh, 1); at <= now+1; at++ {
			if got, want := e.read(ts(at)), expect(ts(at)); got != want {
				rt.Fatalf("final read at %d (threshold %d): %s, model %s", at, gcTh, got, want)
			}
		}
	})
}
