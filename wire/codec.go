package wire

import (
	"fmt"
	"reflect"

	"google.golang.org/protobuf/encoding/protowire"
)

// Marshal appends the message *v (v a pointer to a registered struct) to
// dst.
func (c *Codec) Marshal(dst []byte, v any) ([]byte, error) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return nil, fmt.Errorf("wire: Marshal needs a non-nil pointer, not %T", v)
	}
	st, ok := c.structs[rv.Type().Elem()]
	if !ok {
		return nil, fmt.Errorf("wire: %s is not registered", rv.Type().Elem())
	}
	return c.appendStruct(dst, st, rv.Elem(), 0)
}

// Unmarshal decodes the message b into *v (v a pointer to a registered
// struct, which should be zero: fields absent from b are left alone).
func (c *Codec) Unmarshal(b []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("wire: Unmarshal needs a non-nil pointer, not %T", v)
	}
	st, ok := c.structs[rv.Type().Elem()]
	if !ok {
		return fmt.Errorf("wire: %s is not registered", rv.Type().Elem())
	}
	return c.decodeStruct(b, st, rv.Elem(), 0)
}

// AppendStruct appends the body of the registered struct v, at nesting
// depth depth, for a Custom encoder.
func (c *Codec) AppendStruct(dst []byte, v reflect.Value, depth int) ([]byte, error) {
	st, ok := c.structs[v.Type()]
	if !ok {
		return nil, fmt.Errorf("wire: %s is not registered", v.Type())
	}
	return c.appendStruct(dst, st, v, depth)
}

// DecodeStruct decodes body into the registered struct v (addressable),
// for a Custom decoder.
func (c *Codec) DecodeStruct(body []byte, v reflect.Value, depth int) error {
	st, ok := c.structs[v.Type()]
	if !ok {
		return fmt.Errorf("wire: %s is not registered", v.Type())
	}
	return c.decodeStruct(body, st, v, depth)
}

