package store

import "errors"

var (
	// ErrNoTablet: the directory has no tablet for an addressable key. On
	// a store that holds every tablet this breaks invariant 2 (the
	// directory is damaged); on a cluster member it means no replica of
	// the key's tablet is here.
	ErrNoTablet = errors.New("store: no tablet holds the key")
	// ErrClosed: the store has been closed.
	ErrClosed = errors.New("store: closed")
	// ErrBadDirectory: the directory's descriptors overlap or leave gaps.
	ErrBadDirectory = errors.New("store: tablet directory does not tile the keyspace")
)
