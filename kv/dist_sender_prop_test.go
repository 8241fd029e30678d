package kv

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"pgregory.net/rapid"
)

// TestDistSenderMatchesOneTablet is the router's defining property: for
// any tablet boundaries (some split behind the cache's back) and any batch
// of reads and range requests, the DistSender answers exactly what one
// tablet holding everything would.
func TestDistSenderMatchesOneTablet(t *testing.T) { testMatchesOneTablet(t, false) }

// TestDistSenderMatchesOneTabletLaggingDirectory is the same property
// when directory lookups may answer from an earlier set of boundaries, as
// a node's directory does while its replica of a tablet has not yet
// applied a split the leaseholder (and the cache, through a tablet's
// refusal) already knows of. The router then holds a descriptor newer than
// the one the directory gives for the next key: an older generation of a
// tablet, starting before that key. Dividing a span by it once sent two
// overlapping pieces, each answered correctly, whose rows were then
// concatenated: testcluster.TestClusterScansRacingSplits saw scans return
// rows twice this way. (This test found it at once;
// TestDistSenderStaleDirectoryPiecesDoNotOverlap pins the case.)
func TestDistSenderMatchesOneTabletLaggingDirectory(t *testing.T) { testMatchesOneTablet(t, true) }

func testMatchesOneTablet(t *testing.T, lagging bool) {
	// limit is "no limit" half the time, so unlimited (parallel) scans are
	// drawn as often as limited (walked) ones.
	limit := func(n int64) *rapid.Generator[int64] {
		return rapid.OneOf(rapid.Just(int64(0)), rapid.Int64Range(1, n))
	}
	keyGen := rapid.SampledFrom([]string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"})
	rapid.Check(t, func(t *rapid.T) {
		data := map[string]string{}
		for _, k := range rapid.SliceOfDistinct(keyGen, rapid.ID).Draw(t, "keys") {
			data[k] = "v" + k
		}
		split := newFakeTablets()
		whole := newFakeTablets()
		for k, v := range data {
			split.data[k], whole.data[k] = v, v
		}
		clock := hlc.NewClock(hlc.NewManualClock(1).UnixNano, 0)
		var lookup TabletLookup = split
		if lagging {
			lookup = &laggingDirectory{f: split, rng: rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "lag seed"), 1)), stale: 4}
		}
		cache := NewTabletCache(lookup)
		ds := NewDistSender(split, cache, clock, 10)
		for _, k := range rapid.SliceOfDistinct(keyGen, rapid.ID).Draw(t, "splits") {
			split.split([]byte(k))
		}
		// Warm the cache, then split some more behind its back.
		ctx := context.Background()
		warm := &kvpb.BatchRequest{}
		warm.Add(&kvpb.ScanRequest{Key: []byte("a"), EndKey: []byte("z")})
		if _, err := ds.Send(ctx, warm); err != nil {
			t.Fatal(err)
		}
		for _, k := range rapid.SliceOfDistinct(keyGen, rapid.ID).Draw(t, "late splits") {
			split.split([]byte(k))
		}

		reverse := rapid.Bool().Draw(t, "reverse")
		ba := &kvpb.BatchRequest{}
		for i := range rapid.IntRange(1, 4).Draw(t, "requests") {
			a, b := keyGen.Draw(t, fmt.Sprint("start", i)), keyGen.Draw(t, fmt.Sprint("end", i))
			if b < a {
				a, b = b, a
			}
			b += "\x00"
			switch rapid.IntRange(0, 2).Draw(t, fmt.Sprint("kind", i)) {
			case 0:
				ba.Add(&kvpb.GetRequest{Key: []byte(a)})
			case 1:
				ba.Add(&kvpb.ScanRequest{Key: []byte(a), EndKey: []byte(b), Reverse: reverse,
					MaxKeys:  limit(4).Draw(t, fmt.Sprint("max", i)),
					MaxBytes: limit(8).Draw(t, fmt.Sprint("bytes", i))})
			case 2:
				ba.Add(&kvpb.ResolveIntentRangeRequest{Key: []byte(a), EndKey: []byte(b)})
			}
		}
		got, err := ds.Send(ctx, ba)
		if err != nil {
			t.Fatal(err)
		}
		one := *ba
		one.TabletID = 1
		want, err := whole.Send(ctx, &one)
		if err != nil {
			t.Fatal(err)
		}
		// What is left to read after a limited scan: the router may return a
		// resume span where one tablet knows nothing is left (it cannot
		// know without reading the next tablet), so resume spans compare
		// by the rows they still hold.
		rest := func(sc *kvpb.ScanRequest, r kvpb.Response) string {
			sr := r.(*kvpb.ScanResponse)
			if sr.ResumeSpan == nil {
				return "[]"
			}
			return fmtResp(whole.scan(&kvpb.ScanRequest{Key: sr.ResumeSpan.Key, EndKey: sr.ResumeSpan.EndKey, Reverse: sc.Reverse}))
		}
		for i, req := range ba.Requests {
			g, w := fmtResp(got.Responses[i]), fmtResp(want.Responses[i])
			if sc, ok := req.(*kvpb.ScanRequest); ok {
				g = fmt.Sprintf("%s then %s", rowsString(got.Responses[i].(*kvpb.ScanResponse).Rows), rest(sc, got.Responses[i]))
				w = fmt.Sprintf("%s then %s", rowsString(want.Responses[i].(*kvpb.ScanResponse).Rows), rest(sc, want.Responses[i]))
			}
			if g != w {
				t.Fatalf("%s: router answered %s, one tablet %s (tablets %v)", fmtReq(ba.Requests[i]), g, w, split.descs)
			}
		}
	})
}

