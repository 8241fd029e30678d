package raftnode

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/storage"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

const (
	hardStateSuffix = "rfth"
	snapMetaSuffix  = "rfts"
	confStateSuffix = "rftc"
	entrySuffix     = "rftl"
	// sharedSuffix marks a group that has had a voter on another node
	// (see LogStore.Shared); its value is empty.
	sharedSuffix = "rftx"
)

// LogStore is one replica's raft log and state in the node's engine; it
// implements raft.Storage. Safe for concurrent use: raft reads it on the
// scheduler's goroutine while the snapshot sender may read it on another.
type LogStore struct {
	eng      *storage.Engine
	tabletID uint64

	mu sync.Mutex
	// hs is the last hard state written (nil: none yet). Never modified
	// in place (SetHardState replaces it), so HardState hands it out.
	hs *pb.HardState
	// snap is the metadata of the point the log starts after: entry
	// snap.Index (term snap.Term) is the last one folded into the state
	// machine image; the log holds (snap.Index, last].
	snap *pb.SnapshotMetadata
	// conf is the configuration as of the applied index when the state
	// machine applied a change after the snapshot (nil: snap's).
	conf *pb.ConfState
	last uint64
	// bytes is the encoded size of the entries appended since the log
	// last started over (Compact, ApplySnapshot): what a sole voter's
	// log is truncated by (Node's soloLogBytes).
	bytes uint64
	// shared: some other node may have led the group (Shared).
	shared bool

	// sideloader marks the entries whose payload Append keeps in a file
	// (sideload.go; nil: none, though records of side-loaded entries are
	// still read). Set by the node before the store is used.
	sideloader Sideloader
	// sideloadActive says whether the cluster version lets the log write
	// side-loaded records (nil: it does).
	sideloadActive func() bool
	// side is the log's side-loaded entries by index.
	side map[uint64]sideEntry
	// obsolete are the files of side-loaded entries that left the log,
	// removed by ReleaseObsolete once that is durable; destroyed asks it
	// to remove the tablet's directory too.
	obsolete  []sideRef
	destroyed bool
	// sideDirReady: the tablet's directory exists and is durable.
	sideDirReady bool
	// sideReads counts side-loaded payloads read back, here and in
	// readCounter (the node's, when set).
	sideReads   atomic.Int64
	readCounter *atomic.Int64

	// cache holds the entries appended and not yet applied, consecutive
	// (cache[i] is entry cache[0].e.Index+i), at most entryCacheBytes of
	// them, so that raft's read back of the entries it commits (to apply
	// them, and a leader's to send them) and of their terms costs no read
	// of the engine, nor of a side-loaded payload's file (rule C1).
	cache      []cachedEntry
	cacheBytes uint64
	// cacheMax bounds cacheBytes (entryCacheBytes; tests set less).
	cacheMax uint64
	// cacheHits counts the entries Entries served from the cache.
	cacheHits atomic.Int64
}

// cachedEntry is an entry of LogStore.cache and its size as Entries
// counts it.
type cachedEntry struct {
	e    *pb.Entry
	size uint64
}

// entryCacheBytes bounds a replica's entry cache (each LogStore has its
// own: a node with many replicas may cache this much for each of those
// whose entries do not commit). The entries it holds are those raft has
// just handed to Append and will hand back, committed, in a later Ready
// (which holds them until they are applied anyway), so the cache keeps
// them alive about one round longer than raft would; the bound covers a
// replica whose entries do not commit (a follower cut from its leader, a
// leader without a quorum) and fits the largest entry, an SST of 32 MiB.
const entryCacheBytes = 64 << 20

var _ raft.Storage = (*LogStore)(nil)

