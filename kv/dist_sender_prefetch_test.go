package kv

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
)

// gatedTablets passes batches to fakeTablets, logging when each tablet's
// batch starts and ends, and first calls gate (if set), which may hold
// the batch back. It counts the batches in flight.
type gatedTablets struct {
	f        *fakeTablets
	gate     func(ctx context.Context, ba *kvpb.BatchRequest) error
	inflight atomic.Int64

	mu  sync.Mutex
	log []string
}

func (g *gatedTablets) Send(ctx context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
	g.inflight.Add(1)
	defer g.inflight.Add(-1)
	g.note(fmt.Sprintf("start t%d", ba.TabletID))
	defer g.note(fmt.Sprintf("end t%d", ba.TabletID))
	if g.gate != nil {
		if err := g.gate(ctx, ba); err != nil {
			return nil, err
		}
	}
	return g.f.Send(ctx, ba)
}

func (g *gatedTablets) note(s string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.log = append(g.log, s)
}

// before reports whether event a was logged before event b.
func (g *gatedTablets) before(a, b string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range g.log {
		switch s {
		case a:
			return true
		case b:
			return false
		}
	}
	return false
}

// prefetchTablets is four tablets, [Min,b) [b,c) [c,d) [d,Max) (t1 to
// t4), holding rows a000..a149, b000..b149, c000..c149 and d000..d149.
func prefetchTablets() *fakeTablets {
	f := newFakeTablets()
	for _, p := range "abcd" {
		for i := range 150 {
			f.data[fmt.Sprintf("%c%03d", p, i)] = fmt.Sprintf("v%c%d", p, i)
		}
	}
	for _, k := range []string{"b", "c", "d"} {
		f.split([]byte(k))
	}
	return f
}

func prefetchRouter(s kvpb.Sender, f *fakeTablets, remote bool) *DistSender {
	ds := NewDistSender(s, NewTabletCache(f), hlc.NewClock(hlc.NewManualClock(1).UnixNano, 0), 4)
	if remote {
		ds.remote = func(kvpb.TabletID) bool { return true }
	}
	return ds
}

// TestWalkPrefetchAnswersExactly: a limited scan walked over tablets
// whose leases are elsewhere reads each next tablet ahead, and answers
// exactly what the walk without reading ahead answers: rows, their order
// and the resume span, forward and reverse, with the limit met inside a
// later tablet (the answer read ahead cut to the limit left), at a
// tablet's end, or not at all; a count-style scan; and a batch of two
// scans. A byte limit and a small row limit are not read ahead.
func TestWalkPrefetchAnswersExactly(t *testing.T) {
	for _, tc := range []struct {
		name string
		reqs []*kvpb.ScanRequest
		// prefetched: whether some answer read ahead is used.
		prefetched bool
	}{
		// Tablets hold 150 rows each; the walk reads ahead from its
		// second tablet on, while 256 rows or more are left.
		{"limit met in the third tablet", []*kvpb.ScanRequest{{Key: []byte("a"), EndKey: []byte("e"), MaxKeys: 420}}, true},
		{"limit met at a tablet's end", []*kvpb.ScanRequest{{Key: []byte("a"), EndKey: []byte("e"), MaxKeys: 450}}, true},
		{"limit not met", []*kvpb.ScanRequest{{Key: []byte("a050"), EndKey: []byte("z"), MaxKeys: 5000}}, true},
		{"limit met in the second tablet", []*kvpb.ScanRequest{{Key: []byte("a"), EndKey: []byte("e"), MaxKeys: 280}}, false},
		{"reverse", []*kvpb.ScanRequest{{Key: []byte("a"), EndKey: []byte("d100"), MaxKeys: 400, Reverse: true}}, true},
		{"reverse, limit met in the third tablet", []*kvpb.ScanRequest{{Key: []byte("a"), EndKey: []byte("z"), MaxKeys: 420, Reverse: true}}, true},
		{"reverse, limit not met", []*kvpb.ScanRequest{{Key: []byte("a"), EndKey: []byte("z"), MaxKeys: 1000, Reverse: true}}, true},
		{"count tags", []*kvpb.ScanRequest{{Key: []byte("a"), EndKey: []byte("e"), MaxKeys: 1000, CountTags: []byte{'v'}}}, false},
		{"two scans", []*kvpb.ScanRequest{
			{Key: []byte("a"), EndKey: []byte("c"), MaxKeys: 2000},
			{Key: []byte("c"), EndKey: []byte("e"), MaxKeys: 2000},
		}, true},
		{"byte limit", []*kvpb.ScanRequest{{Key: []byte("a"), EndKey: []byte("e"), MaxBytes: 8000}}, false},
		{"small row limit", []*kvpb.ScanRequest{{Key: []byte("a140"), EndKey: []byte("e"), MaxKeys: 200}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answer := func(remote bool) (string, int64, int64) {
				f := prefetchTablets()
				ds := prefetchRouter(f, f, remote)
				ba := &kvpb.BatchRequest{}
				for _, r := range tc.reqs {
					c := *r
					ba.Add(&c)
				}
				br, err := ds.Send(context.Background(), ba)
				if err != nil {
					t.Fatal(err)
				}
				var out strings.Builder
				for _, r := range br.Responses {
					fmt.Fprintln(&out, fmtResp(r))
				}
				sent, used := ds.ScanPrefetches()
				return out.String(), sent, used
			}
			want, sent, _ := answer(false)
			if sent != 0 {
				t.Fatalf("a router that knows no remote tablet read %d ahead", sent)
			}
			got, sent, used := answer(true)
			if got != want {
				t.Errorf("reading ahead answered\n%s\nwithout:\n%s", got, want)
			}
			if tc.prefetched != (used > 0) {
				t.Errorf("prefetches sent %d, used %d; want some used: %t", sent, used, tc.prefetched)
			}
		})
	}
}

