package rpc

// The positional KV codec this package used before the wire codec
// (kvcodec.go): fields in declaration order, no numbers, so two builds
// whose kvpb structs differ could not talk. Kept only as the baseline of
// BenchmarkKVCodec; errors are left out (the benchmark sends none).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/wire"
)

var (
	requestIface     = reflect.TypeFor[kvpb.Request]()
	responseIface    = reflect.TypeFor[kvpb.Response]()
	errLegacyCorrupt = errors.New("legacy: corrupt KV message")

	legacyRequestTypes  = legacyTypes(requestTypes)
	legacyResponseTypes = legacyTypes(responseTypes)
)

func legacyTypes(ms []wire.Member) []reflect.Type {
	out := make([]reflect.Type, len(ms))
	for i, m := range ms {
		out[i] = m.Type
	}
	return out
}

type legacyEncoder struct{ b []byte }

func (e *legacyEncoder) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }

func (e *legacyEncoder) value(v reflect.Value, depth int) error {
	switch v.Kind() {
	case reflect.Bool:
		if v.Bool() {
			e.b = append(e.b, 1)
		} else {
			e.b = append(e.b, 0)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		e.b = binary.AppendVarint(e.b, v.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		e.uvarint(v.Uint())
	case reflect.String:
		e.uvarint(uint64(v.Len()))
		e.b = append(e.b, v.String()...)
	case reflect.Slice:
		if v.IsNil() {
			e.uvarint(0)
			return nil
		}
		e.uvarint(uint64(v.Len()) + 1)
		if v.Type().Elem().Kind() == reflect.Uint8 {
			e.b = append(e.b, v.Bytes()...)
			return nil
		}
		for i := range v.Len() {
			if err := e.value(v.Index(i), depth); err != nil {
				return err
			}
		}
	case reflect.Array:
		for i := range v.Len() {
			if err := e.value(v.Index(i), depth); err != nil {
				return err
			}
		}
	case reflect.Pointer:
		if v.IsNil() {
			e.uvarint(0)
			return nil
		}
		e.uvarint(1)
		return e.value(v.Elem(), depth)
	case reflect.Struct:
		t := v.Type()
		for i := range v.NumField() {
			if !t.Field(i).IsExported() {
				return fmt.Errorf("rpc: cannot encode %s: unexported field %s", t, t.Field(i).Name)
			}
			if err := e.value(v.Field(i), depth); err != nil {
				return err
			}
		}
	case reflect.Interface:
		switch v.Type() {
		case errorIface:
			return errors.New("legacy codec: errors are not benchmarked")
		case requestIface:
			return e.tagged(v, legacyRequestTypes)
		case responseIface:
			return e.tagged(v, legacyResponseTypes)
		}
		return fmt.Errorf("rpc: cannot encode interface %s", v.Type())
	default:
		return fmt.Errorf("rpc: cannot encode %s", v.Type())
	}
	return nil
}

func (e *legacyEncoder) tagged(v reflect.Value, types []reflect.Type) error {
	if v.IsNil() {
		return fmt.Errorf("rpc: cannot encode a nil %s", v.Type())
	}
	p := v.Elem()
	if p.Kind() != reflect.Pointer || p.IsNil() {
		return fmt.Errorf("rpc: cannot encode %s", p.Type())
	}
	for tag, t := range types {
		if p.Type().Elem() == t {
			e.uvarint(uint64(tag))
			return e.value(p.Elem(), 0)
		}
	}
	return fmt.Errorf("rpc: %s has no wire tag", p.Type())
}

type legacyDecoder struct{ b []byte }

func (d *legacyDecoder) uvarint() (uint64, error) {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		return 0, errLegacyCorrupt
	}
	d.b = d.b[n:]
	return v, nil
}

// length reads a length that must not exceed the bytes left: every element
// of a non-empty encoding takes at least one byte, and for the rare
// zero-size element this still bounds the allocation by the input.
func (d *legacyDecoder) length(plusOne bool) (n int, isNil bool, err error) {
	v, err := d.uvarint()
	if err != nil {
		return 0, false, err
	}
	if plusOne {
		if v == 0 {
			return 0, true, nil
		}
		v--
	}
	if v > uint64(len(d.b)) {
		return 0, false, errLegacyCorrupt
	}
	return int(v), false, nil
}

func (d *legacyDecoder) value(v reflect.Value, depth int) error {
	switch v.Kind() {
	case reflect.Bool:
		if len(d.b) == 0 || d.b[0] > 1 {
			return errLegacyCorrupt
		}
		v.SetBool(d.b[0] == 1)
		d.b = d.b[1:]
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		x, n := binary.Varint(d.b)
		if n <= 0 || v.OverflowInt(x) {
			return errLegacyCorrupt
		}
		d.b = d.b[n:]
		v.SetInt(x)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		x, err := d.uvarint()
		if err != nil || v.OverflowUint(x) {
			return errLegacyCorrupt
		}
		v.SetUint(x)
	case reflect.String:
		n, _, err := d.length(false)
		if err != nil {
			return err
		}
		v.SetString(string(d.b[:n]))
		d.b = d.b[n:]
	case reflect.Slice:
		n, isNil, err := d.length(true)
		if err != nil || isNil {
			return err
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			v.SetBytes(append(make([]byte, 0, n), d.b[:n]...))
			d.b = d.b[n:]
			return nil
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			if err := d.value(s.Index(i), depth); err != nil {
				return err
			}
		}
		v.Set(s)
	case reflect.Array:
		for i := range v.Len() {
			if err := d.value(v.Index(i), depth); err != nil {
				return err
			}
		}
	case reflect.Pointer:
		x, err := d.uvarint()
		if err != nil || x > 1 {
			return errLegacyCorrupt
		}
		if x == 0 {
			return nil
		}
		p := reflect.New(v.Type().Elem())
		if err := d.value(p.Elem(), depth); err != nil {
			return err
		}
		v.Set(p)
	case reflect.Struct:
		for i := range v.NumField() {
			if err := d.value(v.Field(i), depth); err != nil {
				return err
			}
		}
	case reflect.Interface:
		switch v.Type() {
		case errorIface:
			return errors.New("legacy codec: errors are not benchmarked")
		case requestIface:
			return d.tagged(v, legacyRequestTypes)
		case responseIface:
			return d.tagged(v, legacyResponseTypes)
		}
		return fmt.Errorf("rpc: cannot decode interface %s", v.Type())
	default:
		return fmt.Errorf("rpc: cannot decode %s", v.Type())
	}
	return nil
}

func (d *legacyDecoder) tagged(v reflect.Value, types []reflect.Type) error {
	tag, err := d.uvarint()
	if err != nil || tag >= uint64(len(types)) {
		return errLegacyCorrupt
	}
	p := reflect.New(types[tag])
	if err := d.value(p.Elem(), 0); err != nil {
		return err
	}
	v.Set(p)
	return nil
}

func legacyEncodeBatchRequest(dst []byte, ba *kvpb.BatchRequest) ([]byte, error) {
	e := legacyEncoder{b: dst}
	if err := e.value(reflect.ValueOf(ba).Elem(), 0); err != nil {
		return nil, err
	}
	return e.b, nil
}

func legacyDecodeBatchRequest(b []byte) (*kvpb.BatchRequest, error) {
	ba := &kvpb.BatchRequest{}
	d := legacyDecoder{b: b}
	if err := d.value(reflect.ValueOf(ba).Elem(), 0); err != nil {
		return nil, err
	}
	if len(d.b) != 0 {
		return nil, errLegacyCorrupt
	}
	return ba, nil
}
