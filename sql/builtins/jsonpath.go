package builtins

import (
	"slices"
	"strings"
	"unicode"

	"github.com/cockroachdb/apd/v3"
	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// A subset of SQL/JSON path (jsonpath), enough for the common queries:
// lax and strict modes; $, @, $var (from the vars argument), literals;
// member accessors .key, ."key", .*, array accessors [n], [n to m],
// [last], [*]; filters ? (...) with ==, !=, <>, <, <=, >, >=, &&, ||, !,
// exists (...) and (...) is unknown; + - * / % on numbers; the methods
// size(), type(), double(), abs(), floor(), ceiling(). Cairn has no
// jsonpath type: the path is text, parsed per call. Anything else in a
// path (like_regex, starts with, .** , datetime(), keyvalue()) is refused
// with 0A000.

type jpKind uint8

const (
	jpRoot      jpKind = iota // $
	jpCurrent                 // @
	jpVar                     // $name
	jpLiteral                 // a JSON literal
	jpLast                    // last, inside an array subscript
	jpKey                     // .key (Str)
	jpAnyKey                  // .*
	jpIndex                   // [subscripts]
	jpAnyIndex                // [*]
	jpFilter                  // ? (Args[0])
	jpMethod                  // .name()
	jpBinary                  // Args[0] Op Args[1] (arithmetic, comparison, && and ||)
	jpNot                     // !(Args[0])
	jpNeg                     // -Args[0], +Args[0] (Op)
	jpExists                  // exists (Args[0])
	jpIsUnknown               // (Args[0]) is unknown
)

// jpNode is one step of a path: Base is what it applies to (nil for the
// primaries $, @, $var, literals and last).
type jpNode struct {
	Kind jpKind
	Base *jpNode
	Str  string
	Op   string
	Lit  types.JSON
	Args []*jpNode
	// Subs are an array accessor's subscripts: From, or From to To.
	Subs [][2]*jpNode
}

type jsonPath struct {
	strict bool
	expr   *jpNode
}

func errJSONPathSyntax(near string) error {
	if near == "" {
		return pgerror.New(pgerrcode.SyntaxError, "syntax error at end of jsonpath input")
	}
	return pgerror.New(pgerrcode.SyntaxError, "syntax error at or near \"%s\" of jsonpath input", near)
}

// jpLexer splits a path into tokens: punctuation, numbers, quoted strings
// (kept with their quote) and words.
type jpParser struct {
	toks []string
	i    int
}

func lexJSONPath(s string) ([]string, error) {
	var out []string
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '"':
			j := i + 1
			for j < len(s) && s[j] != '"' {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(s) {
				return nil, pgerror.New(pgerrcode.SyntaxError, "unterminated quoted string in jsonpath input")
			}
			out = append(out, s[i:j+1])
			i = j + 1
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9' && (len(out) == 0 || !jpOperand(out[len(out)-1])):
			j := i
			for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == '.' || s[j] == 'e' || s[j] == 'E' ||
				(s[j] == '+' || s[j] == '-') && (s[j-1] == 'e' || s[j-1] == 'E')) {
				j++
			}
			out = append(out, s[i:j])
			i = j
		case c == '$' || c == '_' || unicode.IsLetter(rune(c)):
			j := i + 1
			for j < len(s) && (s[j] == '_' || s[j] >= '0' && s[j] <= '9' || unicode.IsLetter(rune(s[j]))) {
				j++
			}
			out = append(out, s[i:j])
			i = j
		default:
			two := ""
			if i+1 < len(s) {
				two = s[i : i+2]
			}
			switch two {
			case "==", "!=", "<>", "<=", ">=", "&&", "||", "**":
				out = append(out, two)
				i += 2
				continue
			}
			if strings.IndexByte("@.[]()?,<>!+-*/%:", c) < 0 {
				return nil, errJSONPathSyntax(string(c))
			}
			out = append(out, string(c))
			i++
		}
	}
	return out, nil
}

