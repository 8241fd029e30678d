package builtins

import (
	"crypto/md5"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"hash/crc32"
	"hash/fnv"
	"math"
	"strconv"
	"strings"

	"github.com/cairn-db/cairn/sql/rowenc"
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
// FNV-1 (32-bit, the fnv32 function's hash) of DatumsToBytes(datums...),
// the values' key encodings. The key encoding is the one the index itself
// stores, so two values an index treats as equal (1.0 and 1.00 numeric,
// '1 mon' and '30 days') land in the same bucket, it is fast (no text
// formatting, unlike CockroachDB's first prototype, which cast every
// value to text), and it is independent of DateStyle, TimeZone and
// extra_float_digits. The shard column's generation expression is
// mod(fnv32(crdb_internal.datums_to_bytes(cols...)), n), which computes
// the same value (TestShardExpressionMatches). It is part of the on-disk
// format (invariant 7): changing it moves every row of every hash-sharded
// index.
func ShardHash(datums ...types.Datum) (uint32, error) {
	b, err := DatumsToBytes(nil, datums...)
	if err != nil {
		return 0, err
	}
	h := fnv.New32()
	h.Write(b)
	return h.Sum32(), nil
}

// ShardExpr is the generation expression of a hash-sharded index's shard
// column over the SQL expressions args (quoted column names), as the DDL
// stores it; the planner recognises it to compute shards with ShardBucket
// instead of evaluating the text.
func ShardExpr(args []string, buckets int32) string {
	return fmt.Sprintf("mod(fnv32(crdb_internal.datums_to_bytes(%s)), %d)", strings.Join(args, ", "), buckets)
}

// ShardBucket returns ShardHash(datums...) mod buckets (buckets > 0).
func ShardBucket(buckets uint32, datums ...types.Datum) (uint32, error) {
	h, err := ShardHash(datums...)
	return h % buckets, err
}

// DatumsToBytes appends the ascending key encodings of datums (NULLs
// included, as the NULLS LAST marker) to dst: CockroachDB's
// crdb_internal.datums_to_bytes, with Cairn's key encoding.
func DatumsToBytes(dst []byte, datums ...types.Datum) ([]byte, error) {
	for _, d := range datums {
		var err error
		if dst, err = rowenc.EncodeKey(dst, d, rowenc.Asc); err != nil {
			return nil, errInvalidParam("cannot hash a value of family %v: %v", d.Family(), err)
		}
	}
	return dst, nil
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
	// crdb_internal.datums_to_bytes(v, ...) and crdb_internal.shard(n,
	// v, ...) (the schema is not part of a function's name in Cairn's
	// registry): what a client needs to compute the bucket of a key of a
	// hash-sharded index itself.
	registerFn("datums_to_bytes", Overload{Args: []*types.T{Any}, Variadic: true, Return: Fixed(types.Bytea),
		Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			b, err := DatumsToBytes(nil, a...)
			if err != nil {
				return nil, err
			}
			return types.DBytes(b), nil
		}})
	registerFn("shard", Overload{Args: []*types.T{types.Int8, Any}, Variadic: true, Return: Fixed(types.Int8),
		Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			if types.IsNull(a[0]) {
				return types.DNull, nil
			}
			n := int64(a[0].(types.DInt))
			if n < 1 || n > math.MaxUint32 {
				return nil, errInvalidParam("shard bucket count must be between 1 and %d, not %d", uint32(math.MaxUint32), n)
			}
			b, err := ShardBucket(uint32(n), a[1:]...)
			if err != nil {
				return nil, err
			}
			return types.DInt(b), nil
		}})
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
