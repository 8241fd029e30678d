package rowcontainer

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"

	"github.com/cockroachdb/apd/v3"

	"github.com/cairn-db/cairn/sql/types"
)

// Value tags of the spill encoding. Rows never outlive the process, so
// the format may change freely between versions.
const (
	tagNull byte = iota
	tagFalse
	tagTrue
	tagInt
	tagFloat
	tagDecimal
	tagString
	tagBytes
	tagDate
	tagTime
	tagTimestamp
	tagTimestampTZ
	tagInterval
	tagUUID
	tagJSON
	tagJSONText
	tagOid
	tagArray
	tagEnum
	tagRecord
)

// codec encodes rows self-describingly. Array element and record types (*types.T,
// immutable and shared) are written as indexes into typs, which is why a
// codec belongs to one File: it is what reads the file back.
type codec struct {
	typs []*types.T
	idx  map[*types.T]int
	slab []types.Datum // decodeRow's rows are cut from it
}

// rowSlab is how many values' room decodeRow allocates at once for
// narrow rows (up to slabRowWidth values): one allocation per dozens of
// rows read instead of one per row, a third of a spilled hash join's
// allocations. The rows are disjoint (capacity = length), so a caller
// appending to one gets a copy; a row kept while its neighbours are
// dropped keeps the slab's 1 KiB alive, a bounded overhead on what
// RowSize accounts.
const (
	rowSlab      = 64
	slabRowWidth = 8
)

func (c *codec) typeIndex(t *types.T) int {
	if i, ok := c.idx[t]; ok {
		return i
	}
	if c.idx == nil {
		c.idx = map[*types.T]int{}
	}
	c.idx[t] = len(c.typs)
	c.typs = append(c.typs, t)
	return len(c.typs) - 1
}

func appendStr(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// appendRow appends row's encoding: its width, then each value.
func (c *codec) appendRow(dst []byte, row []types.Datum) ([]byte, error) {
	dst = binary.AppendUvarint(dst, uint64(len(row)))
	for _, d := range row {
		var err error
		if dst, err = c.appendDatum(dst, d); err != nil {
			return nil, err
		}
	}
	return dst, nil
}

func (c *codec) appendDatum(dst []byte, d types.Datum) ([]byte, error) {
	if types.IsNull(d) {
		return append(dst, tagNull), nil
	}
	switch v := d.(type) {
	case types.DBool:
		if v {
			return append(dst, tagTrue), nil
		}
		return append(dst, tagFalse), nil
	case types.DInt:
		return binary.AppendVarint(append(dst, tagInt), int64(v)), nil
	case types.DFloat:
		return binary.LittleEndian.AppendUint64(append(dst, tagFloat), math.Float64bits(float64(v))), nil
	case *types.DDecimal:
		dst = append(dst, tagDecimal, byte(v.Form))
		if v.Negative {
			dst = append(dst, 1)
		} else {
			dst = append(dst, 0)
		}
		dst = binary.AppendVarint(dst, int64(v.Exponent))
		return appendStr(dst, string(v.Coeff.MathBigInt().Bytes())), nil
	case types.DString:
		return appendStr(append(dst, tagString), string(v)), nil
	case types.DBytes:
		return appendStr(append(dst, tagBytes), string(v)), nil
	case types.DDate:
		return binary.AppendVarint(append(dst, tagDate), int64(v)), nil
	case types.DTime:
		return binary.AppendVarint(append(dst, tagTime), int64(v)), nil
	case types.DTimestamp:
		return binary.AppendVarint(append(dst, tagTimestamp), int64(v)), nil
	case types.DTimestampTZ:
		return binary.AppendVarint(append(dst, tagTimestampTZ), int64(v)), nil
	case types.DInterval:
		dst = binary.AppendVarint(append(dst, tagInterval), int64(v.Months))
		dst = binary.AppendVarint(dst, int64(v.Days))
		return binary.AppendVarint(dst, v.Micros), nil
	case types.DUUID:
		return append(append(dst, tagUUID), v[:]...), nil
	case *types.DJSON:
		return appendStr(append(dst, tagJSON), v.JSON.String()), nil
	case types.DJSONText:
		return appendStr(append(dst, tagJSONText), string(v)), nil
	case types.DOid:
		return binary.AppendUvarint(append(dst, tagOid), uint64(v)), nil
	case *types.DArray:
		dst = append(dst, tagArray)
		dst = binary.AppendUvarint(dst, uint64(c.typeIndex(v.Elem)))
		if v.ZeroBased {
			dst = append(dst, 1)
		} else {
			dst = append(dst, 0)
		}
		dst = binary.AppendUvarint(dst, uint64(len(v.Elems)))
		for _, e := range v.Elems {
			var err error
			if dst, err = c.appendDatum(dst, e); err != nil {
				return nil, err
			}
		}
		return dst, nil
	case types.DEnum:
		return appendStr(appendStr(append(dst, tagEnum), v.PhysRep), v.Label), nil
	case *types.DTuple:
		dst = append(dst, tagRecord)
		dst = binary.AppendUvarint(dst, uint64(c.typeIndex(v.T)))
		dst = binary.AppendUvarint(dst, uint64(len(v.Elems)))
		for _, e := range v.Elems {
			var err error
			if dst, err = c.appendDatum(dst, e); err != nil {
				return nil, err
			}
		}
		return dst, nil
	}
	return nil, fmt.Errorf("rowcontainer: cannot spill a %T value", d)
}

// reader decodes one encoded row; every read is bounds-checked.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("rowcontainer: corrupt spilled row: %s", what)
	}
}