// OpenLogStore loads the raft state of tabletID's replica from eng (empty
// for a replica that has none yet).
func OpenLogStore(eng *storage.Engine, tabletID uint64) (*LogStore, error) {
	s := &LogStore{eng: eng, tabletID: tabletID, snap: pb.EnsureSnapshotMetadata(nil), cacheMax: entryCacheBytes}
	if v, ok, err := eng.Get(s.key(hardStateSuffix)); err != nil {
		return nil, fmt.Errorf("raft log of tablet %d: reading hard state: %w", tabletID, err)
	} else if ok {
		s.hs = &pb.HardState{}
		if err := proto.Unmarshal(v, s.hs); err != nil {
			return nil, fmt.Errorf("raft log of tablet %d: decoding hard state: %w", tabletID, err)
		}
	}
	if v, ok, err := eng.Get(s.key(snapMetaSuffix)); err != nil {
		return nil, fmt.Errorf("raft log of tablet %d: reading snapshot metadata: %w", tabletID, err)
	} else if ok {
		s.snap = &pb.SnapshotMetadata{}
		if err := proto.Unmarshal(v, s.snap); err != nil {
			return nil, fmt.Errorf("raft log of tablet %d: decoding snapshot metadata: %w", tabletID, err)
		}
		s.snap = pb.EnsureSnapshotMetadata(s.snap)
	}
	if v, ok, err := eng.Get(s.key(confStateSuffix)); err != nil {
		return nil, fmt.Errorf("raft log of tablet %d: reading conf state: %w", tabletID, err)
	} else if ok {
		s.conf = &pb.ConfState{}
		if err := proto.Unmarshal(v, s.conf); err != nil {
			return nil, fmt.Errorf("raft log of tablet %d: decoding conf state: %w", tabletID, err)
		}
	}
	if _, ok, err := eng.Get(s.key(sharedSuffix)); err != nil {
		return nil, fmt.Errorf("raft log of tablet %d: reading the shared mark: %w", tabletID, err)
	} else if ok {
		s.shared = true
	}
	// A store written before the mark existed: a group whose
	// configuration has several voters is shared now.
	if cs := s.snap.GetConfState(); s.conf != nil {
		s.shared = s.shared || multiVoter(s.conf)
	} else {
		s.shared = s.shared || multiVoter(cs)
	}
	s.last = s.snap.GetIndex()
	it, err := eng.NewIter(storage.IterOptions{LowerBound: s.entryKey(0).Key, UpperBound: s.entryKey(1<<64 - 1).Key})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	if it.Last() {
		k := it.UnsafeKey().Key
		s.last = binary.BigEndian.Uint64(k[len(k)-8:])
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("raft log of tablet %d: finding the last entry: %w", tabletID, err)
	}
	if s.last < s.snap.GetIndex() {
		return nil, fmt.Errorf("raft log of tablet %d: last entry %d before the snapshot at %d", tabletID, s.last, s.snap.GetIndex())
	}
	if err := s.loadSide(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *LogStore) key(suffix string) storage.MVCCKey {
	return storage.MVCCKey{Key: keys.TabletLocal(s.tabletID, suffix)}
}

func (s *LogStore) entryKey(index uint64) storage.MVCCKey {
	k := keys.TabletLocal(s.tabletID, entrySuffix)
	return storage.MVCCKey{Key: binary.BigEndian.AppendUint64(k, index)}
}

// InitialState implements raft.Storage.
func (s *LogStore) InitialState() (*pb.HardState, *pb.ConfState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var hs *pb.HardState
	if s.hs != nil {
		hs = proto.Clone(s.hs).(*pb.HardState)
	}
	cs := s.snap.GetConfState()
	if s.conf != nil {
		cs = s.conf
	}
	return hs, proto.Clone(pb.EnsureConfState(cs)).(*pb.ConfState), nil
}

// HardState returns the last hard state written (nil: none yet), as
// InitialState does but without its copies: the caller must not modify
// it. A round asks for every replica's in each pass, to tell whether its
// Ready must be synced; the copies (a reflective proto.Clone of the hard
// state and of the configuration) were about a dozen objects per pass.
func (s *LogStore) HardState() *pb.HardState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hs
}

// SetConfState records the configuration as of the applied index, in b
// (the batch that records the applied index): after a restart raft starts
// from it, since it does not re-deliver entries already applied.
func (s *LogStore) SetConfState(b *storage.Batch, cs *pb.ConfState) error {
	v, err := proto.Marshal(cs)
	if err != nil {
		return err
	}
	if err := b.Put(s.key(confStateSuffix), v); err != nil {
		return err
	}
	if multiVoter(cs) {
		if err := s.markShared(b); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.conf = proto.Clone(cs).(*pb.ConfState)
	s.mu.Unlock()
	return nil
}

// Shared reports whether a node other than this one may ever have led the
// group: its configuration has had several voters, or its state came in a
// snapshot from a leader, or it is the right side of a split of such a
// group (MarkShared). A group that was never shared can take a lease
// without waiting out the clock offset: no other node served from it. One
// that shrank to a lone voter still must, since the node that led it
// before may have acknowledged writes above this node's clock
// (tablet.RaftStateMachine.LeaseAcquired).
func (s *LogStore) Shared() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shared
}

