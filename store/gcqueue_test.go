package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
)

// gcModel is every write a test made: key → versions, oldest first.
type gcModel map[string][]gcVersion

type gcVersion struct {
	ts    hlc.Timestamp
	value []byte // nil: a deletion
}

// read is what a read at ts must see: the newest version at or below ts,
// nothing for a deletion.
func (m gcModel) read(ts hlc.Timestamp) map[string]string {
	out := map[string]string{}
	for k, vs := range m {
		for i := len(vs) - 1; i >= 0; i-- {
			if vs[i].ts.LessEq(ts) {
				if vs[i].value != nil {
					out[k] = string(vs[i].value)
				}
				break
			}
		}
	}
	return out
}

func (e *env) write(ctx context.Context, m gcModel, k string, v []byte) {
	ts := e.clock.Now()
	ba := &kvpb.BatchRequest{Header: kvpb.Header{Timestamp: ts}}
	if v == nil {
		ba.Add(&kvpb.DeleteRequest{Key: []byte(k)})
	} else {
		ba.Add(&kvpb.PutRequest{Key: []byte(k), Value: v})
	}
	if _, err := e.send(ctx, ba); err != nil {
		e.t.Fatalf("write %s at %s: %v", k, ts, err)
	}
	m[k] = append(m[k], gcVersion{ts: ts, value: v})
}

// scanAt reads [a, z) at ts through the store (every tablet).
func (e *env) scanAt(ctx context.Context, ts hlc.Timestamp) (map[string]string, error) {
	out := map[string]string{}
	for _, d := range e.s.Tablets() {
		start, end := d.StartKey, d.EndKey
		if bytes.Compare(start, []byte("a")) < 0 {
			start = []byte("a")
		}
		if bytes.Compare(end, []byte("z")) > 0 {
			end = []byte("z")
		}
		if bytes.Compare(start, end) >= 0 {
			continue
		}
		ba := &kvpb.BatchRequest{Header: kvpb.Header{Timestamp: ts}}
		ba.Add(&kvpb.ScanRequest{Key: start, EndKey: end})
		br, err := e.send(ctx, ba)
		if err != nil {
			return nil, err
		}
		for _, kv := range br.Responses[0].(*kvpb.ScanResponse).Rows {
			out[string(kv.Key)] = string(kv.Value)
		}
	}
	return out, nil
}

// threshold is the highest GC threshold of the store's tablets.
func (e *env) threshold() hlc.Timestamp {
	var th hlc.Timestamp
	for _, d := range e.s.Tablets() {
		th = th.Forward(e.s.Replica(d.TabletID).GCThreshold())
	}
	return th
}

// TestGCQueueCollectsHotRow: a row updated many times keeps, once the
// TTL has passed, only the versions a read at or above the threshold can
// see; a read below the threshold is refused; a pass over a tablet with
// nothing new to collect does not even scan it.
func TestGCQueueCollectsHotRow(t *testing.T) {
	const ttl = 10 * time.Second
	e := newEnv(t, Config{GCTTL: func([]byte) time.Duration { return ttl }})
	e.settle()
	ctx := context.Background()
	m := gcModel{}
	for i := range 200 {
		e.manual.Advance(time.Millisecond)
		e.write(ctx, m, "hot", []byte(fmt.Sprint(i)))
	}
	e.write(ctx, m, "gone", []byte("x"))
	e.write(ctx, m, "gone", nil)
	last := e.clock.Now()
	e.manual.Advance(2 * ttl)
	if n := e.s.GCPass(ctx, false); n != 201 {
		t.Fatalf("GC pass removed %d versions, want 201 (199 old versions of hot, both of gone)", n)
	}
	st := e.s.GCQueueStats()
	if st.Versions != 201 || st.Runs != 1 || st.Bytes <= 0 {
		t.Fatalf("stats after one pass: %+v", st)
	}
	th := e.threshold()
	if want := last.WallTime + int64(ttl); th.WallTime < want {
		t.Fatalf("threshold %s, want at least %d (now − TTL)", th, want)
	}
	if got, err := e.scanAt(ctx, th); err != nil || got["hot"] != "199" || len(got) != 1 {
		t.Fatalf("read at the threshold after GC: %v, %v", got, err)
	}
	var bgc *kvpb.BatchTimestampBeforeGCError
	if _, err := e.scanAt(ctx, th.Prev()); !errors.As(err, &bgc) {
		t.Fatalf("read below the threshold %s: err = %v, want BatchTimestampBeforeGCError", th, err)
	}
	e.manual.Advance(2 * ttl)
	if n := e.s.GCPass(ctx, false); n != 0 {
		t.Fatalf("second pass removed %d", n)
	}
	if st2 := e.s.GCQueueStats(); st2.Scans != st.Scans {
		t.Fatalf("a tablet with no writes and nothing pending was rescanned: scans %d → %d", st.Scans, st2.Scans)
	}
}

