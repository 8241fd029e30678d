package types

// The files in testdata/ are specifications of Postgres behaviour, checked
// with github.com/cockroachdb/datadriven. Commands:
//
//	parse type=<type> [tz=<zone>]
//	<one input literal per line>
//	----
//	<input> => <Format output> | ERROR <sqlstate>: <message>
//
// reads each line with ParseDatum and prints it back with Format. <type>
// is any name LookupName accepts, with optional (n) or (p,s) modifier.
//
//	cast from=<type> to=<type> [assign] [tz=<zone>]
//	<one literal of type from per line>
//	----
//	<input> => <result> | ERROR ...
//
// parses each line as from, then applies Cast (or AssignmentCast with
// assign) to <to>.
//
//	common [what=<construct>]
//	<comma-separated types per line>
//	----
//	<types> => <type> | ERROR ...
//
// resolves CommonType; castkind prints CastKindOf for "from to" lines.
//
//	jsonb
//	<json> | <op> | <operand>
//	----
//	<line> => <result>
//
// applies one jsonb operator: ->, ->> (an integer operand indexes arrays),
// #>, #>> (operand is a comma-separated path), @>, ?, typeof, cmp
// (Compare's sign against the operand).
//
//	name
//	<type per line>
//	----
//	<type> => <Name()> oid=<Oid> typmod=<Typmod()>

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/cairn-db/cairn/sql/pgerror"
)

func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			ctx := &Context{}
			if d.HasArg("tz") {
				var tz string
				d.ScanArgs(t, "tz", &tz)
				loc, err := time.LoadLocation(tz)
				if err != nil {
					t.Fatal(err)
				}
				ctx.Location = loc
			}
			var out strings.Builder
			for _, line := range strings.Split(d.Input, "\n") {
				if line == "" {
					continue
				}
				fmt.Fprintf(&out, "%s => %s\n", line, runLine(t, d, ctx, line))
			}
			return out.String()
		})
	})
}

func runLine(t *testing.T, d *datadriven.TestData, ctx *Context, line string) string {
	switch d.Cmd {
	case "parse":
		typ := argType(t, d, "type")
		v, err := ParseDatum(ctx, typ, line)
		if err != nil {
			return errString(err)
		}
		return Format(ctx, typ, v)
	case "cast":
		from, to := argType(t, d, "from"), argType(t, d, "to")
		v, err := ParseDatum(ctx, from, line)
		if err != nil {
			return "input " + errString(err)
		}
		cast := Cast
		if d.HasArg("assign") {
			cast = AssignmentCast
		}
		r, err := cast(ctx, v, from, to)
		if err != nil {
			return errString(err)
		}
		return Format(ctx, to, r)
	case "common":
		var what string
		if d.HasArg("what") {
			d.ScanArgs(t, "what", &what)
		}
		var ts []*T
		for _, name := range strings.Split(line, ",") {
			ts = append(ts, mustType(t, strings.TrimSpace(name)))
		}
		r, err := CommonType(what, ts...)
		if err != nil {
			return errString(err)
		}
		return r.Name()
	case "castkind":
		f := strings.Fields(line)
		return [...]string{"none", "explicit", "assignment", "implicit"}[CastKindOf(mustType(t, f[0]), mustType(t, f[1]))]
	case "name":
		typ := mustType(t, line)
		return fmt.Sprintf("%s oid=%d typmod=%d pgname=%s size=%d", typ.Name(), typ.Oid, typ.Typmod(), typ.PGName(), typ.Size())
	case "jsonb":
		return runJSON(t, line)
	}
	t.Fatalf("unknown command %s", d.Cmd)
	return ""
}

func runJSON(t *testing.T, line string) string {
	parts := strings.Split(line, " | ")
	j, err := ParseJSON(parts[0])
	if err != nil {
		return errString(err)
	}
	if len(parts) == 1 {
		return j.String()
	}
	op, arg := strings.TrimSpace(parts[1]), ""
	if len(parts) > 2 {
		arg = parts[2]
	}
	show := func(r JSON, ok bool) string {
		if !ok {
			return "NULL"
		}
		return r.String()
	}
	showText := func(r JSON, ok bool) string {
		if !ok {
			return "NULL"
		}
		s, ok := r.AsText()
		if !ok {
			return "NULL"
		}
		return s
	}
	fetch := func() (JSON, bool) {
		if i, err := strconv.ParseInt(arg, 10, 64); err == nil {
			return j.FetchIndex(i)
		}
		return j.FetchKey(arg)
	}
	var path []string
	if arg != "" {
		path = strings.Split(arg, ",")
	}
	switch op {
	case "->":
		return show(fetch())
	case "->>":
		return showText(fetch())
	case "#>":
		return show(j.FetchPath(path))
	case "#>>":
		return showText(j.FetchPath(path))
	case "@>", "cmp":
		o, err := ParseJSON(arg)
		if err != nil {
			return errString(err)
		}
		if op == "cmp" {
			return strconv.Itoa(j.Compare(o))
		}
		return strconv.FormatBool(j.Contains(o))
	case "?":
		return strconv.FormatBool(j.Exists(arg))
	case "typeof":
		return j.TypeOf()
	}
	t.Fatalf("unknown jsonb op %q", op)
	return ""
}

func errString(err error) string {
	e := pgerror.Flatten(err)
	s := "ERROR " + e.Code + ": " + e.Message
	if e.Detail != "" {
		s += " (" + e.Detail + ")"
	}
	return s
}

func argType(t *testing.T, d *datadriven.TestData, key string) *T {
	if !d.HasArg(key) {
		return Text
	}
	var name string
	d.ScanArgs(t, key, &name)
	return mustType(t, name)
}

var modRE = regexp.MustCompile(`^([a-z0-9_ ]+?)\((\d+)(?:,(-?\d+))?\)(\[\])?$`)

// mustType parses a type name with an optional modifier, e.g.
// varchar(3), numeric(5,2), timestamptz(0), char(2)[].
func mustType(t *testing.T, name string) *T {
	name = strings.ReplaceAll(name, "_", " ")
	// The files spell SQL's unquoted char, which the parser turns into
	// bpchar; LookupName's "char" is the quoted single-byte "char".
	if name == "char" || strings.HasPrefix(name, "char(") {
		name = "character" + name[len("char"):]
	}
	m := modRE.FindStringSubmatch(name)
	if m == nil {
		typ, err := LookupName(name)
		if err != nil {
			t.Fatal(err)
		}
		return typ
	}
	base, err := LookupName(m[1])
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(m[2])
	var typ *T
	switch base.Family {
	case StringFamily:
		if base.Oid == BPChar.Oid {
			typ, err = MakeChar(int32(n))
		} else {
			typ, err = MakeVarChar(int32(n))
		}
	case NumericFamily:
		s, _ := strconv.Atoi(m[3])
		typ, err = MakeNumeric(int32(n), int32(s))
	default:
		typ, err = MakeTimestamp(base, int32(n))
	}
	if err != nil {
		t.Fatal(err)
	}
	if m[4] != "" {
		return MustArray(typ)
	}
	return typ
}