func (r *reader) byte() byte {
	if len(r.b) < 1 {
		r.fail("short")
		return 0
	}
	b := r.b[0]
	r.b = r.b[1:]
	return b
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("uvarint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) fixed(n int) []byte {
	if len(r.b) < n {
		r.fail("short value")
		return make([]byte, n)
	}
	b := r.b[:n]
	r.b = r.b[n:]
	return b
}

func (r *reader) str() string {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail("length")
		return ""
	}
	return string(r.fixed(int(n)))
}

func (c *codec) decodeRow(b []byte) ([]types.Datum, error) {
	r := &reader{b: b}
	n := r.uvarint()
	if n > uint64(len(b)) {
		return nil, fmt.Errorf("rowcontainer: corrupt spilled row: width %d", n)
	}
	var row []types.Datum
	if n <= slabRowWidth {
		if uint64(len(c.slab)) < n {
			c.slab = make([]types.Datum, rowSlab)
		}
		row, c.slab = c.slab[:n:n], c.slab[n:]
	} else {
		row = make([]types.Datum, n)
	}
	for i := range row {
		row[i] = c.datum(r)
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("trailing bytes")
	}
	return row, r.err
}

func (c *codec) datum(r *reader) types.Datum {
	switch tag := r.byte(); tag {
	case tagNull:
		return types.DNull
	case tagFalse:
		return types.DBool(false)
	case tagTrue:
		return types.DBool(true)
	case tagInt:
		return types.DInt(r.varint())
	case tagFloat:
		return types.DFloat(math.Float64frombits(binary.LittleEndian.Uint64(r.fixed(8))))
	case tagDecimal:
		d := &types.DDecimal{}
		d.Form = apd.Form(r.byte())
		d.Negative = r.byte() == 1
		d.Exponent = int32(r.varint())
		d.Coeff.SetMathBigInt(new(big.Int).SetBytes([]byte(r.str())))
		return d
	case tagString:
		return types.DString(r.str())
	case tagBytes:
		return types.DBytes(r.str())
	case tagDate:
		return types.DDate(r.varint())
	case tagTime:
		return types.DTime(r.varint())
	case tagTimestamp:
		return types.DTimestamp(r.varint())
	case tagTimestampTZ:
		return types.DTimestampTZ(r.varint())
	case tagInterval:
		m := int32(r.varint())
		d := int32(r.varint())
		return types.DInterval{Months: m, Days: d, Micros: r.varint()}
	case tagUUID:
		var u types.DUUID
		copy(u[:], r.fixed(16))
		return u
	case tagJSON:
		j, err := types.ParseJSON(r.str())
		if err != nil {
			r.fail(err.Error())
			return types.DNull
		}
		return &types.DJSON{JSON: j}
	case tagJSONText:
		return types.DJSONText(r.str())
	case tagOid:
		return types.DOid(r.uvarint())
	case tagArray:
		ti := r.uvarint()
		if ti >= uint64(len(c.typs)) {
			r.fail("array element type")
			return types.DNull
		}
		a := &types.DArray{Elem: c.typs[ti], ZeroBased: r.byte() == 1}
		n := r.uvarint()
		if n > uint64(len(r.b)) {
			r.fail("array length")
			return types.DNull
		}
		a.Elems = make([]types.Datum, n)
		for i := range a.Elems {
			a.Elems[i] = c.datum(r)
		}
		return a
	case tagEnum:
		p := r.str()
		return types.DEnum{PhysRep: p, Label: r.str()}
	case tagRecord:
		ti := r.uvarint()
		if ti >= uint64(len(c.typs)) {
			r.fail("record type")
			return types.DNull
		}
		n := r.uvarint()
		if n > uint64(len(r.b)) {
			r.fail("record length")
			return types.DNull
		}
		t := &types.DTuple{T: c.typs[ti], Elems: make([]types.Datum, n)}
		for i := range t.Elems {
			t.Elems[i] = c.datum(r)
		}
		return t
	default:
		r.fail(fmt.Sprintf("tag %d", tag))
		return types.DNull
	}
}

