package raftnode

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/clusterversion"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/storage"
	"github.com/cairn-db/cairn/storage/simfs"
	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
)

// sidePrefix marks a test entry whose data after it is a side-loaded
// payload.
const sidePrefix = "S:"

// sideRangeOf is the test state machines' SideloadedRange: the payload is
// the data after sidePrefix up to an optional "|" and a suffix, so the
// payload sits inside the data, not only at its end.
func sideRangeOf(data []byte) (start, end int, ok bool) {
	if !bytes.HasPrefix(data, []byte(sidePrefix)) {
		return 0, 0, false
	}
	end = len(data)
	if i := bytes.LastIndexByte(data, '|'); i >= len(sidePrefix) {
		end = i
	}
	return len(sidePrefix), end, true
}

// readSideFile reads a side-loaded file of fs.
func readSideFile(fs vfs.FS, path string) ([]byte, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// sideSM is a state machine that side-loads: each applied entry's data
// under the tablet's replicated keys, and for a side-loaded one, the
// check that its file holds the payload. failSideloaded makes the next
// ApplySideloaded fail (a crash before the apply commits).
type sideSM struct {
	t              *testing.T
	eng            *storage.Engine
	tabletID       uint64
	fromFiles      int
	failSideloaded bool
}

func (m *sideSM) key(index uint64) storage.MVCCKey {
	return storage.MVCCKey{Key: binary.BigEndian.AppendUint64(keys.TabletReplicated(m.tabletID, "sim"), index)}
}

func (m *sideSM) Apply(b *storage.Batch, e *pb.Entry) error {
	return b.Put(m.key(e.GetIndex()), e.GetData())
}

func (m *sideSM) SideloadedRange(data []byte) (int, int, bool) { return sideRangeOf(data) }

func (m *sideSM) ApplySideloaded(b *storage.Batch, e *pb.Entry, file string) error {
	if m.failSideloaded {
		m.failSideloaded = false
		return errors.New("crash before the apply")
	}
	got, err := readSideFile(m.eng.FS(), file)
	if err != nil {
		return err
	}
	start, end, _ := sideRangeOf(e.GetData())
	if !bytes.Equal(got, e.GetData()[start:end]) {
		return fmt.Errorf("entry %d: file %s holds %q, the entry's payload is %q", e.GetIndex(), file, got, e.GetData()[start:end])
	}
	m.fromFiles++
	return m.Apply(b, e)
}

func (m *sideSM) Snapshot() ([]byte, error)                            { return nil, nil }
func (m *sideSM) ApplySnapshot(b *storage.Batch, s *pb.Snapshot) error { return nil }

// sideFiles lists tablet 1's side-loaded files.
func sideFiles(t *testing.T, eng *storage.Engine) []string {
	t.Helper()
	names, err := eng.FS().List(eng.FS().PathJoin(eng.Dir(), sideloadDirName, "t1"))
	if err != nil && !errors.Is(err, iofs.ErrNotExist) {
		t.Fatal(err)
	}
	slices.Sort(names)
	return names
}

func ent(index, term uint64, data string) *pb.Entry {
	typ := pb.EntryType_EntryNormal
	return &pb.Entry{Index: &index, Term: &term, Type: &typ, Data: []byte(data)}
}

// TestSideloadLogStore: a side-loaded entry's payload lives in its file,
// not in the engine's record; it comes back whole from Entries; a reopen
// reads it again; a replaced tail's, a compaction's and a snapshot's
// files go, only after ReleaseObsolete (the caller's synced commit); a
// corrupted or missing file is refused with the file named.
func TestSideloadLogStore(t *testing.T) {
	fs := vfs.NewCrashableMem()
	eng, err := storage.Open("", storage.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { eng.Close() }()
	sm := &sideSM{t: t, eng: eng, tabletID: 1}
	open := func() *LogStore {
		t.Helper()
		s, err := OpenLogStore(eng, 1)
		if err != nil {
			t.Fatal(err)
		}
		s.sideloader = sm
		return s
	}
	s := open()
	commit := func(f func(b *storage.Batch) error) { t.Helper(); commitBatch(t, eng, f) }
	payload := strings.Repeat("sst-bytes ", 1000)
	big := sidePrefix + payload + "|tail"
	commit(func(b *storage.Batch) error {
		return s.Append(b, []*pb.Entry{ent(1, 1, "a"), ent(2, 1, big), ent(3, 1, "b"), ent(4, 1, sidePrefix+"p4")})
	})
	if got := sideFiles(t, eng); !slices.Equal(got, []string{"i2.t1", "i4.t1"}) {
		t.Fatalf("files %v, want i2.t1 i4.t1", got)
	}
	if got, _ := readSideFile(fs, s.SideloadedPath(2, 1)); string(got) != payload {
		t.Fatalf("file of entry 2 holds %d bytes, want the payload's %d", len(got), len(payload))
	}
	if v, _, _ := eng.Get(s.entryKey(2)); len(v) > 100 || bytes.Contains(v, []byte("sst-bytes")) {
		t.Fatalf("entry 2's record holds %d bytes, the payload among them", len(v))
	}
	check := func(s *LogStore) {
		t.Helper()
		es, err := s.Entries(1, 5, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"a", big, "b", sidePrefix + "p4"}
		for i, e := range es {
			if string(e.GetData()) != want[i] || e.GetIndex() != uint64(i+1) || e.GetTerm() != 1 {
				t.Fatalf("entry %d: %d bytes at %d/%d, want %d", i+1, len(e.GetData()), e.GetIndex(), e.GetTerm(), len(want[i]))
			}
		}
		if len(es) != 4 {
			t.Fatalf("%d entries, want 4", len(es))
		}
		if term, err := s.Term(2); err != nil || term != 1 {
			t.Fatalf("Term(2) = %d, %v", term, err)
		}
		// maxSize counts the payload: entry 2 alone is past 100 bytes.
		if es, err := s.Entries(2, 5, 100); err != nil || len(es) != 1 {
			t.Fatalf("Entries(2, 5, 100): %d entries, %v; want 1", len(es), err)
		}
	}
	check(s)
	s = open()
	check(s)
	if path, ok, err := s.SideloadedFile(ent(2, 1, big)); err != nil || !ok || path != s.SideloadedPath(2, 1) {
		t.Fatalf("SideloadedFile(2/1) = %q, %v, %v", path, ok, err)
	}
	if _, ok, _ := s.SideloadedFile(ent(2, 2, big)); ok {
		t.Fatal("SideloadedFile of another term's entry 2 says it is side-loaded")
	}

	// A new term's tail replaces entries 4 and after: 4's file waits for
	// the release, and a new side-loaded entry 4 has its own file.
	commit(func(b *storage.Batch) error { return s.Append(b, []*pb.Entry{ent(4, 2, sidePrefix+"q4")}) })
	if got := sideFiles(t, eng); !slices.Equal(got, []string{"i2.t1", "i4.t1", "i4.t2"}) {
		t.Fatalf("before the release: files %v", got)
	}
	if err := s.ReleaseObsolete(); err != nil {
		t.Fatal(err)
	}
	if got := sideFiles(t, eng); !slices.Equal(got, []string{"i2.t1", "i4.t2"}) {
		t.Fatalf("after the release: files %v, want i2.t1 i4.t2", got)
	}
	// Replaced again, by a plain entry: its marker goes too (the reopen
	// below would find a marker without a file).
	commit(func(b *storage.Batch) error { return s.Append(b, []*pb.Entry{ent(4, 3, "plain")}) })
	if err := s.ReleaseObsolete(); err != nil {
		t.Fatal(err)
	}
	s = open()
	if got := sideFiles(t, eng); !slices.Equal(got, []string{"i2.t1"}) {
		t.Fatalf("a plain entry 4: files %v, want i2.t1", got)
	}

	// A corrupted file is refused by its checksum, naming it.
	path := s.SideloadedPath(2, 1)
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.Write([]byte(strings.Replace(payload, "sst", "SST", 1)))
	_ = f.Close()
	s = open()
	if _, err := s.Entries(2, 3, 1<<30); err == nil || !strings.Contains(err.Error(), "checksum") || !strings.Contains(err.Error(), path) {
		t.Fatalf("Entries over a corrupted file: %v", err)
	}
	if _, _, err := s.SideloadedFile(ent(2, 1, big)); err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("SideloadedFile of a corrupted file: %v", err)
	}
	// A missing file fails the open, naming the entry and the file.
	if err := fs.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenLogStore(eng, 1); err == nil || !strings.Contains(err.Error(), "entry 2 (term 1) is side-loaded but its file") || !strings.Contains(err.Error(), path) {
		t.Fatalf("opening a log whose file is missing: %v", err)
	}
	f, _ = fs.Create(path, vfs.WriteCategoryUnspecified)
	_, _ = f.Write([]byte(payload))
	_ = f.Close()
	s = open()

	// A compaction past entry 2 lets its file go, after the release.
	commit(func(b *storage.Batch) error { return s.Compact(b, 3, nil) })
	if got := sideFiles(t, eng); len(got) != 1 {
		t.Fatalf("before the release: files %v", got)
	}
	if err := s.ReleaseObsolete(); err != nil {
		t.Fatal(err)
	}
	if got := sideFiles(t, eng); len(got) != 0 {
		t.Fatalf("compacted past: files %v, want none", got)
	}
	// Its marker went with it: a reopen finds no marker without a file.
	s = open()
	// A snapshot replaces the log, and a destroyed replica's directory goes.
	commit(func(b *storage.Batch) error { return s.Append(b, []*pb.Entry{ent(5, 3, sidePrefix+"p5")}) })
	one := uint64(9)
	commit(func(b *storage.Batch) error {
		return s.ApplySnapshot(b, &pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: &one, Term: &one, ConfState: &pb.ConfState{Voters: []uint64{1}}}})
	})
	if err := s.ReleaseObsolete(); err != nil {
		t.Fatal(err)
	}
	if got := sideFiles(t, eng); len(got) != 0 {
		t.Fatalf("after a snapshot: files %v, want none", got)
	}
	s = open()
	commit(func(b *storage.Batch) error { return s.Append(b, []*pb.Entry{ent(10, 9, sidePrefix+"p10")}) })
	commit(func(b *storage.Batch) error { return s.Destroy(b) })
	if err := s.ReleaseObsolete(); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat(fs.PathJoin(eng.Dir(), sideloadDirName, "t1")); !errors.Is(err, iofs.ErrNotExist) {
		t.Fatalf("a destroyed replica's directory: %v, want it gone", err)
	}
}