// markShared records in b that the group is shared.
func (s *LogStore) markShared(b *storage.Batch) error {
	if err := b.Put(s.key(sharedSuffix), nil); err != nil {
		return err
	}
	s.mu.Lock()
	s.shared = true
	s.mu.Unlock()
	return nil
}

// multiVoter reports whether cs has, or is leaving, several voters.
func multiVoter(cs *pb.ConfState) bool {
	cs = pb.EnsureConfState(cs)
	return len(cs.GetVoters()) > 1 || len(cs.GetVotersOutgoing()) > 0
}

// MarkShared marks tabletID's group shared (LogStore.Shared) before its
// replica is opened on eng: the right side of a split of a shared group
// holds data that other nodes may have served.
func MarkShared(eng *storage.Engine, tabletID uint64) error {
	b := eng.NewBatch()
	defer b.Close()
	if err := b.Put(storage.MVCCKey{Key: keys.TabletLocal(tabletID, sharedSuffix)}, nil); err != nil {
		return err
	}
	if err := b.Commit(); err != nil {
		return fmt.Errorf("raftnode: marking tablet %d shared: %w", tabletID, err)
	}
	return nil
}

// Entries implements raft.Storage: the entries [lo, hi), at most maxSize
// bytes of them but at least one.
func (s *LogStore) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	s.mu.Lock()
	first, last := s.snap.GetIndex()+1, s.last
	s.mu.Unlock()
	if lo < first {
		return nil, raft.ErrCompacted
	}
	if hi > last+1 {
		return nil, fmt.Errorf("raft log of tablet %d: entries up to %d asked, last is %d", s.tabletID, hi-1, last)
	}
	if lo >= hi {
		return nil, nil
	}
	// The cache's part of [lo, hi), a suffix of it, is not read from the
	// engine.
	tail := s.cachedTail(lo, hi)
	engHi := hi - uint64(len(tail))
	var out []*pb.Entry
	var size uint64
	if lo < engHi {
		var err error
		if out, size, err = s.engineEntries(lo, engHi, maxSize); err != nil {
			return nil, err
		}
		if uint64(len(out)) < engHi-lo {
			// Cut by maxSize.
			return out, nil
		}
	}
	hits := 0
	for _, c := range tail {
		size += c.size
		if len(out) > 0 && size > maxSize {
			break
		}
		out = append(out, c.e)
		hits++
	}
	s.cacheHits.Add(int64(hits))
	return out, nil
}

// engineEntries reads the entries [lo, hi) from the engine, at most
// maxSize bytes of them but at least one, and returns their size.
func (s *LogStore) engineEntries(lo, hi, maxSize uint64) ([]*pb.Entry, uint64, error) {
	it, err := s.eng.NewIter(storage.IterOptions{LowerBound: s.entryKey(lo).Key, UpperBound: s.entryKey(hi).Key})
	if err != nil {
		return nil, 0, err
	}
	defer it.Close()
	var out []*pb.Entry
	var size uint64
	want := lo
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.UnsafeValue()
		if err != nil {
			return nil, 0, err
		}
		// The size is known before a side-loaded payload is read back, so
		// an entry past maxSize costs no read of its file.
		e, err := s.decodeEntry(want, v, false)
		if err != nil {
			return nil, 0, err
		}
		if e.GetIndex() != want {
			return nil, 0, fmt.Errorf("raft log of tablet %d: entry %d missing (found %d)", s.tabletID, want, e.GetIndex())
		}
		esize := uint64(proto.Size(e))
		if rec, side, _ := parseSideRecord(v); side {
			esize += rec.length
		}
		size += esize
		if len(out) > 0 && size > maxSize {
			size -= esize
			break
		}
		if v[0] == sideRecordTag {
			if e, err = s.decodeEntry(want, v, true); err != nil {
				return nil, 0, err
			}
		}
		out = append(out, e)
		want++
	}
	if err := it.Err(); err != nil {
		return nil, 0, err
	}
	if len(out) == 0 {
		return nil, 0, raft.ErrUnavailable
	}
	return out, size, nil
}

