package catalog

import (
	"fmt"
	"strconv"
	"strings"
)

// KindFunction is a user-defined function (CREATE FUNCTION ... LANGUAGE
// sql). Functions live in their schema's relation namespace under a name
// no relation or type can take: the function's name, a NUL byte and its
// input argument types' OIDs (NamespaceName). PostgreSQL identifiers
// never contain NUL, so a table f and a function f coexist as they do in
// PostgreSQL, and overloads f(int) and f(text) are two descriptors whose
// names differ, which the namespace's ConditionalPut keeps unique
// (invariant 5: no two functions of one schema with the same name and
// argument types).
const KindFunction Kind = "function"

// FuncDesc is a SQL function. Its ID doubles as its pg_proc OID.
type FuncDesc struct {
	ID         ID     `json:"id"`
	DatabaseID ID     `json:"database_id"`
	SchemaID   ID     `json:"schema_id"`
	Name       string `json:"name"`
	Version    uint64 `json:"version"`
	Owner      string `json:"owner,omitempty"`
	// Args are the declared parameters in order, input and output
	// (pg_proc.proallargtypes / proargmodes / proargnames).
	Args []FuncArg `json:"args,omitempty"`
	// Return is the result type's OID (pg_proc.prorettype): 2249 (record)
	// for RETURNS TABLE, whose columns are the Args of mode "t".
	Return uint32 `json:"return"`
	// ReturnsSet is RETURNS SETOF / RETURNS TABLE (pg_proc.proretset).
	ReturnsSet bool `json:"returns_set,omitempty"`
	// Volatility is pg_proc.provolatile: "i", "s" or "v".
	Volatility string `json:"volatility"`
	// Parallel is pg_proc.proparallel: "s", "r" or "u".
	Parallel string `json:"parallel"`
	Strict   bool   `json:"strict,omitempty"`
	// SecurityDefiner and LeakProof are stored and shown; a SQL function
	// runs with the caller's privileges either way (docs/sql.md).
	SecurityDefiner bool    `json:"security_definer,omitempty"`
	LeakProof       bool    `json:"leakproof,omitempty"`
	Cost            float64 `json:"cost"`
	Rows            float64 `json:"rows,omitempty"`
	// Body is the function's body: the string of AS '...' (pg_proc.prosrc)
	// or, when SQLBody is set, the SQL-standard body (BEGIN ATOMIC ...
	// END or RETURN expr) as the user wrote it.
	Body    string `json:"body"`
	SQLBody bool   `json:"sql_body,omitempty"`
	// Comment is COMMENT ON FUNCTION's text.
	Comment string `json:"comment,omitempty"`
	// DependsOn lists the relations a SQL-standard body (SQLBody) reads,
	// which PostgreSQL records in pg_depend: pg_dump creates the function
	// after them. A string body records none, as in PostgreSQL.
	DependsOn []ID `json:"depends_on,omitempty"`
}

// FuncArg is one declared parameter.
type FuncArg struct {
	Name string `json:"name,omitempty"`
	Type uint32 `json:"type"`
	// Mode is pg_proc.proargmodes': "i" (IN), "o" (OUT), "b" (INOUT),
	// "v" (VARIADIC) or "t" (a column of RETURNS TABLE).
	Mode string `json:"mode"`
	// Default is the DEFAULT expression's text, "" when none.
	Default string `json:"default,omitempty"`
}

// IsInput reports whether the argument is passed by the caller.
func (a FuncArg) IsInput() bool { return a.Mode == "i" || a.Mode == "b" || a.Mode == "v" }

// InputTypes are the OIDs of the input arguments (pg_proc.proargtypes),
// which identify the function among its overloads.
func (f *FuncDesc) InputTypes() []uint32 {
	var out []uint32
	for _, a := range f.Args {
		if a.IsInput() {
			out = append(out, a.Type)
		}
	}
	return out
}

// NamespaceName is the name under which a function with name and input
// argument types in lives in its schema's namespace (see KindFunction).
func NamespaceName(name string, in []uint32) string {
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte(0)
	for i, o := range in {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(uint64(o), 10))
	}
	return b.String()
}

// IsFunctionEntry reports whether a namespace name is a function's.
func IsFunctionEntry(nsName string) bool { return strings.IndexByte(nsName, 0) >= 0 }

func (f *FuncDesc) DescID() ID                  { return f.ID }
func (f *FuncDesc) DescName() string            { return f.Name }
func (f *FuncDesc) DescVersion() uint64         { return f.Version }
func (f *FuncDesc) DescKind() Kind              { return KindFunction }
func (f *FuncDesc) Parent() (dbID, schemaID ID) { return f.DatabaseID, f.SchemaID }
func (f *FuncDesc) setID(id ID)                 { f.ID = id }
func (f *FuncDesc) setName(n string)            { f.Name = n }
func (f *FuncDesc) setVersion(v uint64)         { f.Version = v }

// Validate checks the function descriptor.
func (f *FuncDesc) Validate() error {
	if err := validateHeader(KindFunction, f.ID, f.Name); err != nil {
		return err
	}
	if strings.IndexByte(f.Name, 0) >= 0 {
		return fmt.Errorf("function name %q contains a NUL byte", f.Name)
	}
	if f.DatabaseID == InvalidID || f.SchemaID == InvalidID {
		return fmt.Errorf("function %q has no database or schema", f.Name)
	}
	if f.Return == 0 {
		return fmt.Errorf("function %q has no return type", f.Name)
	}
	switch f.Volatility {
	case "i", "s", "v":
	default:
		return fmt.Errorf("function %q: volatility %q", f.Name, f.Volatility)
	}
	switch f.Parallel {
	case "s", "r", "u":
	default:
		return fmt.Errorf("function %q: parallel %q", f.Name, f.Parallel)
	}
	for i, a := range f.Args {
		switch a.Mode {
		case "i", "o", "b", "v", "t":
		default:
			return fmt.Errorf("function %q: argument %d has mode %q", f.Name, i+1, a.Mode)
		}
		if a.Type == 0 {
			return fmt.Errorf("function %q: argument %d has no type", f.Name, i+1)
		}
	}
	return nil
}

// nsName is the name d's namespace entry is stored under: its own name,
// or a function's name with its signature (NamespaceName).
func nsName(d Descriptor) string {
	if f, ok := d.(*FuncDesc); ok {
		return NamespaceName(f.Name, f.InputTypes())
	}
	return d.DescName()
}