func (c *Codec) appendStruct(b []byte, st *structInfo, v reflect.Value, depth int) ([]byte, error) {
	if depth > MaxDepth {
		return nil, fmt.Errorf("wire: %s nested deeper than %d", st.typ, MaxDepth)
	}
	for i := range st.fields {
		f := &st.fields[i]
		var err error
		if b, err = c.appendField(b, f.num, f.c, v.Field(f.index), false, depth); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// beginMessage appends num's tag and room for a one-byte length;
// endMessage writes the length of what was appended since, moving the
// body when its length needs more than one byte (rare: most nested
// messages are short).
func beginMessage(b []byte, num protowire.Number) ([]byte, int) {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return append(b, 0), len(b)
}

func endMessage(b []byte, start int) []byte {
	n := len(b) - start - 1
	if n < 0x80 {
		b[start] = byte(n)
		return b
	}
	size := protowire.SizeVarint(uint64(n))
	b = append(b, make([]byte, size-1)...)
	copy(b[start+size:], b[start+1:start+1+n])
	protowire.AppendVarint(b[start:start], uint64(n))
	return b
}

// appendField appends v as field num. force sends a zero value too (an
// element of a repeated field keeps its place).
func (c *Codec) appendField(b []byte, num protowire.Number, cd *coder, v reflect.Value, force bool, depth int) ([]byte, error) {
	switch cd.kind {
	case kBool:
		if x := v.Bool(); x || force {
			b = protowire.AppendTag(b, num, protowire.VarintType)
			b = protowire.AppendVarint(b, protowire.EncodeBool(x))
		}
	case kInt:
		if x := v.Int(); x != 0 || force {
			b = protowire.AppendTag(b, num, protowire.VarintType)
			b = protowire.AppendVarint(b, protowire.EncodeZigZag(x))
		}
	case kUint:
		if x := v.Uint(); x != 0 || force {
			b = protowire.AppendTag(b, num, protowire.VarintType)
			b = protowire.AppendVarint(b, x)
		}
	case kString:
		if x := v.String(); x != "" || force {
			b = protowire.AppendTag(b, num, protowire.BytesType)
			b = protowire.AppendString(b, x)
		}
	case kBytes:
		if !v.IsNil() || force {
			b = protowire.AppendTag(b, num, protowire.BytesType)
			b = protowire.AppendBytes(b, v.Bytes())
		}
	case kArrayBytes:
		if !v.IsZero() || force {
			b = protowire.AppendTag(b, num, protowire.BytesType)
			b = protowire.AppendVarint(b, uint64(v.Len()))
			for i := range v.Len() {
				b = append(b, byte(v.Index(i).Uint()))
			}
		}
	case kStruct:
		if force || !v.IsZero() {
			b, start := beginMessage(b, num)
			b, err := c.appendStruct(b, cd.st, v, depth+1)
			if err != nil {
				return nil, err
			}
			return endMessage(b, start), nil
		}
	case kPointer:
		if v.IsNil() {
			if force {
				return nil, fmt.Errorf("wire: cannot send a nil %s element", cd.typ)
			}
			return b, nil
		}
		b, start := beginMessage(b, num)
		b, err := c.appendStruct(b, cd.st, v.Elem(), depth+1)
		if err != nil {
			return nil, err
		}
		return endMessage(b, start), nil
	case kRepeated:
		for i := range v.Len() {
			var err error
			if b, err = c.appendField(b, num, cd.elem, v.Index(i), true, depth); err != nil {
				return nil, err
			}
		}
	case kUnion:
		if v.IsNil() {
			if force {
				return nil, fmt.Errorf("wire: cannot send a nil %s element", cd.typ)
			}
			return b, nil
		}
		p := v.Elem()
		mnum, ok := cd.un.byType[p.Type()]
		if !ok || p.IsNil() {
			return nil, fmt.Errorf("wire: %s is not a member of %s", p.Type(), cd.typ)
		}
		b, start := beginMessage(b, num)
		b, inner := beginMessage(b, mnum)
		b, err := c.appendStruct(b, cd.un.byNum[mnum], p.Elem(), depth+2)
		if err != nil {
			return nil, err
		}
		return endMessage(endMessage(b, inner), start), nil
	case kCustom:
		b, start := beginMessage(b, num)
		b, present, err := cd.cu.Encode(b, v, depth+1)
		if err != nil {
			return nil, err
		}
		if !present && !force {
			// Drop the tag and the length byte.
			return b[:start-protowire.SizeTag(num)], nil
		}
		return endMessage(b, start), nil
	}
	return b, nil
}

func (c *Codec) decodeStruct(b []byte, st *structInfo, v reflect.Value, depth int) error {
	if depth > MaxDepth {
		return fmt.Errorf("%w: nested deeper than %d", ErrCorrupt, MaxDepth)
	}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %s: %v", ErrCorrupt, st.typ, protowire.ParseError(n))
		}
		b = b[n:]
		f := st.lookup(num)
		if f == nil {
			// A field of another build's schema (invariant 2).
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return fmt.Errorf("%w: %s field %d: %v", ErrCorrupt, st.typ, num, protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		n, err := c.decodeField(b, typ, f.c, v.Field(f.index), depth)
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// decodeField decodes one occurrence of a field of wire type typ from b
// into v and returns how many bytes it took.
func (c *Codec) decodeField(b []byte, typ protowire.Type, cd *coder, v reflect.Value, depth int) (int, error) {
	corrupt := func(what string) (int, error) {
		return 0, fmt.Errorf("%w: %s: %s", ErrCorrupt, cd.typ, what)
	}
	switch cd.kind {
	case kBool, kInt, kUint:
		if typ != protowire.VarintType {
			return corrupt("not a varint")
		}
		x, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return corrupt("bad varint")
		}
		switch cd.kind {
		case kBool:
			if x > 1 {
				return corrupt("bad bool")
			}
			v.SetBool(x == 1)
		case kInt:
			i := protowire.DecodeZigZag(x)
			if v.OverflowInt(i) {
				return corrupt("overflow")
			}
			v.SetInt(i)
		default:
			if v.OverflowUint(x) {
				return corrupt("overflow")
			}
			v.SetUint(x)
		}
		return n, nil
	case kRepeated:
		// Grow in place (no temporary element per occurrence), doubling,
		// so that all the slice's allocations together are at most four
		// times its elements' size (invariant 4).
		i := v.Len()
		if i == v.Cap() {
			v.Grow(max(i, 1))
		}
		v.SetLen(i + 1)
		n, err := c.decodeField(b, typ, cd.elem, v.Index(i), depth)
		if err != nil {
			v.SetLen(i)
		}
		return n, err
	}
	if typ != protowire.BytesType {
		return corrupt("not length-delimited")
	}
	body, n := protowire.ConsumeBytes(b)
	if n < 0 {
		return corrupt("bad length")
	}
	switch cd.kind {
	case kString:
		v.SetString(string(body))
	case kBytes:
		v.SetBytes(append(make([]byte, 0, len(body)), body...))
	case kArrayBytes:
		if len(body) != v.Len() {
			return corrupt(fmt.Sprintf("%d bytes", len(body)))
		}
		reflect.Copy(v, reflect.ValueOf(body))
	case kStruct:
		if err := c.decodeStruct(body, cd.st, v, depth+1); err != nil {
			return 0, err
		}
	case kPointer:
		if v.IsNil() {
			v.Set(reflect.New(cd.st.typ))
		}
		if err := c.decodeStruct(body, cd.st, v.Elem(), depth+1); err != nil {
			return 0, err
		}
	case kUnion:
		if err := c.decodeUnion(body, cd.un, v, depth+1); err != nil {
			return 0, err
		}
	case kCustom:
		if err := cd.cu.Decode(body, v, depth+1); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// decodeUnion reads a Union's message: the one field whose number names
// its concrete type. Fields of unknown numbers are skipped; if no known
// one is left, the value cannot be understood (invariant 5).
func (c *Codec) decodeUnion(b []byte, u *union, v reflect.Value, depth int) error {
	found := false
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %s: %v", ErrCorrupt, u.iface, protowire.ParseError(n))
		}
		b = b[n:]
		st, ok := u.byNum[num]
		if !ok {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return fmt.Errorf("%w: %s: %v", ErrCorrupt, u.iface, protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		if typ != protowire.BytesType {
			return fmt.Errorf("%w: %s member %d: not length-delimited", ErrCorrupt, u.iface, num)
		}
		body, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return fmt.Errorf("%w: %s member %d: bad length", ErrCorrupt, u.iface, num)
		}
		b = b[n:]
		p := reflect.New(st.typ)
		if err := c.decodeStruct(body, st, p.Elem(), depth+1); err != nil {
			return err
		}
		v.Set(p)
		found = true
	}
	if !found {
		return fmt.Errorf("%w: a %s this build does not know", ErrUnknownMember, u.iface)
	}
	return nil
}
