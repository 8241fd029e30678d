package rowcontainer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/cockroachdb/apd/v3"

	"github.com/cairn-db/cairn/sql/mon"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
)

// key is one sort key of the test comparison: SQL's ORDER BY semantics
// over types.Compare (NULLs last ascending, first descending, unless
// nullsFirst says otherwise).
type key struct {
	col              int
	desc, nullsFirst bool
}

func compareBy(keys []key) Compare {
	return func(a, b []types.Datum) int {
		for _, k := range keys {
			x, y := a[k.col], b[k.col]
			xn, yn := types.IsNull(x), types.IsNull(y)
			var c int
			switch {
			case xn && yn:
			case xn || yn:
				c = 1
				if xn == k.nullsFirst {
					c = -1
				}
			default:
				c = types.Compare(x, y)
				if k.desc {
					c = -c
				}
			}
			if c != 0 {
				return c
			}
		}
		return 0
	}
}

func newTemp(t *testing.T, diskLimit int64) *TempStorage {
	t.Helper()
	ts, err := NewTempStorage(t.TempDir()+"/temp", diskLimit)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// filesIn counts the entries under dir (statement directories and files).
func filesIn(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		n++
		if e.IsDir() {
			n += filesIn(t, dir+"/"+e.Name())
		}
	}
	return n
}

// colTypes are the types of randDatum's kinds.
var colTypes = []*types.T{types.Int8, types.Text, types.Float8, types.Numeric}

// TestNormalizedKey: wherever two rows' normalized keys differ, they order
// as the comparison orders them, over one to three columns of ints (few
// values, and any int64, whose encodings take 1 to 9 bytes), strings
// (NUL bytes, common prefixes), floats (-0, NaN, infinities), bools and
// dates, both directions and NULL placements, with a numeric column that
// ends the key.
func TestNormalizedKey(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	// kinds: randDatum's 0..2, then 4 any int64, 5 bool, 6 date, 3 numeric.
	typeOf := map[int]*types.T{0: types.Int8, 1: types.Text, 2: types.Float8, 3: types.Numeric, 4: types.Int8, 5: types.Bool, 6: types.Date}
	for trial := 0; trial < 300; trial++ {
		ncols := 1 + rng.IntN(3)
		var cols []KeyCol
		var keys []key
		kinds := make([]int, ncols)
		for c := range ncols {
			kinds[c] = []int{0, 1, 2, 3, 4, 5, 6}[rng.IntN(7)]
			desc, nullsFirst := rng.IntN(2) == 0, rng.IntN(2) == 0
			cols = append(cols, KeyCol{T: typeOf[kinds[c]], Pos: c, Desc: desc, NullsFirst: nullsFirst})
			keys = append(keys, key{col: c, desc: desc, nullsFirst: nullsFirst})
		}
		kf := NormalizedKey(cols)
		if kinds[0] == 3 {
			if kf != nil {
				t.Fatal("a numeric first column has no normalized key")
			}
			continue
		}
		cmp := compareBy(keys)
		row := func() []types.Datum {
			r := make([]types.Datum, ncols)
			for c, k := range kinds {
				r[c] = randKeyDatum(rng, k)
			}
			return r
		}
		for i := 0; i < 2000; i++ {
			a, b := row(), row()
			ka, oka := kf(a)
			kb, okb := kf(b)
			if !oka || !okb {
				t.Fatalf("kinds %v: %v or %v not abbreviated", kinds, a, b)
			}
			if ka == kb {
				continue
			}
			if want := cmp(a, b); (ka < kb) != (want < 0) || want == 0 {
				t.Fatalf("cols %+v: %v (key %016x) vs %v (key %016x): comparison says %d", cols, a, ka, b, kb, want)
			}
		}
	}
	// A value of another Go type than the column's is not abbreviated.
	if _, ok := FirstKey(types.Int8, 0, false, false)([]types.Datum{types.DFloat(1)}); ok {
		t.Fatal("a float in an int column was abbreviated")
	}
}

// TestNormalizedKeyDecidesSmallInts: two int columns of small values (a
// window's PARTITION BY g % 1000 ORDER BY g over 10M rows) fit in the key
// together, so it decides every pair of rows that differ: the sort never
// falls to the comparison for them.
func TestNormalizedKeyDecidesSmallInts(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, desc := range []bool{false, true} {
		kf := NormalizedKey([]KeyCol{{T: types.Int8, Pos: 0}, {T: types.Int8, Pos: 1, Desc: desc}})
		cmp := compareBy([]key{{col: 0}, {col: 1, desc: desc}})
		for i := 0; i < 20000; i++ {
			g1, g2 := rng.Int64N(10_000_000), rng.Int64N(10_000_000)
			a := []types.Datum{types.DInt(g1 % 1000), types.DInt(g1)}
			b := []types.Datum{types.DInt(g2 % 1000), types.DInt(g2)}
			ka, _ := kf(a)
			kb, _ := kf(b)
			if c := cmp(a, b); c != 0 && ka == kb {
				t.Fatalf("desc %v: %v and %v differ but share the key %016x", desc, a, b, ka)
			}
		}
	}
}