// laggingDirectory answers up to stale lookups from a random earlier set of
// the fake's boundaries (fakeTablets.history), the others from the current
// one, so that routing retries still end.
type laggingDirectory struct {
	f *fakeTablets

	mu    sync.Mutex
	rng   *rand.Rand
	stale int
}

func (l *laggingDirectory) LookupTablet(ctx context.Context, key []byte, reverse bool) (kvpb.TabletDescriptor, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.f.mu.Lock()
	hist := l.f.history
	l.f.mu.Unlock()
	if l.stale > 0 && len(hist) > 0 && l.rng.IntN(2) == 0 {
		l.stale--
		for _, d := range hist[l.rng.IntN(len(hist))] {
			if coversKey(d, key, reverse) {
				return d, nil
			}
		}
	}
	return l.f.LookupTablet(ctx, key, reverse)
}

// staleOnce answers the first lookup of each key in stale from there (an
// old descriptor a lagging directory still holds), every other from f.
type staleOnce struct {
	f     *fakeTablets
	mu    sync.Mutex
	stale map[string]kvpb.TabletDescriptor
}

func (s *staleOnce) LookupTablet(ctx context.Context, key []byte, reverse bool) (kvpb.TabletDescriptor, error) {
	s.mu.Lock()
	d, ok := s.stale[string(key)]
	delete(s.stale, string(key))
	s.mu.Unlock()
	if ok {
		return d, nil
	}
	return s.f.LookupTablet(ctx, key, reverse)
}

