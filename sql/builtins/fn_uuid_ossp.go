package builtins

import (
	"crypto/rand"

	"github.com/google/uuid"

	"github.com/cairn-db/cairn/sql/types"
)

// The functions of the uuid-ossp extension, built in so that CREATE
// EXTENSION "uuid-ossp" (ddl/extension.go) only records the extension:
// migrations of Rails, TypeORM and Prisma default their keys to
// uuid_generate_v4(). They are always callable, installed or not, as
// gen_random_uuid is (it moved into PostgreSQL's core in 13).
func init() {
	random := func(name string) func(EvalContext, []types.Datum) (types.Datum, error) {
		return func(EvalContext, []types.Datum) (types.Datum, error) {
			u, err := uuid.NewRandomFromReader(rand.Reader)
			if err != nil {
				return nil, errInternal("%s: %w", name, err)
			}
			return types.DUUID(u), nil
		}
	}
	registerFn("uuid_generate_v4", Overload{Return: Fixed(types.UUID), Volatility: Volatile, Fn: random("uuid_generate_v4")})
	// v1: time and this host's MAC address, as the OSSP library does.
	registerFn("uuid_generate_v1", Overload{Return: Fixed(types.UUID), Volatility: Volatile, Fn: func(EvalContext, []types.Datum) (types.Datum, error) {
		u, err := uuid.NewUUID()
		if err != nil {
			return nil, errInternal("uuid_generate_v1: %w", err)
		}
		return types.DUUID(u), nil
	}})
	// v1mc: time and a random node with the multicast bit set, which
	// hides the host's MAC address (RFC 4122 §4.5).
	registerFn("uuid_generate_v1mc", Overload{Return: Fixed(types.UUID), Volatility: Volatile, Fn: func(EvalContext, []types.Datum) (types.Datum, error) {
		u, err := uuid.NewUUID()
		if err != nil {
			return nil, errInternal("uuid_generate_v1mc: %w", err)
		}
		if _, err := rand.Read(u[10:]); err != nil {
			return nil, errInternal("uuid_generate_v1mc: %w", err)
		}
		u[10] |= 0x01
		return types.DUUID(u), nil
	}})
	named := func(f func(uuid.UUID, []byte) uuid.UUID) func(EvalContext, []types.Datum) (types.Datum, error) {
		return func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			return types.DUUID(f(uuid.UUID(a[0].(types.DUUID)), []byte(a[1].(types.DString)))), nil
		}
	}
	registerFn("uuid_generate_v3", Overload{Args: []*types.T{types.UUID, types.Text}, Return: Fixed(types.UUID), Strict: true, Fn: named(uuid.NewMD5)})
	registerFn("uuid_generate_v5", Overload{Args: []*types.T{types.UUID, types.Text}, Return: Fixed(types.UUID), Strict: true, Fn: named(uuid.NewSHA1)})
	constant := func(u uuid.UUID) func(EvalContext, []types.Datum) (types.Datum, error) {
		return func(EvalContext, []types.Datum) (types.Datum, error) { return types.DUUID(u), nil }
	}
	registerFn("uuid_nil", Overload{Return: Fixed(types.UUID), Fn: constant(uuid.Nil)})
	registerFn("uuid_ns_dns", Overload{Return: Fixed(types.UUID), Fn: constant(uuid.NameSpaceDNS)})
	registerFn("uuid_ns_url", Overload{Return: Fixed(types.UUID), Fn: constant(uuid.NameSpaceURL)})
	registerFn("uuid_ns_oid", Overload{Return: Fixed(types.UUID), Fn: constant(uuid.NameSpaceOID)})
	registerFn("uuid_ns_x500", Overload{Return: Fixed(types.UUID), Fn: constant(uuid.NameSpaceX500)})
}
