package builtins

// TestEval runs testdata/eval: each case is one SQL expression, evaluated
// through overload resolution exactly as the binder will (arguments cast
// to ResolvedFunc.ArgTypes, then Eval). Expected outputs were produced by
// PostgreSQL 15.18 (`SELECT <expr>` through psql, session TimeZone UTC),
// so a diff is a divergence from Postgres.
//
// The mini-language:
//
//	eval [tz=<IANA zone>]
//	<expr>
//	----
//	<Postgres text output, NULL for null, or ERROR: <sqlstate>: <message>>
//
// tz sets the session TimeZone (default UTC), which the expression's
// literals are read in too. <expr> is one of
//
//	name(arg, ...)      a function call
//	arg OP arg          a binary operator
//	OP arg              a prefix operator
//
// and each arg is a literal: 'text' (type unknown, as in SQL), 'text'::type,
// an integer (int4, or int8 when it does not fit), a decimal (numeric),
// true/false, or NULL (unknown), optionally followed by ::type.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

func testCtx() *FixedContext {
	ts := time.Date(2024, 3, 10, 12, 34, 56, 789000000, time.UTC)
	return &FixedContext{Txn: ts, Stmt: ts, Info: SessionInfo{Database: "defaultdb", User: "root", SessionUser: "root",
		SearchPath: []string{"public"}, BackendPID: 42, ServerPort: 26257}}
}

type lit struct {
	typ *types.T
	val types.Datum
}

// exprParser splits the tiny expression language above.
type exprParser struct {
	s   string
	pos int
	tc  *types.Context
}

func (p *exprParser) skip() {
	for p.pos < len(p.s) && p.s[p.pos] == ' ' {
		p.pos++
	}
}

func (p *exprParser) literal() (lit, error) {
	p.skip()
	var raw string
	var typ *types.T
	switch {
	case strings.HasPrefix(p.s[p.pos:], "'"):
		var b strings.Builder
		i := p.pos + 1
		for ; i < len(p.s); i++ {
			if p.s[i] == '\'' {
				if i+1 < len(p.s) && p.s[i+1] == '\'' {
					b.WriteByte('\'')
					i++
					continue
				}
				break
			}
			b.WriteByte(p.s[i])
		}
		raw, typ = b.String(), types.Unknown
		p.pos = i + 1
	default:
		i := p.pos
		for i < len(p.s) && (p.s[i] >= '0' && p.s[i] <= '9' || p.s[i] == '.' || p.s[i] >= 'a' && p.s[i] <= 'z' || p.s[i] >= 'A' && p.s[i] <= 'Z' || p.s[i] == '_' || p.s[i] == '-' && (i == p.pos || p.s[i-1] == 'e')) {
			i++
		}
		raw = p.s[p.pos:i]
		p.pos = i
		switch {
		case strings.EqualFold(raw, "null"):
			typ = types.Unknown
		case raw == "true" || raw == "false":
			typ = types.Bool
		case strings.ContainsAny(raw, ".e"):
			typ = types.Numeric
		default:
			// Postgres's integer literals: int4, else int8, else numeric.
			typ = types.Int4
			if _, err := types.ParseDatum(nil, types.Int4, raw); err != nil {
				typ = types.Int8
				if _, err := types.ParseDatum(nil, types.Int8, raw); err != nil {
					typ = types.Numeric
				}
			}
		}
	}
	var val types.Datum
	if strings.EqualFold(raw, "null") && typ == types.Unknown {
		val = types.DNull
	} else if typ == types.Unknown {
		val = types.DString(raw)
	} else {
		d, err := types.ParseDatum(nil, typ, raw)
		if err != nil {
			return lit{}, err
		}
		val = d
	}
	for strings.HasPrefix(p.s[p.pos:], "::") {
		p.pos += 2
		i := p.pos
		for i < len(p.s) && (p.s[i] >= 'a' && p.s[i] <= 'z' || p.s[i] >= '0' && p.s[i] <= '9' || p.s[i] == '[' || p.s[i] == ']' || p.s[i] == '_') {
			i++
		}
		t, err := types.LookupName(p.s[p.pos:i])
		if err != nil {
			return lit{}, err
		}
		p.pos = i
		if typ == types.Unknown {
			if types.IsNull(val) {
				val = types.DNull
			} else if val, err = types.ParseDatum(p.tc, t, string(val.(types.DString))); err != nil {
				return lit{}, err
			}
		} else if val, err = types.Cast(nil, val, typ, t); err != nil {
			return lit{}, err
		}
		typ = t
	}
	return lit{typ, val}, nil
}

