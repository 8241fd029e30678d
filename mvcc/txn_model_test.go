package mvcc

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"sort"
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/storage"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/uuid"
	"pgregory.net/rapid"
)

// TestTxnModel runs random interleavings of up to three transactions
// (writes, reads through the transaction, commit or abort with range
// resolution) and non-transactional writes and reads, and checks every
// outcome, including the kind of error and the intents a conflict names,
// against a model: committed versions per key plus each open transaction's
// provisional writes. Transactions read at their start timestamp; pushes
// move their write timestamp up; they commit at a later one still. They
// also take savepoints and roll back to them (ignoring the sequence numbers
// written since), which in the model restores the provisional writes as
// they were at the savepoint while the locks stay.
func TestTxnModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		eng, err := storage.Open("", storage.Options{FS: vfs.NewMem(), NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		defer eng.Close()
		s := &txnModel{t: t, eng: eng, committed: model{}, now: hlc.Timestamp{WallTime: 1}}
		keyGen := rapid.SampledFrom([]string{"a", "b", "c", "d"})
		steps := rapid.IntRange(1, 50).Draw(t, "steps")
		for i := 0; i < steps; i++ {
			switch rapid.IntRange(0, 10).Draw(t, "op") {
			case 0:
				if len(s.open) < 3 {
					s.now = s.now.Next()
					s.begin()
				}
			case 1, 2:
				if tx := s.pick(); tx != nil {
					tomb := rapid.IntRange(0, 3).Draw(t, "del") == 0
					s.txnWrite(tx, keyGen.Draw(t, "key"), rapid.SliceOfN(rapid.Byte(), 0, 3).Draw(t, "value"), tomb)
				}
			case 3:
				if tx := s.pick(); tx != nil {
					s.read(tx, tx.txn.ReadTimestamp)
				}
			case 4:
				if tx := s.pick(); tx != nil {
					s.now = s.now.Next()
					s.finish(tx, rapid.Bool().Draw(t, "commit"))
				}
			case 5:
				s.now = s.now.Next()
				s.plainWrite(keyGen.Draw(t, "key"), rapid.SliceOfN(rapid.Byte(), 0, 3).Draw(t, "value"))
			case 8:
				// A push: later writes go higher, reads stay where they were.
				if tx := s.pick(); tx != nil {
					s.now = s.now.Next()
					tx.txn.WriteTimestamp = s.now
				}
			case 6, 7:
				s.read(nil, hlc.Timestamp{WallTime: rapid.Int64Range(1, s.now.WallTime+1).Draw(t, "read-ts")})
			case 9:
				if tx := s.pick(); tx != nil {
					tx.savepoints = append(tx.savepoints, modelSavepoint{seq: tx.txn.Sequence, writes: maps.Clone(tx.writes)})
				}
			case 10:
				if tx := s.pick(); tx != nil && len(tx.savepoints) > 0 {
					i := rapid.IntRange(0, len(tx.savepoints)-1).Draw(t, "savepoint")
					s.rollbackTo(tx, i)
				}
			}
		}
	})
}

type modelTxn struct {
	txn *kvpb.Transaction
	// writes are the provisional values the transaction reads (tomb for a
	// deletion); its intents' timestamps are in locks.
	writes map[string]*version
	// locks are the keys it holds intents on, with their timestamps: a
	// superset of writes once it rolled back to a savepoint.
	locks      map[string]hlc.Timestamp
	savepoints []modelSavepoint
}

// modelSavepoint is the transaction's sequence number and provisional
// writes when the savepoint was taken.
type modelSavepoint struct {
	seq    int32
	writes map[string]*version
}

type txnModel struct {
	t         *rapid.T
	eng       *storage.Engine
	committed model
	open      []*modelTxn
	now       hlc.Timestamp
	ids       byte
}

func (s *txnModel) begin() {
	s.ids++
	var id uuid.UUID
	id[15] = s.ids
	s.open = append(s.open, &modelTxn{
		txn: &kvpb.Transaction{
			TxnMeta:       kvpb.TxnMeta{ID: id, Key: []byte("a"), WriteTimestamp: s.now, MinTimestamp: s.now},
			ReadTimestamp: s.now,
		},
		writes: map[string]*version{},
		locks:  map[string]hlc.Timestamp{},
	})
}

