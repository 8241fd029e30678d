package tablet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/mvcc"
	"github.com/cairn-db/cairn/storage"
	pb "go.etcd.io/raft/v3/raftpb"
)

// sstOf builds an SST of committed versions at ts of kvs (key, value,
// key, value, ...), keys in order.
func sstOf(t *testing.T, ts hlc.Timestamp, kvs ...string) []byte {
	t.Helper()
	b := storage.NewSSTBuilder()
	for i := 0; i < len(kvs); i += 2 {
		if err := mvcc.PutSSTVersion(b, []byte(kvs[i]), ts, []byte(kvs[i+1])); err != nil {
			t.Fatal(err)
		}
	}
	data, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func wallTS(w int64) hlc.Timestamp { return hlc.Timestamp{WallTime: w} }

func (h *harness) sendAt(ts hlc.Timestamp, reqs ...kvpb.Request) (*kvpb.BatchResponse, error) {
	ba := &kvpb.BatchRequest{}
	ba.Timestamp = ts
	for _, r := range reqs {
		ba.Add(r)
	}
	return h.r.Send(context.Background(), ba)
}

// getAt reads key at ts ("" for no value).
func (h *harness) getAt(t *testing.T, key string, ts hlc.Timestamp) string {
	t.Helper()
	br, err := h.sendAt(ts, &kvpb.GetRequest{Key: []byte(key)})
	if err != nil {
		t.Fatalf("get %q at %s: %v", key, ts, err)
	}
	return string(br.Responses[0].(*kvpb.GetResponse).Value)
}

// TestAddSSTable ingests SSTs of versions at one timestamp into an
// unreplicated replica: readers at or above that timestamp see them, a
// version written above it by anyone else wins whether it was written
// before or after the ingestion, and a malformed request is refused with
// nothing ingested.
func TestAddSSTable(t *testing.T) {
	h := newHarness(t, Config{})
	// b has a newer version before the ingest; c gets one after.
	if _, err := h.sendAt(wallTS(20), &kvpb.PutRequest{Key: []byte("\x03b"), Value: []byte("b20")}); err != nil {
		t.Fatal(err)
	}
	sst := sstOf(t, wallTS(10), "\x03a", "a10", "\x03b", "b10", "\x03c", "c10")
	br, err := h.sendAt(wallTS(10), &kvpb.AddSSTableRequest{Key: []byte("\x03a"), EndKey: []byte("\x03d"), Data: sst})
	if err != nil {
		t.Fatal(err)
	}
	if n := br.Responses[0].(*kvpb.AddSSTableResponse).Versions; n != 3 {
		t.Fatalf("ingested %d versions, want 3", n)
	}
	if _, err := h.sendAt(wallTS(40), &kvpb.PutRequest{Key: []byte("\x03c"), Value: []byte("c40")}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.sendAt(wallTS(41), &kvpb.DeleteRequest{Key: []byte("\x03a")}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key  string
		ts   int64
		want string
	}{
		{"\x03a", 9, ""}, {"\x03a", 10, "a10"}, {"\x03a", 50, ""},
		{"\x03b", 15, "b10"}, {"\x03b", 50, "b20"},
		{"\x03c", 15, "c10"}, {"\x03c", 50, "c40"},
	} {
		if got := h.getAt(t, tc.key, wallTS(tc.ts)); got != tc.want {
			t.Errorf("%q at %d = %q, want %q", tc.key, tc.ts, got, tc.want)
		}
	}
	if n := h.r.Metrics().SSTsIngested.Load(); n != 1 {
		t.Errorf("SSTsIngested = %d, want 1", n)
	}

	// Refusals: each leaves \x03x..\x03z without a version.
	h.r.mu.Lock()
	h.r.setGCThresholdLocked(wallTS(30))
	h.r.mu.Unlock()
	rangeDel := func() []byte {
		path := h.eng.SSTPath("rangedel.sst")
		w, err := h.eng.NewSSTWriter(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.ClearRange([]byte("\x03x"), []byte("\x03y")); err != nil {
			t.Fatal(err)
		}
		if err := w.Finish(); err != nil {
			t.Fatal(err)
		}
		rc, err := h.eng.OpenFile(path)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		buf, err := io.ReadAll(rc)
		if err != nil {
			t.Fatal(err)
		}
		return buf
	}()
	good := func() []byte { return sstOf(t, wallTS(60), "\x03x", "x", "\x03y", "y") }
	add := func(data []byte) *kvpb.AddSSTableRequest {
		return &kvpb.AddSSTableRequest{Key: []byte("\x03x"), EndKey: []byte("\x03z"), Data: data}
	}
	for _, tc := range []struct {
		name string
		ts   hlc.Timestamp
		reqs []kvpb.Request
		txn  bool
	}{
		{"below the GC threshold", wallTS(30), []kvpb.Request{add(sstOf(t, wallTS(30), "\x03x", "x"))}, false},
		{"version at another timestamp", wallTS(60), []kvpb.Request{add(sstOf(t, wallTS(61), "\x03x", "x"))}, false},
		{"key outside the span", wallTS(60), []kvpb.Request{add(sstOf(t, wallTS(60), "\x03x", "x", "\x03z", "z"))}, false},
		{"not table data", wallTS(60), []kvpb.Request{&kvpb.AddSSTableRequest{Key: []byte("\x02x"), EndKey: []byte("\x03z"), Data: sstOf(t, wallTS(60), "\x02x", "x")}}, false},
		{"range deletion", wallTS(60), []kvpb.Request{add(rangeDel)}, false},
		{"not an sst", wallTS(60), []kvpb.Request{add([]byte("garbage"))}, false},
		{"not alone", wallTS(60), []kvpb.Request{add(good()), &kvpb.PutRequest{Key: []byte("\x03y"), Value: []byte("y")}}, false},
		{"in a transaction", wallTS(60), []kvpb.Request{add(good())}, true},
		{"no end key", wallTS(60), []kvpb.Request{&kvpb.AddSSTableRequest{Key: []byte("\x03x"), Data: good()}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ba := &kvpb.BatchRequest{}
			ba.Timestamp = tc.ts
			if tc.txn {
				ba.Timestamp = hlc.Timestamp{}
				ba.Txn = h.newTxn(tc.name, wallTS(60), 1)
				ba.Txn.Key = []byte("\x03x")
			}
			for _, r := range tc.reqs {
				ba.Add(r)
			}
			_, err := h.r.Send(context.Background(), ba)
			var inv *kvpb.InvalidArgumentError
			if !errors.As(err, &inv) {
				t.Fatalf("err = %v, want an InvalidArgumentError", err)
			}
			for _, k := range []string{"\x03x", "\x03y", "\x03z"} {
				if got := h.getAt(t, k, wallTS(70)); got != "" {
					t.Fatalf("%q = %q after a refused AddSSTable", k, got)
				}
			}
		})
	}
	if n := h.r.Metrics().SSTsIngested.Load(); n != 1 {
		t.Errorf("SSTsIngested = %d after the refusals, want 1", n)
	}
}

// TestAddSSTableReplayed applies an AddSSTable entry through the raft
// state machine, loses the apply batch as a crash before its commit
// would (the entry ingested, its applied index not recorded), and
// applies the entry again as a restarted replica does from its log: the
// versions are there once, and a version written above them since still
// wins. The entry asks for an empty apply batch, and refuses one that
// holds another entry's writes.
func TestAddSSTableReplayed(t *testing.T) {
	h := newHarness(t, Config{})
	g := &scriptedGroup{term: 5, leader: 1, proposed: make(chan []byte, 1)}
	h.r.SetRaft(g)
	sm := h.r.StateMachine()
	idx := uint64(10)
	entry := func(data []byte) *pb.Entry {
		idx++
		i, term := idx, uint64(5)
		return &pb.Entry{Term: &term, Index: &i, Data: data}
	}
	apply := func(e *pb.Entry, commit bool) {
		t.Helper()
		b := h.eng.NewBatch()
		defer b.Close()
		if err := sm.Apply(b, e); err != nil {
			t.Fatal(err)
		}
		if commit {
			if err := b.Commit(); err != nil {
				t.Fatal(err)
			}
			sm.Applied([]*pb.Entry{e}, false)
		}
	}

	// A later version of b, through the log.
	put := make(chan error, 1)
	go func() {
		_, err := h.sendAt(wallTS(20), &kvpb.PutRequest{Key: []byte("\x03b"), Value: []byte("b20")})
		put <- err
	}()
	putEntry := entry(<-g.proposed)
	if sm.NeedsEmptyBatch(putEntry) {
		t.Fatal("a put's entry asks for an empty apply batch")
	}
	apply(putEntry, true)
	if err := <-put; err != nil {
		t.Fatal(err)
	}

	done := make(chan error, 1)
	go func() {
		_, err := h.sendAt(wallTS(10), &kvpb.AddSSTableRequest{Key: []byte("\x03a"), EndKey: []byte("\x03c"),
			Data: sstOf(t, wallTS(10), "\x03a", "a10", "\x03b", "b10")})
		done <- err
	}()
	e := entry(<-g.proposed)
	if !sm.NeedsEmptyBatch(e) {
		t.Fatal("an AddSSTable entry does not ask for an empty apply batch")
	}
	// Refused with another entry's write in the batch.
	b := h.eng.NewBatch()
	if err := b.Put(storage.MVCCKey{Key: []byte("\x03q"), Timestamp: wallTS(5)}, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := sm.Apply(b, e); err == nil {
		t.Fatal("an AddSSTable entry applied into a batch holding another entry's writes")
	}
	b.Close()
	h.r.raft.applied = nil

	// Ingested, then the batch lost: the replica forgets the entry.
	apply(e, false)
	h.r.raft.applied = nil
	// Applied again from the log.
	apply(e, true)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := h.r.Metrics().SSTsIngested.Load(); n != 2 {
		t.Fatalf("SSTsIngested = %d, want 2 (the entry applied twice)", n)
	}
	for _, tc := range []struct {
		key  string
		ts   int64
		want string
	}{{"\x03a", 10, "a10"}, {"\x03b", 10, "b10"}, {"\x03b", 30, "b20"}, {"\x03a", 9, ""}} {
		if got := h.getAt(t, tc.key, wallTS(tc.ts)); got != tc.want {
			t.Errorf("%q at %d = %q, want %q", tc.key, tc.ts, got, tc.want)
		}
	}
	// Exactly one version of a at 10 and two of b (10 and 20) in the
	// engine: the second ingestion added nothing.
	it, err := h.eng.NewIter(storage.IterOptions{LowerBound: []byte("\x03a"), UpperBound: []byte("\x03c")})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var got []string
	for ok := it.First(); ok; ok = it.Next() {
		got = append(got, it.UnsafeKey().String())
	}
	if fmt.Sprint(got) != fmt.Sprint([]string{
		storage.MVCCKey{Key: []byte("\x03a"), Timestamp: wallTS(10)}.String(),
		storage.MVCCKey{Key: []byte("\x03b"), Timestamp: wallTS(20)}.String(),
		storage.MVCCKey{Key: []byte("\x03b"), Timestamp: wallTS(10)}.String(),
	}) {
		t.Fatalf("engine holds %q", got)
	}
}