// jpOperand reports whether a token ends an operand, so a following "."
// is an accessor rather than the start of a number.
func jpOperand(tok string) bool {
	return tok == "]" || tok == ")" || tok == "$" || tok == "@" || tok[0] == '"' ||
		tok[0] == '$' || tok[0] == '_' || unicode.IsLetter(rune(tok[0])) || tok[0] >= '0' && tok[0] <= '9'
}

func parseJSONPath(s string) (*jsonPath, error) {
	toks, err := lexJSONPath(s)
	if err != nil {
		return nil, err
	}
	p := &jpParser{toks: toks}
	jp := &jsonPath{}
	switch p.peek() {
	case "strict":
		jp.strict = true
		p.i++
	case "lax":
		p.i++
	}
	if jp.expr, err = p.or(); err != nil {
		return nil, err
	}
	if p.i < len(p.toks) {
		return nil, errJSONPathSyntax(p.toks[p.i])
	}
	return jp, nil
}

func (p *jpParser) peek() string {
	if p.i < len(p.toks) {
		return p.toks[p.i]
	}
	return ""
}

func (p *jpParser) next() string {
	t := p.peek()
	p.i++
	return t
}

func (p *jpParser) expect(tok string) error {
	if t := p.next(); t != tok {
		return errJSONPathSyntax(t)
	}
	return nil
}

// binary parses one level of left-associative binary operators:
// operand (op operand)*, for op among ops.
func (p *jpParser) binary(operand func() (*jpNode, error), ops ...string) (*jpNode, error) {
	l, err := operand()
	for err == nil && slices.Contains(ops, p.peek()) {
		op := p.next()
		var r *jpNode
		if r, err = operand(); err == nil {
			l = &jpNode{Kind: jpBinary, Op: op, Args: []*jpNode{l, r}}
		}
	}
	return l, err
}

// prefixed parses the parenthesised predicate after the prefix just
// consumed (! or exists) as a node of kind.
func (p *jpParser) prefixed(kind jpKind) (*jpNode, error) {
	if err := p.expect("("); err != nil {
		return nil, err
	}
	e, err := p.or()
	if err != nil {
		return nil, err
	}
	return &jpNode{Kind: kind, Args: []*jpNode{e}}, p.expect(")")
}

func (p *jpParser) or() (*jpNode, error)  { return p.binary(p.and, "||") }
func (p *jpParser) and() (*jpNode, error) { return p.binary(p.not, "&&") }

func (p *jpParser) not() (*jpNode, error) {
	if p.peek() == "!" {
		p.i++
		return p.prefixed(jpNot)
	}
	return p.comparison()
}

func (p *jpParser) comparison() (*jpNode, error) {
	if p.peek() == "exists" {
		p.i++
		return p.prefixed(jpExists)
	}
	l, err := p.additive()
	if err != nil {
		return nil, err
	}
	switch op := p.peek(); op {
	case "==", "!=", "<>", "<", "<=", ">", ">=":
		p.i++
		r, err := p.additive()
		if err != nil {
			return nil, err
		}
		return &jpNode{Kind: jpBinary, Op: op, Args: []*jpNode{l, r}}, nil
	case "is":
		p.i++
		if err := p.expect("unknown"); err != nil {
			return nil, err
		}
		return &jpNode{Kind: jpIsUnknown, Args: []*jpNode{l}}, nil
	case "like_regex", "starts":
		return nil, pgerror.New(pgerrcode.FeatureNotSupported, "jsonpath %s is not supported", op)
	}
	return l, nil
}

func (p *jpParser) additive() (*jpNode, error) { return p.binary(p.multiplicative, "+", "-") }

func (p *jpParser) multiplicative() (*jpNode, error) { return p.binary(p.unary, "*", "/", "%") }

func (p *jpParser) unary() (*jpNode, error) {
	if op := p.peek(); op == "-" || op == "+" {
		p.i++
		e, err := p.unary()
		if err != nil {
			return nil, err
		}
		return &jpNode{Kind: jpNeg, Op: op, Args: []*jpNode{e}}, nil
	}
	return p.accessors()
}