// RowSize estimates the bytes row holds in memory: the slice, one
// interface per value, and what the values point to. It is what
// containers reserve (invariant 1).
func RowSize(row []types.Datum) int64 {
	n := int64(24 + 16*len(row))
	for _, d := range row {
		n += DatumSize(d)
	}
	return n
}

// DatumSize estimates the heap bytes one value holds beyond its
// interface header.
func DatumSize(d types.Datum) int64 {
	switch v := d.(type) {
	case nil:
		return 0
	case types.DString:
		return int64(len(v))
	case types.DBytes:
		return int64(len(v))
	case types.DJSONText:
		return int64(len(v))
	case *types.DDecimal:
		return 64 + int64(v.Coeff.BitLen()/8)
	case *types.DJSON:
		// Walking a document to size it costs as much as printing it;
		// its text length is a fair proxy for its tree.
		return 64 + 2*int64(len(v.JSON.String()))
	case *types.DArray:
		n := int64(48 + 16*len(v.Elems))
		for _, e := range v.Elems {
			n += DatumSize(e)
		}
		return n
	case *types.DTuple:
		n := int64(48 + 16*len(v.Elems))
		for _, e := range v.Elems {
			n += DatumSize(e)
		}
		return n
	case types.DEnum:
		return int64(len(v.PhysRep) + len(v.Label) + 32)
	case types.DInterval, types.DUUID:
		return 16
	}
	return 8
}

// EncodeRow appends row in the spill encoding, for a consumer in another
// process of the same version (a distributed fragment's rows, issue 17).
// Arrays are refused: their element types are indexes into a codec's
// own table, which the reader would not have.
func EncodeRow(dst []byte, row []types.Datum) ([]byte, error) {
	for _, d := range row {
		if _, ok := d.(*types.DArray); ok {
			return nil, fmt.Errorf("rowcontainer: cannot ship an array value")
		}
	}
	var c codec
	return c.appendRow(dst, row)
}

// DecodeRow decodes what EncodeRow encoded; every read is bounds-checked.
func DecodeRow(b []byte) ([]types.Datum, error) {
	var c codec
	return c.decodeRow(b)
}
