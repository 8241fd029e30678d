package rowenc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/types"
)

// GIN (inverted) index entries (issue #18):
//
//	key   = index prefix | token (as a bytea key column) | every primary-key column
//	value = uvarint 0
//
// A row has one entry per distinct token of its indexed value (none for
// NULL). A token is what the operator class extracts:
//
//   - jsonb_ops: 'k' and the key for every object key at any depth and
//     every string element of an array (and a top-level string scalar, a
//     one-element array to PostgreSQL); 'v', a kind byte and a body for
//     every other scalar (numbers as numeric keys, so 1 and 1.0 match).
//   - jsonb_path_ops: 'p' and a 64-bit FNV-1a hash of the object keys on
//     the way to each scalar (array positions are not part of the path)
//     and that scalar's jsonb_ops value token.
//   - array_ops: the key encoding of every non-NULL element.
//
// Strings longer than maxTokenString bytes are replaced by 'h' and their
// hash, as PostgreSQL hashes long jsonb_ops keys: the same value always
// yields the same token, so only collisions are added.
//
// Tokens only ever over-approximate: for every operator the planner uses
// (jsonb @>, ?, ?|, ?&; array @>, &&), a row that satisfies the predicate
// holds the tokens the query asks for (TestInvertedTokensSuperset). A scan
// therefore yields a superset of the matching rows and the predicate is
// always checked again on the rows it returns (recheck, as PostgreSQL's
// GIN scans do for jsonb_ops).

// Inverted operator classes (catalog.Index.Opclass of a GIN index).
const (
	JSONBOps     = "jsonb_ops"
	JSONBPathOps = "jsonb_path_ops"
	ArrayOps     = "array_ops"
)

// maxTokenString is the longest string a token holds as is.
const maxTokenString = 128

// Token tags.
const (
	tokKey  = 'k'
	tokVal  = 'v'
	tokPath = 'p'
)

// InvertedTokens returns the distinct tokens opclass extracts from d
// (none for NULL), sorted.
func InvertedTokens(opclass string, d types.Datum) ([][]byte, error) {
	if types.IsNull(d) {
		return nil, nil
	}
	var t tokens
	switch opclass {
	case JSONBOps, JSONBPathOps:
		j, ok := d.(*types.DJSON)
		if !ok {
			return nil, fmt.Errorf("rowenc: %s of a %T", opclass, d)
		}
		if opclass == JSONBOps {
			t.jsonbOps(j.JSON, true)
		} else {
			jsonbPathTokens(j.JSON, nil, t.add)
		}
	case ArrayOps:
		a, ok := d.(*types.DArray)
		if !ok {
			return nil, fmt.Errorf("rowenc: %s of a %T", opclass, d)
		}
		for _, e := range a.Elems {
			if types.IsNull(e) {
				continue
			}
			tok, err := EncodeKey(t.scratch[:0], e, Asc)
			if err != nil {
				return nil, err
			}
			t.scratch = tok
			t.add(tok)
		}
	default:
		return nil, fmt.Errorf("rowenc: unknown inverted operator class %q", opclass)
	}
	slices.SortFunc(t.out, bytes.Compare)
	return slices.CompactFunc(t.out, bytes.Equal), nil
}

// tokens collects a value's tokens: each is built in scratch and copied
// into arena, one array for all of them (a row of the seed's events has
// about 19), instead of an allocation or two per token. A token is a
// capped slice of arena, so nothing appended to one reaches the next;
// arena growing moves only the tokens added after.
type tokens struct {
	arena, scratch []byte
	out            [][]byte
}

func (t *tokens) add(tok []byte) {
	start := len(t.arena)
	t.arena = append(t.arena, tok...)
	t.out = append(t.out, t.arena[start:len(t.arena):len(t.arena)])
}

// JSONKeyToken is the jsonb_ops token `?` looks up for key.
func JSONKeyToken(key string) []byte { return appendTokString([]byte{tokKey}, key) }

// jsonbOps adds j's jsonb_ops tokens; inArray says j is an array
// element (or the top-level value), where strings count as keys.
func (t *tokens) jsonbOps(j types.JSON, inArray bool) {
	switch j.Kind {
	case types.JSONObject:
		for _, p := range j.Pairs {
			t.scratch = appendTokString(append(t.scratch[:0], tokKey), p.Key)
			t.add(t.scratch)
			t.jsonbOps(p.Value, false)
		}
	case types.JSONArray:
		for _, e := range j.Elems {
			t.jsonbOps(e, true)
		}
	case types.JSONString:
		if inArray {
			t.scratch = appendTokString(append(t.scratch[:0], tokKey), j.Str)
			t.add(t.scratch)
			return
		}
		t.scratch = appendScalarToken(t.scratch[:0], j)
		t.add(t.scratch)
	default:
		t.scratch = appendScalarToken(t.scratch[:0], j)
		t.add(t.scratch)
	}
}

// scalarToken is the jsonb_ops value token of a non-container.
func scalarToken(j types.JSON) []byte { return appendScalarToken(nil, j) }

