package mvcc

import (
	"bytes"
	"fmt"
	"sort"
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/storage"
	"github.com/cockroachdb/pebble/v2/vfs"
	"pgregory.net/rapid"
)

// TestModel runs random histories of non-transactional puts and deletes at
// increasing timestamps, GC passes and flushes against a plain map of
// versions, and checks that Get and Scan (forward, reverse, paginated by key
// and byte limits) agree with it at random timestamps. Reads stay at or
// above the highest GC threshold, so the model never forgets a version:
// that GC does not change those reads is invariant 7, checked here.
func TestModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		eng, err := storage.Open("", storage.Options{FS: vfs.NewMem(), NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		defer eng.Close()
		m := model{}
		now := hlc.Timestamp{WallTime: 1}
		var gcThreshold hlc.Timestamp
		keyGen := rapid.SampledFrom([]string{"a", "ab", "b", "c", "c\x00", "d", "e"})
		tick := func() {
			if rapid.Bool().Draw(t, "logical") {
				now.Logical++
			} else {
				now = hlc.Timestamp{WallTime: now.WallTime + int64(rapid.IntRange(1, 3).Draw(t, "wall"))}
			}
		}
		write := func(fn func(b *storage.Batch) error) {
			b := eng.NewBatch()
			defer b.Close()
			if err := fn(b); err != nil {
				t.Fatal(err)
			}
			if err := b.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		readTS := func() hlc.Timestamp {
			lo := gcThreshold.Forward(hlc.Timestamp{WallTime: 1})
			w := rapid.Int64Range(lo.WallTime, now.WallTime+2).Draw(t, "read-wall")
			ts := hlc.Timestamp{WallTime: w, Logical: int32(rapid.IntRange(0, 2).Draw(t, "read-logical"))}
			return ts.Forward(lo)
		}
		steps := rapid.IntRange(1, 60).Draw(t, "steps")
		for i := 0; i < steps; i++ {
			switch rapid.IntRange(0, 9).Draw(t, "op") {
			case 0, 1, 2, 3:
				tick()
				k := keyGen.Draw(t, "key")
				v := rapid.SliceOfN(rapid.Byte(), 0, 4).Draw(t, "value")
				write(func(b *storage.Batch) error { return Put(b, []byte(k), now, v, nil) })
				m.add(k, version{ts: now, value: append([]byte{}, v...)})
			case 4:
				tick()
				k := keyGen.Draw(t, "key")
				var found bool
				write(func(b *storage.Batch) (err error) {
					found, err = Delete(b, []byte(k), now, nil)
					return err
				})
				if _, _, want := m.get(k, now); found != want {
					t.Fatalf("delete %q at %s: found=%v, model says %v", k, now, found, want)
				}
				m.add(k, version{ts: now, tomb: true})
			case 5:
				ts := readTS()
				// Non-transactional writes leave no locks, so skipping the
				// lock keyspace must not change a read.
				noLocks := rapid.Bool().Draw(t, "noLocksInSpan")
				for _, k := range m.keys() {
					res, err := Get(eng, []byte(k), ts, ReadOptions{NoLocksInSpan: noLocks})
					if err != nil {
						t.Fatal(err)
					}
					v, vts, ok := m.get(k, ts)
					if ok != (res.Value != nil) || !bytes.Equal(v, res.Value) || (ok && vts != res.Timestamp) {
						t.Fatalf("get %q at %s: got %q@%s, model %q@%s (%v)", k, ts, res.Value, res.Timestamp, v, vts, ok)
					}
				}
			case 6, 7, 8:
				checkScan(t, eng, m, readTS())
			case 9:
				if rapid.Bool().Draw(t, "flush") {
					if err := eng.Flush(); err != nil {
						t.Fatal(err)
					}
					continue
				}
				th := hlc.Timestamp{WallTime: rapid.Int64Range(gcThreshold.WallTime, now.WallTime).Draw(t, "threshold")}
				th = th.Forward(gcThreshold)
				// The plan (small batches, so a history makes several
				// spans) must foresee exactly what GC removes, and GC
				// of its spans alone must remove all of it.
				plan, err := PlanGC(eng, []byte("a"), []byte("z"), th, rapid.IntRange(1, 4).Draw(t, "batch"), 1<<20)
				if err != nil {
					t.Fatal(err)
				}
				// Either GC of the plan's spans, or bounded GC
				// requests resumed until done, must remove it all.
				var removed int
				limit := rapid.IntRange(0, 3).Draw(t, "limit")
				write(func(b *storage.Batch) error {
					if limit > 0 {
						for from := []byte("a"); from != nil; {
							st, resume, err := GCLimit(b, from, []byte("z"), th, limit)
							if err != nil {
								return err
							}
							removed += st.Versions
							from = resume
						}
						return nil
					}
					for _, sp := range plan.Spans {
						st, err := GC(b, sp[0], sp[1], th)
						if err != nil {
							return err
						}
						removed += st.Versions
					}
					return nil
				})
				if plan.Garbage.Versions != removed {
					t.Fatalf("gc plan at %s foresaw %d versions, GC of its spans removed %d", th, plan.Garbage.Versions, removed)
				}
				if want := m.gc(th); removed != want {
					t.Fatalf("gc at %s removed %d, model says %d", th, removed, want)
				}
				// NextDue is exactly where more garbage appears.
				after, err := PlanGC(eng, []byte("a"), []byte("z"), th, 1000, 1<<20)
				if err != nil {
					t.Fatal(err)
				}
				if after.Garbage.Versions != 0 {
					t.Fatalf("after gc at %s a plan still finds %d versions", th, after.Garbage.Versions)
				}
				if due := after.NextDue; !due.IsEmpty() {
					at, err := PlanGC(eng, []byte("a"), []byte("z"), due, 1000, 1<<20)
					if err != nil {
						t.Fatal(err)
					}
					before, err := PlanGC(eng, []byte("a"), []byte("z"), due.Prev(), 1000, 1<<20)
					if err != nil {
						t.Fatal(err)
					}
					if at.Garbage.Versions == 0 || before.Garbage.Versions != 0 {
						t.Fatalf("next due %s after gc at %s: plan there finds %d, just below %d", due, th, at.Garbage.Versions, before.Garbage.Versions)
					}
				}
				gcThreshold = th
			}
		}
	})
}

