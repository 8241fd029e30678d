package raftnode

// Side-loaded entries (issue #18): an entry whose state machine marks a
// large payload in it (the tablet's AddSSTable: an SST of up to 32 MiB)
// keeps that payload in a file of its own beside the log, and the log's
// record of the entry holds only the rest of the entry, the payload's
// place in it, its length and its checksum. The payload then goes through
// neither the engine's WAL nor a memtable (nor a flush, nor a
// compaction), and the state machine ingests the file by a hard link
// instead of writing the bytes again (Sideloader.ApplySideloaded).
//
// Everything outside LogStore sees whole entries: Entries puts the payload
// back (for a follower's MsgApp, for the apply of an entry raft reads back
// from storage, after a restart or a change of leader), so the messages
// and what a follower receives are unchanged, and a follower side-loads
// on its own Append the same way.
//
// The files live in <engine dir>/sideload/t<tablet>/i<index>.t<term>: an
// index and a term name one entry of the group for good (raft's Log
// Matching), so a file is never rewritten with other bytes. Rules, cited
// by the tests:
//
//  S1. A payload's file is written to a temporary name, synced, renamed
//      to its own and its directory synced before the batch holding the
//      entry's record can commit (Append writes the files; the caller
//      commits after), so a durable record always has its file. The
//      payload is written through a copy (writeCopy), never from the
//      entry's own bytes, which a vfs.File's Write may change and raft
//      still holds (TestSideloadLeavesTheEntryAlone).
//  S2. A file whose record the log does not hold (a crash after the file
//      and before the record; a truncation whose file removal a crash
//      cut short) is deleted when the log store opens; a record whose
//      file is missing is a corruption, and opening fails naming the
//      tablet, the entry and the file. A marker key per side-loaded
//      entry (rfto <index>, value the term) lets the open check a log
//      without reading its entries.
//  S3. A file is removed only after a synced commit of the batch that
//      removed its record (truncation, a replaced tail, a snapshot, the
//      replica's removal): the node calls ReleaseObsolete after such a
//      commit. Before that a crash could bring the record back.
//  S4. A payload read back is checked against the record's length and
//      CRC-32C; so is a file before the state machine links it, unless
//      this process wrote or checked it already. A mismatch is an error
//      naming the file, never a wrong entry.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	iofs "io/fs"
	"strconv"
	"strings"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/storage"
	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Sideloader is optionally implemented by a StateMachine whose entries can
// carry a large payload that needs no place in the engine's WAL: the
// tablet's SSTs. The node never interprets an entry; the state machine
// says which bytes of it are the payload.
type Sideloader interface {
	// SideloadedRange returns the bytes [start, end) of an entry's data
	// to keep in a file beside the log; ok is false for an entry with
	// none. It runs on every entry appended, so it must read no more of
	// data than it needs to decide.
	SideloadedRange(data []byte) (start, end int, ok bool)
	// ApplySideloaded is Apply for an entry whose payload is also in
	// file (checked against the log's checksum): the state machine may
	// take the payload from file (a hard link into the engine) instead
	// of writing e's copy again. The file is the log's: it must not be
	// changed or removed (it goes when the log lets go of the entry).
	ApplySideloaded(b *storage.Batch, e *pb.Entry, file string) error
}