func (p *jpParser) primary() (*jpNode, error) {
	t := p.next()
	switch {
	case t == "":
		return nil, errJSONPathSyntax("")
	case t == "$":
		return &jpNode{Kind: jpRoot}, nil
	case t == "@":
		return &jpNode{Kind: jpCurrent}, nil
	case t[0] == '$':
		return &jpNode{Kind: jpVar, Str: t[1:]}, nil
	case t == "last":
		return &jpNode{Kind: jpLast}, nil
	case t == "true" || t == "false":
		return &jpNode{Kind: jpLiteral, Lit: types.JSONBoolValue(t == "true")}, nil
	case t == "null":
		return &jpNode{Kind: jpLiteral, Lit: types.JSONNullValue}, nil
	case t[0] == '"':
		s, err := unquoteJSONPath(t)
		if err != nil {
			return nil, err
		}
		return &jpNode{Kind: jpLiteral, Lit: types.JSONStringValue(s)}, nil
	case t[0] >= '0' && t[0] <= '9' || t[0] == '.':
		d, _, err := apd.NewFromString(t)
		if err != nil {
			return nil, errJSONPathSyntax(t)
		}
		return &jpNode{Kind: jpLiteral, Lit: types.JSONNumberValue(d)}, nil
	case t == "(":
		e, err := p.or()
		if err != nil {
			return nil, err
		}
		return e, p.expect(")")
	}
	return nil, errJSONPathSyntax(t)
}

func unquoteJSONPath(t string) (string, error) {
	j, err := types.ParseJSON(t)
	if err != nil || j.Kind != types.JSONString {
		return "", errJSONPathSyntax(t)
	}
	return j.Str, nil
}

func (p *jpParser) accessors() (*jpNode, error) {
	e, err := p.primary()
	if err != nil {
		return nil, err
	}
	for {
		switch p.peek() {
		case ".":
			p.i++
			t := p.next()
			switch {
			case t == "*":
				e = &jpNode{Kind: jpAnyKey, Base: e}
			case t == "**":
				return nil, pgerror.New(pgerrcode.FeatureNotSupported, "jsonpath .** is not supported")
			case t == "":
				return nil, errJSONPathSyntax("")
			case t[0] == '"':
				s, err := unquoteJSONPath(t)
				if err != nil {
					return nil, err
				}
				e = &jpNode{Kind: jpKey, Base: e, Str: s}
			case p.peek() == "(":
				p.i++
				if err := p.expect(")"); err != nil {
					return nil, err
				}
				switch t {
				case "size", "type", "double", "abs", "floor", "ceiling":
				case "keyvalue", "datetime":
					return nil, pgerror.New(pgerrcode.FeatureNotSupported, "jsonpath item method .%s() is not supported", t)
				default:
					return nil, errJSONPathSyntax("(")
				}
				e = &jpNode{Kind: jpMethod, Base: e, Str: t}
			case t[0] == '_' || unicode.IsLetter(rune(t[0])):
				e = &jpNode{Kind: jpKey, Base: e, Str: t}
			default:
				return nil, errJSONPathSyntax(t)
			}
		case "[":
			p.i++
			if p.peek() == "*" {
				p.i++
				e = &jpNode{Kind: jpAnyIndex, Base: e}
				if err := p.expect("]"); err != nil {
					return nil, err
				}
				continue
			}
			n := &jpNode{Kind: jpIndex, Base: e}
			for {
				from, err := p.additive()
				if err != nil {
					return nil, err
				}
				var to *jpNode
				if p.peek() == "to" {
					p.i++
					if to, err = p.additive(); err != nil {
						return nil, err
					}
				}
				n.Subs = append(n.Subs, [2]*jpNode{from, to})
				if p.peek() != "," {
					break
				}
				p.i++
			}
			if err := p.expect("]"); err != nil {
				return nil, err
			}
			e = n
		case "?":
			p.i++
			if err := p.expect("("); err != nil {
				return nil, err
			}
			f, err := p.or()
			if err != nil {
				return nil, err
			}
			if err := p.expect(")"); err != nil {
				return nil, err
			}
			e = &jpNode{Kind: jpFilter, Base: e, Args: []*jpNode{f}}
		default:
			return e, nil
		}
	}
}