// checkScan scans a random span at ts, in pages bounded by random limits,
// and compares the concatenated pages (and each page's limits) with the
// model.
func checkScan(t *rapid.T, eng *storage.Engine, m model, ts hlc.Timestamp) {
	bounds := []string{"", "a", "ab", "b", "c", "c\x00", "d", "e", "z"}
	i := rapid.IntRange(0, len(bounds)-2).Draw(t, "start")
	j := rapid.IntRange(i+1, len(bounds)-1).Draw(t, "end")
	start, end := []byte(bounds[i]), []byte(bounds[j])
	reverse := rapid.Bool().Draw(t, "reverse")
	opts := ScanOptions{
		ReadOptions: ReadOptions{NoLocksInSpan: rapid.Bool().Draw(t, "noLocksInSpan")},
		Reverse:     reverse,
		MaxKeys:     int64(rapid.IntRange(0, 3).Draw(t, "max-keys")),
		MaxBytes:    int64(rapid.IntRange(0, 8).Draw(t, "max-bytes")),
	}
	var got []kvpb.KeyValue
	lo, hi := start, end
	for pages := 0; ; pages++ {
		if pages > 20 {
			t.Fatalf("scan [%q, %q) at %s did not finish", start, end, ts)
		}
		res, err := Scan(eng, lo, hi, ts, opts)
		if err != nil {
			t.Fatal(err)
		}
		if opts.MaxKeys > 0 && int64(len(res.Rows)) > opts.MaxKeys {
			t.Fatalf("page of %d rows over MaxKeys %d", len(res.Rows), opts.MaxKeys)
		}
		if opts.MaxBytes > 0 && len(res.Rows) > 1 {
			var n int64
			for _, kv := range res.Rows {
				n += int64(len(kv.Key) + len(kv.Value))
			}
			if n > opts.MaxBytes {
				t.Fatalf("page of %d bytes over MaxBytes %d", n, opts.MaxBytes)
			}
		}
		got = append(got, res.Rows...)
		if res.ResumeSpan == nil {
			break
		}
		lo, hi = res.ResumeSpan.Key, res.ResumeSpan.EndKey
	}
	want := m.scan(string(start), string(end), ts, reverse)
	if fmt.Sprint(fmtRows(got)) != fmt.Sprint(fmtRows(want)) {
		t.Fatalf("scan [%q, %q) at %s reverse=%v:\n got   %v\n model %v", start, end, ts, reverse, fmtRows(got), fmtRows(want))
	}
}

func fmtRows(rows []kvpb.KeyValue) []string {
	out := make([]string, len(rows))
	for i, kv := range rows {
		out[i] = fmt.Sprintf("%q=%q@%s", kv.Key, kv.Value, kv.Timestamp)
	}
	return out
}

type version struct {
	ts    hlc.Timestamp
	value []byte
	tomb  bool
	gone  bool // removed by GC; still answers reads at or above the threshold
}

// model holds every version ever written, oldest first per key.
type model map[string][]version

func (m model) add(k string, v version) { m[k] = append(m[k], v) }

func (m model) keys() []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func (m model) get(k string, ts hlc.Timestamp) ([]byte, hlc.Timestamp, bool) {
	vs := m[k]
	for i := len(vs) - 1; i >= 0; i-- {
		if vs[i].ts.LessEq(ts) {
			if vs[i].tomb {
				return nil, hlc.Timestamp{}, false
			}
			return vs[i].value, vs[i].ts, true
		}
	}
	return nil, hlc.Timestamp{}, false
}

func (m model) scan(start, end string, ts hlc.Timestamp, reverse bool) []kvpb.KeyValue {
	var rows []kvpb.KeyValue
	for _, k := range m.keys() {
		if k < start || k >= end {
			continue
		}
		if v, vts, ok := m.get(k, ts); ok {
			rows = append(rows, kvpb.KeyValue{Key: []byte(k), Value: v, Timestamp: vts})
		}
	}
	if reverse {
		for i, j := 0, len(rows)-1; i < j; i, j = i+1, j-1 {
			rows[i], rows[j] = rows[j], rows[i]
		}
	}
	return rows
}

// gc marks what GC at th must remove and returns how many versions that is.
func (m model) gc(th hlc.Timestamp) int {
	n := 0
	for _, vs := range m {
		newest := -1
		for i := range vs {
			if vs[i].ts.LessEq(th) {
				newest = i
			}
		}
		for i := 0; i <= newest; i++ {
			if (i < newest || vs[i].tomb) && !vs[i].gone {
				vs[i].gone = true
				n++
			}
		}
	}
	return n
}