// appendScalarToken appends scalarToken(j) to dst.
func appendScalarToken(dst []byte, j types.JSON) []byte {
	b := append(dst, tokVal)
	switch j.Kind {
	case types.JSONNull:
		return append(b, 'n')
	case types.JSONBool:
		if j.Bool {
			return append(b, 't')
		}
		return append(b, 'f')
	case types.JSONNumber:
		b = append(b, 'N')
		out, err := EncodeKey(b, types.NewDecimal(j.Num), Asc)
		if err != nil {
			// Every finite numeric has a key; a JSON number is finite.
			return append(b, j.Num.String()...)
		}
		return out
	default:
		return appendTokString(append(b, 's'), j.Str)
	}
}

// appendTokString appends s, or 'h' and its hash when s is long.
func appendTokString(dst []byte, s string) []byte {
	if len(s) <= maxTokenString {
		return append(append(dst, '='), s...)
	}
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum(append(dst, 'h'))
}

// jsonbPathTokens adds j's jsonb_path_ops tokens, path being the object
// keys that lead to it.
func jsonbPathTokens(j types.JSON, path []string, add func([]byte)) {
	switch j.Kind {
	case types.JSONObject:
		for _, p := range j.Pairs {
			jsonbPathTokens(p.Value, append(slices.Clip(path), p.Key), add)
		}
	case types.JSONArray:
		for _, e := range j.Elems {
			jsonbPathTokens(e, path, add)
		}
	default:
		h := fnv.New64a()
		var n [binary.MaxVarintLen64]byte
		for _, k := range path {
			h.Write(n[:binary.PutUvarint(n[:], uint64(len(k)))])
			h.Write([]byte(k))
		}
		h.Write([]byte{0xff})
		h.Write(scalarToken(j))
		add(h.Sum([]byte{tokPath}))
	}
}

// EncodeIndexEntries appends idx's entries for row to dst: one for an
// ordinary index (EncodeIndexEntry), one per token for an inverted one.
// For partial indexes the caller decides membership.
func (t *TableLayout) EncodeIndexEntries(dst []IndexEntry, idx *IndexLayout, row []types.Datum) ([]IndexEntry, error) {
	if idx.Inverted == "" {
		e, err := t.EncodeIndexEntry(idx, row)
		if err != nil {
			return dst, err
		}
		return append(dst, e), nil
	}
	if err := t.checkRow(row); err != nil {
		return dst, err
	}
	toks, err := InvertedTokens(idx.Inverted, row[idx.keyPos[0]])
	if err != nil || len(toks) == 0 {
		return dst, err
	}
	var bucket uint16
	if t.bucketed(idx) {
		if bucket, err = t.Bucket(row); err != nil {
			return dst, err
		}
		bucket = idx.entryBucket(bucket)
	}
	prefix := t.IndexPrefix(nil, idx, bucket)
	pk, err := encodeColumns(nil, t, row, t.Primary.keyPos, t.Primary.KeyOrders)
	if err != nil {
		return dst, err
	}
	// Every key in one allocation and every value in another (a row of
	// the seed's events has about 19 tokens, and the COPY with GIN spent
	// a tenth of its CPU here, mostly allocating): each key is a capped
	// slice of keys, so nothing appended to one can reach the next, and
	// a key encoded past the estimate (a token with NUL bytes, escaped)
	// moves keys to a new array, leaving the ones before it where they are.
	n := 0
	for _, tok := range toks {
		n += len(prefix) + 1 + len(tok) + 2 + len(pk)
	}
	keys, values := make([]byte, 0, n), make([]byte, len(toks))
	dst = slices.Grow(dst, len(toks))
	for i, tok := range toks {
		start := len(keys)
		keys = append(keys, prefix...)
		// EncodeKey of types.DBytes(tok), ascending, without the
		// conversions to a string and a Datum.
		keys = appendEscapedBytes(append(keys, markerValue), tok)
		keys = append(keys, pk...)
		dst = append(dst, IndexEntry{Key: keys[start:len(keys):len(keys)], Value: values[i : i+1 : i+1]})
	}
	return dst, nil
}

// InvertedTokenSpan is the span of idx's entries holding token under
// bucket b (0 unless idx is a local index of a hash-partitioned table,
// then the start of a block: InvertedBlocks).
func (t *TableLayout) InvertedTokenSpan(idx *IndexLayout, b uint16, token []byte) (kvpb.Span, error) {
	k, err := EncodeKey(t.IndexPrefix(nil, idx, b), types.DBytes(token), Asc)
	if err != nil {
		return kvpb.Span{}, err
	}
	return kvpb.Span{Key: k, EndKey: keys.PrefixEnd(k)}, nil
}

// InvertedPrimaryKey returns the part of an inverted entry's key after
// its token: the row's primary-key columns, encoded. Two entries of one
// row share it, so it identifies the row.
func (t *TableLayout) InvertedPrimaryKey(key []byte) ([]byte, error) {
	_, rest, err := DecodeKeyPrefix(key)
	if err != nil {
		return nil, err
	}
	_, rest, err = DecodeKey(rest, types.Bytea, Asc)
	if err != nil {
		return nil, err
	}
	return rest, nil
}

// DecodeInvertedPrimaryKey fills the primary-key columns of row (full
// width, Columns order) from InvertedPrimaryKey's bytes.
func (t *TableLayout) DecodeInvertedPrimaryKey(pk []byte, row []types.Datum) error {
	rest, err := decodeColumns(pk, t, row, t.Primary.keyPos, t.Primary.KeyOrders)
	if err != nil {
		return err
	}
	if len(rest) != 0 {
		return corrupt("trailing bytes after an inverted entry's primary key")
	}
	return nil
}
