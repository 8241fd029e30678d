package rowenc

import "errors"

// Errors, grouped by when they happen.

// Writing.
var (
	// ErrRowTooLarge reports that a packed row exceeds the size limit the
	// writer passed; the writer stores the row unpacked instead (DESIGN §5).
	ErrRowTooLarge = errors.New("rowenc: packed row exceeds the size limit")
	// ErrNotKeyEncodable reports a type that has no order-preserving key
	// encoding (jsonb: Postgres indexes it with GIN, not btree).
	ErrNotKeyEncodable = errors.New("rowenc: type cannot be part of an index key")
	// ErrRowShape reports a row whose length does not match the schema.
	ErrRowShape = errors.New("rowenc: row does not match the schema")
)

// Reading.
var (
	// ErrCorrupt wraps every decoding failure: bytes that this package did
	// not write. Decoders return it rather than panic, whatever the input.
	ErrCorrupt = errors.New("rowenc: corrupt encoding")
	// ErrSchemaTooOld reports a row written under a schema version newer
	// than the reader's; the reader must refresh its descriptor and retry.
	ErrSchemaTooOld = errors.New("rowenc: row written under a newer schema version")
)
