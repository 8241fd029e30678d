package sem

// Walk calls visit for e and, while visit returns true, for each of its
// subexpressions, in evaluation order.
func Walk(e Expr, visit func(Expr) bool) {
	if e == nil || !visit(e) {
		return
	}
	for _, c := range children(e) {
		Walk(c, visit)
	}
}

// Aggregates returns the aggregate and window calls in e, outermost first,
// for the binder to extract and replace (by Map) with AggRef/WindowRef.
func Aggregates(e Expr) []*AggCall {
	var out []*AggCall
	Walk(e, func(x Expr) bool {
		if a, ok := x.(*AggCall); ok {
			out = append(out, a)
			return false
		}
		return true
	})
	return out
}

// Map rebuilds e bottom-up: f sees each node after its children were
// mapped, and returns the node to use in its place (itself to keep it).
// Unchanged subtrees are shared, never copied (invariant 1).
func Map(e Expr, f func(Expr) Expr) Expr {
	if e == nil {
		return nil
	}
	kids := children(e)
	var changed []Expr
	for i, c := range kids {
		m := Map(c, f)
		if m != c && changed == nil {
			changed = append([]Expr(nil), kids...)
		}
		if changed != nil {
			changed[i] = m
		}
	}
	if changed != nil {
		e = withChildren(e, changed)
	}
	return f(e)
}

// children lists a node's subexpressions in evaluation order; withChildren
// is its inverse.
func children(e Expr) []Expr {
	if k, ok := arrayChildren(e); ok {
		return k
	}
	switch v := e.(type) {
	case *FuncCall:
		return v.Args
	case *BinOp:
		return []Expr{v.Left, v.Right}
	case *UnaryOp:
		return []Expr{v.Arg}
	case *Cmp:
		return []Expr{v.Left, v.Right}
	case *And:
		return v.Args
	case *Or:
		return v.Args
	case *Not:
		return []Expr{v.Arg}
	case *IsNull:
		return []Expr{v.Arg}
	case *BoolTest:
		return []Expr{v.Arg}
	case *Case:
		var out []Expr
		if v.Operand != nil {
			out = append(out, v.Operand)
		}
		for _, w := range v.Whens {
			out = append(out, w.Cond, w.Result)
		}
		if v.Else != nil {
			out = append(out, v.Else)
		}
		return out
	case *Coalesce:
		return v.Args
	case *NullIf:
		return []Expr{v.Left, v.Right}
	case *MinMax:
		return v.Args
	case *Cast:
		return []Expr{v.Expr}
	case *DomainCoerce:
		return []Expr{v.Arg}
	case *In:
		return append([]Expr{v.Left}, v.List...)
	case *AnyAll:
		return []Expr{v.Left, v.Array}
	case *RowCmp:
		return append(append([]Expr(nil), v.Left...), v.Right...)
	case *ArrayExpr:
		return v.Elems
	case *Subscript:
		return []Expr{v.Array, v.Index}
	case *RowCons:
		return v.Args
	case *FieldSelect:
		return []Expr{v.Arg}
	case *SubqueryRef:
		if v.Left != nil {
			return []Expr{v.Left}
		}
	case *AggCall:
		if v.Filter != nil {
			return append(append([]Expr(nil), v.Args...), v.Filter)
		}
		return v.Args
	}
	return nil
}

func withChildren(e Expr, k []Expr) Expr {
	if x, ok := arrayWithChildren(e, k); ok {
		return x
	}
	switch v := e.(type) {
	case *FuncCall:
		return &FuncCall{Fn: v.Fn, Args: k}
	case *BinOp:
		return &BinOp{Op: v.Op, Fn: v.Fn, Left: k[0], Right: k[1]}
	case *UnaryOp:
		return &UnaryOp{Op: v.Op, Fn: v.Fn, Arg: k[0]}
	case *Cmp:
		return &Cmp{Op: v.Op, Fn: v.Fn, Left: k[0], Right: k[1]}
	case *And:
		return &And{Args: k}
	case *Or:
		return &Or{Args: k}
	case *Not:
		return &Not{Arg: k[0]}
	case *IsNull:
		return &IsNull{Arg: k[0], Negated: v.Negated}
	case *BoolTest:
		return &BoolTest{Kind: v.Kind, Arg: k[0]}
	case *Case:
		c := &Case{T: v.T, Whens: make([]When, len(v.Whens))}
		if v.Operand != nil {
			c.Operand, k = k[0], k[1:]
		}
		for i, w := range v.Whens {
			w.Cond, w.Result = k[0], k[1]
			c.Whens[i], k = w, k[2:]
		}
		if v.Else != nil {
			c.Else = k[0]
		}
		return c
	case *Coalesce:
		return &Coalesce{Args: k, T: v.T}
	case *NullIf:
		return &NullIf{Left: k[0], Right: k[1], Eq: v.Eq}
	case *MinMax:
		return &MinMax{Greatest: v.Greatest, Args: k, T: v.T}
	case *Cast:
		return &Cast{Expr: k[0], To: v.To, Context: v.Context}
	case *DomainCoerce:
		return &DomainCoerce{Arg: k[0], T: v.T, Checks: v.Checks, Explicit: v.Explicit, Display: v.Display}
	case *In:
		return &In{Left: k[0], List: k[1:], Eq: v.Eq, Negated: v.Negated}
	case *AnyAll:
		return &AnyAll{Op: v.Op, Fn: v.Fn, Left: k[0], Array: k[1], All: v.All}
	case *RowCmp:
		n := len(v.Left)
		return &RowCmp{Op: v.Op, Fns: v.Fns, Left: k[:n:n], Right: k[n:]}
	case *ArrayExpr:
		return &ArrayExpr{Elems: k, T: v.T}
	case *Subscript:
		return &Subscript{Array: k[0], Index: k[1]}
	case *RowCons:
		return &RowCons{Args: k, T: v.T}
	case *FieldSelect:
		return &FieldSelect{Arg: k[0], Index: v.Index}
	case *SubqueryRef:
		c := *v
		c.Left = k[0]
		return &c
	case *AggCall:
		c := *v
		if v.Filter != nil {
			c.Args, c.Filter = k[:len(k)-1:len(k)-1], k[len(k)-1]
		} else {
			c.Args = k
		}
		return &c
	}
	return e
}
