package storage

import "errors"

// ErrEmptyKey is returned when a write names an empty user key.
var ErrEmptyKey = errors.New("storage: empty key")