// TestDistSenderStaleDirectoryPiecesDoNotOverlap pins the case the lagging
// directory property test found, where the cache cannot tell the
// directory's answer is stale: tablets t1 [Min, b), t2 [b, c), t3 [c, Max);
// the cache holds t2; the directory still answers t1's pre-split
// descriptor [Min, Max) for c. A span [b, d) must still go out in pieces
// that tile it, so each row comes back once.
func TestDistSenderStaleDirectoryPiecesDoNotOverlap(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  kvpb.Request
		want string
	}{
		{name: "scan", req: &kvpb.ScanRequest{Key: []byte("b"), EndKey: []byte("d")}, want: "[b1=1 b2=2 c1=3 c2=4]"},
		{name: "reverse scan", req: &kvpb.ScanRequest{Key: []byte("b"), EndKey: []byte("d"), Reverse: true}, want: "[c2=4 c1=3 b2=2 b1=1]"},
		{name: "resolve", req: &kvpb.ResolveIntentRangeRequest{Key: []byte("b"), EndKey: []byte("d")}, want: "resolved=4"},
		{name: "delete range", req: &kvpb.DeleteRangeRequest{Key: []byte("b"), EndKey: []byte("d")}, want: "deleted [b1 b2 c1 c2]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeTablets()
			f.split([]byte("b"))
			oldT1 := f.descs[0]
			oldT1.EndKey = f.descs[1].EndKey
			oldT1.Generation--
			f.split([]byte("c"))
			for i, k := range []string{"b1", "b2", "c1", "c2"} {
				f.data[k] = fmt.Sprint(i + 1)
			}
			lookup := &staleOnce{f: f, stale: map[string]kvpb.TabletDescriptor{"c": oldT1}}
			cache := NewTabletCache(lookup)
			t2, err := f.LookupTablet(context.Background(), []byte("b"), false)
			if err != nil {
				t.Fatal(err)
			}
			cache.Insert(t2)
			ds := NewDistSender(f, cache, hlc.NewClock(hlc.NewManualClock(1).UnixNano, 0), 10)
			ba := &kvpb.BatchRequest{}
			ba.Add(tc.req)
			br, err := ds.Send(context.Background(), ba)
			if err != nil {
				t.Fatal(err)
			}
			if got := fmtResp(br.Responses[0]); got != tc.want {
				t.Fatalf("answered %s, want %s (sub-batches: %v)", got, tc.want, f.takeTrace(false))
			}
		})
	}
}

// TestDistSenderWalkRetriesArePerStep: a limited scan walked over many
// tablets that each split once behind the cache's back is refused once at
// each of them, more times in all than the routing retry budget; the
// budget bounds refusals in a row, so the walk ends with every row.
// (It counted refusals over the whole walk, and TestClusterScansRacingSplits
// saw paginated scans fail with ErrRoutingRetriesExhausted.)
func TestDistSenderWalkRetriesArePerStep(t *testing.T) {
	f := newFakeTablets()
	var want []string
	for c := 'a'; c <= 'x'; c++ {
		k := string(c)
		f.data[k] = "v" + k
		want = append(want, k+"=v"+k)
		if (c-'a')%3 == 0 && c != 'a' {
			f.split([]byte(k))
		}
	}
	cache := NewTabletCache(f)
	ds := NewDistSender(f, cache, hlc.NewClock(hlc.NewManualClock(1).UnixNano, 0), 3)
	ctx := context.Background()
	warm := &kvpb.BatchRequest{}
	warm.Add(&kvpb.ScanRequest{Key: []byte("a"), EndKey: []byte("z")})
	if _, err := ds.Send(ctx, warm); err != nil {
		t.Fatal(err)
	}
	// Split every tablet once more behind the cache's back: eight
	// refusals along the walk, against a budget of three.
	for c := 'b'; c <= 'x'; c += 3 {
		f.split([]byte(string(c)))
	}
	for _, reverse := range []bool{false, true} {
		ba := &kvpb.BatchRequest{}
		ba.Add(&kvpb.ScanRequest{Key: []byte("a"), EndKey: []byte("z"), MaxKeys: 100, Reverse: reverse})
		br, err := ds.Send(ctx, ba)
		if err != nil {
			t.Fatalf("reverse %t: %v", reverse, err)
		}
		got := rowsString(br.Responses[0].(*kvpb.ScanResponse).Rows)
		w := slices.Clone(want)
		if reverse {
			slices.Reverse(w)
		}
		if exp := strings.Join(w, " "); got != exp {
			t.Fatalf("reverse %t: %s, want %s", reverse, got, exp)
		}
		// The next direction meets the boundaries cached by this one:
		// split again.
		for c := 'c'; c <= 'x'; c += 3 {
			f.split([]byte(string(c) + "0"))
		}
	}
}