// TestWalkPrefetchOverlaps: from the walk's second tablet on, the next
// tablet's read starts before the current tablet answers. Tablet 2 holds
// its answer back until tablet 3 has been asked, and tablet 3 until
// tablet 4 has: without reading ahead the walk would wait for ever (here,
// until the test gives up). Tablet 1, the first, is not read past ahead.
func TestWalkPrefetchOverlaps(t *testing.T) {
	f := prefetchTablets()
	asked := map[kvpb.TabletID]chan struct{}{3: make(chan struct{}), 4: make(chan struct{})}
	var once [5]sync.Once
	g := &gatedTablets{f: f}
	g.gate = func(ctx context.Context, ba *kvpb.BatchRequest) error {
		if ch, ok := asked[ba.TabletID]; ok {
			once[ba.TabletID].Do(func() { close(ch) })
		}
		if next, ok := asked[ba.TabletID+1]; ok {
			select {
			case <-next:
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(30 * time.Second):
				return fmt.Errorf("tablet %d was not asked while tablet %d was", ba.TabletID+1, ba.TabletID)
			}
		}
		return nil
	}
	ds := prefetchRouter(g, f, true)
	ba := &kvpb.BatchRequest{}
	ba.Add(&kvpb.ScanRequest{Key: []byte("a"), EndKey: []byte("e"), MaxKeys: 10000})
	br, err := ds.Send(context.Background(), ba)
	if err != nil {
		t.Fatal(err)
	}
	rows := br.Responses[0].(*kvpb.ScanResponse).Rows
	if len(rows) != 600 || string(rows[0].Key) != "a000" || string(rows[599].Key) != "d149" {
		t.Fatalf("got %d rows, %s", len(rows), fmtResp(br.Responses[0]))
	}
	for i := 1; i < len(rows); i++ {
		if string(rows[i-1].Key) >= string(rows[i].Key) {
			t.Fatalf("rows out of order at %d: %s, %s", i, rows[i-1].Key, rows[i].Key)
		}
	}
	for _, p := range [][2]string{{"start t3", "end t2"}, {"start t4", "end t3"}, {"end t1", "start t2"}} {
		if !g.before(p[0], p[1]) {
			t.Errorf("%s not before %s: %v", p[0], p[1], g.log)
		}
	}
	if sent, used := ds.ScanPrefetches(); sent != 2 || used != 2 {
		t.Errorf("prefetches sent %d, used %d; want 2 and 2", sent, used)
	}
}

