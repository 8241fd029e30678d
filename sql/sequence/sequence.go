// Package sequence owns sequence values: where a sequence's value lives in
// KV, and a session's nextval, currval, setval and lastval
// (builtins.SequenceOps). Sequence definitions are catalog descriptors
// (catalog.Sequence); this package reads them through the lookup function
// it is given and never writes the catalog. It must not touch table data.
//
// Storage: one KV key per sequence (ValueKey), holding a counter s that
// kvpb.IncrementRequest adds to atomically and non-transactionally, so a
// nextval is never rolled back (as in PostgreSQL) and concurrent nextvals
// never return the same value. The sequence's last value is s + Base(seq),
// where Base = START - INCREMENT: a sequence that was never used has no
// key (s = 0), and its first nextval adds INCREMENT and returns START.
// Creating a sequence therefore writes nothing to its value key: a
// transaction that creates a table with a serial column can insert into it
// before committing without its nextval waiting on its own intent.
//
// Bounds: the counter may run past MAXVALUE (or below MINVALUE); the value
// returned is checked against the bounds and a sequence without CYCLE
// fails with 2200H, one with CYCLE is reset to MINVALUE (MAXVALUE when
// descending) by a ConditionalPut on the value seen, so that of several
// sessions crossing the bound at once exactly one resets it and the others
// increment again.
package sequence

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/pgerror"
)

// valuePrefix is the system key prefix of sequence values (next to the
// catalog's d/, v/, n/, r/ and id keys).
var valuePrefix = []byte("q/")

// ValueKey is the key holding sequence id's counter.
func ValueKey(id catalog.ID) []byte {
	return keys.System(binary.BigEndian.AppendUint32(append([]byte(nil), valuePrefix...), uint32(id)))
}

// uncalledKey marks a setval(v, false): it holds the counter value that
// setval wrote, so while the counter still has it the sequence reads as
// "v, not called" (State), as PostgreSQL shows it. Any nextval moves the
// counter and so makes the mark stale; setval(v, true) deletes it.
func uncalledKey(id catalog.ID) []byte {
	return append(ValueKey(id), 'u')
}

// Base is what the stored counter is offset by: last value = s + Base.
func Base(seq *catalog.Sequence) (int64, error) {
	b, ok := sub(seq.Start, seq.Increment)
	if !ok {
		return 0, pgerror.New(pgerrcode.NumericValueOutOfRange, "sequence %q: START %d minus INCREMENT %d overflows bigint", seq.Name, seq.Start, seq.Increment)
	}
	return b, nil
}

func sub(a, b int64) (int64, bool) {
	r := a - b
	if (b > 0 && r > a) || (b < 0 && r < a) {
		return 0, false
	}
	return r, true
}

func add(a, b int64) (int64, bool) {
	r := a + b
	if (b > 0 && r < a) || (b < 0 && r > a) {
		return 0, false
	}
	return r, true
}

func mul(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	r := a * b
	if r/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
		return 0, false
	}
	return r, true
}

// SetValue moves seq so that its last value is v (isCalled) or its next
// nextval returns v (!isCalled), outside any transaction. It returns v.
// Out-of-bounds values are 22003 as in PostgreSQL's setval.
func SetValue(ctx context.Context, db *kv.DB, seq *catalog.Sequence, v int64, isCalled bool) (int64, error) {
	if v < seq.Min || v > seq.Max {
		return 0, pgerror.New(pgerrcode.NumericValueOutOfRange, "setval: value %d is out of bounds for sequence %q (%d..%d)", v, seq.Name, seq.Min, seq.Max)
	}
	base, err := Base(seq)
	if err != nil {
		return 0, err
	}
	last := v
	if !isCalled {
		var ok bool
		if last, ok = sub(v, seq.Increment); !ok {
			return 0, pgerror.New(pgerrcode.NumericValueOutOfRange, "setval: value %d is out of bounds for sequence %q", v, seq.Name)
		}
	}
	s, ok := sub(last, base)
	if !ok {
		return 0, pgerror.New(pgerrcode.NumericValueOutOfRange, "setval: value %d is out of bounds for sequence %q", v, seq.Name)
	}
	b := &kv.Batch{}
	b.Put(ValueKey(seq.ID), kvpb.EncodeIncrementValue(s))
	if isCalled {
		b.Del(uncalledKey(seq.ID))
	} else {
		b.Put(uncalledKey(seq.ID), kvpb.EncodeIncrementValue(s))
	}
	if err := db.Run(ctx, b); err != nil {
		return 0, fmt.Errorf("setval of sequence %q: %w", seq.Name, err)
	}
	return v, nil
}

