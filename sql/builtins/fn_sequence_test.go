package builtins

import (
	"sync"
	"testing"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// fakeSeqs counts nextval calls per OID.
type fakeSeqs struct{ next map[uint32]int64 }

func (f *fakeSeqs) NextVal(oid uint32) (int64, error) { f.next[oid]++; return f.next[oid], nil }
func (f *fakeSeqs) CurrVal(oid uint32) (int64, error) { return f.next[oid], nil }
func (f *fakeSeqs) SetVal(oid uint32, v int64, called bool) (int64, error) {
	if !called {
		f.next[oid] = v - 1
	} else {
		f.next[oid] = v
	}
	return v, nil
}
func (f *fakeSeqs) LastVal() (int64, error) { return 42, nil }

type seqCtx struct {
	FixedContext
	ops SequenceOps
}

func (c *seqCtx) Sequences() SequenceOps { return c.ops }

func callSeq(t *testing.T, ctx EvalContext, name string, argTypes []*types.T, args ...types.Datum) (types.Datum, error) {
	t.Helper()
	r, err := ResolveFunc(name, argTypes)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return r.Overload.Fn(ctx, args)
}

// TestSequenceFunctions: the functions pass the regclass OID through to
// the session's SequenceOps, an unknown literal resolves to the regclass
// overload, and without a session they fail with 0A000.
func TestSequenceFunctions(t *testing.T) {
	ops := &fakeSeqs{next: map[uint32]int64{}}
	ctx := &seqCtx{ops: ops}
	rc := []*types.T{types.RegClass}
	for want := int64(1); want <= 3; want++ {
		if v, err := callSeq(t, ctx, "nextval", rc, types.DOid(16400)); err != nil || v != types.DInt(want) {
			t.Fatalf("nextval = %v, %v; want %d", v, err, want)
		}
	}
	if v, err := callSeq(t, ctx, "currval", rc, types.DOid(16400)); err != nil || v != types.DInt(3) {
		t.Fatalf("currval = %v, %v", v, err)
	}
	if v, err := callSeq(t, ctx, "setval", []*types.T{types.RegClass, types.Int8, types.Bool}, types.DOid(16400), types.DInt(10), types.DBool(false)); err != nil || v != types.DInt(10) {
		t.Fatalf("setval = %v, %v", v, err)
	}
	if v, _ := callSeq(t, ctx, "nextval", rc, types.DOid(16400)); v != types.DInt(10) {
		t.Fatalf("nextval after setval(10, false) = %v", v)
	}
	if v, _ := callSeq(t, ctx, "lastval", nil); v != types.DInt(42) {
		t.Fatalf("lastval = %v", v)
	}
	r, err := ResolveFunc("nextval", []*types.T{types.Unknown})
	if err != nil || r.ArgTypes[0].Oid != types.RegClass.Oid {
		t.Fatalf("nextval('name') resolves to %+v, %v", r, err)
	}
	_, err = callSeq(t, &FixedContext{}, "nextval", rc, types.DOid(1))
	if pgerror.Code(err) != "0A000" {
		t.Fatalf("nextval without a session: %v", err)
	}
}

// TestUniqueRowID: values are distinct under concurrency and increase
// within one goroutine.
func TestUniqueRowID(t *testing.T) {
	const workers, each = 4, 2000
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prev := int64(0)
			for k := 0; k < each; k++ {
				v := UniqueRowID()
				if v <= prev || v <= 0 {
					t.Errorf("unique_rowid went from %d to %d", prev, v)
					return
				}
				prev = v
				mu.Lock()
				if seen[v] {
					t.Errorf("unique_rowid returned %d twice", v)
				}
				seen[v] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}
