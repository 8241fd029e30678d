package mvcc

// TestMVCC runs the specification files in testdata/. Each file starts with
// an empty in-memory engine; commands run in order against it.
//
// The mini-language (timestamps are "wall" or "wall,logical"; keys and
// values are plain words, "v=" is the empty value):
//
//	txn_begin t=<name> ts=<ts> [limit=<ts>] [pri=<n>]
//	    A pending transaction whose read, write and min timestamps are ts
//	    and whose uncertainty limit is limit (default: none). Its anchor is
//	    the first key it writes, or k=<key> if given.
//	txn_update t=<name> [read=<ts>] [write=<ts>] [epoch=<n>] [seq=<n>] [limit=<ts>] [status=<s>] [ignore=<a>-<b>|none]
//	    Changes the coordinator's copy of the transaction (refresh, push,
//	    restart, the next write's sequence number). ignore adds the
//	    inclusive range [a, b] to its ignored sequence numbers (a rollback
//	    to a savepoint); none clears them (a restart).
//
//	put k=<key> v=<value> [ts=<ts>] [t=<name>]
//	cput k=<key> v=<value> [exp=<value>] [ts=<ts>] [t=<name>]
//	    Without exp the key is expected to have no value.
//	del k=<key> [ts=<ts>] [t=<name>]
//	del_range k=<key> end=<key> [ts=<ts>] [t=<name>]
//	    Writes run in their own batch, which is committed even when the
//	    function fails, so the dump that follows shows exactly what a
//	    failing call left behind. Output: the result or error, then the dump.
//
//	get k=<key> ts=<ts> [t=<name>] [inconsistent]
//	scan k=<key> end=<key> ts=<ts> [t=<name>] [reverse] [max=<n>] [maxbytes=<n>] [inconsistent] [count=<chars>]
//	    Reads of the engine. With t= the read uses the transaction (its own
//	    intents, its uncertainty limit); ts is still the read timestamp.
//	    local=<ts> sets ReadOptions.LocalUncertaintyLimit. count= counts
//	    the visible values whose first character is one of chars
//	    (ScanOptions.CountTags) and prints "count: n" before the rows
//	    (none: count mode returns no rows).
//
//	resolve t=<name> k=<key> [end=<key>] [max=<n>] status=<pending|committed|aborted>
//	    Resolves with the coordinator's current copy of the transaction
//	    (its WriteTimestamp, Epoch and ignored sequence numbers). With end,
//	    ResolveIntentRange.
//	intents k=<key> [end=<key>] [max=<n>]
//	    ScanIntents.
//	lock k=<key> [end=<key>] [ts=<ts>] [t=<name>]
//	    AcquireLock (a row lock over [k, end)); a lock-only record dumps
//	    as <lock only>.
//	check_lock k=<key> [end=<key>] t=<name>
//	    CheckLock (the checks of an unreplicated lock, which writes
//	    nothing): prints held or the error.
//	gc k=<key> end=<key> threshold=<ts>
//	check_refresh k=<key> [end=<key>] from=<ts> to=<ts> t=<name>
//
//	txn_record op=put t=<name> [status=<s>] [hb=<ts>]
//	    Stores the coordinator's copy (with status and heartbeat, if given).
//	txn_record op=get t=<name>
//	txn_record op=del t=<name>
//	txn_expired t=<name> now=<ts> liveness=<duration>
//	    IsExpired on the stored record.
//	dump
//	    The raw engine: locks, transaction records and versions, in
//	    engine order.
//
// Transactions print by name; intents print as "txn=<name> epo=<e>
// ts=<intent ts> seq=<n>". A lock record with a history prints it after
// its value, oldest first: history=[<seq>:<value> ...].

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/storage"
	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/uuid"
)

func TestMVCC(t *testing.T) {
	// Only the files directly in testdata are specs; subdirectories (such
	// as the fuzzers' testdata/fuzz corpus) are not.
	entries, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		// Each file runs twice: with every write left in the memtable, and
		// with the engine flushed after every write, so reads go through
		// SSTs, their bloom filters and the comparer's Split. Both must
		// print the same.
		for _, flush := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/flush=%v", e.Name(), flush), func(t *testing.T) {
				h := newHarness(t)
				h.flush = flush
				defer h.close()
				datadriven.RunTest(t, filepath.Join("testdata", e.Name()), h.run)
			})
		}
	}
}