// Rebase keeps a sequence's position when ALTER SEQUENCE changes START or
// INCREMENT (which Base depends on): the counter is rewritten so the last
// value stays what it was.
func Rebase(ctx context.Context, db *kv.DB, old, seq *catalog.Sequence) error {
	ob, err := Base(old)
	if err != nil {
		return err
	}
	nb, err := Base(seq)
	if err != nil {
		return err
	}
	key := ValueKey(seq.ID)
	for {
		cur, found, err := db.Get(ctx, key)
		if err != nil {
			return err
		}
		s, err := kvpb.DecodeIncrementValue(cur)
		if err != nil {
			return err
		}
		ns := s + ob - nb
		b := &kv.Batch{}
		b.CPut(key, kvpb.EncodeIncrementValue(ns), cur, found)
		err = db.Run(ctx, b)
		if _, ok := errors.AsType[*kvpb.ConditionFailedError](err); ok {
			continue // a nextval ran in between: read again
		}
		return err
	}
}

// State reads seq's position as SELECT last_value, is_called FROM seq
// shows it, in txn: a sequence never used reports START, not called; after
// setval(v, false) and before the next nextval, v, not called; otherwise
// the last value handed out (or set), called. setval(last_value,
// is_called) restores the same next value, which is what pg_dump relies
// on.
func State(ctx context.Context, txn *kv.Txn, seq *catalog.Sequence) (last int64, isCalled bool, err error) {
	b := &kv.Batch{}
	b.Get(ValueKey(seq.ID))
	b.Get(uncalledKey(seq.ID))
	if err := txn.Run(ctx, b); err != nil {
		return 0, false, fmt.Errorf("reading sequence %q: %w", seq.Name, err)
	}
	if !b.Results[0].Found {
		return seq.Start, false, nil
	}
	n, err := kvpb.DecodeIncrementValue(b.Results[0].Rows[0].Value)
	if err != nil {
		return 0, false, fmt.Errorf("reading sequence %q: %w", seq.Name, err)
	}
	uncalled := false
	if r := b.Results[1]; r.Found {
		m, err := kvpb.DecodeIncrementValue(r.Rows[0].Value)
		uncalled = err == nil && m == n
	}
	base, err := Base(seq)
	if err != nil {
		return 0, false, err
	}
	v, ok := add(n, base)
	if !ok {
		return 0, false, exhausted(seq)
	}
	if next, ok := add(v, seq.Increment); ok && (uncalled || !inBounds(seq, v)) && inBounds(seq, next) {
		return next, false, nil
	}
	if !inBounds(seq, v) {
		// Past the bound: nextval fails (or cycles) from here.
		if v > seq.Max {
			return seq.Max, true, nil
		}
		return seq.Min, true, nil
	}
	return v, true, nil
}

// Clear removes a sequence's value (DROP SEQUENCE, inside the dropping
// transaction).
func Clear(ctx context.Context, txn *kv.Txn, id catalog.ID) error {
	if err := txn.Delete(ctx, uncalledKey(id)); err != nil {
		return err
	}
	return txn.Delete(ctx, ValueKey(id))
}