// rollbackTo rolls tx back to its i-th savepoint (which survives, as in
// PostgreSQL; later ones are gone) and checks what tx reads.
func (s *txnModel) rollbackTo(tx *modelTxn, i int) {
	sp := tx.savepoints[i]
	tx.txn.IgnoredSeqNums = kvpb.AddIgnoredSeqRange(tx.txn.IgnoredSeqNums, kvpb.SeqRange{Start: sp.seq + 1, End: tx.txn.Sequence})
	tx.writes = maps.Clone(sp.writes)
	tx.savepoints = tx.savepoints[:i+1]
	s.read(tx, tx.txn.ReadTimestamp)
}

func (s *txnModel) pick() *modelTxn {
	if len(s.open) == 0 {
		return nil
	}
	return s.open[rapid.IntRange(0, len(s.open)-1).Draw(s.t, "txn")]
}

// holder returns the open transaction other than tx with an intent on k.
func (s *txnModel) holder(k string, tx *modelTxn) *modelTxn {
	for _, o := range s.open {
		if _, ok := o.locks[k]; ok && o != tx {
			return o
		}
	}
	return nil
}

func (s *txnModel) latest(k string) hlc.Timestamp {
	vs := s.committed[k]
	if len(vs) == 0 {
		return hlc.Timestamp{}
	}
	return vs[len(vs)-1].ts
}

func (s *txnModel) commit(fn func(b *storage.Batch) error) error {
	b := s.eng.NewBatch()
	defer b.Close()
	if err := fn(b); err != nil {
		return err
	}
	if err := b.Commit(); err != nil {
		s.t.Fatal(err)
	}
	return nil
}

func (s *txnModel) txnWrite(tx *modelTxn, k string, v []byte, tomb bool) {
	tx.txn.Sequence++
	var found bool
	err := s.commit(func(b *storage.Batch) (err error) {
		if tomb {
			found, err = Delete(b, []byte(k), hlc.Timestamp{}, tx.txn)
			return err
		}
		return Put(b, []byte(k), hlc.Timestamp{}, v, tx.txn)
	})
	if o := s.holder(k, tx); o != nil {
		s.expectIntents(err, o, k)
		return
	}
	ts := tx.txn.WriteTimestamp
	if lts, ok := tx.locks[k]; ok {
		ts = ts.Forward(lts)
	}
	if latest := s.latest(k); !latest.IsEmpty() && (tx.txn.ReadTimestamp.Less(latest) || ts.LessEq(latest)) {
		var wto *kvpb.WriteTooOldError
		if !errors.As(err, &wto) {
			s.t.Fatalf("txn write of %q over version at %s: got %v, want WriteTooOldError", k, latest, err)
		}
		return
	}
	if err != nil {
		s.t.Fatalf("txn write of %q: %v", k, err)
	}
	if tomb {
		want := false
		if w := tx.writes[k]; w != nil {
			want = !w.tomb
		} else {
			_, _, want = s.committed.get(k, hlc.MaxTimestamp)
		}
		if found != want {
			s.t.Fatalf("txn delete of %q: found=%v, model says %v", k, found, want)
		}
	}
	tx.writes[k] = &version{ts: ts, value: append([]byte{}, v...), tomb: tomb}
	tx.locks[k] = ts
}

func (s *txnModel) plainWrite(k string, v []byte) {
	err := s.commit(func(b *storage.Batch) error { return Put(b, []byte(k), s.now, v, nil) })
	if o := s.holder(k, nil); o != nil {
		s.expectIntents(err, o, k)
		return
	}
	if err != nil {
		s.t.Fatalf("put %q at %s: %v", k, s.now, err)
	}
	s.committed.add(k, version{ts: s.now, value: append([]byte{}, v...)})
}

func (s *txnModel) finish(tx *modelTxn, commit bool) {
	status := kvpb.Aborted
	if commit {
		status = kvpb.Committed
		tx.txn.WriteTimestamp = s.now
	}
	var n int
	if err := s.commit(func(b *storage.Batch) (err error) {
		n, _, err = ResolveIntentRange(b, []byte("a"), []byte("z"), tx.txn.TxnMeta, status, 0, tx.txn.IgnoredSeqNums...)
		return err
	}); err != nil {
		s.t.Fatalf("resolve: %v", err)
	}
	if n != len(tx.locks) {
		s.t.Fatalf("resolved %d intents, model has %d", n, len(tx.locks))
	}
	if commit {
		for k, w := range tx.writes {
			s.committed.add(k, version{ts: s.now, value: w.value, tomb: w.tomb})
		}
	}
	for i, o := range s.open {
		if o == tx {
			s.open = append(s.open[:i], s.open[i+1:]...)
			break
		}
	}
}

