package store

import "errors"

var (
	// ErrNoTablet: the directory has no tablet for an addressable key,
	// which breaks invariant 2 and means the directory is damaged.
	ErrNoTablet = errors.New("store: no tablet holds the key")
	// ErrClosed: the store has been closed.
	ErrClosed = errors.New("store: closed")
	// ErrBadDirectory: the directory's descriptors overlap or leave gaps.
	ErrBadDirectory = errors.New("store: tablet directory does not tile the keyspace")
)