// Session is one SQL session's view of sequences: the values its nextval
// calls returned (currval, lastval) and the values it fetched ahead (CACHE
// n). It implements builtins.SequenceOps. Safe for concurrent use, though a
// session uses it from one goroutine.
type Session struct {
	db     *kv.DB
	lookup func(ctx context.Context, oid uint32) (*catalog.Sequence, error)
	// Resolve maps a sequence name (as nextval('name') writes it) to its
	// OID, for the text overloads of the sequence functions; nil refuses
	// names. The session sets it.
	Resolve func(ctx context.Context, name string) (uint32, error)
	// Ctx returns the context of the statement being run; nil: Background.
	Ctx func() context.Context

	mu       sync.Mutex
	curr     map[uint32]int64
	cached   map[uint32]*block
	lastOID  uint32
	haveLast bool
}

// block is a run of values fetched ahead by one increment of CACHE n.
type block struct {
	version   uint64 // the descriptor version it was fetched under
	next      int64
	remaining int64
}

// NewSession returns a session's sequence access; lookup returns the
// sequence descriptor with an OID (42P01/42809 errors are its).
func NewSession(db *kv.DB, lookup func(ctx context.Context, oid uint32) (*catalog.Sequence, error)) *Session {
	return &Session{db: db, lookup: lookup, curr: map[uint32]int64{}, cached: map[uint32]*block{}}
}

func (s *Session) ctx() context.Context {
	if s.Ctx != nil {
		if c := s.Ctx(); c != nil {
			return c
		}
	}
	return context.Background()
}

// ResolveName returns the OID of the sequence name names (the text
// overloads of nextval and friends).
func (s *Session) ResolveName(name string) (uint32, error) {
	if s.Resolve == nil {
		return 0, pgerror.New(pgerrcode.FeatureNotSupported, "sequence names cannot be resolved in this context")
	}
	return s.Resolve(s.ctx(), name)
}

// NextVal advances the sequence and returns its new value.
func (s *Session) NextVal(oid uint32) (int64, error) {
	ctx := s.ctx()
	seq, err := s.lookup(ctx, oid)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.cached[oid]; b != nil && b.version == seq.Version && b.remaining > 0 {
		v := b.next
		b.remaining--
		b.next += seq.Increment
		s.used(oid, v)
		return v, nil
	}
	delete(s.cached, oid)
	v, n, err := fetch(ctx, s.db, seq)
	if err != nil {
		return 0, err
	}
	if n > 1 {
		s.cached[oid] = &block{version: seq.Version, next: v + seq.Increment, remaining: n - 1}
	}
	s.used(oid, v)
	return v, nil
}

func (s *Session) used(oid uint32, v int64) {
	s.curr[oid] = v
	s.lastOID, s.haveLast = oid, true
}

// fetch takes the next value of seq from KV, and with CACHE n up to n-1
// more: it returns the first value and how many consecutive values (first,
// first+INCREMENT, ...) this call now owns.
func fetch(ctx context.Context, db *kv.DB, seq *catalog.Sequence) (first int64, n int64, err error) {
	base, err := Base(seq)
	if err != nil {
		return 0, 0, err
	}
	key := ValueKey(seq.ID)
	for {
		n = max(seq.Cache, 1)
		by, ok := mul(seq.Increment, n)
		if !ok {
			n, by = 1, seq.Increment
		}
		s, err := db.Inc(ctx, key, by)
		var last int64
		if err == nil {
			last, ok = add(s, base)
		}
		if err != nil || !ok {
			// The counter itself overflowed: the sequence is far past its
			// bound.
			if err != nil && !isOverflow(err) {
				return 0, 0, fmt.Errorf("nextval of sequence %q: %w", seq.Name, err)
			}
			if !seq.Cycle {
				return 0, 0, exhausted(seq)
			}
			if err := restartCycle(ctx, db, seq, base, nil); err != nil {
				return 0, 0, err
			}
			return wrapValue(seq), 1, nil
		}
		first = last - by + seq.Increment
		if inBounds(seq, first) {
			// Keep only the values of the block inside the bounds.
			for n > 1 && !inBounds(seq, first+(n-1)*seq.Increment) {
				n--
			}
			return first, n, nil
		}
		if !seq.Cycle {
			return 0, 0, exhausted(seq)
		}
		cur := kvpb.EncodeIncrementValue(s)
		err = restartCycle(ctx, db, seq, base, cur)
		if _, ok := errors.AsType[*kvpb.ConditionFailedError](err); ok {
			continue // another session moved the counter: increment again
		}
		if err != nil {
			return 0, 0, err
		}
		return wrapValue(seq), 1, nil
	}
}