// Evaluation.

type jpEval struct {
	strict bool
	root   types.JSON
	vars   types.JSON
	hasVar bool
}

// jpBool is a predicate's three-valued result.
type jpBool uint8

const (
	jpFalse jpBool = iota
	jpTrue
	jpUnknown
)

func errJSONPath(code, format string, args ...any) error {
	return pgerror.New(code, format, args...)
}

// eval returns the sequence of items e yields with @ = cur; last is the
// last index of the innermost array being subscripted.
func (ev *jpEval) eval(e *jpNode, cur types.JSON, last int) ([]types.JSON, error) {
	switch e.Kind {
	case jpRoot:
		return []types.JSON{ev.root}, nil
	case jpCurrent:
		return []types.JSON{cur}, nil
	case jpVar:
		if !ev.hasVar {
			return nil, errJSONPath(pgerrcode.UndefinedObject, "could not find jsonpath variable \"%s\"", e.Str)
		}
		v, ok := ev.vars.FetchKey(e.Str)
		if !ok {
			return nil, errJSONPath(pgerrcode.UndefinedObject, "could not find jsonpath variable \"%s\"", e.Str)
		}
		return []types.JSON{v}, nil
	case jpLiteral:
		return []types.JSON{e.Lit}, nil
	case jpLast:
		if last < -1 {
			return nil, errJSONPath(pgerrcode.SyntaxError, "LAST is allowed only in array subscripts")
		}
		return []types.JSON{types.JSONNumberValue(apd.New(int64(last), 0))}, nil
	case jpBinary, jpNot, jpExists, jpIsUnknown:
		if isArith(e.Op) && e.Kind == jpBinary {
			return ev.arith(e, cur, last)
		}
		b, err := ev.pred(e, cur, last)
		if err != nil {
			return nil, err
		}
		if b == jpUnknown {
			return []types.JSON{types.JSONNullValue}, nil
		}
		return []types.JSON{types.JSONBoolValue(b == jpTrue)}, nil
	case jpNeg:
		items, err := ev.eval(e.Args[0], cur, last)
		if err != nil {
			return nil, err
		}
		out := make([]types.JSON, 0, len(items))
		for _, it := range ev.unwrap(items) {
			if it.Kind != types.JSONNumber {
				return nil, errJSONPath("22038", "operand of unary jsonpath operator %s is not a numeric value", e.Op)
			}
			if e.Op == "-" {
				d := new(apd.Decimal).Neg(it.Num)
				it = types.JSONNumberValue(d)
			}
			out = append(out, it)
		}
		return out, nil
	}
	base, err := ev.eval(e.Base, cur, last)
	if err != nil {
		return nil, err
	}
	var out []types.JSON
	for _, b := range base {
		items, err := ev.step(e, b, cur, last)
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
	}
	return out, nil
}

// unwrap replaces arrays by their elements in lax mode.
func (ev *jpEval) unwrap(items []types.JSON) []types.JSON {
	if ev.strict {
		return items
	}
	var out []types.JSON
	for _, it := range items {
		if it.Kind == types.JSONArray {
			out = append(out, it.Elems...)
		} else {
			out = append(out, it)
		}
	}
	return out
}

// unwrap is lax mode's automatic unwrapping: an array given to an accessor
// or method that wants an object or a scalar is replaced by its elements,
// each given to f, and f's results are concatenated.
func unwrap(b types.JSON, f func(el types.JSON) ([]types.JSON, error)) ([]types.JSON, error) {
	var out []types.JSON
	for _, el := range b.Elems {
		items, err := f(el)
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
	}
	return out, nil
}