// TestSideloadCrashPoints: a node crashing at each point of a
// side-loaded entry's life restarts consistent. After the file and before
// the entry: the file is an orphan, deleted at the open, and the entry is
// not in the log. After the entry and before the apply: the entry is
// applied at the restart from its file (read back into the entry, and
// the file handed to ApplySideloaded). After the apply and before the
// truncation: the file stays until the log is truncated past the entry,
// which removes it.
func TestSideloadCrashPoints(t *testing.T) {
	fs := vfs.NewCrashableMem()
	crash := func(eng *storage.Engine) {
		t.Helper()
		// Only what was synced survives.
		fs = fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
		_ = eng.Close()
	}

	// After the file, before the entry.
	eng, err := storage.Open("", storage.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	s, err := OpenLogStore(eng, 1)
	if err != nil {
		t.Fatal(err)
	}
	s.sideloader = &sideSM{}
	b := eng.NewBatch()
	if err := s.Append(b, []*pb.Entry{ent(1, 1, sidePrefix+"orphan")}); err != nil {
		t.Fatal(err)
	}
	b.Close() // never committed
	if got := sideFiles(t, eng); len(got) != 1 {
		t.Fatalf("after the append: files %v, want one", got)
	}
	crash(eng)
	if eng, err = storage.Open("", storage.Options{FS: fs}); err != nil {
		t.Fatal(err)
	}
	if got := sideFiles(t, eng); len(got) != 1 {
		t.Fatalf("after the crash: files %v, want the synced one", got)
	}
	if s, err = OpenLogStore(eng, 1); err != nil {
		t.Fatal(err)
	}
	if got := sideFiles(t, eng); len(got) != 0 {
		t.Fatalf("after the open: files %v, want the orphan gone", got)
	}
	if last, _ := s.LastIndex(); last != 0 {
		t.Fatalf("last index %d, want 0", last)
	}

	// After the entry, before the apply.
	start := func(cfg Config) (*Node, *sideSM) {
		t.Helper()
		sm := &sideSM{t: t, eng: eng, tabletID: 1}
		n := NewNode(cfg, eng, nil)
		if _, err := n.AddReplica(1, []uint64{1}, sm); err != nil {
			t.Fatal(err)
		}
		return n, sm
	}
	settle := func(n *Node) error {
		for range 20 {
			if _, err := n.ProcessReady(); err != nil {
				return err
			}
		}
		return nil
	}
	cfg := Config{NodeID: 1, LogKeep: 3, ApplyOffloadBytes: -1, Sideload: true}
	n, sm := start(cfg)
	if err := n.Campaign(1); err != nil {
		t.Fatal(err)
	}
	if err := settle(n); err != nil {
		t.Fatal(err)
	}
	sm.failSideloaded = true
	payload := sidePrefix + strings.Repeat("x", 5000)
	if err := n.Propose(1, []byte(payload)); err != nil {
		t.Fatal(err)
	}
	if err := settle(n); err == nil || !strings.Contains(err.Error(), "crash before the apply") {
		t.Fatalf("the failing apply: %v", err)
	}
	index := n.Replica(1).Applied() + 1
	crash(eng)
	if eng, err = storage.Open("", storage.Options{FS: fs}); err != nil {
		t.Fatal(err)
	}
	if got := sideFiles(t, eng); len(got) != 1 {
		t.Fatalf("after the crash: files %v, want the entry's", got)
	}
	n, sm = start(cfg)
	if err := n.Campaign(1); err != nil {
		t.Fatal(err)
	}
	if err := settle(n); err != nil {
		t.Fatal(err)
	}
	if n.Replica(1).Applied() < index || sm.fromFiles != 1 || n.SideloadedReads.Load() == 0 {
		t.Fatalf("after the restart: applied %d (entry %d), %d applied from files, %d read back", n.Replica(1).Applied(), index, sm.fromFiles, n.SideloadedReads.Load())
	}
	if v, ok, err := eng.Get(sm.key(index)); err != nil || !ok || string(v) != payload {
		t.Fatalf("entry %d's state: %d bytes, %v, %v", index, len(v), ok, err)
	}

	// After the apply, before the truncation: the file stays.
	crash(eng)
	if eng, err = storage.Open("", storage.Options{FS: fs}); err != nil {
		t.Fatal(err)
	}
	n, _ = start(cfg)
	if err := n.Campaign(1); err != nil {
		t.Fatal(err)
	}
	if err := settle(n); err != nil {
		t.Fatal(err)
	}
	if got := sideFiles(t, eng); len(got) != 1 {
		t.Fatalf("restarted after the apply: files %v, want the entry's", got)
	}
	// Entries after it until LogKeep truncates past it; the file goes in
	// the round of the truncation, not with a later write's sync.
	for i := 0; ; i++ {
		if i > 3*int(cfg.LogKeep) {
			t.Fatalf("log not truncated past entry %d", index)
		}
		if err := n.Propose(1, fmt.Appendf(nil, "w%d", i)); err != nil {
			t.Fatal(err)
		}
		if err := settle(n); err != nil {
			t.Fatal(err)
		}
		if first, _ := n.Replica(1).log.FirstIndex(); first > index {
			break
		}
	}
	if got := sideFiles(t, eng); len(got) != 0 {
		t.Fatalf("truncated past the entry: files %v, want none", got)
	}
	_ = eng.Close()
}

// TestSideloadWaitsForClusterVersion: a node side-loads only once the
// cluster version is clusterversion.SideloadedLog (a 1.1 binary, which
// the cluster can still roll back to before, cannot read the records);
// before, the entry is kept whole in the log and applied as any other.
func TestSideloadWaitsForClusterVersion(t *testing.T) {
	eng, err := storage.Open("", storage.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	v := clusterversion.NewHandle(clusterversion.SideloadedLog, clusterversion.VersionedState)
	n := NewNode(Config{NodeID: 1, Version: v, ApplyOffloadBytes: -1, Sideload: true}, eng, nil)
	sm := &sideSM{t: t, eng: eng, tabletID: 1}
	if _, err := n.AddReplica(1, []uint64{1}, sm); err != nil {
		t.Fatal(err)
	}
	if err := n.Campaign(1); err != nil {
		t.Fatal(err)
	}
	settle := func() {
		t.Helper()
		for range 20 {
			if _, err := n.ProcessReady(); err != nil {
				t.Fatal(err)
			}
		}
	}
	settle()
	if err := n.Propose(1, []byte(sidePrefix+"at 1.1")); err != nil {
		t.Fatal(err)
	}
	settle()
	if got := sideFiles(t, eng); len(got) != 0 || sm.fromFiles != 0 {
		t.Fatalf("at cluster version 1.1: files %v, %d applied from files; want the entry inline", got, sm.fromFiles)
	}
	v.SetActive(clusterversion.SideloadedLog)
	if err := n.Propose(1, []byte(sidePrefix+"at 1.2")); err != nil {
		t.Fatal(err)
	}
	settle()
	if got := sideFiles(t, eng); len(got) != 1 || sm.fromFiles != 1 {
		t.Fatalf("at cluster version 1.2: files %v, %d applied from files; want the entry side-loaded", got, sm.fromFiles)
	}
}

// TestSideloadOff: without Config.Sideload the log keeps payloads inline
// (the default while the side-loaded path is slower for distributed
// tables' loads: bench/README.md, "Issue 18, tenth session").
func TestSideloadOff(t *testing.T) {
	eng, err := storage.Open("", storage.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	n := NewNode(Config{NodeID: 1, ApplyOffloadBytes: -1}, eng, nil)
	sm := &sideSM{t: t, eng: eng, tabletID: 1}
	if _, err := n.AddReplica(1, []uint64{1}, sm); err != nil {
		t.Fatal(err)
	}
	if err := n.Campaign(1); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if i == 5 {
			if err := n.Propose(1, []byte(sidePrefix+"inline")); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := n.ProcessReady(); err != nil {
			t.Fatal(err)
		}
	}
	if got := sideFiles(t, eng); len(got) != 0 || sm.fromFiles != 0 || n.Replica(1).Applied() < 3 {
		t.Fatalf("Sideload off: files %v, %d applied from files, applied %d", got, sm.fromFiles, n.Replica(1).Applied())
	}
}

// TestSideloadLeavesTheEntryAlone: writing a payload's file must not
// change the entry it was cut from. Raft keeps the entry it hands to
// Append (its unstable log; the node's entry cache serves it back, C1)
// and applies or sends it later, so a payload written with the entry's
// own bytes into a file whose Write may modify them made the replica
// apply an entry other than its log's (TestSimulation under -race:
// "file ... differs from the entry's payload").
func TestSideloadLeavesTheEntryAlone(t *testing.T) {
	eng, err := storage.Open("", storage.Options{FS: simfs.Clobber(vfs.NewMem(), func(name string) bool {
		// The side-load directory's files; Pebble's own are left alone.
		return strings.Contains(name, sideloadDirName)
	})})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	s, err := OpenLogStore(eng, 1)
	if err != nil {
		t.Fatal(err)
	}
	s.sideloader = &sideSM{t: t, eng: eng, tabletID: 1}
	// Longer than the buffer writeCopy copies through.
	payload := strings.Repeat("sst-bytes ", sideCopyChunk/10+100)
	data := sidePrefix + payload + "|tail"
	e := ent(1, 1, data)
	b := eng.NewBatch()
	defer b.Close()
	if err := s.Append(b, []*pb.Entry{e}); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if string(e.GetData()) != data {
		t.Fatalf("the appended entry's data changed: %.40q…, want %.40q…", e.GetData()[len(sidePrefix):], payload)
	}
	if got, _ := readSideFile(eng.FS(), s.SideloadedPath(1, 1)); string(got) != payload {
		t.Fatalf("the file holds %.40q…, want the payload %.40q…", got, payload)
	}
	es, err := s.Entries(1, 2, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || string(es[0].GetData()) != data {
		t.Fatalf("Entries(1, 2) gives an entry other than the one appended")
	}
}
