package builtins

import (
	"crypto/md5"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"hash/crc32"
	"hash/fnv"
	"strconv"

	"github.com/cairn-db/cairn/sql/types"
)

// Hash functions as CockroachDB defines them: fnv32, fnv32a, fnv64,
// fnv64a, crc32ieee and crc32c take one or more text or bytea arguments,
// hash their bytes in order (NULLs skipped) and return the sum as an int8
// (the 32-bit ones zero-extended, the 64-bit ones reinterpreted as signed).
// Hash-sharded index definitions carry expressions using them, so their
// values are part of the on-disk format and must never change
// (invariant 7).

func hashFn(newHash func() hash.Hash, signed64 bool) Fn {
	return func(_ EvalContext, args []types.Datum) (types.Datum, error) {
		h := newHash()
		any := false
		for _, a := range args {
			if types.IsNull(a) {
				continue
			}
			any = true
			h.Write([]byte(rawString(a)))
		}
		if !any {
			return types.DNull, nil
		}
		sum := h.Sum(nil)
		if len(sum) == 4 {
			return types.DInt(binary.BigEndian.Uint32(sum)), nil
		}
		return types.DInt(int64(binary.BigEndian.Uint64(sum))), nil
	}
}

// ShardHash is the hash a hash-sharded index puts in front of its key:
// a stable 32-bit hash of the datums' canonical hash keys (types.Hash, so
// values that compare equal hash equal, across int widths and numeric),
// reduced modulo buckets by the caller. It is part of the on-disk format
// (invariant 7): changing it moves every row of every hash-sharded index.
func ShardHash(datums ...types.Datum) uint32 {
	h := fnv.New32a()
	var buf [8]byte
	for _, d := range datums {
		binary.BigEndian.PutUint64(buf[:], types.Hash(d))
		h.Write(buf[:])
	}
	return h.Sum32()
}

// ShardBucket returns ShardHash(datums...) mod buckets (buckets > 0).
func ShardBucket(buckets uint32, datums ...types.Datum) uint32 {
	return ShardHash(datums...) % buckets
}

func init() {
	hashes := map[string]func() hash.Hash{
		"fnv32":     func() hash.Hash { return fnv.New32() },
		"fnv32a":    func() hash.Hash { return fnv.New32a() },
		"fnv64":     func() hash.Hash { return fnv.New64() },
		"fnv64a":    func() hash.Hash { return fnv.New64a() },
		"crc32ieee": func() hash.Hash { return crc32.NewIEEE() },
		"crc32c":    func() hash.Hash { return crc32.New(crc32.MakeTable(crc32.Castagnoli)) },
	}
	for name, h := range hashes {
		for _, t := range []*types.T{types.Text, types.Bytea} {
			registerFn(name, Overload{Args: []*types.T{t}, Variadic: true, Return: Fixed(types.Int8), Fn: hashFn(h, true)})
		}
	}
	digest := func(name string, f func([]byte) []byte) {
		ts := []*types.T{types.Text, types.Bytea}
		if name != "md5" {
			ts = ts[1:] // sha256 takes only bytea in Postgres
		}
		for _, t := range ts {
			ret := types.Bytea
			if name == "md5" {
				ret = types.Text
			}
			registerFn(name, Overload{Args: []*types.T{t}, Return: Fixed(ret), Strict: true,
				Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
					sum := f([]byte(rawString(a[0])))
					if name == "md5" {
						return types.DString(hex.EncodeToString(sum)), nil
					}
					return types.DBytes(sum), nil
				}})
		}
	}
	// hex is CockroachDB's: an int in hexadecimal (two's complement for
	// negatives, as to_hex), text or bytea as the hex of its bytes.
	registerFn("hex",
		Overload{Args: []*types.T{types.Int8}, Return: Fixed(types.Text), Strict: true,
			Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
				return types.DString(strconv.FormatUint(uint64(a[0].(types.DInt)), 16)), nil
			}},
		Overload{Args: []*types.T{types.Text}, Return: Fixed(types.Text), Strict: true,
			Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
				return types.DString(hex.EncodeToString([]byte(rawString(a[0])))), nil
			}},
		Overload{Args: []*types.T{types.Bytea}, Return: Fixed(types.Text), Strict: true,
			Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
				return types.DString(hex.EncodeToString([]byte(rawString(a[0])))), nil
			}},
	)
	digest("md5", func(b []byte) []byte { s := md5.Sum(b); return s[:] })
	digest("sha256", func(b []byte) []byte { s := sha256.Sum256(b); return s[:] })
}
