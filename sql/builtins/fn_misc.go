package builtins

import (
	"crypto/rand"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// Version is Cairn's release, shown by version().
var Version = "0.1.0"

// ServerVersion is the PostgreSQL release Cairn answers as (server_version,
// version()); drivers and tools parse the leading "PostgreSQL 15.x".
const ServerVersion = "15.18"

// VersionString is what version() returns.
func VersionString() string {
	return "PostgreSQL " + ServerVersion + " on x86_64-pc-linux-gnu, compiled by Go (Cairn " + Version + "), 64-bit"
}

func info(name string, ret *types.T, f func(s SessionInfo) types.Datum) {
	registerFn(name, Overload{Return: Fixed(ret), Volatility: Stable, Fn: func(ctx EvalContext, _ []types.Datum) (types.Datum, error) {
		return f(ctx.Session()), nil
	}})
}

func errNoAdvisoryLocks() error {
	return pgerror.New(pgerrcode.ObjectNotInPrerequisiteState, "advisory locks are not available in this context")
}

// AdvisoryKeyOf is the lock key of pg_advisory_*(bigint) (one argument) or
// pg_advisory_*(int, int) (two), kept apart as Postgres keeps them.
func AdvisoryKeyOf(args []types.Datum) AdvisoryKey {
	if len(args) == 1 {
		return AdvisoryKey{Key: i64(args[0])}
	}
	return AdvisoryKey{Key: i64(args[0])<<32 | int64(uint32(i64(args[1]))), TwoInt: true}
}

func init() {
	// pg_typeof names its argument's type: the body is bound to the
	// resolved type, and a NULL argument still has one (not Strict); an
	// untyped literal's is unknown, as in Postgres.
	registerFn("pg_typeof", Overload{Args: []*types.T{Any}, Return: Fixed(types.RegType), Volatility: Stable,
		Bind: func(at, call []*types.T) Fn {
			oid := types.DOid(types.TypeOID(at[0]))
			if call[0].Family == types.UnknownFamily {
				oid = types.DOid(types.Unknown.Oid)
			}
			return func(EvalContext, []types.Datum) (types.Datum, error) { return oid, nil }
		}})
	registerFn("version", Overload{Return: Fixed(types.Text), Volatility: Stable, Fn: func(EvalContext, []types.Datum) (types.Datum, error) {
		return types.DString(VersionString()), nil
	}})
	name := types.Name // these return PostgreSQL's name type, as there
	info("current_database", name, func(s SessionInfo) types.Datum { return types.DString(s.Database) })
	info("current_catalog", name, func(s SessionInfo) types.Datum { return types.DString(s.Database) })
	info("current_user", name, func(s SessionInfo) types.Datum { return types.DString(s.User) })
	info("current_role", name, func(s SessionInfo) types.Datum { return types.DString(s.User) })
	info("user", name, func(s SessionInfo) types.Datum { return types.DString(s.User) })
	info("session_user", name, func(s SessionInfo) types.Datum { return types.DString(s.SessionUser) })
	// current_schema and current_schemas show only the search path's
	// schemas that exist, as PostgreSQL's do ("$user" names none usually).
	registerFn("current_schema", Overload{Return: Fixed(name), Volatility: Stable,
		Fn: func(ctx EvalContext, _ []types.Datum) (types.Datum, error) {
			for _, sc := range existingSchemas(ctx, ctx.Session().SearchPath) {
				return types.DString(sc), nil
			}
			return types.DNull, nil
		}})
	registerFn("current_schemas", Overload{Args: []*types.T{types.Bool}, Return: Fixed(types.MustArray(name)), Volatility: Stable, Strict: true,
		Fn: func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
			out := types.NewArray(name)
			path := existingSchemas(ctx, ctx.Session().SearchPath)
			if bool(a[0].(types.DBool)) && !containsString(path, "pg_catalog") {
				out.Elems = append(out.Elems, types.DString("pg_catalog"))
			}
			for _, s := range path {
				out.Elems = append(out.Elems, types.DString(s))
			}
			return out, nil
		}})
	info("pg_backend_pid", types.Int4, func(s SessionInfo) types.Datum { return types.DInt(s.BackendPID) })
	info("inet_server_port", types.Int4, func(s SessionInfo) types.Datum {
		if s.ServerPort == 0 {
			return types.DNull
		}
		return types.DInt(s.ServerPort)
	})
	registerFn("gen_random_uuid", Overload{Return: Fixed(types.UUID), Volatility: Volatile, Fn: func(EvalContext, []types.Datum) (types.Datum, error) {
		u, err := uuid.NewRandomFromReader(rand.Reader)
		if err != nil {
			return nil, errInternal("gen_random_uuid: %w", err)
		}
		return types.DUUID(u), nil
	}})
	registerFn("num_nulls", Overload{Args: []*types.T{Any}, Variadic: true, Return: Fixed(types.Int4), Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		n := 0
		for _, d := range a {
			if types.IsNull(d) {
				n++
			}
		}
		return types.DInt(n), nil
	}})
	registerFn("num_nonnulls", Overload{Args: []*types.T{Any}, Variadic: true, Return: Fixed(types.Int4), Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		n := 0
		for _, d := range a {
			if !types.IsNull(d) {
				n++
			}
		}
		return types.DInt(n), nil
	}})

	// Advisory locks: the key arithmetic is here, the lock table is the
	// session's (EvalContext.AdvisoryLocks).
	for _, variant := range []struct {
		name               string
		shared, xact, wait bool
		unlock             bool
	}{
		{"pg_advisory_lock", false, false, true, false},
		{"pg_advisory_lock_shared", true, false, true, false},
		{"pg_try_advisory_lock", false, false, false, false},
		{"pg_try_advisory_lock_shared", true, false, false, false},
		{"pg_advisory_xact_lock", false, true, true, false},
		{"pg_advisory_xact_lock_shared", true, true, true, false},
		{"pg_try_advisory_xact_lock", false, true, false, false},
		{"pg_try_advisory_xact_lock_shared", true, true, false, false},
		{"pg_advisory_unlock", false, false, false, true},
		{"pg_advisory_unlock_shared", true, false, false, true},
	} {
		ret := types.Bool
		if variant.wait {
			ret = types.Unknown // void
		}
		fn := func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
			l := ctx.AdvisoryLocks()
			if l == nil {
				return nil, errNoAdvisoryLocks()
			}
			key := AdvisoryKeyOf(a)
			if variant.unlock {
				return types.DBool(l.Unlock(key, variant.shared)), nil
			}
			ok, err := l.Lock(ctx.Ctx(), key, variant.shared, variant.xact, variant.wait)
			if err != nil {
				return nil, err
			}
			if variant.wait {
				return types.DNull, nil
			}
			return types.DBool(ok), nil
		}
		registerFn(variant.name,
			Overload{Args: []*types.T{types.Int8}, Return: Fixed(ret), Strict: true, Volatility: Volatile, Fn: fn},
			Overload{Args: []*types.T{types.Int4, types.Int4}, Return: Fixed(ret), Strict: true, Volatility: Volatile, Fn: fn})
	}
	registerFn("pg_advisory_unlock_all", Overload{Return: Fixed(types.Unknown), Volatility: Volatile, Fn: func(ctx EvalContext, _ []types.Datum) (types.Datum, error) {
		l := ctx.AdvisoryLocks()
		if l == nil {
			return nil, errNoAdvisoryLocks()
		}
		l.UnlockAll()
		return types.DNull, nil
	}})
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// existingSchemas filters a search path to the schemas that exist, when
// the catalog can be asked (else the path as it is).
func existingSchemas(ctx EvalContext, path []string) []string {
	ci := catalogInfo(ctx)
	if ci == nil {
		return path
	}
	out := make([]string, 0, len(path))
	for _, sc := range path {
		if _, err := ci.ResolveReg(types.RegNamespace, QuoteIdent(sc)); err == nil {
			out = append(out, sc)
		}
	}
	return out
}