const (
	// sideMarkSuffix keys the marker of a side-loaded entry (rule S2).
	sideMarkSuffix = "rfto"
	// sideloadDirName is the directory under the engine's that holds the
	// side-loaded payloads, one subdirectory per tablet.
	sideloadDirName = "sideload"
	// sideRecordTag starts the record of a side-loaded entry: no
	// protobuf encoding starts with 0 (field number 0 is invalid), so a
	// build that does not know the format fails to decode it instead of
	// misreading it.
	sideRecordTag     byte = 0
	sideRecordVersion byte = 1
	sideTmpSuffix          = ".tmp"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// sideEntry is a side-loaded entry of the log.
type sideEntry struct {
	term uint64
	// checked: this process wrote the file or checked it against the
	// record (rule S4).
	checked bool
}

// sideRef names a file whose entry left the log (rule S3).
type sideRef struct{ index, term uint64 }

// sideRecord is the log's record of a side-loaded entry.
type sideRecord struct {
	start, length uint64
	crc           uint32
	// stripped is the entry, encoded, with the payload cut out of its
	// data.
	stripped []byte
}

func encodeSideRecord(start, length uint64, crc uint32, stripped []byte) []byte {
	v := make([]byte, 0, 2+2*binary.MaxVarintLen64+4+len(stripped))
	v = append(v, sideRecordTag, sideRecordVersion)
	v = binary.AppendUvarint(v, start)
	v = binary.AppendUvarint(v, length)
	v = binary.BigEndian.AppendUint32(v, crc)
	return append(v, stripped...)
}

// parseSideRecord reads a record; ok is false for a plain entry.
func parseSideRecord(v []byte) (r sideRecord, ok bool, err error) {
	if len(v) == 0 || v[0] != sideRecordTag {
		return r, false, nil
	}
	if len(v) < 2 || v[1] != sideRecordVersion {
		return r, true, fmt.Errorf("side-loaded record of unknown version")
	}
	v = v[2:]
	var n int
	if r.start, n = binary.Uvarint(v); n <= 0 {
		return r, true, fmt.Errorf("side-loaded record: bad start")
	}
	v = v[n:]
	if r.length, n = binary.Uvarint(v); n <= 0 {
		return r, true, fmt.Errorf("side-loaded record: bad length")
	}
	v = v[n:]
	if len(v) < 4 {
		return r, true, fmt.Errorf("side-loaded record: short")
	}
	r.crc = binary.BigEndian.Uint32(v)
	r.stripped = v[4:]
	return r, true, nil
}

func (s *LogStore) fs() vfs.FS { return s.eng.FS() }

func (s *LogStore) sideDir() string {
	fs := s.fs()
	return fs.PathJoin(s.eng.Dir(), sideloadDirName, "t"+strconv.FormatUint(s.tabletID, 10))
}

func sideName(index, term uint64) string {
	return "i" + strconv.FormatUint(index, 10) + ".t" + strconv.FormatUint(term, 10)
}

func parseSideName(name string) (index, term uint64, ok bool) {
	i, t, found := strings.Cut(name, ".t")
	if !found || !strings.HasPrefix(i, "i") {
		return 0, 0, false
	}
	index, err1 := strconv.ParseUint(i[1:], 10, 64)
	term, err2 := strconv.ParseUint(t, 10, 64)
	return index, term, err1 == nil && err2 == nil
}

// SideloadedPath is where the payload of entry (index, term) of the
// tablet's log lives while the log holds it.
func (s *LogStore) SideloadedPath(index, term uint64) string {
	return s.fs().PathJoin(s.sideDir(), sideName(index, term))
}

func (s *LogStore) markKey(index uint64) storage.MVCCKey {
	k := keys.TabletLocal(s.tabletID, sideMarkSuffix)
	return storage.MVCCKey{Key: binary.BigEndian.AppendUint64(k, index)}
}

// loadSide reads the markers of the side-loaded entries and reconciles
// the tablet's directory with them (rule S2). OpenLogStore calls it.
func (s *LogStore) loadSide() error {
	s.side = map[uint64]sideEntry{}
	it, err := s.eng.NewIter(storage.IterOptions{LowerBound: s.markKey(0).Key, UpperBound: s.markKey(1<<64 - 1).Key})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		k := it.UnsafeKey().Key
		v, err := it.UnsafeValue()
		if err != nil {
			it.Close()
			return err
		}
		if len(v) != 8 {
			it.Close()
			return fmt.Errorf("raft log of tablet %d: malformed side-load marker %q", s.tabletID, k)
		}
		s.side[binary.BigEndian.Uint64(k[len(k)-8:])] = sideEntry{term: binary.BigEndian.Uint64(v)}
	}
	err = it.Err()
	it.Close()
	if err != nil {
		return fmt.Errorf("raft log of tablet %d: reading side-load markers: %w", s.tabletID, err)
	}
	fs, dir := s.fs(), s.sideDir()
	names, err := fs.List(dir)
	if err != nil && !errors.Is(err, iofs.ErrNotExist) {
		return fmt.Errorf("raft log of tablet %d: listing %s: %w", s.tabletID, dir, err)
	}
	have := map[uint64]bool{}
	for _, name := range names {
		index, term, ok := parseSideName(name)
		if ok && !strings.HasSuffix(name, sideTmpSuffix) {
			if se, in := s.side[index]; in && se.term == term {
				have[index] = true
				continue
			}
		}
		// No record names it: the crash came between the file and its
		// record, or between a truncation and the file's removal.
		if err := fs.Remove(fs.PathJoin(dir, name)); err != nil && !errors.Is(err, iofs.ErrNotExist) {
			return fmt.Errorf("raft log of tablet %d: removing the orphan %s: %w", s.tabletID, fs.PathJoin(dir, name), err)
		}
	}
	for index, se := range s.side {
		if !have[index] {
			return fmt.Errorf("raft log of tablet %d: entry %d (term %d) is side-loaded but its file %s is missing: the raft log is corrupt",
				s.tabletID, index, se.term, s.SideloadedPath(index, se.term))
		}
	}
	return nil
}