type harness struct {
	t     *testing.T
	flush bool // flush the engine after every write
	eng   *storage.Engine
	txns  map[string]*kvpb.Transaction
	names map[uuid.UUID]string
}

func newHarness(t *testing.T) *harness {
	eng, err := storage.Open("", storage.Options{FS: vfs.NewMem(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, eng: eng, txns: map[string]*kvpb.Transaction{}, names: map[uuid.UUID]string{}}
}

func (h *harness) close() {
	if err := h.eng.Close(); err != nil {
		h.t.Fatal(err)
	}
}

// args gives typed access to a directive's arguments.
type args struct {
	t  *testing.T
	td *datadriven.TestData
}

func (a args) str(key string) (string, bool) {
	arg, ok := a.td.Arg(key)
	if !ok {
		return "", false
	}
	return strings.Join(arg.Vals, ","), true
}

func (a args) must(key string) string {
	s, ok := a.str(key)
	if !ok {
		a.td.Fatalf(a.t, "missing argument %s", key)
	}
	return s
}

func (a args) bytes(key string) []byte {
	s, ok := a.str(key)
	if !ok {
		return nil
	}
	return []byte(s)
}

func (a args) ts(key string) hlc.Timestamp {
	s, ok := a.str(key)
	if !ok {
		return hlc.Timestamp{}
	}
	ts, err := hlc.ParseTimestamp(s)
	if err != nil {
		a.td.Fatalf(a.t, "%v", err)
	}
	return ts
}

func (a args) int(key string) int64 {
	s, ok := a.str(key)
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		a.td.Fatalf(a.t, "%v", err)
	}
	return n
}

func (a args) status(key string) kvpb.TxnStatus {
	switch s := a.must(key); s {
	case "pending":
		return kvpb.Pending
	case "committed":
		return kvpb.Committed
	case "aborted":
		return kvpb.Aborted
	default:
		a.td.Fatalf(a.t, "unknown status %q", s)
	}
	return 0
}

func (h *harness) txn(a args) *kvpb.Transaction {
	name, ok := a.str("t")
	if !ok {
		return nil
	}
	txn, ok := h.txns[name]
	if !ok {
		a.td.Fatalf(a.t, "unknown txn %s", name)
	}
	return txn
}

func (h *harness) run(t *testing.T, td *datadriven.TestData) string {
	a := args{t: t, td: td}
	var out strings.Builder
	switch td.Cmd {
	case "txn_begin":
		name := a.must("t")
		ts := a.ts("ts")
		id := uuid.NewSHA1(uuid.NameSpaceOID, []byte(name))
		h.names[id] = name
		h.txns[name] = &kvpb.Transaction{
			TxnMeta: kvpb.TxnMeta{
				ID: id, Key: a.bytes("k"), WriteTimestamp: ts, MinTimestamp: ts,
				Priority: int32(a.int("pri")),
			},
			Name:                   name,
			ReadTimestamp:          ts,
			GlobalUncertaintyLimit: a.ts("limit"),
		}
		return h.fmtTxn(h.txns[name])
	case "txn_update":
		txn := h.txn(a)
		if _, ok := a.str("read"); ok {
			txn.ReadTimestamp = a.ts("read")
		}
		if _, ok := a.str("write"); ok {
			txn.WriteTimestamp = a.ts("write")
		}
		if _, ok := a.str("limit"); ok {
			txn.GlobalUncertaintyLimit = a.ts("limit")
		}
		if _, ok := a.str("epoch"); ok {
			txn.Epoch = int32(a.int("epoch"))
		}
		if _, ok := a.str("seq"); ok {
			txn.Sequence = int32(a.int("seq"))
		}
		if _, ok := a.str("status"); ok {
			txn.Status = a.status("status")
		}
		if r, ok := a.str("ignore"); ok {
			if r == "none" {
				txn.IgnoredSeqNums = nil
			} else {
				var lo, hi int32
				if _, err := fmt.Sscanf(r, "%d-%d", &lo, &hi); err != nil {
					td.Fatalf(t, "ignore=%s: %v", r, err)
				}
				txn.IgnoredSeqNums = kvpb.AddIgnoredSeqRange(txn.IgnoredSeqNums, kvpb.SeqRange{Start: lo, End: hi})
			}
		}
		return h.fmtTxn(txn)

	case "lock":
		key, txn := a.bytes("k"), h.txn(a)
		ts := a.ts("ts")
		if txn != nil {
			ts = txn.WriteTimestamp
		}
		h.write(&out, func(b *storage.Batch) (string, error) {
			acquired, err := AcquireLock(b, key, a.bytes("end"), ts, txn)
			return fmt.Sprintf("acquired: %v\n", acquired), err
		})

	case "check_lock":
		held, err := CheckLock(h.eng, a.bytes("k"), a.bytes("end"), h.txn(a), WriteOptions{})
		if err != nil {
			return h.fmtErr(err)
		}
		return fmt.Sprintf("held: %v\n", held)

	case "put", "cput", "del", "del_range":
		key, ts, txn := a.bytes("k"), a.ts("ts"), h.txn(a)
		if txn != nil && len(txn.Key) == 0 {
			txn.Key = key
		}
		h.write(&out, func(b *storage.Batch) (string, error) {
			switch td.Cmd {
			case "put":
				return "", Put(b, key, ts, a.bytes("v"), txn)
			case "cput":
				_, exp := a.str("exp")
				return "", ConditionalPut(b, key, ts, a.bytes("v"), a.bytes("exp"), exp, txn)
			case "del":
				found, err := Delete(b, key, ts, txn)
				return fmt.Sprintf("found: %v\n", found), err
			default:
				deleted, err := DeleteRange(b, key, a.bytes("end"), ts, txn)
				var s strings.Builder
				for _, k := range deleted {
					fmt.Fprintf(&s, "deleted: %q\n", k)
				}
				if len(deleted) == 0 && err == nil {
					s.WriteString("deleted: none\n")
				}
				return s.String(), err
			}
		})

	case "get":
		res, err := Get(h.eng, a.bytes("k"), a.ts("ts"), ReadOptions{Txn: h.txn(a), LocalUncertaintyLimit: a.ts("local"), Inconsistent: td.HasArg("inconsistent")})
		if err != nil {
			return h.fmtErr(err)
		}
		if res.Value == nil {
			fmt.Fprintf(&out, "get: %q -> <no value>\n", a.bytes("k"))
		} else {
			fmt.Fprintf(&out, "get: %q -> %q @%s\n", a.bytes("k"), res.Value, res.Timestamp)
		}
		h.fmtIntents(&out, "ignored", res.Intents)
	case "scan":
		res, err := Scan(h.eng, a.bytes("k"), a.bytes("end"), a.ts("ts"), ScanOptions{
			ReadOptions: ReadOptions{Txn: h.txn(a), LocalUncertaintyLimit: a.ts("local"), Inconsistent: td.HasArg("inconsistent")},
			Reverse:     td.HasArg("reverse"),
			MaxKeys:     a.int("max"),
			MaxBytes:    a.int("maxbytes"),
			CountTags:   a.bytes("count"),
		})
		if err != nil {
			return h.fmtErr(err)
		}
		if td.HasArg("count") {
			fmt.Fprintf(&out, "count: %d\n", res.Count)
		}
		for _, kv := range res.Rows {
			fmt.Fprintf(&out, "scan: %q -> %q @%s\n", kv.Key, kv.Value, kv.Timestamp)
		}
		if len(res.Rows) == 0 {
			out.WriteString("scan: no rows\n")
		}
		if res.ResumeSpan != nil {
			fmt.Fprintf(&out, "resume: %s\n", res.ResumeSpan)
		}
		h.fmtIntents(&out, "ignored", res.Intents)

	case "resolve":
		txn := h.txn(a)
		status := a.status("status")
		h.write(&out, func(b *storage.Batch) (string, error) {
			if _, ok := a.str("end"); ok {
				n, resume, err := ResolveIntentRange(b, a.bytes("k"), a.bytes("end"), txn.TxnMeta, status, a.int("max"), txn.IgnoredSeqNums...)
				s := fmt.Sprintf("resolved: %d\n", n)
				if resume != nil {
					s += fmt.Sprintf("resume: %s\n", resume)
				}
				return s, err
			}
			ok, err := ResolveIntent(b, kvpb.Intent{Key: a.bytes("k"), Txn: txn.TxnMeta}, status, txn.IgnoredSeqNums...)
			return fmt.Sprintf("resolved: %v\n", ok), err
		})
	case "intents":
		ins, err := ScanIntents(h.eng, a.bytes("k"), a.bytes("end"), a.int("max"))
		if err != nil {
			return h.fmtErr(err)
		}
		h.fmtIntents(&out, "intent", ins)
		if len(ins) == 0 {
			out.WriteString("intents: none\n")
		}
	case "gc":
		h.write(&out, func(b *storage.Batch) (string, error) {
			st, err := GC(b, a.bytes("k"), a.bytes("end"), a.ts("threshold"))
			return fmt.Sprintf("removed: %d\n", st.Versions), err
		})
	case "check_refresh":
		err := CheckRefresh(h.eng, a.bytes("k"), a.bytes("end"), a.ts("from"), a.ts("to"), h.txn(a).ID)
		if err != nil {
			return h.fmtErr(err)
		}
		return "ok\n"

	case "txn_record":
		txn := h.txn(a)
		switch op := a.must("op"); op {
		case "put":
			rec := txn.Clone()
			if _, ok := a.str("status"); ok {
				rec.Status = a.status("status")
			}
			if _, ok := a.str("hb"); ok {
				rec.LastHeartbeat = a.ts("hb")
			}
			h.write(&out, func(b *storage.Batch) (string, error) { return "", PutTxnRecord(b, rec) })
		case "del":
			h.write(&out, func(b *storage.Batch) (string, error) { return "", DeleteTxnRecord(b, txn.Key, txn.ID) })
		case "get":
			rec, found, err := GetTxnRecord(h.eng, txn.Key, txn.ID)
			if err != nil {
				return h.fmtErr(err)
			}
			if !found {
				return "record: none\n"
			}
			return "record: " + h.fmtRecord(&rec) + "\n"
		default:
			td.Fatalf(t, "unknown txn_record op %q", op)
		}
	case "txn_expired":
		txn := h.txn(a)
		rec, found, err := GetTxnRecord(h.eng, txn.Key, txn.ID)
		if err != nil || !found {
			td.Fatalf(t, "no record for %s: %v", txn.Name, err)
		}
		d, err := time.ParseDuration(a.must("liveness"))
		if err != nil {
			td.Fatalf(t, "%v", err)
		}
		return fmt.Sprintf("expired: %v\n", IsExpired(rec, a.ts("now"), d))
	case "dump":
		h.dump(&out)
	default:
		td.Fatalf(t, "unknown command %s", td.Cmd)
	}
	return out.String()
}

// write runs fn in a fresh batch and commits it whatever fn returns, then
// prints fn's output or error and the engine.
func (h *harness) write(out *strings.Builder, fn func(*storage.Batch) (string, error)) {
	b := h.eng.NewBatch()
	defer b.Close()
	s, err := fn(b)
	if err := b.Commit(); err != nil {
		h.t.Fatal(err)
	}
	if h.flush {
		if err := h.eng.Flush(); err != nil {
			h.t.Fatal(err)
		}
	}
	if err != nil {
		out.WriteString(h.fmtErr(err))
	} else {
		out.WriteString(s)
	}
	h.dump(out)
}

func (h *harness) dump(out *strings.Builder) {
	it, err := h.eng.NewIter(storage.IterOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
		k := it.UnsafeKey()
		raw, err := it.UnsafeValue()
		if err != nil {
			h.t.Fatal(err)
		}
		if user, err := keys.DecodeLock(k.Key); err == nil {
			lk, err := decodeLockRecord(raw)
			if err != nil {
				h.t.Fatal(err)
			}
			if lk.LockOnly {
				fmt.Fprintf(out, "lock: %q -> %s <lock only>\n", user, h.fmtMeta(lk.Txn))
				continue
			}
			fmt.Fprintf(out, "lock: %q -> %s %s", user, h.fmtMeta(lk.Txn), fmtLockValue(lk.Value, lk.Tombstone))
			if len(lk.History) > 0 {
				out.WriteString(" history=[")
				for i, hv := range lk.History {
					if i > 0 {
						out.WriteString(" ")
					}
					fmt.Fprintf(out, "%d:%s", hv.Seq, fmtLockValue(hv.Value, hv.Tombstone))
				}
				out.WriteString("]")
			}
			out.WriteString("\n")
			continue
		}
		if anchor, _, err := keys.DecodeTxnRecord(k.Key); err == nil && keys.IsLocal(k.Key) {
			rec, err := decodeTxnRecord(raw)
			if err != nil {
				h.t.Fatal(err)
			}
			fmt.Fprintf(out, "record: %q -> %s\n", anchor, h.fmtRecord(&rec))
			continue
		}
		v, tomb, local, err := decodeValueLocal(raw)
		if err != nil {
			h.t.Fatal(err)
		}
		var loc string
		if !local.IsEmpty() {
			loc = fmt.Sprintf(" (local %s)", local)
		}
		if tomb {
			fmt.Fprintf(out, "data: %s -> <tombstone>%s\n", k, loc)
		} else {
			fmt.Fprintf(out, "data: %s -> %q%s\n", k, v, loc)
		}
	}
	if err := it.Err(); err != nil {
		h.t.Fatal(err)
	}
	if n == 0 {
		out.WriteString("<empty engine>\n")
	}
}

func (h *harness) name(id uuid.UUID) string {
	if n, ok := h.names[id]; ok {
		return n
	}
	return id.String()[:8]
}

func (h *harness) fmtMeta(m kvpb.TxnMeta) string {
	return fmt.Sprintf("txn=%s epo=%d ts=%s seq=%d", h.name(m.ID), m.Epoch, m.WriteTimestamp, m.Sequence)
}

func fmtLockValue(v []byte, tombstone bool) string {
	if tombstone {
		return "<tombstone>"
	}
	return fmt.Sprintf("%q", v)
}

// fmtIgnored prints a transaction's ignored sequence numbers, if any.
func fmtIgnored(t *kvpb.Transaction) string {
	if len(t.IgnoredSeqNums) == 0 {
		return ""
	}
	return " ignored=" + kvpb.FormatSeqRanges(t.IgnoredSeqNums)
}

func (h *harness) fmtTxn(t *kvpb.Transaction) string {
	return fmt.Sprintf("txn %s %s epo=%d seq=%d read=%s write=%s limit=%s%s\n", t.Name, t.Status, t.Epoch, t.Sequence, t.ReadTimestamp, t.WriteTimestamp, t.GlobalUncertaintyLimit, fmtIgnored(t))
}

func (h *harness) fmtRecord(t *kvpb.Transaction) string {
	return fmt.Sprintf("txn=%s %s epo=%d write=%s min=%s hb=%s%s", h.name(t.ID), t.Status, t.Epoch, t.WriteTimestamp, t.MinTimestamp, t.LastHeartbeat, fmtIgnored(t))
}

func (h *harness) fmtIntents(out *strings.Builder, label string, ins []kvpb.Intent) {
	for _, in := range ins {
		fmt.Fprintf(out, "%s: %q %s\n", label, in.Key, h.fmtMeta(in.Txn))
	}
}

// fmtErr prints the kvpb error types with all their fields, so a spec can
// state exactly what the caller is told.
func (h *harness) fmtErr(err error) string {
	var (
		wie *kvpb.WriteIntentError
		wto *kvpb.WriteTooOldError
		unc *kvpb.ReadWithinUncertaintyIntervalError
		rty *kvpb.TransactionRetryError
		cfe *kvpb.ConditionFailedError
		inv *kvpb.InvalidArgumentError
	)
	var s strings.Builder
	switch {
	case errors.As(err, &wie):
		s.WriteString("error: WriteIntentError\n")
		h.fmtIntents(&s, "  conflict", wie.Intents)
	case errors.As(err, &wto):
		fmt.Fprintf(&s, "error: WriteTooOldError key=%q ts=%s actual=%s\n", wto.Key, wto.Timestamp, wto.ActualTimestamp)
	case errors.As(err, &unc):
		fmt.Fprintf(&s, "error: ReadWithinUncertaintyIntervalError key=%q read=%s existing=%s limit=%s\n", unc.Key, unc.ReadTimestamp, unc.ExistingTimestamp, unc.UncertaintyLimit)
	case errors.As(err, &rty):
		fmt.Fprintf(&s, "error: TransactionRetryError %s: %s\n", rty.Reason, rty.Detail)
	case errors.As(err, &cfe):
		if cfe.ActualValue == nil {
			fmt.Fprintf(&s, "error: ConditionFailedError key=%q actual=<no value>\n", cfe.Key)
		} else {
			fmt.Fprintf(&s, "error: ConditionFailedError key=%q actual=%q\n", cfe.Key, cfe.ActualValue)
		}
	case errors.As(err, &inv):
		fmt.Fprintf(&s, "error: %v\n", inv)
	default:
		fmt.Fprintf(&s, "error: %v\n", err)
	}
	return s.String()
}