// step applies accessor e to one item b.
func (ev *jpEval) step(e *jpNode, b types.JSON, cur types.JSON, last int) ([]types.JSON, error) {
	switch e.Kind {
	case jpKey:
		if b.Kind == types.JSONArray && !ev.strict {
			return unwrap(b, func(el types.JSON) ([]types.JSON, error) { return ev.step(e, el, cur, last) })
		}
		if b.Kind != types.JSONObject {
			if ev.strict {
				return nil, errJSONPath("2203A", "jsonpath member accessor can only be applied to an object")
			}
			return nil, nil
		}
		v, ok := b.FetchKey(e.Str)
		if !ok {
			if ev.strict {
				return nil, errJSONPath("2203A", "JSON object does not contain key \"%s\"", e.Str)
			}
			return nil, nil
		}
		return []types.JSON{v}, nil
	case jpAnyKey:
		if b.Kind == types.JSONArray && !ev.strict {
			return unwrap(b, func(el types.JSON) ([]types.JSON, error) { return ev.step(e, el, cur, last) })
		}
		if b.Kind != types.JSONObject {
			if ev.strict {
				return nil, errJSONPath("2203C", "jsonpath wildcard member accessor can only be applied to an object")
			}
			return nil, nil
		}
		out := make([]types.JSON, len(b.Pairs))
		for i, p := range b.Pairs {
			out[i] = p.Value
		}
		return out, nil
	case jpAnyIndex:
		if b.Kind != types.JSONArray {
			if ev.strict {
				return nil, errJSONPath("22039", "jsonpath wildcard array accessor can only be applied to an array")
			}
			return []types.JSON{b}, nil
		}
		return b.Elems, nil
	case jpIndex:
		elems := b.Elems
		if b.Kind != types.JSONArray {
			if ev.strict {
				return nil, errJSONPath("22039", "jsonpath array accessor can only be applied to an array")
			}
			elems = []types.JSON{b}
		}
		var out []types.JSON
		for _, s := range e.Subs {
			from, err := ev.index(s[0], cur, len(elems)-1)
			if err != nil {
				return nil, err
			}
			to := from
			if s[1] != nil {
				if to, err = ev.index(s[1], cur, len(elems)-1); err != nil {
					return nil, err
				}
			}
			if from < 0 || to >= len(elems) || from > to {
				if ev.strict {
					return nil, errJSONPath("22033", "jsonpath array subscript is out of bounds")
				}
				from, to = max(from, 0), min(to, len(elems)-1)
			}
			for i := from; i <= to; i++ {
				out = append(out, elems[i])
			}
		}
		return out, nil
	case jpFilter:
		candidates := []types.JSON{b}
		if b.Kind == types.JSONArray && !ev.strict {
			candidates = b.Elems
		}
		var out []types.JSON
		for _, c := range candidates {
			r, err := ev.pred(e.Args[0], c, last)
			if err != nil {
				return nil, err
			}
			if r == jpTrue {
				out = append(out, c)
			}
		}
		return out, nil
	case jpMethod:
		return ev.method(e.Str, b)
	}
	return nil, errJSONPath(pgerrcode.InternalError, "jsonpath: unexpected node %d", e.Kind)
}

func (ev *jpEval) index(e *jpNode, cur types.JSON, last int) (int, error) {
	items, err := ev.eval(e, cur, last)
	if err != nil {
		return 0, err
	}
	if len(items) != 1 || items[0].Kind != types.JSONNumber {
		return 0, errJSONPath("22033", "jsonpath array subscript is not a single numeric value")
	}
	i, err := items[0].Num.Int64()
	if err != nil {
		var t apd.Decimal
		if _, err := apd.BaseContext.RoundToIntegralValue(&t, items[0].Num); err != nil {
			return 0, err
		}
		if i, err = t.Int64(); err != nil {
			return 0, errJSONPath("22033", "jsonpath array subscript is out of integer range")
		}
	}
	return int(i), nil
}