// randKeyDatum is randDatum's kinds and TestNormalizedKey's others.
func randKeyDatum(rng *rand.Rand, kind int) types.Datum {
	if kind < 4 {
		return randDatum(rng, kind)
	}
	if rng.IntN(8) == 0 {
		return types.DNull
	}
	switch kind {
	case 4:
		// Magnitudes of every byte length, both signs, and the ends.
		switch rng.IntN(4) {
		case 0:
			return types.DInt([]int64{math.MinInt64, math.MaxInt64, 0, -1, 1, 255, 256, -256, -257}[rng.IntN(9)])
		default:
			v := int64(rng.Uint64() >> rng.IntN(64))
			if rng.IntN(2) == 0 {
				v = -v
			}
			return types.DInt(v)
		}
	case 5:
		return types.DBool(rng.IntN(2) == 0)
	default:
		return types.DDate(rng.Int64N(40000) - 20000)
	}
}

func randDatum(rng *rand.Rand, kind int) types.Datum {
	if rng.IntN(8) == 0 {
		return types.DNull
	}
	switch kind {
	case 0:
		return types.DInt(rng.IntN(50) - 25) // many ties
	case 1:
		b := make([]byte, rng.IntN(6))
		for i := range b {
			b[i] = "ab\x00zé"[rng.IntN(5)]
		}
		return types.DString(b)
	case 2:
		return types.DFloat([]float64{math.Inf(-1), -0.0, 0, 1.5, math.NaN(), math.Inf(1)}[rng.IntN(6)])
	default:
		return types.NewDecimal(apd.New(rng.Int64N(2000)-1000, -int32(rng.IntN(3))))
	}
}