// Term implements raft.Storage: the term of entry i, for i in
// [FirstIndex()-1, LastIndex()].
func (s *LogStore) Term(i uint64) (uint64, error) {
	s.mu.Lock()
	snapIndex, snapTerm, last := s.snap.GetIndex(), s.snap.GetTerm(), s.last
	s.mu.Unlock()
	switch {
	case i == snapIndex:
		return snapTerm, nil
	case i < snapIndex:
		return 0, raft.ErrCompacted
	case i > last:
		return 0, raft.ErrUnavailable
	}
	if t, ok := s.cachedTerm(i); ok {
		return t, nil
	}
	v, ok, err := s.eng.Get(s.entryKey(i))
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("raft log of tablet %d: entry %d missing", s.tabletID, i)
	}
	e, err := s.decodeEntry(i, v, false)
	if err != nil {
		return 0, err
	}
	return e.GetTerm(), nil
}

// LastIndex implements raft.Storage.
func (s *LogStore) LastIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last, nil
}

// FirstIndex implements raft.Storage.
func (s *LogStore) FirstIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snap.GetIndex() + 1, nil
}

// Snapshot implements raft.Storage. It returns the metadata of the point
// the log starts after; the state machine image itself (an SST of the
// tablet's span) is produced and streamed by the snapshot sender, not
// carried in the raft message.
func (s *LogStore) Snapshot() (*pb.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &pb.Snapshot{Metadata: proto.Clone(s.snap).(*pb.SnapshotMetadata)}, nil
}

// SetHardState writes hs into b.
func (s *LogStore) SetHardState(b *storage.Batch, hs *pb.HardState) error {
	v, err := proto.Marshal(hs)
	if err != nil {
		return err
	}
	if err := b.Put(s.key(hardStateSuffix), v); err != nil {
		return err
	}
	kept := copyHardState(hs)
	s.mu.Lock()
	s.hs = kept
	s.mu.Unlock()
	return nil
}

// RaiseCommit makes the kept hard state's commit index at least
// applied, in memory (the caller's applied index: every entry through it
// was committed). The node writes no hard state whose commit index alone
// changed (doc.go, invariant 10), so the written one may lag the applied
// index, which raft must not find past its commit on a restart (raft's
// commit starts at the snapshot's index without a hard state).
func (s *LogStore) RaiseCommit(applied uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hs.GetCommit() >= applied || s.hs == nil && applied <= s.snap.GetIndex() {
		return
	}
	raised := &pb.HardState{}
	if s.hs != nil {
		raised = copyHardState(s.hs)
	}
	raised.Commit = &applied
	s.hs = raised
}

// keptHardState is a hard state and the values its fields point to: a
// copy in one object (a proto.Clone was four, made by reflection).
type keptHardState struct {
	hs                 pb.HardState
	term, vote, commit uint64
}

// copyHardState copies hs's fields, set or not as in hs.
func copyHardState(hs *pb.HardState) *pb.HardState {
	k := &keptHardState{}
	if hs.Term != nil {
		k.term, k.hs.Term = *hs.Term, &k.term
	}
	if hs.Vote != nil {
		k.vote, k.hs.Vote = *hs.Vote, &k.vote
	}
	if hs.Commit != nil {
		k.commit, k.hs.Commit = *hs.Commit, &k.commit
	}
	return &k.hs
}