func (ev *jpEval) method(name string, b types.JSON) ([]types.JSON, error) {
	if name != "size" && name != "type" && b.Kind == types.JSONArray && !ev.strict {
		return unwrap(b, func(el types.JSON) ([]types.JSON, error) { return ev.method(name, el) })
	}
	switch name {
	case "type":
		return []types.JSON{types.JSONStringValue(b.TypeOf())}, nil
	case "size":
		n := int64(1)
		if b.Kind == types.JSONArray {
			n = int64(len(b.Elems))
		} else if ev.strict {
			return nil, errJSONPath("22039", "jsonpath item method .size() can only be applied to an array")
		}
		return []types.JSON{types.JSONNumberValue(apd.New(n, 0))}, nil
	}
	var d *apd.Decimal
	switch b.Kind {
	case types.JSONNumber:
		d = b.Num
	case types.JSONString:
		if name != "double" {
			break
		}
		x, _, err := apd.NewFromString(strings.TrimSpace(b.Str))
		if err != nil || x.Form != apd.Finite {
			return nil, errJSONPath("22036", "string argument of jsonpath item method .%s() is not a valid representation of a double precision number", name)
		}
		d = x
	}
	if d == nil {
		return nil, errJSONPath("22036", "jsonpath item method .%s() can only be applied to a numeric value", name)
	}
	r := new(apd.Decimal)
	var err error
	switch name {
	case "double":
		f, _ := d.Float64()
		_, err = r.SetFloat64(f)
	case "abs":
		r.Abs(d)
	case "floor":
		_, err = apd.BaseContext.Floor(r, d)
	case "ceiling":
		_, err = apd.BaseContext.Ceil(r, d)
	}
	if err != nil {
		return nil, err
	}
	return []types.JSON{types.JSONNumberValue(r)}, nil
}

func isArith(op string) bool { return strings.Contains("+-*/%", op) && len(op) == 1 }

func (ev *jpEval) arith(e *jpNode, cur types.JSON, last int) ([]types.JSON, error) {
	var ds [2]*apd.Decimal
	for i, side := range []string{"left", "right"} {
		items, err := ev.eval(e.Args[i], cur, last)
		if err != nil {
			return nil, err
		}
		items = ev.unwrap(items)
		if len(items) != 1 || items[0].Kind != types.JSONNumber {
			return nil, errJSONPath("22038", "%s operand of jsonpath operator %s is not a single numeric value", side, e.Op)
		}
		ds[i] = items[0].Num
	}
	r := new(apd.Decimal)
	ctx := apd.BaseContext.WithPrecision(40)
	var err error
	switch e.Op {
	case "+":
		_, err = ctx.Add(r, ds[0], ds[1])
	case "-":
		_, err = ctx.Sub(r, ds[0], ds[1])
	case "*":
		_, err = ctx.Mul(r, ds[0], ds[1])
	case "/", "%":
		if ds[1].IsZero() {
			return nil, errJSONPath(pgerrcode.DivisionByZero, "division by zero")
		}
		if e.Op == "/" {
			_, err = ctx.Quo(r, ds[0], ds[1])
			r.Reduce(r)
		} else {
			_, err = ctx.Rem(r, ds[0], ds[1])
		}
	}
	if err != nil {
		return nil, err
	}
	return []types.JSON{types.JSONNumberValue(r)}, nil
}