func isOverflow(err error) bool {
	_, ok := errors.AsType[*kvpb.InvalidArgumentError](err)
	return ok
}

func inBounds(seq *catalog.Sequence, v int64) bool { return v >= seq.Min && v <= seq.Max }

// wrapValue is where a cycling sequence starts over.
func wrapValue(seq *catalog.Sequence) int64 {
	if seq.Increment > 0 {
		return seq.Min
	}
	return seq.Max
}

// restartCycle sets the counter so the last value is wrapValue, provided
// it still holds expected (nil: whatever it holds).
func restartCycle(ctx context.Context, db *kv.DB, seq *catalog.Sequence, base int64, expected []byte) error {
	s, ok := sub(wrapValue(seq), base)
	if !ok {
		return exhausted(seq)
	}
	b := &kv.Batch{}
	if expected == nil {
		b.Put(ValueKey(seq.ID), kvpb.EncodeIncrementValue(s))
	} else {
		b.CPut(ValueKey(seq.ID), kvpb.EncodeIncrementValue(s), expected, true)
	}
	return db.Run(ctx, b)
}

func exhausted(seq *catalog.Sequence) error {
	if seq.Increment > 0 {
		return pgerror.New(pgerrcode.SequenceGeneratorLimitExceeded, "nextval: reached maximum value of sequence %q (%d)", seq.Name, seq.Max)
	}
	return pgerror.New(pgerrcode.SequenceGeneratorLimitExceeded, "nextval: reached minimum value of sequence %q (%d)", seq.Name, seq.Min)
}

// CurrVal returns the value this session's latest nextval of the sequence
// returned (55000 before any).
func (s *Session) CurrVal(oid uint32) (int64, error) {
	ctx := s.ctx()
	seq, err := s.lookup(ctx, oid)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.curr[oid]
	if !ok {
		return 0, pgerror.New(pgerrcode.ObjectNotInPrerequisiteState, "currval of sequence %q is not yet defined in this session", seq.Name)
	}
	return v, nil
}

// LastVal returns the value of the latest nextval of any sequence in this
// session (55000 before any).
func (s *Session) LastVal() (int64, error) {
	s.mu.Lock()
	oid, ok := s.lastOID, s.haveLast
	v := s.curr[oid]
	s.mu.Unlock()
	if !ok {
		return 0, pgerror.New(pgerrcode.ObjectNotInPrerequisiteState, "lastval is not yet defined in this session")
	}
	// PostgreSQL fails lastval once the sequence is dropped.
	if _, err := s.lookup(s.ctx(), oid); err != nil {
		return 0, pgerror.New(pgerrcode.ObjectNotInPrerequisiteState, "lastval is not yet defined in this session")
	}
	return v, nil
}

// SetVal sets the sequence's value (setval), dropping the values this
// session fetched ahead. With isCalled, currval becomes v.
func (s *Session) SetVal(oid uint32, v int64, isCalled bool) (int64, error) {
	ctx := s.ctx()
	seq, err := s.lookup(ctx, oid)
	if err != nil {
		return 0, err
	}
	if _, err := SetValue(ctx, s.db, seq, v, isCalled); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.cached, oid)
	if isCalled {
		s.curr[oid] = v
	}
	return v, nil
}

// Forget drops what the session remembers of a sequence (DISCARD
// SEQUENCES, or the sequence was dropped).
func (s *Session) Forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.curr = map[uint32]int64{}
	s.cached = map[uint32]*block{}
	s.haveLast = false
}