// Append writes ents (consecutive) into b. Entries already in the log at
// their indexes and after them are replaced: a new leader's entries win
// over an old term's uncommitted tail. Entries at or before the snapshot
// are skipped.
func (s *LogStore) Append(b *storage.Batch, ents []*pb.Entry) error {
	if len(ents) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	first := s.snap.GetIndex() + 1
	if ents[len(ents)-1].GetIndex() < first {
		return nil
	}
	if ents[0].GetIndex() < first {
		ents = ents[first-ents[0].GetIndex():]
	}
	if ents[0].GetIndex() > s.last+1 {
		return fmt.Errorf("raft log of tablet %d: appending at %d leaves a gap after %d", s.tabletID, ents[0].GetIndex(), s.last)
	}
	// The side-loaded entries of a replaced tail leave the log, unless the
	// same entry (index and term) comes again; their markers go with them.
	var replaced map[uint64]sideEntry
	for index, se := range s.side {
		if index >= ents[0].GetIndex() {
			if replaced == nil {
				replaced = map[uint64]sideEntry{}
			}
			replaced[index] = se
		}
	}
	wrote := false
	for i, e := range ents {
		if e.GetIndex() != ents[0].GetIndex()+uint64(i) {
			return fmt.Errorf("raft log of tablet %d: appended entries not consecutive at %d", s.tabletID, e.GetIndex())
		}
		var v []byte
		var err error
		start, end, side := 0, 0, false
		if s.sideloader != nil && e.GetType() == pb.EntryType_EntryNormal && len(e.GetData()) > 0 && (s.sideloadActive == nil || s.sideloadActive()) {
			start, end, side = s.sideloader.SideloadedRange(e.GetData())
			side = side && 0 <= start && start <= end && end <= len(e.GetData())
		}
		if side {
			// Rule S1: the file now, the record in b.
			old, had := replaced[e.GetIndex()]
			same := had && old.term == e.GetTerm()
			if v, err = s.sideRecordOf(e, start, end, !same); err != nil {
				return err
			}
			wrote = wrote || !same
			if same {
				delete(replaced, e.GetIndex())
			}
			if err := b.Put(s.markKey(e.GetIndex()), binary.BigEndian.AppendUint64(nil, e.GetTerm())); err != nil {
				return err
			}
			s.side[e.GetIndex()] = sideEntry{term: e.GetTerm(), checked: true}
			s.bytes += uint64(end - start)
		} else if v, err = proto.Marshal(e); err != nil {
			return err
		}
		if err := b.Put(s.entryKey(e.GetIndex()), v); err != nil {
			return err
		}
		s.bytes += uint64(len(v))
	}
	for index, se := range replaced {
		s.obsolete = append(s.obsolete, sideRef{index, se.term})
		if cur := s.side[index]; cur.term == se.term {
			// Replaced by a plain entry, or cut off: no new marker.
			delete(s.side, index)
			if err := b.Delete(s.markKey(index)); err != nil {
				return err
			}
		}
	}
	if wrote {
		// The renames of rule S1, durable before b can commit.
		if err := syncDir(s.fs(), s.sideDir()); err != nil {
			return fmt.Errorf("raft log of tablet %d: %w", s.tabletID, err)
		}
	}
	newLast := ents[len(ents)-1].GetIndex()
	if newLast < s.last {
		// The replaced tail's remainder goes too.
		if err := s.clearEntries(b, newLast, s.last); err != nil {
			return err
		}
	}
	s.last = newLast
	s.cacheAppendLocked(ents)
	return nil
}

// ErrSnapOutOfDate is ApplySnapshot's refusal of a snapshot no newer than
// the store's.
var ErrSnapOutOfDate = raft.ErrSnapOutOfDate

// ApplySnapshot makes the log start after snap's index: every entry goes,
// and snap's metadata (index, term, ConfState) is recorded. The state
// machine image is ingested by the caller.
func (s *LogStore) ApplySnapshot(b *storage.Batch, snap *pb.Snapshot) error {
	meta := pb.EnsureSnapshot(snap).GetMetadata()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.snap.GetIndex() != 0 && s.snap.GetIndex() >= meta.GetIndex() {
		return ErrSnapOutOfDate
	}
	if err := s.clearEntries(b, s.snap.GetIndex(), s.last); err != nil {
		return err
	}
	if err := s.dropSideMarksLocked(b, 0, 1<<64-1); err != nil {
		return err
	}
	if err := s.putSnapMeta(b, meta); err != nil {
		return err
	}
	if err := b.Delete(s.key(confStateSuffix)); err != nil {
		return err
	}
	// Any snapshot but a new group's initial one (index 1) was sent by
	// the group's leader on another node.
	if meta.GetIndex() > 1 || multiVoter(meta.GetConfState()) {
		if err := b.Put(s.key(sharedSuffix), nil); err != nil {
			return err
		}
		s.shared = true
	}
	s.conf = nil
	s.last = meta.GetIndex()
	s.bytes = 0
	s.cacheDropLocked(1<<64 - 1)
	return nil
}