// pred evaluates a predicate. Errors inside comparisons and exists are
// unknown, as SQL/JSON says.
func (ev *jpEval) pred(e *jpNode, cur types.JSON, last int) (jpBool, error) {
	switch e.Kind {
	case jpNot:
		r, err := ev.pred(e.Args[0], cur, last)
		if err != nil || r == jpUnknown {
			return r, err
		}
		return 1 - r, nil
	case jpIsUnknown:
		r, err := ev.pred(e.Args[0], cur, last)
		if err != nil {
			return jpFalse, err
		}
		if r == jpUnknown {
			return jpTrue, nil
		}
		return jpFalse, nil
	case jpExists:
		items, err := ev.eval(e.Args[0], cur, last)
		if err != nil {
			return jpUnknown, nil
		}
		if len(items) > 0 {
			return jpTrue, nil
		}
		return jpFalse, nil
	case jpBinary:
		switch e.Op {
		case "&&", "||":
			l, err := ev.pred(e.Args[0], cur, last)
			if err != nil {
				return jpFalse, err
			}
			if e.Op == "&&" && l == jpFalse || e.Op == "||" && l == jpTrue {
				return l, nil
			}
			r, err := ev.pred(e.Args[1], cur, last)
			if err != nil {
				return jpFalse, err
			}
			if e.Op == "&&" && r == jpFalse || e.Op == "||" && r == jpTrue {
				return r, nil
			}
			if l == jpUnknown || r == jpUnknown {
				return jpUnknown, nil
			}
			return r, nil
		case "==", "!=", "<>", "<", "<=", ">", ">=":
			return ev.compare(e, cur, last), nil
		}
	}
	// A path used as a predicate (jsonb_path_match): its single boolean.
	items, err := ev.eval(e, cur, last)
	if err != nil {
		return jpFalse, err
	}
	if len(items) == 1 {
		switch items[0].Kind {
		case types.JSONBool:
			if items[0].Bool {
				return jpTrue, nil
			}
			return jpFalse, nil
		case types.JSONNull:
			return jpUnknown, nil
		}
	}
	return jpFalse, errJSONPath("22038", "single boolean result is expected")
}

// compare is true when some pair of the sides' items compares true;
// unknown when a pair cannot be compared (different kinds, or an error)
// and none is true (lax) or at the first such pair (strict).
func (ev *jpEval) compare(e *jpNode, cur types.JSON, last int) jpBool {
	ls, err := ev.eval(e.Args[0], cur, last)
	if err != nil {
		return jpUnknown
	}
	rs, err := ev.eval(e.Args[1], cur, last)
	if err != nil {
		return jpUnknown
	}
	ls, rs = ev.unwrap(ls), ev.unwrap(rs)
	found, unknown := false, false
	for _, l := range ls {
		for _, r := range rs {
			c, ok := jpCompareItems(l, r)
			if !ok {
				unknown = true
				if ev.strict {
					return jpUnknown
				}
				continue
			}
			var t bool
			switch e.Op {
			case "==":
				t = c == 0
			case "!=", "<>":
				t = c != 0
			case "<":
				t = c < 0
			case "<=":
				t = c <= 0
			case ">":
				t = c > 0
			case ">=":
				t = c >= 0
			}
			if t {
				found = true
				if !ev.strict {
					return jpTrue
				}
			}
		}
	}
	switch {
	case found:
		return jpTrue
	case unknown:
		return jpUnknown
	}
	return jpFalse
}

// jpCompareItems compares two scalars of one kind (null equals null and
// only null); arrays, objects and mixed kinds do not compare.
func jpCompareItems(a, b types.JSON) (int, bool) {
	if a.Kind == types.JSONNull || b.Kind == types.JSONNull {
		if a.Kind == b.Kind {
			return 0, true
		}
		return 1, true // null is only equal to null; != holds
	}
	if a.Kind != b.Kind {
		return 0, false
	}
	switch a.Kind {
	case types.JSONNumber:
		return a.Num.Cmp(b.Num), true
	case types.JSONString:
		return strings.Compare(a.Str, b.Str), true
	case types.JSONBool:
		return compareBools(a.Bool, b.Bool), true
	}
	return 0, false
}

