package builtins

import (
	"context"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/sql/types"
)

func call(t *testing.T, ctx EvalContext, name string, argTypes []*types.T, args ...types.Datum) types.Datum {
	t.Helper()
	r, err := ResolveFunc(name, argTypes)
	if err != nil {
		t.Fatal(err)
	}
	d, err := r.Eval(ctx, args)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return d
}

func TestSessionFunctions(t *testing.T) {
	ctx := testCtx()
	for _, tc := range []struct {
		fn   string
		want string
	}{
		{"current_database", "defaultdb"},
		{"current_user", "root"},
		{"session_user", "root"},
		{"current_schema", "public"},
		{"pg_backend_pid", "42"},
		{"inet_server_port", "26257"},
		{"now", "2024-03-10 12:34:56.789+00"},
		{"current_date", "2024-03-10"},
	} {
		if got := call(t, ctx, tc.fn, nil).String(); got != tc.want {
			t.Errorf("%s() = %s, want %s", tc.fn, got, tc.want)
		}
	}
	if got := call(t, ctx, "current_schemas", []*types.T{types.Bool}, types.DBool(true)).String(); got != "{pg_catalog,public}" {
		t.Errorf("current_schemas(true) = %s", got)
	}
	v := call(t, ctx, "version", nil).String()
	if !strings.HasPrefix(v, "PostgreSQL 15.") || !strings.Contains(v, "Cairn") {
		t.Errorf("version() = %q: tools parse the leading PostgreSQL 15.x", v)
	}
}

func TestRandomIsSeeded(t *testing.T) {
	draw := func() []types.Datum {
		ctx := testCtx()
		call(t, ctx, "setseed", []*types.T{types.Float8}, types.DFloat(0.5))
		return []types.Datum{call(t, ctx, "random", nil), call(t, ctx, "random", nil)}
	}
	a, b := draw(), draw()
	if a[0] != b[0] || a[1] != b[1] || a[0] == a[1] {
		t.Errorf("setseed(0.5) then random() twice: %v and %v", a, b)
	}
	for _, d := range a {
		if f := float64(d.(types.DFloat)); f < 0 || f >= 1 {
			t.Errorf("random() = %v, outside [0, 1)", f)
		}
	}
	r, _ := ResolveFunc("setseed", []*types.T{types.Float8})
	if _, err := r.Eval(testCtx(), []types.Datum{types.DFloat(2)}); err == nil {
		t.Error("setseed(2) must fail")
	}
	u := call(t, testCtx(), "gen_random_uuid", nil).(types.DUUID)
	if u[6]>>4 != 4 || u[8]>>6 != 2 {
		t.Errorf("gen_random_uuid() = %s is not a version 4 UUID", u)
	}
}

// recordingLocker is an AdvisoryLocker that records calls.
type recordingLocker struct{ calls []string }

func (l *recordingLocker) Lock(_ context.Context, k AdvisoryKey, shared, xact, wait bool) (bool, error) {
	l.calls = append(l.calls, types.DInt(k.Key).String()+map[bool]string{true: " two-int", false: ""}[k.TwoInt]+
		map[bool]string{true: " shared", false: ""}[shared]+map[bool]string{true: " xact", false: ""}[xact]+
		map[bool]string{true: " wait", false: ""}[wait])
	return true, nil
}

func (l *recordingLocker) Unlock(k AdvisoryKey, shared bool) bool {
	l.calls = append(l.calls, "unlock "+types.DInt(k.Key).String())
	return false
}

func (l *recordingLocker) UnlockAll() { l.calls = append(l.calls, "unlock all") }

func TestAdvisoryLocks(t *testing.T) {
	l := &recordingLocker{}
	ctx := testCtx()
	ctx.Locks = l
	i8, i4 := []*types.T{types.Int8}, []*types.T{types.Int4, types.Int4}
	call(t, ctx, "pg_advisory_lock", i8, types.DInt(7))
	if got := call(t, ctx, "pg_try_advisory_xact_lock_shared", i4, types.DInt(1), types.DInt(-1)); got != types.DBool(true) {
		t.Errorf("try lock = %v", got)
	}
	if got := call(t, ctx, "pg_advisory_unlock", i8, types.DInt(7)); got != types.DBool(false) {
		t.Errorf("unlock of a lock not held = %v", got)
	}
	call(t, ctx, "pg_advisory_unlock_all", nil)
	want := []string{"7 wait", "8589934591 two-int shared xact", "unlock 7", "unlock all"}
	if strings.Join(l.calls, "; ") != strings.Join(want, "; ") {
		t.Errorf("calls = %q, want %q", l.calls, want)
	}
	r, _ := ResolveFunc("pg_advisory_lock", i8)
	if _, err := r.Eval(testCtx(), []types.Datum{types.DInt(1)}); err == nil {
		t.Error("advisory lock without a lock manager must fail")
	}
}
