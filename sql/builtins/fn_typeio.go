package builtins

import (
	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// Type input and output functions: each type's pair under PostgreSQL's
// names (int4in/int4out, numeric_in/numeric_out, array_in/array_out, ...),
// which pg_type.typinput and typoutput name. Clients read those columns:
// pgjdbc's getTypeInfo tells arrays by typinput = 'array_in'::regproc.
// They are real functions: an input function parses its text as a cast
// from text does (with the type modifier, for the three-argument ones),
// an output function prints its value as a cast to text does. Cairn has
// no cstring type, so text stands in for it in their signatures.

// typeIO names a type's input and output functions; typmod marks the
// input functions PostgreSQL declares as (cstring, oid, integer).
type typeIO struct {
	in, out string
	typmod  bool
}

var typeIONames = map[uint32]typeIO{
	types.Bool.Oid: {"boolin", "boolout", false}, types.Int2.Oid: {"int2in", "int2out", false},
	types.Int4.Oid: {"int4in", "int4out", false}, types.Int8.Oid: {"int8in", "int8out", false},
	types.Float4.Oid: {"float4in", "float4out", false}, types.Float8.Oid: {"float8in", "float8out", false},
	types.Numeric.Oid: {"numeric_in", "numeric_out", true}, types.Text.Oid: {"textin", "textout", false},
	types.VarChar.Oid: {"varcharin", "varcharout", true}, types.BPChar.Oid: {"bpcharin", "bpcharout", true},
	types.Bytea.Oid: {"byteain", "byteaout", false}, types.Date.Oid: {"date_in", "date_out", false},
	types.Time.Oid: {"time_in", "time_out", true}, types.Timestamp.Oid: {"timestamp_in", "timestamp_out", true},
	types.TimestampTZ.Oid: {"timestamptz_in", "timestamptz_out", true},
	types.Interval.Oid:    {"interval_in", "interval_out", true}, types.UUID.Oid: {"uuid_in", "uuid_out", false},
	types.JSONB.Oid: {"jsonb_in", "jsonb_out", false}, types.JSONText.Oid: {"json_in", "json_out", false},
	types.Oid.Oid: {"oidin", "oidout", false}, types.Name.Oid: {"namein", "nameout", false},
	types.Char.Oid: {"charin", "charout", false}, types.RegClass.Oid: {"regclassin", "regclassout", false},
	types.RegType.Oid: {"regtypein", "regtypeout", false}, types.RegProc.Oid: {"regprocin", "regprocout", false},
	types.RegProcedure.Oid: {"regprocedurein", "regprocedureout", false},
	types.RegNamespace.Oid: {"regnamespacein", "regnamespaceout", false},
	types.RegRole.Oid:      {"regrolein", "regroleout", false}, types.Unknown.Oid: {"unknownin", "unknownout", false},
	types.Int2Vector.Oid: {"int2vectorin", "int2vectorout", false},
	types.OidVector.Oid:  {"oidvectorin", "oidvectorout", false},
}

// TypeIOFuncs returns the OIDs of t's input and output functions
// (pg_type.typinput, typoutput), or zeros for a type that has none here.
func TypeIOFuncs(t *types.T) (in, out uint32) {
	io, ok := typeIONames[t.Oid]
	if !ok {
		if t.Family != types.ArrayFamily {
			return 0, 0
		}
		io = typeIO{"array_in", "array_out", true}
	}
	return Lookup(io.in)[0].OID, Lookup(io.out)[0].OID
}

// withTypmod applies an input function's type modifier as
// pg_attribute.atttypmod encodes it (-1: none).
func withTypmod(t *types.T, typmod int64) (*types.T, error) {
	if typmod < 0 {
		return t, nil
	}
	switch t.Family {
	case types.StringFamily:
		if t.Oid == types.VarChar.Oid {
			return types.MakeVarChar(int32(typmod - 4))
		}
		return types.MakeChar(int32(typmod - 4))
	case types.NumericFamily:
		return types.MakeNumeric(int32((typmod-4)>>16), int32((typmod-4)&0xffff))
	case types.TimeFamily, types.TimestampFamily, types.TimestampTZFamily:
		return types.MakeTimestamp(t, int32(typmod))
	}
	return t, nil
}

// arrayOfElem is the array type of the built-in type with OID elem.
func arrayOfElem(elem uint32) (*types.T, error) {
	for _, base := range [][]*types.T{types.Scalars, types.RegTypes} {
		for _, t := range base {
			if t.Oid == elem {
				return types.MakeArray(t)
			}
		}
	}
	return nil, pgerror.New(pgerrcode.UndefinedObject, "type with OID %d does not exist", elem)
}

func init() {
	text, oid, i4 := types.Text, types.Oid, types.Int4
	var all []*types.T
	for _, base := range [][]*types.T{types.Scalars, types.RegTypes, {types.Unknown, types.Int2Vector, types.OidVector}} {
		all = append(all, base...)
	}
	for _, t := range all {
		io := typeIONames[t.Oid]
		if io.in == "" {
			panic("builtins: no input and output functions named for " + t.Name())
		}
		vol := Immutable
		switch t.Family {
		case types.DateFamily, types.TimeFamily, types.TimestampFamily, types.TimestampTZFamily, types.IntervalFamily, types.OidFamily:
			vol = Stable // the session's DateStyle, TimeZone or catalog
		}
		args := []*types.T{text}
		if io.typmod {
			args = []*types.T{text, oid, i4}
		}
		registerFn(io.in, Overload{Args: args, Return: Fixed(t), Strict: true, Volatility: vol,
			Fn: func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
				to := t
				if len(a) == 3 {
					var err error
					if to, err = withTypmod(t, i64(a[2])); err != nil {
						return nil, err
					}
				}
				return types.ParseDatum(typesCtx(ctx), to, str(a[0]))
			}})
		registerFn(io.out, Overload{Args: []*types.T{t}, Return: Fixed(text), Strict: true, Volatility: vol,
			Fn: func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
				return types.DString(types.Format(typesCtx(ctx), t, a[0])), nil
			}})
	}
	// array_in's result type is the array of the element type its second
	// argument names, known only at run time: anyarray, as in PostgreSQL.
	registerFn("array_in", Overload{Args: []*types.T{text, oid, i4}, Return: Fixed(AnyArray), Strict: true,
		Volatility: Stable, Fn: func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
			at, err := arrayOfElem(uint32(a[1].(types.DOid)))
			if err != nil {
				return nil, err
			}
			return types.ParseDatum(typesCtx(ctx), at, str(a[0]))
		}})
	registerFn("array_out", Overload{Args: []*types.T{AnyArray}, Return: Fixed(text), Strict: true, Volatility: Stable,
		Fn: func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
			return types.DString(types.Format(typesCtx(ctx), nil, a[0])), nil
		}})
}
