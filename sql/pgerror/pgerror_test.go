package pgerror

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgerrcode"
)

func TestCode(t *testing.T) {
	base := New(pgerrcode.NumericValueOutOfRange, "integer out of range")
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"direct", base, pgerrcode.NumericValueOutOfRange},
		{"wrapped twice", fmt.Errorf("a: %w", fmt.Errorf("b: %w", base)), pgerrcode.NumericValueOutOfRange},
		{"outermost wins", fmt.Errorf("x: %w", Wrapf(base, pgerrcode.DatatypeMismatch, "outer")), pgerrcode.DatatypeMismatch},
		{"joined", errors.Join(errors.New("plain"), base), pgerrcode.NumericValueOutOfRange},
		{"plain", errors.New("boom"), pgerrcode.InternalError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Code(tc.err); got != tc.want {
				t.Fatalf("Code = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestFlattenKeepsContextAndDetail(t *testing.T) {
	base := New(pgerrcode.NumericValueOutOfRange, "integer out of range")
	e := New(pgerrcode.InvalidTextRepresentation, "invalid input syntax for type integer: %q", "x").WithDetail("d").WithHint("h")
	f := Flatten(fmt.Errorf("column a: %w", e))
	if f.Code != pgerrcode.InvalidTextRepresentation || f.Detail != "d" || f.Hint != "h" {
		t.Fatalf("unexpected %+v", f)
	}
	if f.Message != `column a: invalid input syntax for type integer: "x"` {
		t.Fatalf("message %q", f.Message)
	}
	w := Wrapf(base, pgerrcode.DatatypeMismatch, "ctx %d", 1)
	if w.Error() != "ctx 1: integer out of range" || !errors.Is(w, base) {
		t.Fatalf("Wrapf lost its cause: %v", w)
	}
	if e.Detail != "d" || Flatten(nil) != nil {
		t.Fatal("WithDetail or Flatten(nil) misbehaved")
	}
	if g := Flatten(errors.New("boom")); g.Code != pgerrcode.InternalError || g.Message != "boom" {
		t.Fatalf("plain error flattened to %+v", g)
	}
}