func evalExpr(ctx EvalContext, expr string) (string, error) {
	p := &exprParser{s: strings.TrimSpace(expr), tc: ctx.Types()}
	var lits []lit
	var res *Resolved
	var err error
	// A call starts with an identifier followed by "(".
	if i := strings.IndexByte(p.s, '('); i > 0 && isIdent(p.s[:i]) {
		name := p.s[:i]
		p.pos = i + 1
		p.skip()
		for p.pos < len(p.s) && p.s[p.pos] != ')' {
			l, err := p.literal()
			if err != nil {
				return "", err
			}
			lits = append(lits, l)
			p.skip()
			if p.pos < len(p.s) && p.s[p.pos] == ',' {
				p.pos++
			}
			p.skip()
		}
		res, err = ResolveFunc(name, litTypes(lits))
	} else if op, rest, ok := strings.Cut(p.s, " "); ok && strings.Trim(op, "+-*/<>=~!@#%^&|`?") == "" {
		p.s, p.pos = rest, 0
		l, err := p.literal()
		if err != nil {
			return "", err
		}
		lits = []lit{l}
		res, err = LookupUnaryOp(op, l.typ)
		if err != nil {
			return "", err
		}
	} else {
		l, err := p.literal()
		if err != nil {
			return "", err
		}
		p.skip()
		j := strings.IndexByte(p.s[p.pos:], ' ')
		op := p.s[p.pos : p.pos+j]
		p.pos += j
		r, err := p.literal()
		if err != nil {
			return "", err
		}
		lits = []lit{l, r}
		res, err = LookupBinaryOp(op, l.typ, r.typ)
		if err != nil {
			return "", err
		}
	}
	if err != nil {
		return "", err
	}
	args := make([]types.Datum, len(lits))
	for i, l := range lits {
		v := l.val
		if l.typ == types.Unknown && !types.IsNull(v) {
			if v, err = types.ParseDatum(ctx.Types(), res.ArgTypes[i], string(v.(types.DString))); err != nil {
				return "", err
			}
		} else if !types.IsNull(v) && !sameType(l.typ, res.ArgTypes[i]) {
			if v, err = types.Cast(ctx.Types(), v, l.typ, res.ArgTypes[i]); err != nil {
				return "", err
			}
		}
		args[i] = v
	}
	switch res.Overload.Class {
	case Generator:
		if res.Overload.Strict {
			for _, a := range args {
				if types.IsNull(a) {
					return "", nil
				}
			}
		}
		it, err := res.Overload.SRF(ctx, args)
		if err != nil {
			return "", err
		}
		var rows []string
		for {
			row, ok, err := it.Next()
			if err != nil {
				return "", err
			}
			if !ok {
				break
			}
			cols := res.Overload.Columns(res.ArgTypes)
			var parts []string
			for i, d := range row {
				parts = append(parts, types.Format(ctx.Types(), cols[i].Type, d))
			}
			rows = append(rows, strings.Join(parts, "|"))
		}
		return strings.Join(rows, "\n"), nil
	case Normal:
	default:
		return "", fmt.Errorf("%s is not a scalar function", res.Overload.Signature())
	}
	d, err := res.Eval(ctx, args)
	if err != nil {
		return "", err
	}
	return types.Format(ctx.Types(), res.Return, d), nil
}

func isIdent(s string) bool {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return s != ""
}

func litTypes(ls []lit) []*types.T {
	ts := make([]*types.T, len(ls))
	for i, l := range ls {
		ts[i] = l.typ
	}
	return ts
}

func TestEval(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd != "eval" {
				t.Fatalf("unknown command %s", d.Cmd)
			}
			ctx := testCtx()
			for _, a := range d.CmdArgs {
				if a.Key != "tz" || len(a.Vals) != 1 {
					t.Fatalf("unknown argument %s", a)
				}
				loc, err := time.LoadLocation(a.Vals[0])
				if err != nil {
					t.Fatal(err)
				}
				ctx.TypesCtx = &types.Context{Location: loc}
			}
			out, err := evalExpr(ctx, d.Input)
			if err != nil {
				return fmt.Sprintf("ERROR: %s: %s\n", pgerror.Code(err), err.Error())
			}
			if out == "" {
				return ""
			}
			return out + "\n"
		})
	})
}