// Bytes is the encoded size of the entries appended since the log was
// last compacted or replaced by a snapshot (0 after a restart): an
// estimate of what the log holds, which it overstates by entries
// replaced in place and understates by entries kept through a compaction.
func (s *LogStore) Bytes() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

// Compact discards the entries before compactIndex; entry compactIndex
// becomes the point the log starts after (its term is kept for matching),
// as with raft.MemoryStorage. cs is the configuration as of compactIndex
// (nil: unchanged). The caller must have applied compactIndex.
func (s *LogStore) Compact(b *storage.Batch, compactIndex uint64, cs *pb.ConfState) error {
	s.mu.Lock()
	snapIndex, last := s.snap.GetIndex(), s.last
	s.mu.Unlock()
	if compactIndex <= snapIndex {
		return raft.ErrCompacted
	}
	if compactIndex > last {
		return fmt.Errorf("raft log of tablet %d: compacting to %d past the last entry %d", s.tabletID, compactIndex, last)
	}
	term, err := s.Term(compactIndex)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	meta := proto.Clone(s.snap).(*pb.SnapshotMetadata)
	meta.Index, meta.Term = &compactIndex, &term
	if cs != nil {
		meta.ConfState = proto.Clone(cs).(*pb.ConfState)
	}
	if err := s.clearEntries(b, s.snap.GetIndex(), compactIndex); err != nil {
		return err
	}
	if err := s.dropSideMarksLocked(b, 0, compactIndex); err != nil {
		return err
	}
	s.bytes = 0
	s.cacheDropLocked(compactIndex)
	return s.putSnapMeta(b, meta)
}

// dropSideMarksLocked drops the side-loaded entries in [lo, hi]
// (dropSideLocked) and deletes their markers in b, one key each, for the
// reason clearEntries gives: s.side holds exactly the markers the engine
// holds (loadSide reads them all, Append writes and deletes them with
// it). s.mu is held.
func (s *LogStore) dropSideMarksLocked(b *storage.Batch, lo, hi uint64) error {
	for index := range s.side {
		if index >= lo && index <= hi {
			if err := b.Delete(s.markKey(index)); err != nil {
				return err
			}
		}
	}
	s.dropSideLocked(lo, hi)
	return nil
}

// compactPointMax is the most entries Compact, ApplySnapshot and a
// replaced tail delete one by one; a longer stretch goes as one range
// deletion.
const compactPointMax = 8192