// TestGCQueueProtected: the protected timestamp holds the threshold back,
// so a reader there keeps its snapshot.
func TestGCQueueProtected(t *testing.T) {
	var protected hlc.Timestamp
	e := newEnv(t, Config{GCTTL: func([]byte) time.Duration { return time.Second },
		GCProtected: func(context.Context) (hlc.Timestamp, error) { return protected, nil }})
	e.settle()
	ctx := context.Background()
	m := gcModel{}
	for i := range 50 {
		e.manual.Advance(time.Millisecond)
		e.write(ctx, m, "k", []byte(fmt.Sprint(i)))
		if i == 20 {
			protected = e.clock.Now()
		}
	}
	e.manual.Advance(time.Minute)
	e.s.GCPass(ctx, false)
	if th := e.threshold(); th != protected {
		t.Fatalf("threshold %s, want the protected timestamp %s", th, protected)
	}
	got, err := e.scanAt(ctx, protected)
	if err != nil || got["k"] != "20" {
		t.Fatalf("read at the protected timestamp: %v, %v; want k=20", got, err)
	}
	old := protected
	protected = hlc.Timestamp{}
	e.manual.Advance(2 * time.Second) // past the rescan interval
	e.s.GCPass(ctx, false)
	if got, err := e.scanAt(ctx, e.clock.Now()); err != nil || got["k"] != "49" {
		t.Fatalf("read after the protection went: %v, %v", got, err)
	}
	if _, err := e.scanAt(ctx, old); err == nil {
		t.Fatalf("read at the old protected timestamp succeeded after GC passed it (threshold %s, stats %+v)", e.threshold(), e.s.GCQueueStats())
	}
}

