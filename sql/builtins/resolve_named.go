package builtins

import (
	"strings"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// ResolveFuncNamed resolves a call whose arguments may be named
// (make_interval(days => 3)): names[i] is the i-th argument's name, ""
// for a positional one; positional arguments come first. Only overloads
// declaring ArgNames take named calls, as in Postgres only functions with
// proargnames do. A parameter no argument supplies takes its default
// (Overload.Defaults), so it must have one. The result's ArgTypes and
// Order are per parameter: the binder builds the positional argument
// list from them. With no names it is ResolveFunc.
func ResolveFuncNamed(name string, args []*types.T, names []string) (*Resolved, error) {
	named := false
	for _, n := range names {
		named = named || n != ""
	}
	if !named {
		return ResolveFunc(name, args)
	}
	name = strings.ToLower(name)
	var hits []*Resolved
	for _, o := range functions[name] {
		order, ok := mapNamedArgs(o, len(args), names)
		if !ok {
			continue
		}
		// Defaults stand as arguments of exactly the parameter's type.
		virt := make([]*types.T, len(o.Args))
		for p, i := range order {
			if i >= 0 {
				virt[p] = args[i]
			} else {
				virt[p] = o.Args[p]
			}
		}
		c, n := resolve([]*Overload{o}, virt, false)
		if n != 1 || c == nil {
			continue
		}
		r, err := finish(c, virt)
		if err != nil {
			return nil, err
		}
		r.Order = order
		hits = append(hits, r)
	}
	switch len(hits) {
	case 0:
		return nil, pgerror.New(pgerrcode.UndefinedFunction, "function %s(%s) does not exist", name, namedTypeList(args, names)).
			WithHint("No function matches the given name and argument types. You might need to add explicit type casts.")
	case 1:
		return hits[0], nil
	}
	return nil, pgerror.New(pgerrcode.AmbiguousFunction, "function %s(%s) is not unique", name, namedTypeList(args, names)).
		WithHint("Could not choose a best candidate function. You might need to add explicit type casts.")
}

// mapNamedArgs gives, for each of o's parameters, the index of the call
// argument supplying it or -1 for its default; false when the call does
// not fit o.
func mapNamedArgs(o *Overload, nargs int, names []string) ([]int, bool) {
	if o.ArgNames == nil || o.Variadic || nargs > len(o.Args) {
		return nil, false
	}
	order := make([]int, len(o.Args))
	for p := range order {
		order[p] = -1
	}
	for i, n := range names {
		p := i
		if n != "" {
			p = -1
			for j, an := range o.ArgNames {
				if an == n {
					p = j
				}
			}
			if p < 0 {
				return nil, false
			}
		}
		if order[p] >= 0 {
			return nil, false
		}
		order[p] = i
	}
	firstDefault := len(o.Args) - len(o.Defaults)
	for p, i := range order {
		if i < 0 && p < firstDefault {
			return nil, false
		}
	}
	return order, true
}

// namedTypeList prints arguments as Postgres's errors do: "days =>
// integer" for named ones.
func namedTypeList(args []*types.T, names []string) string {
	s := make([]string, len(args))
	for i, a := range args {
		s[i] = typeName(a)
		if names[i] != "" {
			s[i] = names[i] + " => " + s[i]
		}
	}
	return strings.Join(s, ", ")
}