func compareBools(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// runJSONPath evaluates path over target for the jsonb_path_* functions:
// args are (target, path[, vars[, silent]]). With silent, an evaluation
// error (a missing key in strict mode, a type error) is not raised:
// failed reports it, for the functions that then return NULL.
func runJSONPath(a []types.Datum) (items []types.JSON, failed bool, err error) {
	jp, err := parseJSONPath(str(a[1]))
	if err != nil {
		return nil, false, err
	}
	ev := &jpEval{strict: jp.strict, root: jsonArg(a[0])}
	if len(a) > 2 && !types.IsNull(a[2]) {
		ev.vars, ev.hasVar = jsonArg(a[2]), true
		if ev.vars.Kind != types.JSONObject {
			return nil, false, errJSON("\"vars\" argument is not an object").
				WithDetail("Jsonpath parameters should be encoded as key-value pairs of \"vars\" object.")
		}
	}
	silent := len(a) > 3 && !types.IsNull(a[3]) && bool(a[3].(types.DBool))
	items, err = ev.eval(jp.expr, ev.root, -2)
	if err != nil && silent {
		return nil, true, nil
	}
	return items, false, err
}

func init() {
	jb, text, b := types.JSONB, types.Text, types.Bool
	argSets := [][]*types.T{{jb, text}, {jb, text, jb}, {jb, text, jb, b}}
	// The _tz variants differ only in allowing time-zone-dependent
	// datetime() comparisons, which this subset does not have.
	for _, args := range argSets {
		for _, sfx := range []string{"", "_tz"} {
			registerJSONPathFns(sfx, args)
		}
	}
	registerBinary("@?", Overload{Args: []*types.T{jb, text}, Return: Fixed(b), Strict: true,
		Fn: func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
			return pathExists(ctx, []types.Datum{a[0], a[1], types.DNull, types.DBool(true)})
		}})
	registerBinary("@@", Overload{Args: []*types.T{jb, text}, Return: Fixed(b), Strict: true,
		Fn: func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
			return pathMatch(ctx, []types.Datum{a[0], a[1], types.DNull, types.DBool(true)})
		}})
}

func pathExists(_ EvalContext, a []types.Datum) (types.Datum, error) {
	items, failed, err := runJSONPath(a)
	if err != nil || failed {
		return types.DNull, err
	}
	return types.DBool(len(items) > 0), nil
}

func pathMatch(_ EvalContext, a []types.Datum) (types.Datum, error) {
	items, failed, err := runJSONPath(a)
	if err != nil || failed {
		return types.DNull, err
	}
	if len(items) == 1 {
		switch items[0].Kind {
		case types.JSONBool:
			return types.DBool(items[0].Bool), nil
		case types.JSONNull:
			return types.DNull, nil
		}
	}
	if len(a) > 3 && !types.IsNull(a[3]) && bool(a[3].(types.DBool)) {
		return types.DNull, nil
	}
	return nil, errJSONPath("22038", "single boolean result is expected")
}

// registerJSONPathFns registers the jsonb_path_* functions (with suffix
// sfx) for one argument list.
func registerJSONPathFns(sfx string, args []*types.T) {
	jb, b := types.JSONB, types.Bool
	registerFn("jsonb_path_query"+sfx, Overload{Args: args, Class: Generator, Strict: true, Return: Fixed(jb),
		Columns: func([]*types.T) []Column { return []Column{{"jsonb_path_query" + sfx, jb}} },
		SRF: func(_ EvalContext, a []types.Datum) (RowIter, error) {
			items, _, err := runJSONPath(a)
			rows := make([][]types.Datum, len(items))
			for i, it := range items {
				rows[i] = []types.Datum{jsonOut(it)}
			}
			return &sliceIter{rows: rows}, err
		}})
	registerFn("jsonb_path_query_array"+sfx, Overload{Args: args, Return: Fixed(jb), Strict: true,
		Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			items, _, err := runJSONPath(a)
			return jsonOut(types.JSONArrayValue(items...)), err
		}})
	registerFn("jsonb_path_query_first"+sfx, Overload{Args: args, Return: Fixed(jb), Strict: true,
		Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			items, _, err := runJSONPath(a)
			if err != nil || len(items) == 0 {
				return types.DNull, err
			}
			return jsonOut(items[0]), nil
		}})
	registerFn("jsonb_path_exists"+sfx, Overload{Args: args, Return: Fixed(b), Strict: true, Fn: pathExists})
	registerFn("jsonb_path_match"+sfx, Overload{Args: args, Return: Fixed(b), Strict: true, Fn: pathMatch})
}