// TestGCQueueModel runs random histories of writes, deletions, GC passes
// (random TTLs and protected timestamps), splits and restarts, and checks
// after each GC that reads at or above the threshold see exactly what the
// model says, and reads below it are refused.
func TestGCQueueModel(t *testing.T) {
	for seed := int64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			ttl := time.Duration(1+rng.Intn(20)) * time.Millisecond
			var protected hlc.Timestamp
			e := newEnv(t, Config{GCTTL: func([]byte) time.Duration { return ttl },
				GCProtected: func(context.Context) (hlc.Timestamp, error) { return protected, nil },
				GCFraction:  0.01})
			e.settle()
			ctx := context.Background()
			m := gcModel{}
			keys := []string{"a", "b", "c", "d", "e", "f", "g"}
			var writes []hlc.Timestamp
			var removed int64
			for step := range 300 {
				e.manual.Advance(time.Duration(rng.Intn(3)) * time.Millisecond)
				switch op := rng.Intn(20); {
				case op < 12:
					var v []byte
					if rng.Intn(4) > 0 {
						v = []byte(fmt.Sprint(step))
					}
					e.write(ctx, m, keys[rng.Intn(len(keys))], v)
					writes = append(writes, e.clock.Now())
				case op < 17:
					protected = hlc.Timestamp{}
					if rng.Intn(2) == 0 && len(writes) > 0 {
						protected = writes[rng.Intn(len(writes))]
					}
					removed += e.s.GCPass(ctx, rng.Intn(3) == 0)
					th := e.threshold()
					now := e.clock.Now()
					for range 5 {
						ts := hlc.Timestamp{WallTime: th.WallTime + rng.Int63n(now.WallTime-th.WallTime+1)}
						ts = ts.Forward(th).Forward(hlc.Timestamp{WallTime: 1})
						got, err := e.scanAt(ctx, ts)
						if err != nil {
							t.Fatalf("step %d: read at %s (threshold %s): %v", step, ts, th, err)
						}
						if want := m.read(ts); fmt.Sprint(got) != fmt.Sprint(want) {
							t.Fatalf("step %d: read at %s (threshold %s) = %v, model %v", step, ts, th, got, want)
						}
					}
					if !th.IsEmpty() {
						var bgc *kvpb.BatchTimestampBeforeGCError
						if _, err := e.scanAt(ctx, th.Prev()); !errors.As(err, &bgc) {
							t.Fatalf("step %d: read below threshold %s: %v", step, th, err)
						}
					}
				case op < 19:
					k := keys[1+rng.Intn(len(keys)-1)]
					if _, _, err := e.s.Split(ctx, []byte(k)); err != nil {
						var inv *kvpb.InvalidArgumentError
						if !errors.As(err, &inv) { // already split there
							t.Fatalf("split at %s: %v", k, err)
						}
					}
					e.settle()
				default:
					e.reopen()
					e.settle()
				}
			}
			if removed == 0 {
				t.Fatalf("no GC pass removed anything: the history checked nothing")
			}
		})
	}
}

// A TTL cut (a zone's gc.ttlseconds changed) takes effect at the next
// pass, for a tablet scanned under the old TTL and not written since.
func TestGCQueueTTLChange(t *testing.T) {
	ttl := time.Hour
	e := newEnv(t, Config{GCTTL: func([]byte) time.Duration { return ttl }})
	e.settle()
	ctx := context.Background()
	m := gcModel{}
	for i := range 20 {
		e.manual.Advance(time.Millisecond)
		e.write(ctx, m, "k", []byte(fmt.Sprint(i)))
	}
	e.manual.Advance(time.Minute)
	if n := e.s.GCPass(ctx, false); n != 0 {
		t.Fatalf("removed %d within the TTL", n)
	}
	ttl = time.Second
	e.manual.Advance(2 * time.Second)
	if n := e.s.GCPass(ctx, false); n != 19 {
		t.Fatalf("after the TTL cut the pass removed %d, want 19", n)
	}
}

// A GC that removes many versions from a tablet (gcCompactVersions) is
// followed by a compaction of the tablet's span, so reads stop stepping
// over the deletions; a small one is not.
func TestGCQueueCompactsAfterLargeGC(t *testing.T) {
	const ttl = time.Second
	e := newEnv(t, Config{GCTTL: func([]byte) time.Duration { return ttl }})
	e.settle()
	ctx := context.Background()
	m := gcModel{}
	versions := func(n int) {
		for i := range n {
			e.manual.Advance(time.Microsecond)
			e.write(ctx, m, "hot", fmt.Appendf(nil, "%d", i))
		}
	}
	versions(100)
	e.manual.Advance(2 * ttl)
	e.s.GCPass(ctx, true)
	if c := e.s.GCQueueStats().Compactions; c != 0 {
		t.Fatalf("%d compactions after removing 99 versions", c)
	}
	versions(gcCompactVersions + 10)
	e.manual.Advance(2 * ttl)
	e.s.GCPass(ctx, true)
	if c := e.s.GCQueueStats().Compactions; c != 1 {
		t.Fatalf("%d compactions after removing %d versions, want 1", c, gcCompactVersions+10)
	}
	if got := string(e.get("hot")); got != fmt.Sprint(gcCompactVersions+9) {
		t.Fatalf("hot = %q after GC and compaction", got)
	}
}