// read checks Get of every key and a forward and a reverse Scan at ts, as
// tx (or without a transaction when tx is nil).
func (s *txnModel) read(tx *modelTxn, ts hlc.Timestamp) {
	var opts ReadOptions
	// With no intents anywhere, promising so must change nothing: every
	// check below holds either way.
	if !s.anyIntents() {
		opts.NoLocksInSpan = rapid.Bool().Draw(s.t, "noLocksInSpan")
	}
	if tx != nil {
		opts.Txn = tx.txn
	}
	var wantRows []string
	var conflicts []string
	for _, k := range []string{"a", "b", "c", "d"} {
		var w *version
		if tx != nil {
			w = tx.writes[k]
		}
		switch o := s.holder(k, tx); {
		case w != nil:
			if !w.tomb {
				wantRows = append(wantRows, fmt.Sprintf("%s=%x@%s", k, w.value, tx.locks[k]))
			}
		case o != nil && o.locks[k].LessEq(ts):
			conflicts = append(conflicts, k)
		default:
			if v, vts, ok := s.committed.get(k, ts); ok {
				wantRows = append(wantRows, fmt.Sprintf("%s=%x@%s", k, v, vts))
			}
		}
		res, err := Get(s.eng, []byte(k), ts, opts)
		if len(conflicts) > 0 && conflicts[len(conflicts)-1] == k {
			if !isIntentErr(err, k) {
				s.t.Fatalf("get %q at %s: got %v, want a conflict", k, ts, err)
			}
			continue
		}
		if err != nil {
			s.t.Fatalf("get %q at %s: %v", k, ts, err)
		}
		got := ""
		if res.Value != nil {
			got = fmt.Sprintf("%s=%x@%s", k, res.Value, res.Timestamp)
		}
		want := ""
		if len(wantRows) > 0 && bytes.HasPrefix([]byte(wantRows[len(wantRows)-1]), []byte(k+"=")) {
			want = wantRows[len(wantRows)-1]
		}
		if got != want {
			s.t.Fatalf("get %q at %s (txn %v): got %q, want %q", k, ts, tx != nil, got, want)
		}
	}
	for _, reverse := range []bool{false, true} {
		res, err := Scan(s.eng, []byte("a"), []byte("z"), ts, ScanOptions{ReadOptions: opts, Reverse: reverse})
		if len(conflicts) > 0 {
			var wie *kvpb.WriteIntentError
			if !errors.As(err, &wie) {
				s.t.Fatalf("scan at %s: got %v, want conflicts on %v", ts, err, conflicts)
			}
			var keys []string
			for _, in := range wie.Intents {
				keys = append(keys, string(in.Key))
			}
			sort.Strings(keys)
			if fmt.Sprint(keys) != fmt.Sprint(conflicts) {
				s.t.Fatalf("scan at %s: conflicts on %v, want %v", ts, keys, conflicts)
			}
			continue
		}
		if err != nil {
			s.t.Fatalf("scan at %s: %v", ts, err)
		}
		var got []string
		for _, kv := range res.Rows {
			got = append(got, fmt.Sprintf("%s=%x@%s", kv.Key, kv.Value, kv.Timestamp))
		}
		if reverse {
			sort.Strings(got)
		}
		if fmt.Sprint(got) != fmt.Sprint(wantRows) {
			s.t.Fatalf("scan at %s reverse=%v (txn %v): got %v, want %v", ts, reverse, tx != nil, got, wantRows)
		}
	}
}

func (s *txnModel) expectIntents(err error, holder *modelTxn, k string) {
	var wie *kvpb.WriteIntentError
	if !errors.As(err, &wie) || len(wie.Intents) != 1 || wie.Intents[0].Txn.ID != holder.txn.ID || string(wie.Intents[0].Key) != k {
		s.t.Fatalf("write of %q: got %v, want an intent of %s", k, err, holder.txn.Short())
	}
}

func isIntentErr(err error, k string) bool {
	var wie *kvpb.WriteIntentError
	return errors.As(err, &wie) && len(wie.Intents) == 1 && string(wie.Intents[0].Key) == k
}

// anyIntents reports whether any open transaction has written.
func (s *txnModel) anyIntents() bool {
	for _, o := range s.open {
		if len(o.locks) > 0 {
			return true
		}
	}
	return false
}
