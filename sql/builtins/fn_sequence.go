package builtins

import (
	"crypto/rand"
	"encoding/binary"
	"sync/atomic"
	"time"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// Sequence functions (nextval, currval, setval, lastval) call the
// session's SequenceOps; unique_rowid fills the hidden rowid column of
// tables created without a primary key.

// SequenceNameResolver is implemented by SequenceOps that can map a
// sequence name to its OID. The functions take a regclass, so a name
// literal is resolved by the regclass input function; this is for callers
// that hold a bare name.
type SequenceNameResolver interface {
	ResolveName(name string) (uint32, error)
}

func sequences(ctx EvalContext) (SequenceOps, error) {
	if ctx == nil || ctx.Sequences() == nil {
		return nil, pgerror.New(pgerrcode.FeatureNotSupported, "sequence functions are not available in this context")
	}
	return ctx.Sequences(), nil
}

func regOID(d types.Datum) uint32 { return uint32(d.(types.DOid)) }

func init() {
	registerFn("nextval", Overload{Args: []*types.T{types.RegClass}, Return: Fixed(types.Int8), Strict: true, Volatility: Volatile,
		Fn: func(ctx EvalContext, args []types.Datum) (types.Datum, error) {
			ops, err := sequences(ctx)
			if err != nil {
				return nil, err
			}
			v, err := ops.NextVal(regOID(args[0]))
			return types.DInt(v), err
		}})
	registerFn("currval", Overload{Args: []*types.T{types.RegClass}, Return: Fixed(types.Int8), Strict: true, Volatility: Volatile,
		Fn: func(ctx EvalContext, args []types.Datum) (types.Datum, error) {
			ops, err := sequences(ctx)
			if err != nil {
				return nil, err
			}
			v, err := ops.CurrVal(regOID(args[0]))
			return types.DInt(v), err
		}})
	registerFn("setval",
		Overload{Args: []*types.T{types.RegClass, types.Int8}, Return: Fixed(types.Int8), Strict: true, Volatility: Volatile,
			Fn: func(ctx EvalContext, args []types.Datum) (types.Datum, error) {
				ops, err := sequences(ctx)
				if err != nil {
					return nil, err
				}
				v, err := ops.SetVal(regOID(args[0]), i64(args[1]), true)
				return types.DInt(v), err
			}},
		Overload{Args: []*types.T{types.RegClass, types.Int8, types.Bool}, Return: Fixed(types.Int8), Strict: true, Volatility: Volatile,
			Fn: func(ctx EvalContext, args []types.Datum) (types.Datum, error) {
				ops, err := sequences(ctx)
				if err != nil {
					return nil, err
				}
				v, err := ops.SetVal(regOID(args[0]), i64(args[1]), bool(args[2].(types.DBool)))
				return types.DInt(v), err
			}})
	registerFn("lastval", Overload{Return: Fixed(types.Int8), Volatility: Volatile,
		Fn: func(ctx EvalContext, _ []types.Datum) (types.Datum, error) {
			ops, err := sequences(ctx)
			if err != nil {
				return nil, err
			}
			v, err := ops.LastVal()
			return types.DInt(v), err
		}})
	registerFn("unique_rowid", Overload{Return: Fixed(types.Int8), Volatility: Volatile,
		Fn: func(EvalContext, []types.Datum) (types.Datum, error) {
			return types.DInt(UniqueRowID()), nil
		}})
}

// unique_rowid: (microseconds since 1970 << 10) | node bits, moved past the
// last value this process returned, so values are unique in the process,
// roughly increasing in time, and positive until the year 2255. The 10
// node bits keep processes apart: random per process until
// SetUniqueRowIDNode fixes them (a cluster's node sets its node ID as it
// starts: server.startReplicated). Nothing here survives a restart; a
// restarted node waits until its clock is at most the maximum offset
// (500 ms) behind its persisted clock bound (server/clockbound.go), so a
// node whose clock went back may still repeat a value from that last half
// second; an INSERT's CPut refuses it.
var (
	lastRowID   atomic.Int64
	rowIDNodeID atomic.Uint32
)

const rowIDNodeBits = 10

func init() {
	var b [2]byte
	_, _ = rand.Read(b[:])
	rowIDNodeID.Store(uint32(binary.BigEndian.Uint16(b[:])) & (1<<rowIDNodeBits - 1))
}

// SetUniqueRowIDNode sets the node bits unique_rowid mixes in (the low 10
// bits of id).
func SetUniqueRowIDNode(id uint32) { rowIDNodeID.Store(id & (1<<rowIDNodeBits - 1)) }

// UniqueRowID returns the next unique_rowid() value.
func UniqueRowID() int64 {
	node := int64(rowIDNodeID.Load())
	for {
		v := time.Now().UnixMicro()<<rowIDNodeBits | node
		last := lastRowID.Load()
		if v <= last {
			// Same microsecond (or the clock went back): step past the
			// last value, keeping this node's bits.
			v = (last>>rowIDNodeBits+1)<<rowIDNodeBits | node
		}
		if lastRowID.CompareAndSwap(last, v) {
			return v
		}
	}
}
