package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Descriptors are stored as JSON (encoding/json) in an envelope that names
// the format version and holds exactly one kind:
//
//	{"format_version":1,"table":{"id":104,"name":"t",...}}
//
// JSON over a compact binary form because descriptors are small, read
// through the Cache rather than per row, and read by people in debug
// tools; the envelope's FormatVersion lets a later release change the
// shape and still read what older ones wrote. Types are stored as
// Postgres's (OID, typmod) pair (coltype.go).

// FormatVersion is the envelope version this release writes and reads.
const FormatVersion = 1

type envelope struct {
	FormatVersion int       `json:"format_version"`
	Database      *Database `json:"database,omitempty"`
	Schema        *Schema   `json:"schema,omitempty"`
	Table         *Table    `json:"table,omitempty"`
	View          *View     `json:"view,omitempty"`
	Sequence      *Sequence `json:"sequence,omitempty"`
	Type          *TypeDesc `json:"type,omitempty"`
	Function      *FuncDesc `json:"function,omitempty"`
}

// Encode returns d's stored form. It validates d first: the catalog never
// stores a descriptor it could not read back.
func Encode(d Descriptor) ([]byte, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	e := envelope{FormatVersion: FormatVersion}
	switch v := d.(type) {
	case *Database:
		e.Database = v
	case *Schema:
		e.Schema = v
	case *Table:
		e.Table = v
	case *View:
		e.View = v
	case *Sequence:
		e.Sequence = v
	case *TypeDesc:
		e.Type = v
	case *FuncDesc:
		e.Function = v
	}
	return json.Marshal(e)
}

// Decode parses and validates a stored descriptor. Any failure wraps
// ErrBadDescriptor; it never panics (FuzzDecode).
func Decode(b []byte) (Descriptor, error) {
	var e envelope
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadDescriptor, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data", ErrBadDescriptor)
	}
	if e.FormatVersion != FormatVersion {
		return nil, fmt.Errorf("%w: format version %d, this release reads %d", ErrBadDescriptor, e.FormatVersion, FormatVersion)
	}
	var ds []Descriptor
	if e.Database != nil {
		ds = append(ds, e.Database)
	}
	if e.Schema != nil {
		ds = append(ds, e.Schema)
	}
	if e.Table != nil {
		ds = append(ds, e.Table)
	}
	if e.View != nil {
		ds = append(ds, e.View)
	}
	if e.Sequence != nil {
		ds = append(ds, e.Sequence)
	}
	if e.Type != nil {
		ds = append(ds, e.Type)
	}
	if e.Function != nil {
		ds = append(ds, e.Function)
	}
	if len(ds) != 1 {
		return nil, fmt.Errorf("%w: envelope holds %d descriptors", ErrBadDescriptor, len(ds))
	}
	if err := ds[0].Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadDescriptor, err)
	}
	return ds[0], nil
}

// Clone returns a deep copy of d for modification (descriptors from a
// Reader or Cache are shared and immutable).
func Clone[D Descriptor](d D) (D, error) {
	var zero D
	b, err := Encode(d)
	if err != nil {
		return zero, err
	}
	c, err := Decode(b)
	if err != nil {
		return zero, err
	}
	out, ok := c.(D)
	if !ok {
		return zero, fmt.Errorf("catalog: clone of %s changed its kind", describe(d))
	}
	return out, nil
}
