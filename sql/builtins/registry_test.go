package builtins

import (
	"errors"
	"testing"

	"github.com/cockroachdb/apd/v3"
	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// TestRegistryWellFormed checks invariant 1 and the Class contract: every
// overload has what its class needs, a unique OID found by ByOID, and a
// return type for concrete arguments.
func TestRegistryWellFormed(t *testing.T) {
	seen := map[uint32]string{}
	check := func(kind string, m map[string][]*Overload) {
		for name, ovs := range m {
			for _, o := range ovs {
				sig := kind + " " + o.Signature()
				if prev, dup := seen[o.OID]; dup {
					t.Errorf("%s and %s share OID %d", prev, sig, o.OID)
				}
				seen[o.OID] = sig
				if got, ok := ByOID(o.OID); !ok || got != o {
					t.Errorf("ByOID(%d) does not find %s", o.OID, sig)
				}
				if o.Name() != name {
					t.Errorf("%s registered as %q", sig, name)
				}
				var ok bool
				switch o.Class {
				case Normal:
					ok = (o.Fn != nil) != (o.Bind != nil)
				case Generator:
					ok = o.SRF != nil && o.Columns != nil
				case AggregateClass:
					ok = o.NewAggregate != nil
				case WindowClass:
					ok = o.NewWindow != nil
				}
				if !ok {
					t.Errorf("%s lacks the implementation its class needs", sig)
				}
			}
		}
	}
	check("function", functions)
	check("operator", binaryOps)
	check("prefix operator", unaryOps)
	if len(Names()) < 150 {
		t.Errorf("only %d functions registered", len(Names()))
	}
}

// TestResolutionErrors pins Postgres's error shape (invariant 2): code,
// message and hint, as psql shows them for PostgreSQL 15.
func TestResolutionErrors(t *testing.T) {
	for _, tc := range []struct {
		err        func() error
		code, msg  string
		hintPrefix string
	}{
		{func() error { _, err := ResolveFunc("abs", []*types.T{types.Text}); return err },
			pgerrcode.UndefinedFunction, "function abs(text) does not exist",
			"No function matches the given name and argument types. You might need to add explicit type casts."},
		{func() error { _, err := ResolveFunc("nosuch", nil); return err },
			pgerrcode.UndefinedFunction, "function nosuch() does not exist", "No function matches"},
		{func() error { _, err := LookupBinaryOp("+", types.Int4, types.Text); return err },
			pgerrcode.UndefinedFunction, "operator does not exist: integer + text",
			"No operator matches the given name and argument types. You might need to add explicit type casts."},
		{func() error { _, err := LookupBinaryOp("+", types.Unknown, types.Unknown); return err },
			pgerrcode.AmbiguousFunction, "operator is not unique: unknown + unknown",
			"Could not choose a best candidate operator. You might need to add explicit type casts."},
		{func() error { _, err := LookupUnaryOp("-", types.Unknown); return err },
			pgerrcode.AmbiguousFunction, "operator is not unique: - unknown",
			"Could not choose a best candidate operator. You might need to add an explicit type cast."},
		{func() error { _, err := LookupUnaryOp("-", types.Bool); return err },
			pgerrcode.UndefinedFunction, "operator does not exist: - boolean",
			"No operator matches the given name and argument type. You might need to add an explicit type cast."},
	} {
		err := tc.err()
		var pe *pgerror.Error
		if !errors.As(err, &pe) {
			t.Errorf("want %q, got %v", tc.msg, err)
			continue
		}
		if pe.Code != tc.code || pe.Message != tc.msg || len(pe.Hint) < len(tc.hintPrefix) || pe.Hint[:len(tc.hintPrefix)] != tc.hintPrefix {
			t.Errorf("got %s %q (hint %q), want %s %q (hint %q...)", pe.Code, pe.Message, pe.Hint, tc.code, tc.msg, tc.hintPrefix)
		}
	}
}

// TestResolvedTypes checks what the binder gets back: coercion targets and
// result types, including polymorphic ones.
func TestResolvedTypes(t *testing.T) {
	intArr := types.MustArray(types.Int4)
	numArr := types.MustArray(types.Numeric)
	for _, tc := range []struct {
		fn       string
		args     []*types.T
		wantArgs []*types.T
		ret      *types.T
	}{
		{"array_append", []*types.T{intArr, types.Numeric}, []*types.T{numArr, types.Numeric}, numArr},
		{"array_append", []*types.T{intArr, types.Unknown}, []*types.T{intArr, types.Int4}, intArr},
		{"round", []*types.T{types.Unknown}, []*types.T{types.Float8}, types.Float8},
		{"round", []*types.T{types.Int4}, []*types.T{types.Float8}, types.Float8},
		{"round", []*types.T{types.Numeric, types.Int2}, []*types.T{types.Numeric, types.Int4}, types.Numeric},
		{"sum", []*types.T{types.Int8}, []*types.T{types.Int8}, types.Numeric},
		{"sum", []*types.T{types.Int2}, []*types.T{types.Int2}, types.Int8},
		{"avg", []*types.T{types.Float4}, []*types.T{types.Float4}, types.Float8},
		{"lag", []*types.T{types.Text, types.Int4, types.Unknown}, []*types.T{types.Text, types.Int4, types.Text}, types.Text},
		{"concat", []*types.T{types.Unknown, types.Int4}, []*types.T{types.Text, types.Int4}, types.Text},
		{"unnest", []*types.T{intArr}, []*types.T{intArr}, types.Int4},
		{"length", []*types.T{types.VarChar}, []*types.T{types.Text}, types.Int4},
	} {
		r, err := ResolveFunc(tc.fn, tc.args)
		if err != nil {
			t.Errorf("%s%v: %v", tc.fn, tc.args, err)
			continue
		}
		for i, a := range r.ArgTypes {
			if !a.Identical(tc.wantArgs[i]) {
				t.Errorf("%s%v: argument %d coerces to %s, want %s", tc.fn, tc.args, i, a, tc.wantArgs[i])
			}
		}
		if !r.Return.Identical(tc.ret) {
			t.Errorf("%s%v returns %s, want %s", tc.fn, tc.args, r.Return, tc.ret)
		}
	}
}

func TestGreatest(t *testing.T) {
	typ, err := ResolveGreatest("GREATEST", []*types.T{types.Int4, types.Numeric, types.Unknown})
	if err != nil || !typ.Identical(types.Numeric) {
		t.Fatalf("GREATEST(int, numeric, unknown) is %v, %v", typ, err)
	}
	if _, err := ResolveGreatest("GREATEST", []*types.T{types.Int4, types.Text}); pgerror.Code(err) != pgerrcode.DatatypeMismatch {
		t.Errorf("GREATEST(int, text): %v", err)
	}
	args := []types.Datum{types.DNull, types.DInt(3), types.DInt(7), types.DNull, types.DInt(-1)}
	if g := Greatest(args, false); g != types.DInt(7) {
		t.Errorf("greatest = %v", g)
	}
	if l := Greatest(args, true); l != types.DInt(-1) {
		t.Errorf("least = %v", l)
	}
	if n := Greatest([]types.Datum{types.DNull}, false); !types.IsNull(n) {
		t.Errorf("greatest(NULL) = %v", n)
	}
}

// TestShardHashStable pins invariant 7: these values are stored in
// hash-sharded indexes, so a change here would misplace existing rows.
func TestShardHashStable(t *testing.T) {
	for i, tc := range []struct {
		datums []types.Datum
	}{
		{[]types.Datum{types.DInt(1)}},
		{[]types.Datum{types.DString("abc"), types.DNull}},
		{nil},
	} {
		got, err := ShardHash(tc.datums...)
		if err != nil {
			t.Fatal(err)
		}
		if got != shardHashGolden[i] {
			t.Errorf("ShardHash(%v) = %d, want %d", tc.datums, got, shardHashGolden[i])
		}
	}
	// Values an index treats as equal share a bucket.
	a, _ := ShardHash(decFromInt(1))
	b, _ := ShardHash(mustDecimal(t, "1.000"))
	if a != b {
		t.Errorf("numeric 1 and 1.000 hash differently: %d, %d", a, b)
	}
}

// TestShardExpressionMatches: the shard column's generation expression,
// evaluated as SQL, computes ShardBucket (the planner derives buckets
// with the Go function, writers with the expression).
func TestShardExpressionMatches(t *testing.T) {
	fnv32 := mustResolve(t, "fnv32", types.Bytea)
	d2b := mustResolve(t, "datums_to_bytes", types.Int8, types.Text)
	shard := mustResolve(t, "shard", types.Int8, types.Int8, types.Text)
	for _, k := range []int64{0, 1, -7, 1 << 40} {
		vals := []types.Datum{types.DInt(k), types.DString("x")}
		b, err := d2b.Eval(nil, vals)
		if err != nil {
			t.Fatal(err)
		}
		h, err := fnv32.Eval(nil, []types.Datum{b})
		if err != nil {
			t.Fatal(err)
		}
		want, err := ShardBucket(8, vals...)
		if err != nil {
			t.Fatal(err)
		}
		if got := int64(h.(types.DInt)) % 8; got != int64(want) {
			t.Errorf("mod(fnv32(datums_to_bytes(%d, 'x')), 8) = %d, ShardBucket = %d", k, got, want)
		}
		s, err := shard.Eval(nil, append([]types.Datum{types.DInt(8)}, vals...))
		if err != nil {
			t.Fatal(err)
		}
		if int64(s.(types.DInt)) != int64(want) {
			t.Errorf("shard(8, %d, 'x') = %v, want %d", k, s, want)
		}
	}
}

// shardHashGolden were computed when ShardHash took its final form
// (FNV-1 of the key encodings).
var shardHashGolden = [3]uint32{2779727968, 3600765267, 2166136261}

func mustResolve(t *testing.T, name string, args ...*types.T) *Resolved {
	t.Helper()
	r, err := ResolveFunc(name, args)
	if err != nil {
		t.Fatalf("resolve %s: %v", name, err)
	}
	return r
}

func mustDecimal(t *testing.T, s string) types.Datum {
	t.Helper()
	d, _, err := apd.NewFromString(s)
	if err != nil {
		t.Fatal(err)
	}
	return types.NewDecimal(d)
}