// TestWalkPrefetchEndsWithTheWalk: a prefetch the walk does not take is
// cancelled, and the walk returns only once it has ended: when the limit
// is met in the current tablet, and when the statement is cancelled
// while the current tablet reads. Either way nothing is left in flight.
func TestWalkPrefetchEndsWithTheWalk(t *testing.T) {
	for _, cancelStatement := range []bool{false, true} {
		t.Run(fmt.Sprintf("statement cancelled %t", cancelStatement), func(t *testing.T) {
			f := prefetchTablets()
			// Tablet 2 holds 600 rows: a limit of 600 from a is met
			// there, which the walk learns only from its answer, after
			// it has asked tablet 3 ahead for up to 450.
			for i := 150; i < 600; i++ {
				f.data[fmt.Sprintf("b%03d", i)] = "v"
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			prefetchAsked := make(chan struct{})
			var prefetchEnd atomic.Value
			g := &gatedTablets{f: f}
			g.gate = func(rctx context.Context, ba *kvpb.BatchRequest) error {
				switch ba.TabletID {
				case 2:
					// Tablet 2 answers once tablet 3 has been asked;
					// or the statement is cancelled then.
					<-prefetchAsked
					if cancelStatement {
						cancel()
						<-rctx.Done()
						return rctx.Err()
					}
				case 3:
					// Tablet 3 answers only when its request is
					// cancelled.
					close(prefetchAsked)
					<-rctx.Done()
					prefetchEnd.Store(rctx.Err())
					return rctx.Err()
				}
				return nil
			}
			ds := prefetchRouter(g, f, true)
			ba := &kvpb.BatchRequest{}
			ba.Add(&kvpb.ScanRequest{Key: []byte("a"), EndKey: []byte("e"), MaxKeys: 600})
			br, err := ds.Send(ctx, ba)
			if cancelStatement {
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("cancelled walk: %v, %v", br, err)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				if got := fmtResp(br.Responses[0]); !strings.HasSuffix(got, `resume="b450"-"e"`) {
					t.Fatalf("answered %s, want 600 rows and the rest to resume", got)
				}
			}
			if n := g.inflight.Load(); n != 0 {
				t.Fatalf("%d batches still in flight after the walk returned", n)
			}
			if e, _ := prefetchEnd.Load().(error); !errors.Is(e, context.Canceled) {
				t.Fatalf("the prefetch of tablet 3 ended with %v, want it cancelled", e)
			}
			if sent, used := ds.ScanPrefetches(); sent != 1 || used != 0 {
				t.Errorf("prefetches sent %d, used %d; want 1 and 0", sent, used)
			}
		})
	}
}

// TestPrefetchAnswerFor: how an answer read ahead becomes the answer to
// the walk's own request (invariant 2 of dist_sender_prefetch.go): as it
// is when nothing changed, cut to a row limit that shrank (the resume
// span from the first row cut, either direction), and refused when the
// request differs otherwise, its limit grew, or it is a count.
func TestPrefetchAnswerFor(t *testing.T) {
	rows := func(ks ...string) []kvpb.KeyValue {
		var out []kvpb.KeyValue
		for _, k := range ks {
			out = append(out, kvpb.KeyValue{Key: []byte(k), Value: []byte("v")})
		}
		return out
	}
	scan := func(max int64, reverse bool) *kvpb.ScanRequest {
		return &kvpb.ScanRequest{Key: []byte("b"), EndKey: []byte("f"), MaxKeys: max, Reverse: reverse}
	}
	for _, tc := range []struct {
		name       string
		sent, want *kvpb.ScanRequest
		resp       *kvpb.ScanResponse
		out        string // "" when refused
	}{
		{"unchanged", scan(300, false), scan(300, false), &kvpb.ScanResponse{Rows: rows("b1", "c1")}, "[b1=v c1=v]"},
		{"cut", scan(300, false), scan(2, false), &kvpb.ScanResponse{Rows: rows("b1", "c1", "d1")}, `[b1=v c1=v] resume="d1"-"f"`},
		{"cut reverse", scan(300, true), scan(2, true), &kvpb.ScanResponse{Rows: rows("d1", "c1", "b1")}, `[d1=v c1=v] resume="b"-"b1\x00"`},
		{"shrunk, fewer rows", scan(300, false), scan(5, false), &kvpb.ScanResponse{Rows: rows("b1", "c1")}, "[b1=v c1=v]"},
		{"unlimited sent", scan(0, false), scan(1, false), &kvpb.ScanResponse{Rows: rows("b1", "c1")}, `[b1=v] resume="c1"-"f"`},
		{"limit grew", scan(2, false), scan(300, false), &kvpb.ScanResponse{Rows: rows("b1", "c1")}, ""},
		{"limit lifted", scan(2, false), scan(0, false), &kvpb.ScanResponse{Rows: rows("b1", "c1")}, ""},
		{"other span", scan(300, false), &kvpb.ScanRequest{Key: []byte("c"), EndKey: []byte("f"), MaxKeys: 300}, &kvpb.ScanResponse{}, ""},
		{"count cut", &kvpb.ScanRequest{Key: []byte("b"), EndKey: []byte("f"), MaxKeys: 300, CountTags: []byte{1}},
			&kvpb.ScanRequest{Key: []byte("b"), EndKey: []byte("f"), MaxKeys: 2, CountTags: []byte{1}}, &kvpb.ScanResponse{Count: 3}, ""},
		{"count unchanged", &kvpb.ScanRequest{Key: []byte("b"), EndKey: []byte("f"), MaxKeys: 300, CountTags: []byte{1}},
			&kvpb.ScanRequest{Key: []byte("b"), EndKey: []byte("f"), MaxKeys: 300, CountTags: []byte{1}}, &kvpb.ScanResponse{Count: 3}, "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := answerFor(tc.sent, tc.want, tc.resp)
			switch {
			case tc.out == "" && ok:
				t.Fatalf("used %s, want it refused", fmtResp(got))
			case tc.out != "" && !ok:
				t.Fatalf("refused, want %s", tc.out)
			case ok && fmtResp(got) != tc.out:
				t.Fatalf("got %s, want %s", fmtResp(got), tc.out)
			}
		})
	}
}
