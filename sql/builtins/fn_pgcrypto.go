package builtins

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"hash"
	"strings"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// pgcrypto's general hashing functions and gen_random_bytes, built in so
// that CREATE EXTENSION pgcrypto (ddl/extension.go) only records the
// extension. crypt, gen_salt and the pgp_* functions are not here.

// pgcryptoHashes are the algorithms digest and hmac accept, by the
// lower-case name pgcrypto's OpenSSL provider knows them by.
var pgcryptoHashes = map[string]func() hash.Hash{
	"md5": md5.New, "sha1": sha1.New, "sha224": sha256.New224, "sha256": sha256.New,
	"sha384": sha512.New384, "sha512": sha512.New,
}

func pgcryptoHash(name string) (func() hash.Hash, error) {
	if f, ok := pgcryptoHashes[strings.ToLower(name)]; ok {
		return f, nil
	}
	return nil, errInvalidParam("Cannot use %q: No such hash algorithm", name)
}

func init() {
	digestFn := func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		f, err := pgcryptoHash(rawString(a[1]))
		if err != nil {
			return nil, err
		}
		h := f()
		h.Write([]byte(rawString(a[0])))
		return types.DBytes(h.Sum(nil)), nil
	}
	hmacFn := func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		f, err := pgcryptoHash(rawString(a[2]))
		if err != nil {
			return nil, err
		}
		h := hmac.New(f, []byte(rawString(a[1])))
		h.Write([]byte(rawString(a[0])))
		return types.DBytes(h.Sum(nil)), nil
	}
	registerFn("digest",
		Overload{Args: []*types.T{types.Text, types.Text}, Return: Fixed(types.Bytea), Strict: true, Fn: digestFn},
		Overload{Args: []*types.T{types.Bytea, types.Text}, Return: Fixed(types.Bytea), Strict: true, Fn: digestFn})
	registerFn("hmac",
		Overload{Args: []*types.T{types.Text, types.Text, types.Text}, Return: Fixed(types.Bytea), Strict: true, Fn: hmacFn},
		Overload{Args: []*types.T{types.Bytea, types.Bytea, types.Text}, Return: Fixed(types.Bytea), Strict: true, Fn: hmacFn})
	registerFn("gen_random_bytes", Overload{Args: []*types.T{types.Int4}, Return: Fixed(types.Bytea), Strict: true, Volatility: Volatile,
		Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			n := int64(a[0].(types.DInt))
			// pgcrypto's limit, and its error.
			if n < 1 || n > 1024 {
				return nil, pgerror.New(pgerrcode.ExternalRoutineInvocationException, "Length not in range")
			}
			b := make([]byte, n)
			if _, err := rand.Read(b); err != nil {
				return nil, errInternal("gen_random_bytes: %w", err)
			}
			return types.DBytes(b), nil
		}})
}
