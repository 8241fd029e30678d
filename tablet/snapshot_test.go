package tablet

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/storage"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// dumpEngine lists every engine key in [lo, hi) with its value.
func dumpEngine(t *testing.T, r Iterable, lo, hi []byte) []string {
	t.Helper()
	it, err := r.NewIter(storage.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var out []string
	for ok := it.First(); ok; ok = it.Next() {
		v, _ := it.UnsafeValue()
		out = append(out, fmt.Sprintf("%s=%q", it.UnsafeKey(), v))
	}
	return out
}

// TestSnapshotReplacesSpans: a snapshot of a tablet taken on one engine
// and ingested on another makes the receiver's replicated state of that
// tablet identical to the sender's (stale keys there are gone) and leaves
// everything else on the receiver alone (other tablets, the raft log).
func TestSnapshotReplacesSpans(t *testing.T) {
	open := func() *storage.Engine {
		eng, err := storage.Open("", storage.Options{FS: vfs.NewMem()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { eng.Close() })
		return eng
	}
	desc := kvpb.TabletDescriptor{TabletID: 5, StartKey: []byte("\x03b"), EndKey: []byte("\x03m")}
	var txnID [keys.TxnIDLen]byte
	txnID[0] = 7
	put := func(eng *storage.Engine, kvs map[string]string, versioned ...string) {
		b := eng.NewBatch()
		defer b.Close()
		for k, v := range kvs {
			if err := b.Put(storage.MVCCKey{Key: []byte(k)}, []byte(v)); err != nil {
				t.Fatal(err)
			}
		}
		for i, k := range versioned {
			for ts := int64(1); ts <= 3; ts++ {
				if err := b.Put(storage.MVCCKey{Key: []byte(k), Timestamp: hlc.Timestamp{WallTime: ts * 10, Logical: int32(i)}}, fmt.Appendf(nil, "%s@%d", k, ts)); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	sender, receiver := open(), open()
	put(sender, map[string]string{
		string(keys.TabletReplicated(5, "gcth")):       "sender-gc",
		string(keys.TxnRecord([]byte("\x03c"), txnID)): "record",
		string(keys.Lock([]byte("\x03d"))):             "intent",
		string(keys.TabletReplicated(6, "gcth")):       "other tablet",
		string(keys.Lock([]byte("\x03z"))):             "lock outside",
	}, "\x03b", "\x03c", "\x03lzz", "\x03m", "\x03a")
	put(receiver, map[string]string{
		string(keys.TabletReplicated(5, "gcth")):  "stale-gc",
		string(keys.TabletReplicated(5, "stale")): "stale",
		string(keys.Lock([]byte("\x03e"))):        "stale intent",
		string(keys.TabletLocal(5, "rfth")):       "receiver raft state",
		string(keys.TabletReplicated(4, "gcth")):  "receiver's other tablet",
		string(keys.Lock([]byte("\x03a"))):        "receiver lock outside",
	}, "\x03f", "\x03a", "\x03m")

	snap := sender.NewSnapshot()
	defer snap.Close()
	w, err := receiver.NewSSTWriter("snap-5.sst")
	if err != nil {
		t.Fatal(err)
	}
	n, err := WriteSnapshot(snap, desc, w)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	// gc, record, intent, and 3 versions of b, c and lzz.
	if n != 3+9 {
		t.Errorf("snapshot holds %d keys, want 12", n)
	}
	if err := IngestSnapshot(context.Background(), receiver, w.Path()); err != nil {
		t.Fatal(err)
	}
	for _, sp := range ReplicatedSpans(desc) {
		got := dumpEngine(t, receiver, sp.Key, sp.EndKey)
		want := dumpEngine(t, sender, sp.Key, sp.EndKey)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("span %q-%q after ingest:\n%s\nwant\n%s", sp.Key, sp.EndKey, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	// Outside the tablet's replicated spans nothing changed.
	for k, want := range map[string]string{
		string(keys.TabletLocal(5, "rfth")):      "receiver raft state",
		string(keys.TabletReplicated(4, "gcth")): "receiver's other tablet",
		string(keys.Lock([]byte("\x03a"))):       "receiver lock outside",
	} {
		v, ok, err := receiver.Get(storage.MVCCKey{Key: []byte(k)})
		if err != nil || !ok || string(v) != want {
			t.Errorf("%q: got %q %v %v, want %q", k, v, ok, err, want)
		}
	}
	// The receiver's versions of keys outside the span are its own (their
	// logical clocks say which engine wrote them: 1 and 2 on the
	// receiver, 4 and 3 on the sender).
	for k, logical := range map[string]string{"\x03a": "@30,1=", "\x03m": "@30,2="} {
		if got := dumpEngine(t, receiver, []byte(k), keys.Next([]byte(k))); len(got) != 3 || !strings.Contains(got[0], logical) {
			t.Errorf("receiver's versions of %q outside the tablet: %v", k, got)
		}
	}
}
