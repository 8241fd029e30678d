package kvpb

import (
	"encoding/binary"
	"fmt"
)

type (
	// IncrementRequest adds Increment to the int64 stored at Key (a missing
	// key counts as 0) and writes the sum, as one latched
	// read-modify-write on the tablet. It is never transactional: the new
	// value is a committed version at once, which is what a sequence's
	// nextval needs (PostgreSQL never rolls a sequence back). The stored
	// value is EncodeIncrementValue's: 8 bytes, big-endian. Like any
	// non-transactional write, a batch may touch the key once: a second
	// increment of it at the batch's timestamp is a WriteTooOldError.
	IncrementRequest struct {
		Key       []byte `wire:"1"`
		Increment int64  `wire:"2"`
	}
	// IncrementResponse holds the value written.
	IncrementResponse struct {
		NewValue int64 `wire:"1"`
	}
)

func (*IncrementRequest) Method() Method  { return MethodIncrement }
func (*IncrementResponse) Method() Method { return MethodIncrement }
func (r *IncrementRequest) Span() Span    { return Span{Key: r.Key} }

// EncodeIncrementValue is how an IncrementRequest stores v.
func EncodeIncrementValue(v int64) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(v))
}

// DecodeIncrementValue reads a value IncrementRequest stored; nil (no
// value) is 0.
func DecodeIncrementValue(b []byte) (int64, error) {
	if b == nil {
		return 0, nil
	}
	if len(b) != 8 {
		return 0, fmt.Errorf("kvpb: value of %d bytes is not an increment counter", len(b))
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}