// TestSorterRandom sorts random rows under budgets from roomy to tiny
// (hundreds of runs and several merge passes) and checks the result
// against slices.SortStableFunc, NULL placement, DESC and multiple
// columns included.
func TestSorterRandom(t *testing.T) {
	ctx := context.Background()
	keySets := [][]key{
		{{col: 0}},
		{{col: 0, desc: true, nullsFirst: true}},
		{{col: 1}, {col: 0, desc: true}},
		{{col: 2, nullsFirst: true}, {col: 3, desc: true}},
		{{col: 3}, {col: 1, desc: true, nullsFirst: false}, {col: 0}},
	}
	for _, workMem := range []int64{0, 64 << 10, 4 << 10, 600} {
		for ki, keys := range keySets {
			rng := rand.New(rand.NewPCG(uint64(workMem), uint64(ki)))
			n := 3000 + rng.IntN(2000)
			rows := make([][]types.Datum, n)
			for i := range rows {
				// The last column is the input position, to check stability.
				rows[i] = []types.Datum{randDatum(rng, 0), randDatum(rng, 1), randDatum(rng, 2), randDatum(rng, 3), types.DInt(i)}
			}
			ts := newTemp(t, 0)
			node := mon.NewBudget("SQL memory", 0)
			acc := node.NewAccount(workMem)
			scope := ts.NewScope()
			cmp := compareBy(keys)
			s := NewSorter(cmp, acc, scope)
			// The first key abbreviated where its type has one (int,
			// text, float; not numeric).
			s.SetKey(FirstKey(colTypes[keys[0].col], keys[0].col, keys[0].desc, keys[0].nullsFirst))
			for _, r := range rows {
				if err := s.Add(ctx, r); err != nil {
					t.Fatal(err)
				}
			}
			it, err := s.Sort(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var got [][]types.Datum
			for {
				r, err := it.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if r == nil {
					break
				}
				got = append(got, r)
			}
			want := slices.Clone(rows)
			sort.SliceStable(want, func(i, j int) bool { return cmp(want[i], want[j]) < 0 })
			if len(got) != len(want) {
				t.Fatalf("work_mem %d keys %v: %d rows, want %d", workMem, keys, len(got), len(want))
			}
			for i := range want {
				// Position equality checks stability and values at once
				// (the position column is unique).
				if got[i][4] != want[i][4] {
					t.Fatalf("work_mem %d keys %v: row %d is input row %v, want %v (%v vs %v)", workMem, keys, i, got[i][4], want[i][4], got[i], want[i])
				}
				for c := range want[i] {
					if types.Compare(got[i][c], want[i][c]) != 0 || got[i][c].String() != want[i][c].String() {
						t.Fatalf("row %d column %d: %v, want %v", i, c, got[i][c], want[i][c])
					}
				}
			}
			if workMem == 600 && s.Runs <= 2*minMerge {
				t.Fatalf("a 600-byte budget wrote %d runs; the test wants several merge passes", s.Runs)
			}
			// Tiered merges: only enough runs are merged early to leave
			// minMerge (the order at 600 bytes) for the last merge, so
			// with at most minMerge² runs fewer rows than the input are
			// written twice, and the count of merges is the least.
			if r := s.SortedRuns; workMem == 600 && r <= minMerge*minMerge {
				if s.MergedRows >= int64(n) {
					t.Fatalf("%d runs: %d rows merged early, input %d", r, s.MergedRows, n)
				}
				if want := (r - minMerge + minMerge - 2) / (minMerge - 1); s.Runs-r != want {
					t.Fatalf("%d runs: %d early merges, want %d", r, s.Runs-r, want)
				}
			}
			if workMem == 0 && s.Runs != 0 {
				t.Fatalf("an unlimited sorter spilled %d runs", s.Runs)
			}
			it.Close()
			if acc.Used() != 0 || node.Used() != 0 {
				t.Fatalf("after Close: account %d, node %d bytes (invariant 1)", acc.Used(), node.Used())
			}
			if ts.Disk().Used() != 0 {
				t.Fatalf("after Close: %d bytes of disk reserved (invariant 2)", ts.Disk().Used())
			}
			if err := scope.Close(); err != nil {
				t.Fatal(err)
			}
			if n := filesIn(t, ts.Dir()); n != 0 {
				t.Fatalf("%d temporary files left (invariant 4)", n)
			}
		}
	}
}

// TestSorterDiskBudget: when the temporary-disk budget runs out too, the
// sort fails with 53200 and leaves nothing behind.
func TestSorterDiskBudget(t *testing.T) {
	ctx := context.Background()
	ts := newTemp(t, 512<<10)
	acc := mon.NewBudget("SQL memory", 0).NewAccount(16 << 10)
	scope := ts.NewScope()
	s := NewSorter(compareBy([]key{{col: 0}}), acc, scope)
	var err error
	for i := 0; i < 1_000_000 && err == nil; i++ {
		err = s.Add(ctx, []types.Datum{types.DInt(i), types.DString("padding padding padding")})
	}
	var pe *pgerror.Error
	if !errors.As(err, &pe) || pe.Code != pgerrcode.OutOfMemory {
		t.Fatalf("got %v, want 53200", err)
	}
	s.Close()
	if err := scope.Close(); err != nil {
		t.Fatal(err)
	}
	if ts.Disk().Used() != 0 || filesIn(t, ts.Dir()) != 0 {
		t.Fatalf("disk %d bytes, %d files left", ts.Disk().Used(), filesIn(t, ts.Dir()))
	}
}

// TestFileDiskReservation: a file being filled reserves disk ahead of
// what it holds (at least what it holds: invariant 2), and a sealed one
// holds exactly its bytes, so many small queued files (a 256-way hash
// split) do not hold a chunk each; appending again reserves again.
func TestFileDiskReservation(t *testing.T) {
	ts := newTemp(t, 0)
	scope := ts.NewScope()
	defer scope.Close()
	var files []*File
	for i := range 256 {
		f, err := scope.NewFileBuffered(4 << 10)
		if err != nil {
			t.Fatal(err)
		}
		for j := range i + 1 {
			if err := f.Append([]types.Datum{types.DInt(j), types.DString("row")}); err != nil {
				t.Fatal(err)
			}
		}
		if ts.Disk().Used() < f.Size() {
			t.Fatalf("file %d: %d bytes reserved for %d written", i, ts.Disk().Used(), f.Size())
		}
		if err := f.Seal(); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	var size int64
	for _, f := range files {
		size += f.Size()
	}
	if used := ts.Disk().Used(); used != size {
		t.Fatalf("256 sealed files of %d bytes hold %d bytes of disk budget", size, used)
	}
	if err := files[0].Append([]types.Datum{types.DInt(-1), types.DString("again")}); err != nil {
		t.Fatal(err)
	}
	if used := ts.Disk().Used(); used <= size {
		t.Fatalf("an append after Seal reserved nothing: %d bytes for %d", used, size)
	}
	rd, err := files[0].Reader(4 << 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []int64{0, -1} {
		row, err := rd.Next()
		if err != nil || row == nil || row[0] != types.DInt(want) {
			t.Fatalf("read %v, %v; want %d", row, err, want)
		}
	}
	rd.Close()
	for _, f := range files {
		f.Close()
	}
	if used := ts.Disk().Used(); used != 0 {
		t.Fatalf("%d bytes reserved after every file closed (invariant 2)", used)
	}
}

// TestSorterCancel: a cancelled context stops the merge, and closing the
// scope removes the runs.
func TestSorterCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	ts := newTemp(t, 0)
	acc := mon.NewBudget("SQL memory", 0).NewAccount(4 << 10)
	scope := ts.NewScope()
	s := NewSorter(compareBy([]key{{col: 0, desc: true}}), acc, scope)
	for i := range 20000 {
		if err := s.Add(ctx, []types.Datum{types.DInt(i)}); err != nil {
			t.Fatal(err)
		}
	}
	it, err := s.Sort(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if filesIn(t, ts.Dir()) == 0 {
		t.Fatal("a 4kB sort of 20000 rows wrote no files")
	}
	cancel()
	for err == nil {
		_, err = it.Next(ctx)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if err := scope.Close(); err != nil {
		t.Fatal(err)
	}
	if n := filesIn(t, ts.Dir()); n != 0 {
		t.Fatalf("%d temporary files left after the scope closed", n)
	}
	if ts.Disk().Used() != 0 {
		t.Fatalf("%d bytes of disk reserved after the scope closed", ts.Disk().Used())
	}
}

// TestCodecRoundTrip: every kind of value comes back from a file exactly
// as it went in.
func TestCodecRoundTrip(t *testing.T) {
	dec, _, err := apd.NewFromString("-12.3400")
	if err != nil {
		t.Fatal(err)
	}
	j, err := types.ParseJSON(`{"a": [1, 2.50, null], "b": "x"}`)
	if err != nil {
		t.Fatal(err)
	}
	nan := &types.DDecimal{}
	nan.Form = apd.NaN
	row := []types.Datum{
		types.DNull, types.DBool(true), types.DBool(false), types.DInt(math.MinInt64), types.DFloat(math.Copysign(0, -1)),
		types.NewDecimal(dec), nan, types.DString("héllo\x00"), types.DBytes("\x00\xff"), types.DDate(math.MaxInt32),
		types.DTime(86400000000), types.DTimestamp(-5), types.DTimestampTZ(1234567), types.DInterval{Months: 1, Days: -2, Micros: 3},
		types.DUUID{1, 2, 3}, &types.DJSON{JSON: j}, types.DJSONText(`{"a" : 1}`), types.DOid(4294967295),
		&types.DArray{Elem: types.Int8, Elems: []types.Datum{types.DInt(1), types.DNull}},
		&types.DArray{Elem: types.Int2, Elems: []types.Datum{types.DInt(7)}, ZeroBased: true},
		types.DEnum{PhysRep: "\x80", Label: "happy"},
		&types.DTuple{T: types.MakeRecord([]types.Field{{Name: "x", T: types.Int2}, {Name: "n", T: types.Text}}),
			Elems: []types.Datum{types.DInt(3), types.DNull}},
	}
	ts := newTemp(t, 0)
	scope := ts.NewScope()
	defer scope.Close()
	f, err := scope.NewFile()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Append(row); err != nil {
		t.Fatal(err)
	}
	r, err := f.Reader(64)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	for i := range row {
		if types.IsNull(row[i]) != types.IsNull(got[i]) || row[i].String() != got[i].String() {
			t.Errorf("value %d: %v (%T), want %v (%T)", i, got[i], got[i], row[i], row[i])
		}
	}
	if a, ok := got[18].(*types.DArray); !ok || a.Elem != types.Int8 {
		t.Errorf("array element type not kept: %#v", got[18])
	}
	if a, ok := got[19].(*types.DArray); !ok || !a.ZeroBased {
		t.Errorf("zero-based array not kept: %#v", got[19])
	}
	if r, ok := got[21].(*types.DTuple); !ok || r.T != row[21].(*types.DTuple).T {
		t.Errorf("record type not kept: %#v", got[21])
	}
	if f, ok := got[4].(types.DFloat); !ok || !math.Signbit(float64(f)) {
		t.Errorf("-0 not kept: %v", got[4])
	}
	if end, err := r.Next(); end != nil || err != nil {
		t.Errorf("after the last row: %v, %v", end, err)
	}
}

// TestBuffer: a buffer that spills reads back the same rows, any number
// of times, and releases memory and disk at Close.
func TestBuffer(t *testing.T) {
	ctx := context.Background()
	for _, workMem := range []int64{0, 1 << 10} {
		ts := newTemp(t, 0)
		node := mon.NewBudget("SQL memory", 0)
		acc := node.NewAccount(workMem)
		scope := ts.NewScope()
		b := NewBuffer(acc, scope)
		for i := range 500 {
			if err := b.Add([]types.Datum{types.DInt(i), types.DString("r")}); err != nil {
				t.Fatal(err)
			}
		}
		if b.Spilled() != (workMem > 0) {
			t.Fatalf("work_mem %d: spilled %v", workMem, b.Spilled())
		}
		for pass := range 2 {
			it, err := b.Iter()
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; ; i++ {
				r, err := it.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if r == nil {
					if i != 500 {
						t.Fatalf("pass %d read %d rows", pass, i)
					}
					break
				}
				if r[0] != types.DInt(i) {
					t.Fatalf("pass %d row %d: %v", pass, i, r)
				}
			}
			it.Close()
		}
		b.Close()
		scope.Close()
		if node.Used() != 0 || ts.Disk().Used() != 0 || filesIn(t, ts.Dir()) != 0 {
			t.Fatalf("after Close: memory %d, disk %d, files %d", node.Used(), ts.Disk().Used(), filesIn(t, ts.Dir()))
		}
	}
}

// TestRowReader: rows read by position, in memory and spilled, in random
// order and in the patterns window functions use (forward with a lagging
// and a leading reader), are the rows added, each transformed once per
// block read; the cache stays within its blocks, and Close releases it.
func TestRowReader(t *testing.T) {
	const n = 5000
	for _, workMem := range []int64{0, 1 << 10} {
		ts := newTemp(t, 0)
		node := mon.NewBudget("SQL memory", 0)
		scope := ts.NewScope()
		b := NewBuffer(node.NewAccount(workMem), scope)
		for i := range n {
			if err := b.Add([]types.Datum{types.DInt(i), types.DString("row")}); err != nil {
				t.Fatal(err)
			}
		}
		if b.Spilled() != (workMem > 0) {
			t.Fatalf("work_mem %d: spilled %v", workMem, b.Spilled())
		}
		cacheAcc := node.NewAccount(0)
		transforms := 0
		rr, err := b.RowReader(cacheAcc, 3, func(r []types.Datum) ([]types.Datum, error) {
			transforms++
			return []types.Datum{r[0].(types.DInt) * 2}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		check := func(i int64) {
			t.Helper()
			r, err := rr.Row(i)
			if err != nil {
				t.Fatal(err)
			}
			if r[0] != types.DInt(2*i) {
				t.Fatalf("work_mem %d: row %d is %v", workMem, i, r)
			}
		}
		// Forward, with readers 700 behind and 300 ahead (lag, lead).
		for i := int64(0); i < n; i++ {
			check(i)
			if i >= 700 {
				check(i - 700)
			}
			if i+300 < n {
				check(i + 300)
			}
		}
		// Three regions further apart than the cache holds: each reads
		// each block once (a cache that thrashed would read a block
		// per access, about 3n blocks).
		if transforms > 3*(n+blockRows) {
			t.Errorf("work_mem %d: %d rows transformed for %d rows", workMem, transforms, n)
		}
		// A spilled buffer's blocks also hold the stored rows (Raw).
		perRow := RowSize([]types.Datum{types.DInt(0)})
		if workMem > 0 {
			perRow += RowSize([]types.Datum{types.DInt(0), types.DString("row")})
		}
		if peak := cacheAcc.Used(); peak > 3*blockRows*perRow {
			t.Errorf("work_mem %d: cache holds %d bytes", workMem, peak)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		for range 2000 {
			check(rng.Int64N(n))
			i := rng.Int64N(n)
			if r, err := rr.Raw(i); err != nil || len(r) != 2 || r[0] != types.DInt(i) || r[1] != types.DString("row") {
				t.Fatalf("work_mem %d: raw row %d is %v, %v", workMem, i, r, err)
			}
		}
		if _, err := rr.Row(n); err == nil {
			t.Errorf("row %d of %d: no error", n, n)
		}
		rr.Close()
		if cacheAcc.Used() != 0 {
			t.Errorf("after Close: cache holds %d bytes", cacheAcc.Used())
		}
		b.Close()
		scope.Close()
		if node.Used() != 0 || ts.Disk().Used() != 0 || filesIn(t, ts.Dir()) != 0 {
			t.Fatalf("after Close: memory %d, disk %d, files %d", node.Used(), ts.Disk().Used(), filesIn(t, ts.Dir()))
		}
	}
}

// TestTempStorageCleansAtStart: a node's temporary directory is emptied
// when it starts (files a crashed node left behind).
func TestTempStorageCleansAtStart(t *testing.T) {
	dir := t.TempDir() + "/temp"
	if err := os.MkdirAll(dir+"/stmt-1-1", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir+"/stmt-1-1/000001.rows", []byte("left over"), 0o600); err != nil {
		t.Fatal(err)
	}
	ts, err := NewTempStorage(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := filesIn(t, ts.Dir()); n != 0 {
		t.Fatalf("%d entries survived the start", n)
	}
}

// TestTopK keeps the first k rows of random input under budgets from
// roomy to tiny (the tiny ones move to a spilling Sorter) and checks them
// against the first k of a stable sort: ties keep input order, so top-k
// and a full sort agree row for row.
func TestTopK(t *testing.T) {
	ctx := context.Background()
	keySets := [][]key{
		{{col: 0}},
		{{col: 0, desc: true, nullsFirst: true}},
		{{col: 2, nullsFirst: true}, {col: 3, desc: true}},
	}
	for _, workMem := range []int64{0, 64 << 10, 600} {
		for _, k := range []int64{0, 1, 7, 100, 5000, 10000} {
			for ki, keys := range keySets {
				rng := rand.New(rand.NewPCG(uint64(k), uint64(ki)))
				n := 3000 + rng.IntN(2000)
				rows := make([][]types.Datum, n)
				for i := range rows {
					rows[i] = []types.Datum{randDatum(rng, 0), randDatum(rng, 1), randDatum(rng, 2), randDatum(rng, 3), types.DInt(i)}
				}
				ts := newTemp(t, 0)
				node := mon.NewBudget("SQL memory", 0)
				acc := node.NewAccount(workMem)
				scope := ts.NewScope()
				cmp := compareBy(keys)
				tk := NewTopK(cmp, k, acc, scope)
				for _, r := range rows {
					if err := tk.Add(ctx, r); err != nil {
						t.Fatal(err)
					}
					// Past the MinRunRows rows held anyway, a heap still filling
					// stays within work_mem.
					if h := int64(len(tk.h)); workMem > 0 && h > MinRunRows && h < k && acc.Used() > workMem {
						t.Fatalf("work_mem %d k %d: %d bytes held without spilling", workMem, k, acc.Used())
					}
				}
				it, err := tk.Sort(ctx)
				if err != nil {
					t.Fatal(err)
				}
				var got [][]types.Datum
				for {
					r, err := it.Next(ctx)
					if err != nil {
						t.Fatal(err)
					}
					if r == nil {
						break
					}
					got = append(got, r)
				}
				want := slices.Clone(rows)
				sort.SliceStable(want, func(i, j int) bool { return cmp(want[i], want[j]) < 0 })
				want = want[:min(int64(len(want)), k)]
				if len(got) != len(want) {
					t.Fatalf("work_mem %d k %d keys %v: %d rows, want %d", workMem, k, keys, len(got), len(want))
				}
				for i := range want {
					if got[i][4] != want[i][4] {
						t.Fatalf("work_mem %d k %d keys %v: row %d is input row %v, want %v", workMem, k, keys, i, got[i][4], want[i][4])
					}
				}
				// No budget, or a k below MinRunRows: the heap; 600 bytes and
				// k >= 100: the Sorter. Between, it depends on the rows.
				if (workMem == 0 || k < MinRunRows) && tk.Spilled {
					t.Fatalf("work_mem %d k %d: spilled", workMem, k)
				}
				if workMem == 600 && k >= 100 && !tk.Spilled {
					t.Fatalf("work_mem %d k %d: did not spill", workMem, k)
				}
				it.Close()
				if acc.Used() != 0 || node.Used() != 0 || ts.Disk().Used() != 0 {
					t.Fatalf("after Close: account %d, node %d, disk %d bytes", acc.Used(), node.Used(), ts.Disk().Used())
				}
				if err := scope.Close(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// TestSorterMergeOrder: the merge order is what work_mem holds minReadBuf
// buffers (and a reader's overhead) for, so at 256 KiB (an order of 102)
// a sort of up to 102 runs is merged in one pass, writing no row twice,
// and its merge's buffers,
// larger when the runs are fewer, stay within work_mem; more runs than
// the order are merged early, only as many as needed.
func TestSorterMergeOrder(t *testing.T) {
	ctx := context.Background()
	const workMem = 256 << 10
	order := workMem / (minReadBuf + readerOverhead)
	for _, runs := range []int{3, order, order + 5} {
		ts := newTemp(t, 0)
		node := mon.NewBudget("SQL memory", 0)
		acc := node.NewAccount(workMem)
		s := NewSorter(compareBy([]key{{col: 0}}), acc, ts.NewScope())
		for i := 0; s.SortedRuns < runs-1 || i%100 != 0; i++ {
			if err := s.Add(ctx, []types.Datum{types.DInt((i * 7919) % 100003), types.DString("row")}); err != nil {
				t.Fatal(err)
			}
		}
		it, err := s.Sort(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if s.SortedRuns != runs {
			t.Fatalf("%d runs, want %d", s.SortedRuns, runs)
		}
		if used := acc.Used(); used > workMem {
			t.Errorf("%d runs: the merge holds %d bytes, work_mem %d", runs, used, workMem)
		}
		early := s.Runs - s.SortedRuns
		if runs <= order && (early != 0 || s.MergedRows != 0) {
			t.Errorf("%d runs, order %d: %d early merges writing %d rows, want one pass", runs, order, early, s.MergedRows)
		}
		if runs > order && early != 1 {
			t.Errorf("%d runs, order %d: %d early merges, want 1 (of %d runs)", runs, order, early, runs-order+1)
		}
		var prev types.Datum
		n := 0
		for {
			r, err := it.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if r == nil {
				break
			}
			if prev != nil && types.Compare(prev, r[0]) > 0 {
				t.Fatalf("row %d: %v after %v", n, r[0], prev)
			}
			prev = r[0]
			n++
		}
		it.Close()
		if acc.Used() != 0 {
			t.Fatalf("after Close: %d bytes reserved", acc.Used())
		}
	}
}

// TestSorterReservesWhatItHolds: what a sorter reserves (invariant 1)
// covers the heap its rows and their slots take, measured with the
// collector, and is not far over it: an over-count makes runs shorter
// and a sort with more runs merges its rows twice, an under-count lets
// the node's memory pass its budget. Each row is three values (two boxed
// ints above 255, one NULL), the shape of a window's sorted row.
func TestSorterReservesWhatItHolds(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's allocations grow the heap beyond the rows' own bytes (race_on_test.go)")
	}
	ctx := context.Background()
	for _, n := range []int{1000, 100_000, 300_000} {
		node := mon.NewBudget("SQL memory", 0)
		acc := node.NewAccount(0)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		s := NewSorter(compareBy([]key{{col: 0}}), acc, nil)
		for i := range n {
			row := make([]types.Datum, 3)
			row[0], row[2] = types.DInt(1000+i%997), types.DInt(1000+i)
			if err := s.Add(ctx, row); err != nil {
				t.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
		// 1% for what else the heap did meanwhile.
		if used := acc.Used(); used < held*99/100 || used > 2*held {
			t.Errorf("%d rows: reserved %d bytes, the heap grew by %d", n, used, held)
		}
		runtime.KeepAlive(s)
		s.Close()
		if acc.Used() != 0 {
			t.Fatalf("%d rows: %d bytes reserved after Close", n, acc.Used())
		}
	}
}

// TestSorterRunLength: a run holds as many rows as work_mem has room
// for at RowSize less its header plus a slot (slotSize) each: the slots'
// arrays grow in smaller steps once doubling does not fit, and keep
// their size for the next run.
func TestSorterRunLength(t *testing.T) {
	ctx := context.Background()
	const workMem = 1 << 20
	ts := newTemp(t, 0)
	node := mon.NewBudget("SQL memory", 0)
	acc := node.NewAccount(workMem)
	s := NewSorter(compareBy([]key{{col: 0}}), acc, ts.NewScope())
	defer s.Close()
	row := func(i int) []types.Datum {
		r := make([]types.Datum, 3)
		r[0], r[2] = types.DInt(1000+i%997), types.DInt(1000+i)
		return r
	}
	perRow := RowSize(row(0)) - rowHeaderSize + slotSize
	var runs []int64
	for i := 0; s.SortedRuns < 4; i++ {
		if err := s.Add(ctx, row(i)); err != nil {
			t.Fatal(err)
		}
		if n := len(s.runs); n > len(runs) {
			runs = append(runs, s.runs[n-1].Rows())
		}
	}
	want := int64(workMem) / perRow
	for i, r := range runs {
		// Growing by halving steps leaves at most MinRunRows slots,
		// plus a row's values, unfilled.
		if r < want-MinRunRows-1 || r > want {
			t.Errorf("run %d holds %d rows; work_mem holds %d at %d bytes a row", i, r, want, perRow)
		}
	}
}

// sortOnce sorts n rows of a random permutation under workMem in scope
// and checks the order; it returns the sort's error (nil when sorted).
func sortOnce(ctx context.Context, scope *Scope, node *mon.Budget, workMem int64, n int, seed uint64) (runs int, err error) {
	acc := node.NewAccount(workMem)
	s := NewSorter(compareBy([]key{{col: 0}}), acc, scope)
	defer s.Close()
	rng := rand.New(rand.NewPCG(seed, 1))
	for _, v := range rng.Perm(n) {
		if err := s.Add(ctx, []types.Datum{types.DInt(v), types.DString("row")}); err != nil {
			return s.Runs, err
		}
	}
	it, err := s.Sort(ctx)
	if err != nil {
		return s.Runs, err
	}
	defer it.Close()
	for want := 0; ; want++ {
		r, err := it.Next(ctx)
		if err != nil {
			return s.Runs, err
		}
		if r == nil {
			if want != n {
				return s.Runs, fmt.Errorf("%d rows, want %d", want, n)
			}
			return s.SortedRuns, nil
		}
		if r[0] != types.DInt(want) {
			return s.Runs, fmt.Errorf("row %d is %v", want, r[0])
		}
	}
}

// TestSorterOpenFileLimits: a sort of many runs holds no more
// descriptors than its statement's and the node's limits allow
// (invariant 7): its merge order shrinks to its share, costing merge
// passes, and with too few descriptors for any merge it fails with 53000
// and gives every one back. Ten statements sorting at once under a node
// limit smaller than their runs together all finish.
func TestSorterOpenFileLimits(t *testing.T) {
	ctx := context.Background()
	// An order of 78 (work_mem / (minReadBuf + readerOverhead)), ~125
	// runs of ~3,200 rows.
	const workMem, n = 256 << 10, 400_000
	for _, c := range []struct {
		node, stmt int64
		fails      bool
	}{
		{node: 1000, stmt: 1000},
		{node: 1000, stmt: 40},
		{node: 24, stmt: 1000},
		{node: 2, stmt: 1000, fails: true}, // a merge of two runs and its output need 3
		{node: 1000, stmt: 2, fails: true},
	} {
		ts := newTemp(t, 0)
		ts.SetOpenFileLimits(c.node, c.stmt)
		scope := ts.NewScope()
		runs, err := sortOnce(ctx, scope, mon.NewBudget("SQL memory", 0), workMem, n, 1)
		switch {
		case c.fails && pgerror.Code(err) != pgerrcode.InsufficientResources:
			t.Errorf("limits %d/%d: %v, want 53000", c.node, c.stmt, err)
		case !c.fails && err != nil:
			t.Errorf("limits %d/%d: %v", c.node, c.stmt, err)
		case !c.fails && runs < 100:
			t.Errorf("limits %d/%d: %d runs; the test wants many", c.node, c.stmt, runs)
		}
		if p := ts.OpenFilesPeak(); p > min(c.node, c.stmt) {
			t.Errorf("limits %d/%d: %d descriptors held at once", c.node, c.stmt, p)
		}
		scope.Close()
		if o := ts.OpenFiles(); o != 0 {
			t.Errorf("limits %d/%d: %d descriptors held after Close", c.node, c.stmt, o)
		}
	}

	ts := newTemp(t, 0)
	const nodeLimit = 60
	ts.SetOpenFileLimits(nodeLimit, 0)
	node := mon.NewBudget("SQL memory", 0)
	errs := make(chan error, 10)
	for i := range 10 {
		go func() {
			scope := ts.NewScope()
			_, err := sortOnce(ctx, scope, node, workMem, n/2, uint64(i))
			scope.Close()
			errs <- err
		}()
	}
	for range 10 {
		// A statement may find the node's descriptors taken by the
		// others between sizing its merge and opening its runs: 53000
		// then, never anything else.
		if err := <-errs; err != nil && pgerror.Code(err) != pgerrcode.InsufficientResources {
			t.Errorf("concurrent sort: %v", err)
		}
	}
	if p := ts.OpenFilesPeak(); p > nodeLimit {
		t.Errorf("ten sorts held %d descriptors at once, node limit %d", p, nodeLimit)
	}
	if o := ts.OpenFiles(); o != 0 {
		t.Errorf("%d descriptors held after the sorts", o)
	}
}

// TestSorterProcessFileLimit: with the process's own descriptor limit
// (RLIMIT_NOFILE) lower than the storage's, a sort the operating system
// refuses descriptors fails with 53000, not a crash or an untyped error.
// It runs in a child process, which lowers its own limit.
func TestSorterProcessFileLimit(t *testing.T) {
	if os.Getenv("CAIRN_TEST_NOFILE_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestSorterProcessFileLimit$", "-test.v")
		cmd.Env = append(os.Environ(), "CAIRN_TEST_NOFILE_CHILD=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "--- PASS: TestSorterProcessFileLimit") {
			t.Fatalf("child did not pass:\n%s", out)
		}
		return
	}
	ctx := context.Background()
	rl := syscall.Rlimit{Cur: 48, Max: 48}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	ts := newTemp(t, 0)
	ts.SetOpenFileLimits(100000, 100000) // only the process limit binds
	scope := ts.NewScope()
	_, err := sortOnce(ctx, scope, mon.NewBudget("SQL memory", 0), 256<<10, 400_000, 1)
	if pgerror.Code(err) != pgerrcode.InsufficientResources {
		t.Fatalf("sort past the process's descriptors: %v, want 53000", err)
	}
	scope.Close()
	if o := ts.OpenFiles(); o != 0 {
		t.Fatalf("%d descriptors held after Close", o)
	}
	// The limit in force is the process's: a storage made now takes half.
	if got := newTemp(t, 0).maxOpen; got != minNodeOpen {
		t.Errorf("default node limit %d under RLIMIT_NOFILE 48, want %d", got, minNodeOpen)
	}
}

// TestSorterMergeReservesItsReaders: what a merge of many runs holds
// (each run's read buffer, reader and row in the heap, and the decode
// slab the readers share) is within what it reserves (invariant 1),
// measured with the collector: the heap the merge frees when closed.
func TestSorterMergeReservesItsReaders(t *testing.T) {
	ctx := context.Background()
	const workMem = 1 << 20
	ts := newTemp(t, 0)
	acc := mon.NewBudget("SQL memory", 0).NewAccount(workMem)
	s := NewSorter(compareBy([]key{{col: 0}}), acc, ts.NewScope())
	for i := 0; s.SortedRuns < 300; i++ {
		if err := s.Add(ctx, []types.Datum{types.DInt((i * 7919) % 1000003), types.DInt(1000 + i)}); err != nil {
			t.Fatal(err)
		}
	}
	it, err := s.Sort(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := it.Next(ctx); err != nil {
		t.Fatal(err)
	}
	if s.Runs != s.SortedRuns {
		t.Fatalf("%d runs merged early: the test wants one merge of all", s.Runs-s.SortedRuns)
	}
	var open, closed runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&open)
	reserved := acc.Used()
	it.Close()
	runtime.GC()
	runtime.ReadMemStats(&closed)
	held := int64(open.HeapAlloc) - int64(closed.HeapAlloc)
	t.Logf("%d runs: the merge held %d bytes, reserved %d", s.SortedRuns, held, reserved)
	if held > reserved {
		t.Errorf("%d runs: the merge held %d bytes, reserved %d", s.SortedRuns, held, reserved)
	}
}