// ensureSideDir makes the tablet's directory durable once per store.
func (s *LogStore) ensureSideDir() error {
	if s.sideDirReady {
		return nil
	}
	fs, dir := s.fs(), s.sideDir()
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("raft log of tablet %d: making %s: %w", s.tabletID, dir, err)
	}
	// The new directories' entries in their parents must survive a crash
	// with the files in them.
	for _, d := range []string{s.eng.Dir(), fs.PathJoin(s.eng.Dir(), sideloadDirName), dir} {
		if err := syncDir(fs, d); err != nil {
			return fmt.Errorf("raft log of tablet %d: %w", s.tabletID, err)
		}
	}
	s.sideDirReady = true
	return nil
}

func syncDir(fs vfs.FS, dir string) error {
	if dir == "" {
		dir = "."
	}
	d, err := fs.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("opening %s to sync: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}

// sideRecordOf encodes e's record with its payload data[start:end] cut
// out and, unless write is false (the file is there already: the same
// index and term), writes the payload's file (rule S1; the caller syncs
// the directory after its last file). s.mu is held.
func (s *LogStore) sideRecordOf(e *pb.Entry, start, end int, write bool) ([]byte, error) {
	data := e.GetData()
	payload := data[start:end]
	crc := crc32.Checksum(payload, castagnoli)
	stripped := make([]byte, 0, len(data)-len(payload))
	stripped = append(append(stripped, data[:start]...), data[end:]...)
	se := &pb.Entry{Term: e.Term, Index: e.Index, Type: e.Type, Data: stripped}
	enc, err := proto.Marshal(se)
	if err != nil {
		return nil, err
	}
	if write {
		if err := s.ensureSideDir(); err != nil {
			return nil, err
		}
		fs := s.fs()
		path := s.SideloadedPath(e.GetIndex(), e.GetTerm())
		tmp := path + sideTmpSuffix
		f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
		if err != nil {
			return nil, fmt.Errorf("raft log of tablet %d: side-loading entry %d: %w", s.tabletID, e.GetIndex(), err)
		}
		err = writeCopy(f, payload)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = fs.Rename(tmp, path)
		}
		if err != nil {
			_ = fs.Remove(tmp)
			return nil, fmt.Errorf("raft log of tablet %d: side-loading entry %d into %s: %w", s.tabletID, e.GetIndex(), path, err)
		}
	}
	return encodeSideRecord(uint64(start), uint64(len(payload)), crc, enc), nil
}

// sideCopyChunk bounds the buffer writeCopy copies a payload through.
const sideCopyChunk = 1 << 20

// writeCopy writes p to f through a buffer of its own. vfs.File.Write,
// unlike io.Writer's, may modify the slice it is given (Pebble's MemFS
// inverts it in builds with the race or invariants tag, to catch a caller
// that keeps it), and a payload is a slice of the entry's data, which
// raft keeps (its unstable log, the node's entry cache) and applies after
// the append: written directly, the entry a replica applies, or sends to
// a follower, could differ from the one its log holds.
func writeCopy(f vfs.File, p []byte) error {
	buf := make([]byte, min(len(p), sideCopyChunk))
	for len(p) > 0 {
		n := copy(buf, p)
		if _, err := f.Write(buf[:n]); err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// decodeEntry decodes the record v of entry index; a side-loaded one gets
// its payload back from its file when inline is set (and only its term,
// index and type are to be trusted when it is not).
func (s *LogStore) decodeEntry(index uint64, v []byte, inline bool) (*pb.Entry, error) {
	rec, side, err := parseSideRecord(v)
	if err != nil {
		return nil, fmt.Errorf("raft log of tablet %d: entry %d: %w", s.tabletID, index, err)
	}
	e := &pb.Entry{}
	if !side {
		if err := proto.Unmarshal(v, e); err != nil {
			return nil, fmt.Errorf("raft log of tablet %d: decoding entry %d: %w", s.tabletID, index, err)
		}
		return e, nil
	}
	if err := proto.Unmarshal(rec.stripped, e); err != nil {
		return nil, fmt.Errorf("raft log of tablet %d: decoding side-loaded entry %d: %w", s.tabletID, index, err)
	}
	if !inline {
		return e, nil
	}
	stripped := e.GetData()
	if rec.start > uint64(len(stripped)) {
		return nil, fmt.Errorf("raft log of tablet %d: side-loaded entry %d: payload at %d past its %d bytes", s.tabletID, index, rec.start, len(stripped))
	}
	data := make([]byte, uint64(len(stripped))+rec.length)
	copy(data, stripped[:rec.start])
	copy(data[rec.start+rec.length:], stripped[rec.start:])
	path := s.SideloadedPath(index, e.GetTerm())
	if err := s.readSide(path, data[rec.start:rec.start+rec.length], rec.crc); err != nil {
		return nil, fmt.Errorf("raft log of tablet %d: entry %d: %w", s.tabletID, index, err)
	}
	s.sideReads.Add(1)
	if s.readCounter != nil {
		s.readCounter.Add(1)
	}
	s.mu.Lock()
	if se, ok := s.side[index]; ok && se.term == e.GetTerm() {
		se.checked = true
		s.side[index] = se
	}
	s.mu.Unlock()
	e.Data = data
	return e, nil
}

// readSide reads the payload file at path into buf, which must be its
// whole length, and checks its checksum (rule S4).
func (s *LogStore) readSide(path string, buf []byte, crc uint32) error {
	f, err := s.fs().Open(path)
	if err != nil {
		return fmt.Errorf("side-loaded payload %s: %w", path, err)
	}
	defer f.Close()
	if _, err := io.ReadFull(f, buf); err != nil {
		return fmt.Errorf("side-loaded payload %s: reading %d bytes: %w", path, len(buf), err)
	}
	var one [1]byte
	if n, _ := f.Read(one[:]); n != 0 {
		return fmt.Errorf("side-loaded payload %s: longer than the %d bytes its record says", path, len(buf))
	}
	if got := crc32.Checksum(buf, castagnoli); got != crc {
		return fmt.Errorf("side-loaded payload %s: checksum %08x, the record says %08x: the file is corrupt", path, got, crc)
	}
	return nil
}

// SideloadedFile returns the file holding e's payload when the log holds
// e side-loaded (ok false: e is a plain entry), checked against the
// record's checksum first unless this process wrote or checked it
// (rule S4).
func (s *LogStore) SideloadedFile(e *pb.Entry) (path string, ok bool, err error) {
	index := e.GetIndex()
	s.mu.Lock()
	se, ok := s.side[index]
	s.mu.Unlock()
	if !ok || se.term != e.GetTerm() {
		return "", false, nil
	}
	path = s.SideloadedPath(index, se.term)
	if se.checked {
		return path, true, nil
	}
	v, found, err := s.eng.Get(s.entryKey(index))
	if err != nil {
		return "", false, err
	}
	if !found {
		return "", false, fmt.Errorf("raft log of tablet %d: side-loaded entry %d missing", s.tabletID, index)
	}
	rec, side, err := parseSideRecord(v)
	if err != nil || !side {
		return "", false, fmt.Errorf("raft log of tablet %d: entry %d has a side-load marker but no side-loaded record (%v)", s.tabletID, index, err)
	}
	buf := make([]byte, rec.length)
	if err := s.readSide(path, buf, rec.crc); err != nil {
		return "", false, fmt.Errorf("raft log of tablet %d: entry %d: %w", s.tabletID, index, err)
	}
	s.mu.Lock()
	if cur, ok := s.side[index]; ok && cur.term == se.term {
		cur.checked = true
		s.side[index] = cur
	}
	s.mu.Unlock()
	return path, true, nil
}

// dropSideLocked moves the side-loaded entries at indexes in [lo, hi] out
// of the log's set, their files to be removed once that is durable (rule
// S3), and reports whether there were any. s.mu is held.
func (s *LogStore) dropSideLocked(lo, hi uint64) bool {
	any := false
	for index, se := range s.side {
		if index >= lo && index <= hi {
			s.obsolete = append(s.obsolete, sideRef{index, se.term})
			delete(s.side, index)
			any = true
		}
	}
	return any
}

// HasObsolete reports whether files wait for ReleaseObsolete.
func (s *LogStore) HasObsolete() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.obsolete) > 0 || s.destroyed
}

// ReleaseObsolete removes the files of side-loaded entries the log no
// longer holds. The caller has committed, with a sync, the batch that
// removed their records (rule S3). A file whose entry came back (the
// same index and term, so the same bytes) stays.
func (s *LogStore) ReleaseObsolete() error {
	s.mu.Lock()
	refs := s.obsolete
	s.obsolete = nil
	destroyed := s.destroyed && len(s.side) == 0
	s.destroyed = false
	var keep []sideRef
	for _, r := range refs {
		if se, ok := s.side[r.index]; ok && se.term == r.term {
			keep = append(keep, r)
		}
	}
	s.mu.Unlock()
	fs := s.fs()
	var first error
	for _, r := range refs {
		kept := false
		for _, k := range keep {
			kept = kept || k == r
		}
		if kept {
			continue
		}
		path := s.SideloadedPath(r.index, r.term)
		if err := fs.Remove(path); err != nil && !errors.Is(err, iofs.ErrNotExist) && first == nil {
			first = fmt.Errorf("raft log of tablet %d: removing %s: %w", s.tabletID, path, err)
		}
	}
	if destroyed {
		if err := fs.RemoveAll(s.sideDir()); err != nil && first == nil {
			first = fmt.Errorf("raft log of tablet %d: removing %s: %w", s.tabletID, s.sideDir(), err)
		}
		s.mu.Lock()
		s.sideDirReady = false
		s.mu.Unlock()
	}
	return first
}