// clearEntries deletes the entries (after, to]: for Compact and
// ApplySnapshot, after is the snapshot's index, at or below which the log
// holds nothing (they delete through it); for a replaced tail, the last
// new entry. They are deleted
// one key at a time, as CockroachDB truncates its raft logs: a range
// deletion stays in its memtable until the memtable is flushed, and Pebble
// then builds a range-deletion iterator over that memtable for every
// iterator and Get of any key (an object each, and a span seek at every
// seek of that level), while a point tombstone here is met only by reads
// of the log. A truncation runs once per LogKeep applied entries, so the
// cost is about one memtable insert per entry. A stretch longer than
// compactPointMax (a log left long, or a large LogKeep) is one range
// deletion.
func (s *LogStore) clearEntries(b *storage.Batch, after, to uint64) error {
	if to <= after {
		return nil
	}
	if to-after > compactPointMax {
		return b.ClearRange(s.entryKey(after+1).Key, s.entryKey(to+1).Key)
	}
	k := s.entryKey(after + 1)
	n := len(k.Key) - 8
	for i := after + 1; i <= to; i++ {
		binary.BigEndian.PutUint64(k.Key[n:], i)
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// putSnapMeta records meta; s.mu is held.
func (s *LogStore) putSnapMeta(b *storage.Batch, meta *pb.SnapshotMetadata) error {
	v, err := proto.Marshal(meta)
	if err != nil {
		return err
	}
	if err := b.Put(s.key(snapMetaSuffix), v); err != nil {
		return err
	}
	s.snap = pb.EnsureSnapshotMetadata(proto.Clone(meta).(*pb.SnapshotMetadata))
	return nil
}

// Destroy removes every key of the replica's raft state (the replica was
// removed from the group or replaced by a snapshot of another replica ID).
func (s *LogStore) Destroy(b *storage.Batch) error {
	p := keys.TabletLocalPrefix(s.tabletID)
	if err := b.ClearRange(append(p[:len(p):len(p)], "rft"...), append(p[:len(p):len(p)], "rfu"...)); err != nil {
		return err
	}
	s.mu.Lock()
	s.hs, s.snap, s.conf, s.last, s.bytes = nil, pb.EnsureSnapshotMetadata(nil), nil, 0, 0
	// The markers went with the range above (rfto sorts inside rft).
	s.dropSideLocked(0, 1<<64-1)
	s.cacheDropLocked(1<<64 - 1)
	s.destroyed = true
	s.mu.Unlock()
	return nil
}

// The entry cache (rule C1: an entry served from the cache is the entry
// the log holds at its index, since every change of the log at an index
// changes the cache there in the same call: Append replaces the cached
// tail it replaces, Compact, ApplySnapshot and Destroy drop what they
// remove).

// cacheAppendLocked caches ents, just appended (consecutive, none at or
// before the snapshot), in place of any cached entry at or after the
// first of them. s.mu is held.
func (s *LogStore) cacheAppendLocked(ents []*pb.Entry) {
	first := ents[0].GetIndex()
	if n := uint64(len(s.cache)); n > 0 {
		cf := s.cache[0].e.GetIndex()
		if first <= cf || first > cf+n {
			// Replaces all of it, or leaves a gap after it (its entries
			// were evicted or applied): it starts over.
			s.cacheDropLocked(1<<64 - 1)
		} else {
			for _, c := range s.cache[first-cf:] {
				s.cacheBytes -= c.size
			}
			clear(s.cache[first-cf:])
			s.cache = s.cache[:first-cf]
		}
	}
	for _, e := range ents {
		c := cachedEntry{e: e, size: uint64(proto.Size(e))}
		s.cache = append(s.cache, c)
		s.cacheBytes += c.size
	}
	// The oldest go first: raft reads the entries in log order.
	drop := 0
	for drop < len(s.cache) && s.cacheBytes > s.cacheMax {
		s.cacheBytes -= s.cache[drop].size
		drop++
	}
	if drop > 0 {
		s.cacheTrimLocked(drop)
	}
}

// cacheTrimLocked drops the first n cached entries (their bytes already
// taken off cacheBytes). s.mu is held.
func (s *LogStore) cacheTrimLocked(n int) {
	clear(s.cache[:n])
	if n == len(s.cache) {
		s.cache = s.cache[:0]
		return
	}
	s.cache = s.cache[n:]
}

// cacheDropLocked drops the cached entries at or before index. s.mu is
// held.
func (s *LogStore) cacheDropLocked(index uint64) {
	n := 0
	for n < len(s.cache) && s.cache[n].e.GetIndex() <= index {
		s.cacheBytes -= s.cache[n].size
		n++
	}
	if n > 0 {
		s.cacheTrimLocked(n)
	}
}

// AppliedTo lets the entry cache go of the entries up to index, which the
// state machine has applied: raft reads an applied entry back only to
// send it to a follower that lacks it, which the engine serves.
func (s *LogStore) AppliedTo(index uint64) {
	s.mu.Lock()
	s.cacheDropLocked(index)
	s.mu.Unlock()
}

// cachedTail returns the cached entries of [lo, hi) when the cache holds
// a suffix of it (none: it holds no entry at hi-1). The slice is new.
func (s *LogStore) cachedTail(lo, hi uint64) []cachedEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := uint64(len(s.cache))
	if n == 0 {
		return nil
	}
	cf := s.cache[0].e.GetIndex()
	if hi <= cf || hi > cf+n {
		return nil
	}
	from := max(lo, cf)
	return slices.Clone(s.cache[from-cf : hi-cf])
}

// cachedTerm is Term for an entry the cache holds.
func (s *LogStore) cachedTerm(i uint64) (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := uint64(len(s.cache)); n > 0 {
		if cf := s.cache[0].e.GetIndex(); i >= cf && i < cf+n {
			return s.cache[i-cf].e.GetTerm(), true
		}
	}
	return 0, false
}
