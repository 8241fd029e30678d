package kv

import (
	"context"
	"fmt"
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"pgregory.net/rapid"
)

// TestDistSenderMatchesOneTablet is the router's defining property: for
// any tablet boundaries (some split behind the cache's back) and any batch
// of reads and range requests, the DistSender answers exactly what one
// tablet holding everything would.
func TestDistSenderMatchesOneTablet(t *testing.T) {
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
		cache := NewTabletCache(split)
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
